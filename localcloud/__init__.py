"""The local cloud: this repo's Pulumi program deployed into ministack (a local AWS in pure Python) and driven
through every mode, with IAM enforced and AWS's awkward behaviours put in. `make demo` and the e2e tests use it.

What provisions (the Pulumi program under mocks that create each resource for real): `program.py` (runs
`__main__.py` with a stack's config), `mocks.py`, `provision.py` (one resource kind after another), `deploy.py`.
What emulates AWS where ministack does not: `scheduler_minute.py` (Scheduler's minute, shared by every process),
`aws_behaviour.py` (patches put into ministack's own process: the minute window, batch redelivery, a poller per
stream mapping, AWS's limits), `iam.py` (ministack's IAM put right: schedule groups, iam:PassRole, SQS batches, SES
identities, service roles), `recurring.py` (rate and cron schedules in their zone), `ttl.py` (DynamoDB's TTL
process, in ministack's process), `emulators.py` (universal targets, email; switches TTL on), `endpoints.py` (the
local endpoints they talk through).
What drives it: `server.py` (ministack's lifecycle), `scenarios.py` and `demo.py` (`make demo`), `try_it.py`
(`up --stay`), `interrupts.py`, `__main__.py` (the command line).
"""

from __future__ import annotations
