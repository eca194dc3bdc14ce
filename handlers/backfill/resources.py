"""The stack's resources a backfill module's calls are on. Each module declares its actions per resource, once
(`AWS_ACTIONS_ON`); its flat `AWS_ACTIONS` (what tests/iam checks against its code), the backfill function's role
(components/backfill_function.py) and the operator's scan policies (components/cli/permissions.py) derive from it,
each mapping these names to its own resources' ARNs."""

from __future__ import annotations

from collections.abc import Mapping

TABLE = "table"  # the table: its items, its key schema
MARKER = "marker"  # eventbridge's "backfilled" marker in its ledger (read before, written after a first backfill)
TOTALS = "totals"  # aggregate's total items, in the table (read and replaced once every segment is done)
SCHEDULES = "schedules"  # the schedules of the table's group
POISON = "poison"  # the poison queue
ANY = "*"  # an action IAM gives no resource-level permission (ListSchedules)
CHECKPOINT = "checkpoint"  # `reconcile_every`'s checkpoint item, in the mode's ledger
# Every resource a module may name, in the order policies list their statements.
RESOURCES = (TABLE, MARKER, TOTALS, SCHEDULES, POISON, ANY, CHECKPOINT)

AWS_ACTIONS: tuple[str, ...] = ()


def flat(on: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """A module's actions, whatever resource they are on (its `AWS_ACTIONS`)."""
    return tuple(sorted({action for actions in on.values() for action in actions}))
