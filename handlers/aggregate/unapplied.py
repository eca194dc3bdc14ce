"""aggregate's records parked unapplied: a record whose group's total can never be written is parked with the groups
it was not applied to (`UNAPPLIED`), and its replay (`redrive poison`, once the total is fixed) applies it to those
groups only, through the ledger's marker, whatever its age (`unapplied_groups`)."""

from __future__ import annotations

from st_core import log
from st_core.errors import error_code
from st_core.poison import PoisonQueue
from st_core.stream import DynamoDBStreamRecord

from aggregate.records import Contribution, Unwritable

# No AWS calls of its own (the poison queue's send is st_core.poison's).
AWS_ACTIONS: tuple[str, ...] = ()

# On a record parked because its group's total cannot be written: the groups (`Contribution.group`) it was not
# applied to. Its replay applies it to those only, through the ledger (see the package's docstring).
UNAPPLIED = "stUnapplied"


def unapplied_groups(record: DynamoDBStreamRecord) -> set[str] | None:
    """The groups a parked record was not applied to (`UNAPPLIED`), when it was parked so; None otherwise."""
    groups = record.get(UNAPPLIED) if isinstance(record, dict) else None
    return {str(g) for g in groups} if isinstance(groups, list) else None


def park_unapplied(poison: PoisonQueue, failures: list[Unwritable]) -> list[str]:
    """Park each record of totals that can never be written once, with every group it was not applied to: its
    replay applies it to those (`unapplied_groups`). The sequence numbers of those the queue refuses, for retry."""
    by_record: dict[str, tuple[DynamoDBStreamRecord, set[str], list[str], list[str], list[str]]] = {}
    for failure in failures:
        for c in failure.records:
            if c.record is None:
                continue
            record, groups, reasons, codes, sequences = by_record.setdefault(c.event_id, (c.record, set(), [], [], []))
            groups.add(c.group)
            sequences.append(c.sequence)
            if str(failure) not in reasons:
                reasons.append(str(failure))
                codes.append(failure.code)
    retry: list[str] = []
    for record, groups, reasons, codes, sequences in by_record.values():
        stamped = {**record, UNAPPLIED: sorted(groups)}
        try:
            poison.send(stamped, "; ".join(reasons), codes[0])
        except Exception as exc:
            log.error("poison-failed", sequenceNumber=sequences[0], error=error_code(exc), reason=reasons[0])
            retry += sequences
    if by_record:
        log.warning("total-parked", records=len(by_record), reason=reasons[0][:300])
    return retry


def park_group(poison: PoisonQueue, items: list[Contribution], reason: str, code: str) -> list[str]:
    """Park each record of a group whose total can never be written; those the queue refuses are retried."""
    retry: list[str] = []
    for item in items:
        try:
            poison.send(item.record, reason, code)
        except Exception as exc:
            log.error("poison-failed", sequenceNumber=item.sequence, error=error_code(exc), reason=reason)
            retry.append(item.sequence)
    log.warning("total-parked", records=len(items), reason=reason[:300])
    return retry
