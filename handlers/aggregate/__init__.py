"""`aggregate` mode (seed 003): source items (partition key starting `SCORE`) keep a running total per group (the
user) in the same table, at `PK=<group>`, `SK=TOTAL`.

Exactly once, one write per group per batch, and no transaction on the normal path: the batch's records are
coalesced into one delta per group, and that delta is added by one conditional UpdateItem of the total which also
records which stream records it applied. The total item keeps the ids of its recent records (`record_digest` of
the record's `eventID` and the group: 6 bytes) in binary sets, one per 15-minute bucket of the records' creation
time (`ApproximateCreationDateTime`, the same on every delivery of a record): attributes `stIds<bucket>`. The write
is conditional on `NOT contains(stIds<bucket>, id)` for each of its records, so a record applied before (a batch
delivered again, a retry from a sequence number, a bisected batch, a response lost after the write happened) fails
it; DynamoDB then returns the item as it was (ReturnValuesOnConditionCheckFailure), the records whose ids it holds
are dropped and the rest written again. Nothing here depends on the order of records or on shards, so any
parallelization factor works: writes to one total are serialized by DynamoDB, each checking every id it adds.

A record cannot come back once it is older than the horizon (`horizonSeconds`: the event source mapping's maximum
record age, plus the function timeout for a delivery that started just before that age, plus a margin); a bucket is
removed by the next write of its total once every record it can hold is past the horizon. Records older than the
horizon cannot be checked and are parked with the reason (Lambda does not deliver them).

A record parked because its group's total cannot be written (the total is not a number, the sum leaves DynamoDB's
range) was not applied: it is parked with the groups it was not applied to (`stUnapplied` on the parked record), and
its replay (`redrive poison`, once the total is fixed) is applied to those groups only, through the ledger's marker
whatever its age, so a replay a day later counts once, and so does a second replay of it while the ledger remembers
the first (`windowSeconds`). Its ids on the total are checked as well while they are there.

The ids take at most RING_BYTES of the item, so a total stays under 1 KB and a write costs one write unit. A group
with more records within the horizon than fit falls back to the ledger: its write becomes a transaction with one
marker per record in the ledger table (2 write units each), which also sets `stLedgerUntil` to now + the horizon
on the total. Writes without markers require `stLedgerUntil` to be absent or past, so a record applied through the
ledger is checked against the ledger for as long as it can come back; the ledger path checks the ids on the total
as well, and puts its own there when they fit (so ledger mode ends one horizon after the last write whose ids did
not fit). A record without a creation time (Lambda always gives one) can only be checked in the ledger, and takes
that path. `stIds*` and `stLedgerUntil` are reserved names on the total item.

On another account's table the ledger path cannot be a transaction (DynamoDB refuses one whose items are in two
accounts, and the ledger is in the deploying account): the write there takes the records' markers from the ledger
first, adds to the total with a journal of its records' ids (`stJournal`, also reserved), then puts their markers and
clears the journal (see `LedgerPath.in_steps`).

Each container remembers the ids of the totals it wrote (DynamoDB returns the item with every write, at no cost):
a record whose id it saw there was applied, and is skipped without a write (Lambda's retry of a batch mostly
reaches the container of its first delivery); the memory also names the expired buckets to remove. It is only a
hint: a new container learns from the first failed condition, and the conditions alone make each record count once.

The ledger has no stream and the total's key does not start with the source prefix, so nothing written here can
invoke this function again.

The package's parts: `records` (pure: a record's contributions, a group's records cut into writes), `ring` (the ids
on a total, and this container's memory of them), `totals` (the writes: `Totals`), `ledger` (the ledger path and the
journal: `LedgerPath`), `unapplied` (records parked unapplied, and their replay's groups); the entry points
(`handle_batch`, `handler`) are here.

Sums use DynamoDB's number arithmetic exactly (38 significant digits; Python's default context has 28). A total
that can never be written (the sum leaves DynamoDB's range, the total attribute is not a number) is parked with the
reason, record by record, instead of blocking the shard until its retries run out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from st_core import log
from st_core.batch import batch_metrics, park_malformed, process_batch, sequence_order
from st_core.clients import CLIENTS, Clients
from st_core.config import load_config
from st_core.errors import PermanentError, error_code, is_transient
from st_core.poison import PoisonQueue, message_limit
from st_core.stream import BatchResponse, DynamoDBStreamEvent, DynamoDBStreamRecord, split_event

from aggregate.ledger import JOURNAL, LedgerPath
from aggregate.records import (
    BUCKET_SECONDS,
    DYNAMODB_NUMBERS,
    MARKER_PREFIX,
    MODE,
    RECORDS_PER_WRITE,
    Aggregation,
    Collected,
    Contribution,
    Outcome,
    Plan,
    Unwritable,
    chunks,
    contributions,
    journal_marker,
)
from aggregate.ring import LEDGER_UNTIL, RING_PREFIX, RINGS, Ring, RingCache, bucket_name
from aggregate.totals import Totals
from aggregate.unapplied import UNAPPLIED, park_group, park_unapplied, unapplied_groups

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import HandlerConfig

__all__ = [
    "AWS_ACTIONS",
    "BUCKET_SECONDS",
    "DYNAMODB_NUMBERS",
    "JOURNAL",
    "LEDGER_UNTIL",
    "MARKER_PREFIX",
    "MODE",
    "RECORDS_PER_WRITE",
    "RINGS",
    "RING_PREFIX",
    "UNAPPLIED",
    "Aggregation",
    "Contribution",
    "LedgerPath",
    "Outcome",
    "Plan",
    "Ring",
    "RingCache",
    "Totals",
    "Unwritable",
    "bucket_name",
    "chunks",
    "contributions",
    "handle_batch",
    "handler",
    "journal_marker",
    "unapplied_groups",
]

# No AWS calls of its own: each module of the package declares those it makes (checked by tests/iam).
AWS_ACTIONS: tuple[str, ...] = ()


def handle_batch(
    event: DynamoDBStreamEvent | object,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], float] = time.time,
) -> BatchResponse:
    settings = config["aggregate"]
    horizon = int(settings["horizonSeconds"])
    poison = PoisonQueue(
        config["poisonQueueUrl"], mode=MODE, table=config["table"], clients=clients, limit=message_limit(config)
    )
    records, malformed = split_event(event)
    park_malformed(poison, malformed)
    collected = Collected()

    def collect(record: DynamoDBStreamRecord) -> None:
        found = contributions(record, settings)
        groups = unapplied_groups(record)
        if groups is not None:
            # A replay of a record parked unapplied, at any age: to the groups it was not applied to (the others
            # were), each checked in the ledger.
            found = [c for c in found if c.group in groups]
            for c in found:
                c.ledger_only = True
            collected.add(found)
            return
        age = now() - found[0].created if found and found[0].created is not None else 0.0
        if age > horizon:
            raise PermanentError(
                f"stream record is {age:.0f} s old, beyond the {horizon} s horizon (maximum record age + "
                "function timeout + margin): Lambda does not deliver records that old, and it cannot be checked "
                "against an earlier delivery"
            )
        collected.add(found)

    # Phase 1, per record: what it contributes; bad records go to the poison queue with the reason.
    parsed = process_batch(records, collect, poison=poison, max_workers=config["maxWorkers"])
    # Phase 2, per group: one write for the whole batch's delta. A record twice in one event counts once.
    by_group: dict[str, list[Contribution]] = {}
    unique: set[tuple[str, str]] = set()
    for item in collected.contributions:
        if (item.event_id, item.group) not in unique:
            unique.add((item.event_id, item.group))
            by_group.setdefault(item.group, []).append(item)
    totals = Totals(config, clients, now)
    outcomes: list[Outcome] = []
    unwritable: list[Unwritable] = []

    def apply(group: str) -> list[str]:
        """The sequence numbers to retry from when this group's total could not be written (none if parked)."""
        items = by_group[group]
        outcome = Outcome()
        outcomes.append(outcome)
        try:
            totals.apply(group, items, outcome)
        except Unwritable as exc:
            unwritable.append(exc)  # parked once every group is done: a record once, with all it was not applied to
            return []
        except Exception as exc:
            if isinstance(exc, PermanentError) or not is_transient(exc):
                return park_group(poison, items, str(exc), error_code(exc))
            # Retried from this group's first record; what was applied meanwhile is skipped by its id.
            log.warning("total-failed", group=group, error=type(exc).__name__, reason=str(exc)[:300])
            return [min((c.sequence for c in items), key=sequence_order)]
        return []

    failed = [f["itemIdentifier"] for f in parsed["batchItemFailures"]]
    # Groups are independent (different items, ADD is atomic): their writes run concurrently.
    workers = max(1, min(config["maxWorkers"], len(by_group)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for sequences in pool.map(apply, list(by_group)):
            failed += sequences
    failed += park_unapplied(poison, unwritable)
    response: BatchResponse = {
        "batchItemFailures": [{"itemIdentifier": seq} for seq in sorted(set(failed), key=sequence_order)]
    }
    summary = Outcome()
    for outcome in outcomes:
        summary.add(outcome)
    log.info(
        "totals-updated",
        groups=len(by_group),
        applied=summary.applied,
        alreadyApplied=summary.skipped,
        writes=summary.writes,
        ledgerWrites=summary.ledger_writes,
        failedConditions=summary.failed_writes,
        writeUnits=summary.units,
    )
    batch_metrics(config, mode=MODE, records=len(records) + len(malformed), poison=poison, response=response)
    return response


def handler(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """Lambda entry point (`aggregate.handler`)."""
    log.invoked(context)
    return handle_batch(event, load_config())
