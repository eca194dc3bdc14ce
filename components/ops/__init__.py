"""The operator's side of a deployed ScheduledTable: the `scheduled-table` command (`cli`) and what it runs:
`redrive` (parked work back after a fix), `inspection` (what a stack holds), `backfill` (backfill and reconcile)
and `local` (the local cloud's command line). Never imported by the component: these talk to AWS (boto3, which the
package does not install), the component only declares resources."""
