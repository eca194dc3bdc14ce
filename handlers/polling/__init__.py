"""`polling` mode (seed 002, sharded as in part 2 of the AWS series): a rule invokes `handler` every interval; it
takes what is due from the sparse due index, every shard at once, a shard's items spread over the worker pool, and
runs each item exactly once. `assign` is the stream consumer that puts newly written items in the index (seed
002's "task scheduler").

Exactly once, with overlapping or crashing processors: a shard is held by one invocation at a time (a lease in the
ledger, one conditional write a shard and tick, not one an item); the index is eventually consistent, so each page's
items are read again consistently before they are sent, and each sent item is completed by a write conditional on
it being unchanged since that read. An invocation that dies leaves its shards held until the lease ends (the Lambda
timeout + 30 s from its start): what it sent and did not complete is then sent again (at least once, never lost). A
failed dispatch goes back into the index with an attempt count and exponential backoff, and after the last attempt
to the dead-letter queue with the reason. An item it cannot read (an index attribute written by hand, a time that
is no time) is parked in the poison queue and taken out of the index; the rest of its page goes on. Every write
here sets `stStatus`, so the stream filter never hands these writes back to `assign` (no loop).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from decimal import Decimal
from enum import Enum
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from st_core import log
from st_core.clients import CLIENTS, CallLimits, Clients
from st_core.config import load_config
from st_core.dispatch import batch_entries, due_event, most_calls, prepare, send_many, target_input
from st_core.errors import PermanentError, advice, error_code, is_transient, kms_reason, persist
from st_core.naming import item_keys, key_names, occurrence_id
from st_core.pending import (
    ATTEMPTS,
    DONE_AT,
    DUE,
    ERROR,
    INDEX_NAME,
    SHARD,
    STATUS,
    TASK_DUE,
    TIMED,
    Status,
    without_index,
)
from st_core.stream import decode_image
from st_core.timeparse import format_due, parse_due

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import HandlerConfig

# The AWS actions this module's own calls need (checked by tests/iam): the processor's. Query the due index, read a
# page's items again (consistent BatchGetItem), complete/back off an item (update; delete with on_done="delete"),
# hold and release a shard (put and delete in the ledger), dead-letter to the target DLQ, park an item it cannot read
# in the poison queue. The assigner's are polling_assign's.
# With `shard_groups` > 1 the rule's invocation invokes the processor once per group of shards with something due
# (`fan_out`): lambda:InvokeFunction, on the function itself.
AWS_ACTIONS = (
    "dynamodb:BatchGetItem",
    "dynamodb:DeleteItem",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:Query",
    "dynamodb:UpdateItem",
    "lambda:InvokeFunction",
    "sqs:SendMessage",
)

MODE = "polling"
# The prefix of the ledger marker of a stream record the assigner has indexed.
PAGE_SIZE = 100


if TYPE_CHECKING:  # a Protocol class costs its build at import; the handler only annotates with it

    class LambdaContext(Protocol):
        invoked_function_arn: str

        def get_remaining_time_in_millis(self) -> int: ...


class Outcome(Enum):
    """What became of one due item the tick read."""

    DISPATCHED = "dispatched"
    RETRIED = "retried"
    FAILED = "failed"
    SKIPPED = "skipped"  # not sent: moved, deleted or done since the index showed it
    LEFT = "left"  # not sent: out of time (the next tick takes it)
    UNREAD = "unread"  # not sent: its read was throttled past every try (the next tick takes it)
    UNSETTLED = "unsettled"  # sent (or refused), but its completion or backoff failed: due again at the next tick
    POISONED = "poisoned"  # not sent: it cannot be (`Unusable`); parked in the poison queue, out of the index


class TickReport:
    """What one processor invocation did (also its return value and the metrics it logs).

    `backlog` is the due items the tick read but had no time left for, and `backlogged_shards` the shards it stopped
    with due items left (read, or beyond the last page it read). Both come free with the pages read: counting the
    rest of a shard would read every waiting item again, every tick for as long as the backlog lasts.
    `held_shards` is the shards with something due that another invocation held (a tick still running).
    `throttled` is the due items whose consistent read DynamoDB throttled past every try (left for the next tick,
    their shard stopped and counted in `backlogged_shards`): a hot partition, not a tick short of time, which
    `out_of_time` alone says.

    A plain class rather than a dataclass, which would generate and compile its methods on every cold start."""

    def __init__(self) -> None:
        self.dispatched = self.retried = self.failed = self.skipped = self.unsettled = self.poisoned = 0
        self.backlog = self.backlogged_shards = self.held_shards = self.throttled = 0
        self.out_of_time = False
        self.shards: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"TickReport({vars(self)})"

    def tally(self, outcomes: list[Outcome]) -> None:
        self.dispatched += outcomes.count(Outcome.DISPATCHED)
        self.retried += outcomes.count(Outcome.RETRIED)
        self.failed += outcomes.count(Outcome.FAILED)
        self.skipped += outcomes.count(Outcome.SKIPPED)
        self.backlog += outcomes.count(Outcome.LEFT)
        self.throttled += outcomes.count(Outcome.UNREAD)
        self.unsettled += outcomes.count(Outcome.UNSETTLED)
        self.poisoned += outcomes.count(Outcome.POISONED)

    def add(self, other: TickReport) -> None:
        self.dispatched += other.dispatched
        self.retried += other.retried
        self.failed += other.failed
        self.skipped += other.skipped
        self.backlog += other.backlog
        self.throttled += other.throttled
        self.unsettled += other.unsettled
        self.poisoned += other.poisoned
        self.backlogged_shards += other.backlogged_shards
        self.held_shards += other.held_shards
        self.out_of_time |= other.out_of_time


# The pace (items a second) at which this container's last tick took each shard of a table: a warm container (the
# rule invokes the processor every interval) sizes a shard's first page with it, as it sizes later pages with the
# tick's own pace.
_PACE: dict[tuple[str, int], float] = {}
# The ledger item that holds a shard for one invocation: `LEASE_PREFIX` + the shard number.
LEASE_PREFIX = "lease#shard#"
# The ledger item that keeps the highest `shards` whose index entries may still wait (`Processor.index_shards`).
SHARDS_RECORD = {"id": {"S": "shards#highest"}}
# The most shards a configuration may have (components/args.py): what a first tick probes for entries left behind.
MAX_SHARDS = 100
# Kept free of calls in a send's budget: the processor's own time between them (building events, logging, a pause
# of the interpreter).
SLACK_SECONDS = 1.0
# One call's budget is never sized below this, however short the Lambda timeout (its budget margin).
MIN_CALL_SECONDS = 1.0


def call_limits(margin: float) -> CallLimits:
    """The processor's own limits for one AWS call, sized to its budget margin: the last batch a tick may start, with
    the margin left, is one send and one completion, each at its worst (`CallLimits.worst_seconds`), and
    SLACK_SECONDS to spare. The handlers' default (3 x (5 s + 15 s)) lets one call outlast the margin, so a batch sent
    at the margin was cut off by the Lambda timeout between its send and its completions (and sent again).

    One attempt, with the whole budget for its answer: the SDK retries a read timeout, and a send whose answer was
    merely slow had been stored by the target, so its retry delivered the batch twice (the herd soak on a loaded
    machine saw 3 of 9,500 sent twice about a second apart with two attempts of 1.25 s each). A send that fails or
    times out is the processor's to judge (its entries backed off or dead-lettered), a completion is retried by
    `persist` while the time left allows."""
    worst = max(MIN_CALL_SECONDS, (margin - SLACK_SECONDS) / 2)
    connect = min(0.5, worst / 3)
    return CallLimits(connect=connect, read=worst - connect, attempts=1)


_PROCESSOR_CLIENTS: dict[float, Clients] = {}


def processor_clients(margin: float) -> Clients:
    """The processor's clients, keeping to `call_limits(margin)`: one registry a container (a margin)."""
    made = _PROCESSOR_CLIENTS.get(margin)
    if made is None:
        made = _PROCESSOR_CLIENTS.setdefault(margin, Clients(call_limits(margin)))
    return made


# BatchGetItem's tries for keys DynamoDB leaves unprocessed (throttling) before the rest is left for the next tick.
READ_ATTEMPTS = 5
# The errors of a BatchGetItem throttled as a whole: its keys are left for the next tick, as unprocessed ones are.
READ_THROTTLED = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"})


# -- the processor ---------------------------------------------------------------------------------------------


class Processor:
    """One tick. Each shard with something due is held by one invocation at a time (a lease in the ledger, one
    conditional write a shard, not one an item), read a page at a time; each page's items are read again,
    consistently, in one BatchGetItem (the index is eventually consistent: it may still show an item that was
    completed, moved or deleted), and those still as the index showed them are sent, as many a call as the target
    takes, on a pool shared by all shards (a hot shard gets every worker). Each sent item is completed by a write
    conditional on it being unchanged since that read. The lease ends at the Lambda timeout + 30 s from the tick's
    start, so an invocation that dies leaves its shards to the next tick after that; one that ends releases them."""

    def __init__(
        self,
        config: HandlerConfig,
        clients: Clients,
        now: Callable[[], float],
        time_left: Callable[[], float],
        shards: Sequence[int] | None = None,
        sending: Clients | None = None,
    ):
        self.config = config
        self.polling = config["polling"]
        # The shards this invocation takes: every one (`index_shards`, found at the tick), or (fanned out) its group's.
        self.whole = shards is None
        self.shards = list(range(self.polling["shards"]) if shards is None else shards)
        self.clients = clients
        # The sends and the item writes that follow them (completions, backoffs, dead letters): kept to the
        # processor's own call limits (`call_limits`, the handler's `processor_clients`), which a send's budget
        # counts on; the reads and the leases keep the generous ones (a slow read only stops a shard's drain).
        self.send_clients = clients if sending is None else sending
        self.now = now
        self.time_left = time_left
        self.keys = key_names(config)
        # A shard's lease outlives the invocation that took it: the Lambda timeout + 30 s from the tick's start.
        self.lease = int(now()) + self.polling["leaseSeconds"]
        # Who holds a shard: this invocation's own mark, so only it releases its leases.
        self.holder = os.urandom(8).hex()
        self.workers = config["maxWorkers"]
        # The longest one of its calls may take: what a send and its completions are budgeted by (`_fitting`).
        self.call_seconds = call_limits(self.polling["budgetMarginSeconds"]).worst_seconds()
        # A cold container's first page of a shard, before any pace is known: its share of one round of the pool.
        self.first_page = max(1, self.workers // max(1, len(self.shards)))

    def tick(self) -> TickReport:
        report = TickReport()
        if self.whole:
            self.shards = self.index_shards()
        shards = self.shards
        if not shards:
            return report
        # The readers only query and wait; the items' work runs on `pool`, which outlives them (the last `with` is
        # left first), so a page's batches can still queue there.
        with (
            ThreadPoolExecutor(max_workers=self.workers) as pool,
            ThreadPoolExecutor(max_workers=min(self.workers, len(shards))) as readers,
        ):
            drained = list(readers.map(lambda shard: self._drain(shard, pool), shards))
        for shard, (counts, _) in zip(shards, drained, strict=True):
            report.add(counts)
            report.shards[shard] = counts.dispatched
        log.metrics(
            "ScheduledTable",
            {"Table": self.config["table"], "Mode": MODE},
            properties={"heldShards": report.held_shards, "outOfTime": report.out_of_time},
            Dispatched=report.dispatched,
            Retried=report.retried,
            Failed=report.failed,
            Unsettled=report.unsettled,
            Poisoned=report.poisoned,
            Backlog=report.backlog,
            BackloggedShards=report.backlogged_shards,
            Throttled=report.throttled,
        )
        for _, error in drained:
            if error is not None:
                raise error  # after the metrics: what the other shards did is reported
        return report

    def index_shards(self) -> list[int]:
        """The shards the due index may hold entries in: 0 to `shards`-1, and those above that a higher `shards`
        before a change left entries in (the assigner indexes each new item on a shard below the current count,
        and an entry stays on its shard until it leaves the index), until they are empty. The ledger keeps the
        highest count in use (`SHARDS_RECORD`): raised at the first tick of a higher `shards`; lowered once every
        shard above the current count holds nothing and an assigner of the old count can no longer be running (a
        lease's length after the change was first seen). A stack's first tick, with no record yet (its assigner may
        have indexed items under another `shards` before it), probes every shard a configuration may have. One
        GetItem a tick, and while old shards hold entries, one more one-item Query each."""
        shards = self.polling["shards"]
        ddb = self.clients.get("dynamodb")
        ledger = self.polling["ledgerTable"]
        now = int(self.now())
        record = ddb.get_item(TableName=ledger, Key=SHARDS_RECORD, ConsistentRead=True).get("Item")
        if record is None:
            highest, since = self._highest_used(shards), now
            self._keep_shards(highest, shards, since, "attribute_not_exists(#shards)", {})
        else:
            highest, seen, since = (int(record[name]["N"]) for name in ("shards", "config", "since"))
            if highest < shards:  # raised: every entry is on a shard below the new count
                self._keep_shards(shards, shards, now, "#shards = :was", {":was": record["shards"]})
                highest = shards
            elif highest > shards and seen != shards:  # lowered: the old assigner's grace starts now
                since = now
                condition = "#shards = :was AND #config = :seen"
                self._keep_shards(
                    highest, shards, since, condition, {":was": record["shards"], ":seen": record["config"]}
                )
        if highest <= shards:
            return list(range(shards))
        old = [shard for shard in range(shards, highest) if self._holds_any(shard)]
        if not old and now >= since + self.polling["leaseSeconds"]:
            condition = "#shards = :was AND #config = :seen"
            self._keep_shards(
                shards, shards, since, condition, {":was": {"N": str(highest)}, ":seen": {"N": str(shards)}}
            )
            log.info("old-shards-drained", shards=shards, was=highest)
        elif old:
            log.info("old-shards-draining", shards=shards, old=old, note="entries indexed before `shards` was lowered")
        return [*range(shards), *old]

    def _keep_shards(self, highest: int, shards: int, since: int, condition: str, values: dict[str, Any]) -> None:
        """Write the shards record, if it is still as read (another tick's write wins: the next tick reads it)."""
        try:
            self.clients.get("dynamodb").put_item(
                TableName=self.polling["ledgerTable"],
                Item={
                    **SHARDS_RECORD,
                    "shards": {"N": str(highest)},
                    "config": {"N": str(shards)},
                    "since": {"N": str(since)},
                },
                ConditionExpression=condition,
                ExpressionAttributeNames={
                    "#shards": "shards",
                    **({"#config": "config"} if "#config" in condition else {}),
                },
                **({"ExpressionAttributeValues": values} if values else {}),
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    def _holds_any(self, shard: int) -> bool:
        """Whether the shard holds any index entry, due or not (one one-item Query)."""
        query = self.due_query(shard)
        query.update(
            KeyConditionExpression="#shard = :shard",
            ExpressionAttributeNames={"#shard": SHARD},
            ExpressionAttributeValues={":shard": {"N": str(shard)}},
            Limit=1,
        )
        return bool(self._query(self.clients.get("dynamodb"), query).get("Items"))

    def _highest_used(self, shards: int) -> int:
        """One above the highest shard holding an entry, at least `shards`: every shard up to MAX_SHARDS probed."""
        above = list(range(shards, MAX_SHARDS))
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(above)))) as readers:
            held = [shard for shard, holds in zip(above, readers.map(self._holds_any, above), strict=True) if holds]
        return max([shards, *(shard + 1 for shard in held)])

    def _out_of_time(self) -> bool:
        return self.time_left() < self.polling["budgetMarginSeconds"]

    def due_query(self, shard: int) -> dict[str, Any]:
        """One shard's due items: a range (`stDue <= now`), never one exact time bucket."""
        return {
            "TableName": self.config["table"],
            "IndexName": INDEX_NAME,
            "KeyConditionExpression": "#shard = :shard AND #due <= :now",
            "ExpressionAttributeNames": {"#shard": SHARD, "#due": DUE},
            "ExpressionAttributeValues": {":shard": {"N": str(shard)}, ":now": {"N": str(int(self.now()))}},
            "Limit": PAGE_SIZE,
        }

    def due_shards(self) -> list[int]:
        """The shards with at least one item due now: a one-item page of each, read in parallel. What the fan-out
        reads before invoking anything, so a quiet tick costs one query per shard, as a single tick does."""
        ddb = self.clients.get("dynamodb")

        def due(shard: int) -> bool:
            return bool(self._query(ddb, {**self.due_query(shard), "Limit": 1}).get("Items"))

        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(self.shards)))) as readers:
            found = list(readers.map(due, self.shards))
        return [shard for shard, is_due in zip(self.shards, found, strict=True) if is_due]

    def _query(self, ddb: Any, query: dict[str, Any]) -> dict[str, Any]:
        """One page of the due index. A table without the index (one the component does not own, given with its
        stream ARN, so nothing checked it at deploy) fails every tick: say which index and how to add it, in the
        log and in the error the alarm counts."""
        try:
            page: dict[str, Any] = ddb.query(**query)
        except Exception as exc:
            # AWS: ValidationException "The table does not have the specified index"; moto: ResourceNotFound.
            if error_code(exc) not in ("ValidationException", "ResourceNotFoundException") or "index" not in str(exc):
                raise
            fix = (
                f"table {self.config['table']!r} has no due index {INDEX_NAME!r}: add a global secondary index "
                f"{INDEX_NAME!r} with partition key {SHARD!r} (N) and sort key {DUE!r} (N), projection ALL"
            )
            log.error("due-index-missing", table=self.config["table"], fix=fix)
            raise RuntimeError(fix) from exc
        return page

    def _drain(self, shard: int, pool: ThreadPoolExecutor) -> tuple[TickReport, Exception | None]:
        """Take the shard's due items a page at a time until none is left or the time is up. The shard is held
        (`_hold`) once its first page shows something due, and released at the end, whatever happened. Each page is
        no larger than the time left can take at the shard's pace, so a tick that runs out of time has read little
        it does not take (the next tick would read it again)."""
        counts = TickReport()
        query = self.due_query(shard)
        ddb = self.clients.get("dynamodb")
        began: float | None = None
        handled = 0
        held = False
        # The first error of an entry that was not sent (a park or an owed dead letter whose send fails, a write
        # that fails before a send): the entry stays due for the next tick, and the shard's other entries go on
        # (it would head the shard every tick); the tick fails with it at the end.
        failure: Exception | None = None
        try:
            while True:
                left = self.time_left()
                if began is None:
                    began = left
                elif handled and began > left:
                    _PACE[(self.config["table"], shard)] = handled / (began - left)
                limit = self._page_limit(shard, handled, began - left, left)
                if limit == 0:  # the next item would not be done before the margin
                    counts.out_of_time = True
                    counts.backlogged_shards = 1
                    return counts, failure
                page: dict[str, Any] = self._query(ddb, {**query, "Limit": limit})
                entries = page.get("Items", [])
                if not entries:
                    return counts, failure
                if not held:
                    held = self._hold(shard)
                    if not held:
                        counts.held_shards = 1
                        log.info("shard-held", shard=shard, note="another invocation is taking this shard")
                        return counts, failure
                outcomes, error, unsent = self._run_page(entries, pool)
                counts.tally(outcomes)
                failure = failure or unsent
                if error is not None:
                    return counts, error
                handled += sum(1 for o in outcomes if o not in (Outcome.LEFT, Outcome.UNREAD))
                if Outcome.LEFT in outcomes or Outcome.UNREAD in outcomes:
                    # Out of time, or reads throttled (the partition is hot: the next page would be too).
                    counts.out_of_time = Outcome.LEFT in outcomes
                    counts.backlogged_shards = 1
                    return counts, failure
                if not page.get("LastEvaluatedKey"):
                    return counts, failure
                query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        except Exception as exc:  # a failed query or read: the shard stops, the others go on
            return counts, exc  # an entry's earlier error (`failure`) was logged as it happened
        finally:
            if held:
                self._release(shard)

    def _lease_key(self, shard: int) -> dict[str, Any]:
        return {"id": {"S": f"{LEASE_PREFIX}{shard}"}}

    def _hold(self, shard: int) -> bool:
        """Take the shard until the lease ends, unless another invocation holds it: one conditional write. Only one
        invocation sends a shard's items at a time, so two overlapping ticks never send one item twice."""
        try:
            self.clients.get("dynamodb").put_item(
                TableName=self.polling["ledgerTable"],
                Item={
                    **self._lease_key(shard),
                    "holder": {"S": self.holder},
                    "expiresAt": {"N": str(self.lease)},
                },
                # Its own lease too: the SDK's retry of a put DynamoDB applied but whose answer was lost would
                # otherwise find this invocation's lease and leave the shard held, by nobody, until the lease ends.
                ConditionExpression="attribute_not_exists(#ends) OR #ends <= :now OR #holder = :holder",
                ExpressionAttributeNames={"#ends": "expiresAt", "#holder": "holder"},
                ExpressionAttributeValues={":now": {"N": str(int(self.now()))}, ":holder": {"S": self.holder}},
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def _release(self, shard: int) -> None:
        """Give the shard back as the drain ends, so the next tick need not wait for the lease. A release that
        fails only delays the shard until its lease ends."""
        try:
            self.clients.get("dynamodb").delete_item(
                TableName=self.polling["ledgerTable"],
                Key=self._lease_key(shard),
                ConditionExpression="#holder = :holder",
                ExpressionAttributeNames={"#holder": "holder"},
                ExpressionAttributeValues={":holder": {"S": self.holder}},
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                log.warning("shard-release-failed", shard=shard, reason=f"{type(exc).__name__}: {str(exc)[:300]}")

    def _page_limit(self, shard: int, handled: int, spent: float, left: float) -> int:
        """How many items to read next: what the time left before the margin can take at the shard's pace (0:
        none), up to a page. The pace is this tick's so far; before the first page, this container's last tick's
        (at least one item: a pace is only learnt by taking items), or a small first page in a cold container.
        `spent` is in the clock of `left` (the Lambda's remaining time)."""
        available = left - self.polling["budgetMarginSeconds"]
        if available < 0:
            return 0
        if handled == 0:
            pace = _PACE.get((self.config["table"], shard))
            return self.first_page if pace is None else max(1, min(PAGE_SIZE, int(pace * available)))
        if spent <= 0:
            return PAGE_SIZE  # the clock did not move (no Lambda context): nothing to fit
        return min(PAGE_SIZE, int(handled / spent * available))

    def _run_page(
        self, entries: list[dict[str, Any]], pool: ThreadPoolExecutor
    ) -> tuple[list[Outcome], Exception | None, Exception | None]:
        """Read the page's items again, consistently, keep those still as the index showed them, and send them
        as many a call as the target takes (`dispatch.batch_entries`: 10 to a queue, a bus or a topic), each batch
        on the pool. Returns the outcomes, the first error of a sent batch (the shard stops: a completion that
        fails leaves its item to be sent again, so a shard whose writes fail is not sent further), and the first
        error of an entry not sent to the target (the shard goes on without it)."""
        current, unread = self._read_current(entries)
        outcomes: list[Outcome] = [Outcome.UNREAD] * unread
        errors: list[Exception] = []
        ready: list[dict[str, Any]] = []
        for entry in entries:
            identity = self._identity(entry)
            item = current.get(identity)
            if item is None:
                if identity in current:  # not read (throttled past every try): counted UNREAD above
                    continue
                outcomes.append(Outcome.SKIPPED)  # deleted since the index showed it
                continue
            # Each entry by itself: one that cannot be handled is parked, one whose write fails waits for the next
            # tick; neither stops the page (the shard would starve while it stays first).
            try:
                outcome = self._triage(item, entry)
            except Unusable as exc:
                self._settle(outcomes, errors, self._key(item), partial(self._park, item, exc), sent=False)
                continue
            except Exception as exc:
                self._unsettled(outcomes, errors, self._key(item), exc, sent=False)
                continue
            if outcome is None:
                ready.append(item)
            else:
                outcomes.append(outcome)
        size = batch_entries(self.config["target"])
        runs = [pool.submit(self._run, ready[n : n + size]) for n in range(0, len(ready), size)]
        error: Exception | None = None
        for run in runs:
            try:
                done, failure = run.result()
            except Exception as exc:
                error = error or exc
                continue
            outcomes.extend(done)
            error = error or failure
        return outcomes, error, errors[0] if errors else None

    def _triage(self, item: dict[str, Any], entry: dict[str, Any]) -> Outcome | None:
        """What becomes of one read item before any send: None to send it, or its outcome (not sent). `Unusable`
        for an item whose bookkeeping or time cannot be read."""
        status = item.get(STATUS, {}).get("S")
        if status == Status.FAILED.value and self._in_place(item, entry):
            return self._owed(item)  # failed for good and still in the index: its dead letter is owed (`_give_up`)
        if not self._as_indexed(item, entry):
            return Outcome.SKIPPED
        task_due(item)
        attempts_of(item)
        if self._cancelled(item):
            delay = self._delay(item)
            if status == Status.PENDING.value:
                if delay is None:
                    self._unindex(item)  # the assigner parks it (an item without a time), and indexes it nowhere
                return Outcome.SKIPPED  # with a delay, the assigner indexes it again at it
            # Backed off: the assigner's filter never passes its user's writes.
            if delay is None:
                time_attribute, delay_attribute = self.config["timeAttribute"], self.polling["delayAttribute"]
                raise Unusable(
                    time_attribute,
                    f"was removed while the item waited to be tried again, and it has no {delay_attribute!r} "
                    "(seconds >= 0) and the component no default_delay_seconds",
                    f"write {time_attribute!r} again (ISO-8601 or epoch seconds) or {delay_attribute!r}, or delete "
                    "the item",
                )
            self._reindex(self._key(item), item, int(self.now()) + delay, timed=False)
            return Outcome.SKIPPED
        moved = self._moved(item)
        if moved is not None:
            self._reindex(self._key(item), item, moved)
            return Outcome.SKIPPED
        return None

    def _key(self, raw: dict[str, Any]) -> dict[str, Any]:
        return {k: raw[k] for k in self.keys}

    def _identity(self, raw: dict[str, Any]) -> tuple[Any, ...]:
        return tuple((k, *next(iter(raw[k].items()))) for k in self.keys)

    def _read_current(self, entries: list[dict[str, Any]]) -> tuple[dict[tuple[Any, ...], Any], int]:
        """The page's items as they are now: one consistent BatchGetItem (a page is at most 100 keys, the call's
        limit), keys DynamoDB leaves unprocessed asked again with a backoff. An item found maps to itself, one not
        found (deleted) is absent; one never read (still unprocessed after every try) maps to None, with their
        count: they are left for the next tick."""
        ddb = self.clients.get("dynamodb")
        table = self.config["table"]
        found: dict[tuple[Any, ...], Any] = {}
        request: dict[str, Any] = {table: {"Keys": [self._key(e) for e in entries], "ConsistentRead": True}}
        for attempt in range(READ_ATTEMPTS):
            if attempt:  # a backoff between tries, none after the last
                time.sleep(min(2.0, 0.05 * 2 ** (attempt - 1)))
            try:
                response = ddb.batch_get_item(RequestItems=request)
            except Exception as exc:
                # Throttled whole (every key at once): DynamoDB raises instead of returning them unprocessed.
                if error_code(exc) not in READ_THROTTLED:
                    raise
                continue
            for items in response.get("Responses", {}).values():
                for item in items:
                    found[self._identity(item)] = item
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return found, 0
        unread = [key for keys in request.values() for key in keys["Keys"]]
        for key in unread:
            found[self._identity(key)] = None
        log.warning("read-throttled", unread=len(unread), note="left for the next tick")
        return found, len(unread)

    def _as_indexed(self, item: dict[str, Any], entry: dict[str, Any]) -> bool:
        """The item is still where the index entry put it: waiting (no settled status), in the same shard at the
        same `stDue`."""
        if item.get(STATUS, {}).get("S") in (Status.DONE.value, Status.FAILED.value):
            return False
        return self._in_place(item, entry)

    @staticmethod
    def _in_place(item: dict[str, Any], entry: dict[str, Any]) -> bool:
        """The item is still in the index where the entry shows it: the same shard, the same `stDue`."""
        return item.get(DUE) == entry.get(DUE) and item.get(SHARD) == entry.get(SHARD)

    def _unchanged(self, item: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The condition under which a write settles the occurrence `item` was read as: its `stDue` and its time
        attribute as read. A user's move since (or a PutItem that removed the index attributes) fails it, and the
        item stays for the assigner or the next tick."""
        names = {"#due": DUE, "#time": self.config["timeAttribute"]}
        values: dict[str, Any] = {":due": item[DUE]}
        if present(item, names["#time"]) is not None:
            values[":time"] = item[names["#time"]]
            return "#due = :due AND #time = :time", names, values
        if names["#time"] in item:  # written as null: still null (a null is compared by its type, not by `=`)
            values[":null"] = {"S": "NULL"}
            return "#due = :due AND attribute_type(#time, :null)", names, values
        return "#due = :due AND attribute_not_exists(#time)", names, values

    def _run(self, batch: list[dict[str, Any]]) -> tuple[list[Outcome], Exception | None]:
        """Dispatch a batch in one call to the target where it takes a batch (`dispatch.send_many`), then complete
        each the target took, and back off (or dead-letter) each it refused, by itself: one refused entry is
        retried alone, never with the ones already sent. Each entry's bookkeeping is its own (`_settle`): one that
        fails (a throttle outlasting the retries) leaves that entry due, and the others are still completed, so
        none the target took is sent again; the first such error is returned, for the tick to fail with after the
        rest is done. A send takes only the entries whose send and completions fit the time left at their worst
        (`_fitting`), the next send the next ones, and so on; what does not fit even alone is left for the next
        tick, unsent: a send the Lambda timeout cuts off before its completions would be sent again once the
        shard's lease ends."""
        if self._out_of_time():
            return [Outcome.LEFT] * len(batch), None
        target = self.config["target"]
        outcomes: list[Outcome] = []
        errors: list[Exception] = []
        ready: list[tuple[dict[str, Any], int, str, str]] = []
        for item in batch:
            key = self._key(item)
            try:
                due = task_due(item)
                named = item_keys(key, self.config)
                moment = datetime.fromtimestamp(due, UTC)
                occurrence = occurrence_id(named, moment)
                event = due_event(
                    mode=MODE,
                    table=self.config["table"],
                    keys=named.plain,
                    due=moment,
                    item=without_index(decode_image(item) or {}),
                    occurrence=occurrence,
                )
                payload = target_input(target, event)
            except Exception as exc:
                self._settle(outcomes, errors, key, partial(self._failed, item, exc), sent=False)
                continue
            ready.append((item, due, occurrence, payload))
        if ready:
            try:
                prepare(target, clients=self.send_clients)
            except Exception as exc:  # the target cannot be looked up (a queue deleted): a send that failed, each
                for item, *_ in ready:
                    self._settle(outcomes, errors, self._key(item), partial(self._failed, item, exc), sent=False)
                return outcomes, errors[0] if errors else None
        while ready:
            # As many as fit, sent and settled, then the next: a short time left sends smaller batches.
            fitting = self._fitting([(payload, occurrence) for *_, occurrence, payload in ready])
            if fitting == 0:
                outcomes.extend([Outcome.LEFT] * len(ready))
                break
            self._send(ready[:fitting], outcomes, errors)
            ready = ready[fitting:]
        return outcomes, errors[0] if errors else None

    def _send(
        self, ready: list[tuple[dict[str, Any], int, str, str]], outcomes: list[Outcome], errors: list[Exception]
    ) -> None:
        """Send (item, due, occurrence, payload) entries that fit the time left (`_fitting`), then settle each:
        the completions first (the budget counts one each), then the refused entries' backoffs (nothing was
        sent)."""
        target = self.config["target"]
        refused = send_many(
            target, [(payload, occurrence) for *_, occurrence, payload in ready], clients=self.send_clients
        )
        sent = [(item, due) for (item, due, _, _), error in zip(ready, refused, strict=True) if error is None]
        for position, (item, due) in enumerate(sent):
            later = len(sent) - position - 1
            self._settle(outcomes, errors, self._key(item), partial(self._dispatched, item, due, later), sent=True)
        for (item, _, _, _), error in zip(ready, refused, strict=True):
            if error is not None:
                self._settle(outcomes, errors, self._key(item), partial(self._failed, item, error), sent=False)

    def _fitting(self, batch: list[tuple[str, str]]) -> int:
        """How many of `batch`'s entries (payload, occurrence), from the first, can be sent now: their send's calls
        (`dispatch.most_calls`) and one completion each, every call at its worst, fit the time left with
        SLACK_SECONDS to spare. The Lambda timeout then never cuts a send off from its completions."""
        left = self.time_left() - SLACK_SECONDS
        for count in range(len(batch), 0, -1):
            if (most_calls(self.config["target"], batch[:count]) + count) * self.call_seconds <= left:
                return count
        return 0

    def _dispatched(self, item: dict[str, Any], due: int, later: int = 0) -> Outcome:
        """Complete a sent item. Its write is tried again (a throttle, a 500) only while the time left still holds
        the retry and the `later` completions of its batch, each at its worst."""

        def may_retry(wait: float) -> bool:
            return wait + (later + 1) * self.call_seconds <= self.time_left() - SLACK_SECONDS

        persist(partial(self._done, item), may_retry=may_retry)
        log.info(
            "dispatched",
            keys=decode_image(self._key(item)),
            dueAt=format_due(datetime.fromtimestamp(due, UTC)),
            lateSeconds=round(self.now() - due, 3),
        )
        return Outcome.DISPATCHED

    def _settle(
        self,
        outcomes: list[Outcome],
        errors: list[Exception],
        key: dict[str, Any],
        step: Callable[[], Outcome],
        *,
        sent: bool,
    ) -> None:
        """Record one entry's outcome, by itself: a bookkeeping write that fails (the completion, the backoff, the
        dead letter) is logged and kept in `errors`, and the entry counted UNSETTLED; it stays in the index, due
        at the next tick: sent again then if it was sent (at least once, never lost), sent for the first time
        if not."""
        try:
            outcomes.append(step())
        except Exception as exc:
            self._unsettled(outcomes, errors, key, exc, sent=sent)

    @staticmethod
    def _unsettled(
        outcomes: list[Outcome], errors: list[Exception], key: dict[str, Any], exc: Exception, *, sent: bool
    ) -> None:
        errors.append(exc)
        outcomes.append(Outcome.UNSETTLED)
        log.error(
            "unsettled",
            keys=decode_image(key),
            sent=sent,
            reason=f"{type(exc).__name__}: {str(exc)[:500]}",
            note="stays due: taken again by the next tick" + (", and sent again" if sent else ""),
        )

    def _moved(self, raw: dict[str, Any]) -> int | None:
        """The due time the item's time attribute gives, when it is not the one of the occurrence the index entry
        stands for: the user moved the item since it was indexed (running it now would run it at its old time), or
        a writer indexed it itself (`pending_attributes`) at a time its time attribute does not give. `_reindex`
        puts it back at that time. `Unusable` for a time attribute that cannot be read (the user wrote one since it
        was indexed, or a writer indexed it with one): it has no time to run at."""
        value = present(raw, self.config["timeAttribute"])
        status = raw.get(STATUS, {}).get("S")
        if value is None or (status == Status.RETRY.value and TASK_DUE not in raw):
            return None  # no time attribute; or backed off before `stTaskDue` was kept: its occurrence is unknown
        try:
            moved = int(parse_due(decode_image({"t": value})["t"]).timestamp())  # type: ignore[index]
        except PermanentError as exc:
            raise Unusable(
                self.config["timeAttribute"],
                str(exc),
                f"write {self.config['timeAttribute']!r} again as an ISO-8601 time or epoch seconds (the item is "
                "indexed again)",
            ) from exc
        return moved if moved != task_due(raw) else None

    def _cancelled(self, raw: dict[str, Any]) -> bool:
        """The item was indexed from its time attribute (`stTimed`) and the attribute is gone: its user removed it
        since, so it is not due at the `stDue` it left behind. An item indexed from a delay or by its writer
        (`pending_attributes`) has no mark: its `stDue` is its time."""
        return TIMED in raw and present(raw, self.config["timeAttribute"]) is None

    def _delay(self, raw: dict[str, Any]) -> int | None:
        """The delay (seconds) at which the assigner indexes an item without a time attribute: the item's delay
        attribute, a number of seconds >= 0, or the component's default; None when neither applies (the assigner
        parks such an item)."""
        delay = present(raw, self.polling["delayAttribute"])
        if delay is None:
            default = self.polling["defaultDelaySeconds"]
            return None if default is None else int(default)
        try:
            seconds = Decimal(delay["N"]) if "N" in delay else None
        except ArithmeticError:
            return None
        return int(seconds) if seconds is not None and seconds >= 0 else None

    def _unindex(self, raw: dict[str, Any], reason: str | None = None) -> None:
        """Take the item out of the due index, conditional on it being as read, and leave it waiting (PENDING),
        so that a user's next write of its time indexes it again (the assigner's filter passes updates of
        waiting items). `reason` (why it was parked) is kept in `stError`."""
        condition, names, values = self._unchanged(raw)
        names.update({"#status": STATUS, "#shard": SHARD, "#task": TASK_DUE, "#timed": TIMED})
        values[":pending"] = {"S": Status.PENDING.value}
        update = "SET #status = :pending REMOVE #shard, #due, #task, #timed"
        if reason is not None:
            names["#error"] = ERROR
            values[":error"] = {"S": reason}
            update = "SET #status = :pending, #error = :error REMOVE #shard, #due, #task, #timed"
        if self._write_if(raw, update, condition, names, values):
            log.info("unindexed", keys=decode_image(self._key(raw)), parked=reason is not None)

    def _park(self, raw: dict[str, Any], problem: Unusable) -> Outcome:
        """Park an item that cannot be handled in the table's poison queue, with a reason naming its keys, the
        attribute and the fix, then take it out of the index (`_unindex`), so it is not read again every tick. The
        send comes first: if the write then fails, the next tick parks it again (twice, never lost)."""
        from st_core.jsontext import dumps
        from st_core.poison import UNUSABLE_ITEM, PoisonQueue, message_limit
        from st_core.stream import lambda_keys

        keys = decode_image(self._key(raw))
        reason = f"item {dumps(keys)} cannot be delivered: {problem}; taken out of the due index"
        queue = PoisonQueue(
            self.config["poisonQueueUrl"],
            mode=MODE,
            table=self.config["table"],
            clients=self.clients,
            limit=message_limit(self.config),
        )
        queue.send(
            {"keys": keys, "Keys": lambda_keys(self._key(raw)), "item": decode_image(raw)}, reason, UNUSABLE_ITEM
        )
        log.error("poisoned", keys=keys, reason=reason)
        self._unindex(raw, reason)
        return Outcome.POISONED

    def _reindex(self, key: dict[str, Any], raw: dict[str, Any], moved: int, *, timed: bool = True) -> None:
        """Index an item whose time attribute no longer gives its `stDue` again at the time it gives, as the
        assigner indexes a move (conditional on the item being as it was read); the next tick that finds it due
        sends it. The assigner does not see every such item: its filter passes moves of waiting items only (not
        those of a backed-off one), and a writer's own index entry never (an
        insert carrying `stStatus`, or an `stDue` rewritten alone, is no change of the time attribute). So neither
        waits for it: when both index the same move, the second one's condition fails (the `stDue` it was read
        with is gone), and the item has one place in the index. The assigner ignores this write (it keeps the
        time attribute). `timed=False` indexes a backed-off item whose time was removed at its delay, as the
        assigner indexes a waiting one (not marked as indexed from its time)."""
        condition, names, values = self._unchanged(raw)
        names.update({"#status": STATUS, "#task": TASK_DUE, "#attempts": ATTEMPTS, "#error": ERROR})
        names["#timed"] = TIMED
        values.update({":moved": {"N": str(moved)}, ":pending": {"S": Status.PENDING.value}})
        update = "SET #due = :moved, #status = :pending REMOVE #task, #attempts, #error, #timed"
        if timed:
            values[":timed"] = {"BOOL": True}
            update = "SET #due = :moved, #status = :pending, #timed = :timed REMOVE #task, #attempts, #error"
        if not self._write_if(raw, update, condition, names, values):
            return
        log.info(
            "reindexed",
            keys=decode_image(key),
            dueAt=format_due(datetime.fromtimestamp(moved, UTC)),
            indexedAt=format_due(datetime.fromtimestamp(task_due(raw), UTC)),
            note=f"its {self.config['timeAttribute']!r} does not give the stDue it was indexed at: indexed again"
            + ("" if timed else ", at its delay (the attribute was removed)"),
        )

    def _done(self, item: dict[str, Any]) -> None:
        """Mark the sent occurrence done (or delete the item, `on_done="delete"`), only if the item is still as it
        was read: a user's move since keeps it waiting at its new time."""
        ddb = self.send_clients.get("dynamodb")
        condition, names, values = self._unchanged(item)
        key = self._key(item)
        try:
            if self.polling["onDone"] == "delete":
                ddb.delete_item(
                    TableName=self.config["table"],
                    Key=key,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
                return
            names.update({"#status": STATUS, "#doneAt": DONE_AT, "#shard": SHARD, "#error": ERROR})
            names.update({"#task": TASK_DUE, "#timed": TIMED})
            ddb.update_item(
                TableName=self.config["table"],
                Key=key,
                UpdateExpression=("SET #status = :done, #doneAt = :at REMOVE #shard, #due, #error, #task, #timed"),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={
                    **values,
                    ":done": {"S": Status.DONE.value},
                    ":at": {"S": format_due(datetime.fromtimestamp(self.now(), UTC))},
                },
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            log.warning(
                "changed-since-sent",
                keys=decode_image(key),
                note="the item was moved, rewritten or deleted between its read and its completion; left as it is",
            )

    def _failed(self, item: dict[str, Any], exc: Exception) -> Outcome:
        """Back the item off (back in the index at a later `stDue`, its occurrence's time kept in `stTaskDue`, so
        the next attempt is the same occurrence), or after the last attempt dead-letter it (`_give_up`)."""
        attempts = attempts_of(item) + 1
        reason = kms_reason(exc) or f"{type(exc).__name__}: {str(exc)[:500]}{advice(exc)}"
        final = not is_transient(exc) or attempts >= self.polling["maxAttempts"]
        log.warning(
            "dispatch-failed", keys=decode_image(self._key(item)), attempts=attempts, final=final, reason=reason
        )
        if final:
            return self._give_up(item, reason, attempts)
        condition, names, values = self._unchanged(item)
        names.update({"#status": STATUS, "#attempts": ATTEMPTS, "#error": ERROR, "#task": TASK_DUE})
        backoff = self.polling["backoffSeconds"] * 2 ** (attempts - 1)
        values.update(
            {
                ":attempts": {"N": str(attempts)},
                ":error": {"S": reason},
                ":retry": {"S": Status.RETRY.value},
                ":next": {"N": str(int(self.now()) + backoff)},
                ":task": {"N": str(task_due(item))},
            }
        )
        self._write_if(
            item,
            "SET #status = :retry, #attempts = :attempts, #error = :error, #due = :next, #task = :task",
            condition,
            names,
            values,
        )
        return Outcome.RETRIED

    def _give_up(self, item: dict[str, Any], reason: str, attempts: int) -> Outcome:
        """Dead-letter an occurrence that failed for good, in three steps, so that a dead letter is sent only for
        an item still as it was read, and is never lost:

        1. mark it FAILED with the reason, conditional on the item being unchanged since its read (a user who moved
           or rewrote it meanwhile keeps it waiting at its new time: no dead letter), and keep it in the index;
        2. send the dead letter;
        3. take it out of the index (conditional on it still being that FAILED entry).

        Sending first (as before) dead-lettered an item the user had changed meanwhile. Marking it and taking it out
        of the index in one write would lose the dead letter if the send then failed (nothing would read the item
        again). A FAILED item still in the index is a dead letter owed: the next tick that reads it sends it
        (`_owed`) and takes it out, so a send or clean-up that fails is repeated, at least once, never lost. Only a
        dead letter whose clean-up failed can be sent twice."""
        condition, names, values = self._unchanged(item)
        names.update({"#status": STATUS, "#attempts": ATTEMPTS, "#error": ERROR, "#task": TASK_DUE})
        values.update(
            {
                ":attempts": {"N": str(attempts)},
                ":error": {"S": reason},
                ":failed": {"S": Status.FAILED.value},
                ":task": {"N": str(task_due(item))},
            }
        )
        marked = self._write_if(
            item,
            "SET #status = :failed, #attempts = :attempts, #error = :error, #task = :task",
            condition,
            names,
            values,
        )
        if not marked:
            log.warning(
                "changed-since-read",
                keys=decode_image(self._key(item)),
                note="failed for good, but the item was moved, rewritten or deleted since its read: no dead letter",
            )
            return Outcome.SKIPPED
        return self._owed(
            {
                **item,
                STATUS: {"S": Status.FAILED.value},
                ATTEMPTS: {"N": str(attempts)},
                ERROR: {"S": reason},
                TASK_DUE: {"N": str(task_due(item))},
            }
        )

    def _owed(self, item: dict[str, Any]) -> Outcome:
        """Send the dead letter a FAILED item still in the index is owed, then take it out of the index (see
        `_give_up`): after a send or a clean-up that failed, the next tick that reads the entry repeats them."""
        self._dead_letter(item, item.get(ERROR, {}).get("S", "failed"), attempts_of(item))
        self._write_if(
            item,
            "REMOVE #shard, #due, #task, #timed",
            "#status = :failed AND #due = :due",
            {"#status": STATUS, "#due": DUE, "#shard": SHARD, "#task": TASK_DUE, "#timed": TIMED},
            {":failed": {"S": Status.FAILED.value}, ":due": item[DUE]},
        )
        return Outcome.FAILED

    def _write_if(
        self, item: dict[str, Any], update: str, condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> bool:
        """One conditional update of the item; False when its condition failed (the item changed: nothing
        written)."""
        try:
            self.send_clients.get("dynamodb").update_item(
                TableName=self.config["table"],
                Key=self._key(item),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def _dead_letter(self, raw: dict[str, Any], reason: str, attempts: int) -> None:
        from st_core.poison import fit  # only a task that failed for good compiles it, not every tick's cold start

        body = {
            "reason": reason,
            "attempts": attempts,
            "mode": MODE,
            "table": self.config["table"],
            "keys": decode_image(self._key(raw)),
            # What `scheduled-table redrive target` needs to send the same due event again, under the same name.
            "dueAt": format_due(datetime.fromtimestamp(task_due(raw), UTC)),
            "occurrence": occurrence_id(
                item_keys(self._key(raw), self.config), datetime.fromtimestamp(task_due(raw), UTC)
            ),
            "item": without_index(decode_image(raw) or {}),
        }
        # A 400 KB item still dead-letters: without its body if need be, never retried forever for its size.
        self.send_clients.get("sqs").send_message(
            QueueUrl=self.polling["deadLetterUrl"], MessageBody=fit(body, "item", {})
        )


class Unusable(PermanentError):
    """An item the processor cannot handle as it is (an attribute it cannot read): parked in the poison queue with
    `str(self)` as the reason, naming the attribute and the fix."""

    def __init__(self, attribute: str, problem: str, fix: str) -> None:
        super().__init__(f"attribute {attribute!r}: {problem}; fix: {fix}")


def present(raw: dict[str, Any], attribute: str) -> dict[str, Any] | None:
    """The attribute's typed value, None when it is absent or null (`{"NULL": true}`, what boto3 writes for None):
    the assigner reads a null time or delay as none (`decode_image` gives None), so the processor does too."""
    value = raw.get(attribute)
    if not isinstance(value, dict) or value.get("NULL"):
        return None
    return value


def task_due(raw: dict[str, Any]) -> int:
    """The due time of the occurrence an index entry stands for: `stDue` until a failed dispatch moves it (to a
    backoff), then `stTaskDue`. A fraction (a value written by hand) is due at the next
    whole second, never before (exact: a Decimal of DynamoDB's number text, never a float). `Unusable` when it is not
    a number of epoch seconds a datetime can hold."""
    attribute = TASK_DUE if TASK_DUE in raw else DUE
    value = raw.get(attribute)
    fix = (
        "write the item again with its time in the time attribute (ISO-8601 or epoch seconds) and without "
        f"{attribute!r}, or index it with pending_attributes"
    )
    if not isinstance(value, dict) or "N" not in value:
        raise Unusable(attribute, f"is {str(value)[:80]}, not a number of epoch seconds", fix)
    try:
        return int(parse_due(Decimal(value["N"])).timestamp())
    except (PermanentError, ArithmeticError) as exc:
        raise Unusable(attribute, str(exc), fix) from exc


def attempts_of(raw: dict[str, Any]) -> int:
    """The dispatch attempts the item has had (`stAttempts`; none when absent). `Unusable` when not a number."""
    value = raw.get(ATTEMPTS)
    if value is None:
        return 0
    try:
        return int(Decimal(value["N"]))
    except (KeyError, TypeError, ArithmeticError) as exc:
        raise Unusable(
            ATTEMPTS,
            f"is {str(value)[:80]}, not a count",
            f"put the item again without {ATTEMPTS!r} (or with it a whole number), or write it a new time",
        ) from exc


def shard_groups(shards: int, groups: int) -> list[list[int]]:
    """`shards` split into `groups` disjoint groups (shard s in group s mod groups), none empty: one processor
    invocation each when the tick fans out. Disjoint, so no two of one tick's invocations read the same shard (a
    claim would keep an item once even if they did: this only saves the refused claims)."""
    return [list(range(group, shards, groups)) for group in range(max(1, min(groups, shards)))]


class FanOut:
    """What the rule's invocation did when it fanned out: the shards it found due, the invocations it made."""

    def __init__(self, due_shards: list[int], invoked: list[list[int]]) -> None:
        self.due_shards = due_shards
        self.invoked = invoked


def fan_out(
    config: HandlerConfig,
    function: str,
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], float] = time.time,
) -> FanOut:
    """The rule's invocation with `shardGroups` > 1: invoke `function` (this processor) asynchronously once for
    each group of shards that has something due, with the group in the event; each of those runs a tick of its
    shards only (`handler`), so a herd is drained by as many invocations at once as there are groups, each with its
    own worker pool. An invocation given a group never fans out again (no loop). The delivery itself is the one
    `Processor` for both: the same claims, completions and backoffs. An invoke that fails fails this invocation
    after the others were made (its shards stay due for the next tick)."""
    import json

    processor = Processor(config, clients, now, lambda: 900.0)
    processor.shards = processor.index_shards()
    due = set(processor.due_shards())
    groups = [group for group in shard_groups(max(processor.shards) + 1, _groups(config)) if due.intersection(group)]
    lam = clients.get("lambda")

    def invoke(group: list[int]) -> None:
        lam.invoke(FunctionName=function, InvocationType="Event", Payload=json.dumps({"shards": group}).encode())

    errors: list[Exception] = []
    with ThreadPoolExecutor(max_workers=max(1, min(config["maxWorkers"], len(groups)))) as invokers:
        for future in [invokers.submit(invoke, group) for group in groups]:
            try:
                future.result()
            except Exception as exc:  # every group is tried before the tick fails
                errors.append(exc)
    log.info("fanned-out", dueShards=sorted(due), invocations=len(groups) - len(errors), failed=len(errors))
    if errors:
        raise errors[0]
    return FanOut(sorted(due), groups)


def _groups(config: HandlerConfig) -> int:
    polling = config.get("polling")
    return int(polling.get("shardGroups", 1)) if polling else 1


def _group_of(event: object, config: HandlerConfig) -> list[int] | None:
    """The shards a fanned-out invocation was given (`{"shards": [...]}`), those a configuration may have (the
    fan-out also hands out shards above the current count that still hold entries: `Processor.index_shards`);
    None for the rule's own event (it has no `shards`)."""
    if not isinstance(event, dict) or "shards" not in event:
        return None
    given = event["shards"]
    group = [s for s in given if isinstance(s, int) and 0 <= s < MAX_SHARDS] if isinstance(given, list) else []
    if group != given:
        log.warning("shard-group-ignored", given=str(given)[:200], kept=group, note="shards out of range")
    return group


def process(
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], float] = time.time,
    time_left: Callable[[], float] = lambda: 900.0,
    shards: Sequence[int] | None = None,
    sending: Clients | None = None,
) -> TickReport:
    """One tick of `shards` (every shard when None); `sending`: the clients of its sends and item writes
    (`clients` when None)."""
    return Processor(config, clients, now, time_left, shards, sending).tick()


def time_left_of(context: LambdaContext) -> Callable[[], float]:
    """The invocation's time left (s): the context's, never more than it said at the start less the time gone since
    on this container's own clock, so a context whose count does not move (an emulator's) still bounds the tick."""
    start, first = time.monotonic(), context.get_remaining_time_in_millis() / 1000

    def left() -> float:
        return min(context.get_remaining_time_in_millis() / 1000, first - (time.monotonic() - start))

    return left


def handler(event: dict[str, Any], context: LambdaContext | None = None) -> dict[str, Any]:
    """Lambda entry point for the rule (`polling.handler`): one tick; with `shardGroups` > 1, the rule's
    invocation fans out (`fan_out`) and each invocation it makes ticks its group of shards."""
    log.invoked(context)
    config = load_config()
    group = _group_of(event, config)
    if group is None and _groups(config) > 1:
        function = context.invoked_function_arn if context is not None else os.environ["AWS_LAMBDA_FUNCTION_NAME"]
        fanned = fan_out(config, function)
        return {"dueShards": len(fanned.due_shards), "invocations": len(fanned.invoked)}
    section = config.get("polling")
    sending = processor_clients(section["budgetMarginSeconds"]) if section else CLIENTS
    if context is None:
        report = process(config, shards=group, sending=sending)
    else:
        report = process(config, time_left=time_left_of(context), shards=group, sending=sending)
    return {
        "dispatched": report.dispatched,
        "retried": report.retried,
        "failed": report.failed,
        "poisoned": report.poisoned,
        "backlog": report.backlog,
        "backloggedShards": report.backlogged_shards,
        "heldShards": report.held_shards,
        "outOfTime": report.out_of_time,
        "throttled": report.throttled,
    }
