"""The operator's command line: the `scheduled-table` command (`command`) and what its subcommands run: `redrive`
(parked work back after a fix), `inspection` (what a stack holds), `backfill` (backfill and reconcile), `console`
(a local page over a stack), `permissions` (each command's policy) and `local` (the local cloud's command line).
Never imported by the component: these talk to AWS (boto3, which the package does not install), the component only
declares resources."""
