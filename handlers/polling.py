"""`polling` mode (seed 002, sharded as in part 2 of the AWS series): a rule invokes `handler` every interval; it
takes what is due from the sparse due index, every shard at once, a shard's items spread over the worker pool, and
runs each item exactly once. `assign` is the stream consumer that puts newly written items in the index (seed
002's "task scheduler").

Exactly once, with overlapping or crashing processors: an item is claimed with a conditional update (a lease)
before dispatch, which also moves it out of the due range until the lease ends, so an overlapping tick does not
read it again; a claim never completed is due again when the lease ends; a failed dispatch goes back into the index
with an attempt count and exponential backoff, and after the last attempt to the dead-letter queue with the reason.
Every write here sets `stStatus`, so the stream filter never hands these writes back to `assign` (no loop).
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from decimal import Decimal
from enum import Enum
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from st_core import log
from st_core.clients import CLIENTS, Clients
from st_core.config import load_config
from st_core.dispatch import batch_entries, due_event, send_many, target_input
from st_core.errors import PermanentError, advice, error_code, is_transient, kms_reason, persist
from st_core.naming import item_keys, key_names, occurrence_id
from st_core.pending import (
    ATTEMPTS,
    CLAIM,
    DONE_AT,
    DUE,
    ERROR,
    INDEX_NAME,
    SHARD,
    STATUS,
    TASK_DUE,
    Status,
    without_index,
)
from st_core.stream import (
    BatchResponse,
    DynamoDBStreamEvent,
    decode_image,
)
from st_core.timeparse import format_due, parse_due

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import HandlerConfig

# The AWS actions this module's own calls need (checked by tests/iam): the processor's. Query the due index,
# claim/complete/back off an item (update; delete with on_done="delete"), dead-letter to the target DLQ. The
# assigner's are polling_assign's.
# With `shard_groups` > 1 the rule's invocation invokes the processor once per group of shards with something due
# (`fan_out`): lambda:InvokeFunction, on the function itself.
AWS_ACTIONS = (
    "dynamodb:DeleteItem",
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
    SKIPPED = "skipped"  # not claimed: another processor has it, or it moved, was deleted or is done
    YIELDED = "yielded"  # not claimed: a younger tick took it, so this tick reads no more of the shard
    LEFT = "left"  # not taken: out of time (the next tick takes it)
    UNSETTLED = "unsettled"  # claimed, but its completion or backoff failed: due again when its lease ends


class Claim(Enum):
    TAKEN = "taken"
    GONE = "gone"  # moved, deleted, or taken by this tick's own lease
    OLDER = "older"  # taken (claimed, or claimed and done) by a tick that started earlier and is reading this shard
    YOUNGER = "younger"  # taken (claimed, or claimed and done) by a tick that started later


class TickReport:
    """What one processor invocation did (also its return value and the metrics it logs).

    `backlog` is the due items the tick read but had no time left for, and `backlogged_shards` the shards it stopped
    with due items left (read, or beyond the last page it read). Both come free with the pages read: counting the
    rest of a shard would read every waiting item again, every tick for as long as the backlog lasts.

    A plain class rather than a dataclass, which would generate and compile its methods on every cold start."""

    def __init__(self) -> None:
        self.dispatched = self.retried = self.failed = self.skipped = self.unsettled = 0
        self.backlog = self.backlogged_shards = self.yielded_shards = 0
        self.out_of_time = False
        self.shards: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"TickReport({vars(self)})"

    def tally(self, outcomes: list[Outcome]) -> None:
        self.dispatched += outcomes.count(Outcome.DISPATCHED)
        self.retried += outcomes.count(Outcome.RETRIED)
        self.failed += outcomes.count(Outcome.FAILED)
        self.skipped += outcomes.count(Outcome.SKIPPED) + outcomes.count(Outcome.YIELDED)
        self.backlog += outcomes.count(Outcome.LEFT)
        self.unsettled += outcomes.count(Outcome.UNSETTLED)

    def add(self, other: TickReport) -> None:
        self.dispatched += other.dispatched
        self.retried += other.retried
        self.failed += other.failed
        self.skipped += other.skipped
        self.backlog += other.backlog
        self.unsettled += other.unsettled
        self.backlogged_shards += other.backlogged_shards
        self.yielded_shards += other.yielded_shards
        self.out_of_time |= other.out_of_time


# The pace (items a second) at which this container's last tick took each shard of a table: a warm container (the
# rule invokes the processor every interval) sizes a shard's first page with it, as it sizes later pages with the
# tick's own pace.
_PACE: dict[tuple[str, int], float] = {}


class ClaimsFirst:
    """The tick's worker pool, shared by every shard: a claim (`first=True`) runs before any dispatch waiting for a
    worker, whatever shard or page either comes from. An item a tick has read but not claimed is in sight of an
    overlapping tick, which reads it again (and may win it, a refused claim that is a write); queued behind the
    dispatches of pages read before it, a late shard's page would stay in sight for as long as those take. Among
    claims, and among dispatches, first come first served."""

    def __init__(self, workers: int) -> None:
        self._tasks: queue.PriorityQueue[tuple[int, int, Callable[[], Any] | None, Future[Any] | None]] = (
            queue.PriorityQueue()
        )
        self._order = itertools.count()
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], *args: Any, first: bool = False) -> Future[Any]:
        future: Future[Any] = Future()
        self._tasks.put((0 if first else 1, next(self._order), lambda: fn(*args), future))
        return future

    def _work(self) -> None:
        while True:
            _, _, task, future = self._tasks.get()
            if task is None or future is None:
                return
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(task())
                except BaseException as exc:  # handed to whoever waits on the future, as an executor does
                    future.set_exception(exc)

    def __enter__(self) -> ClaimsFirst:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Wait for every task, as an executor's `with` does: a stop marker for each worker, after all the rest."""
        for _thread in self._threads:
            self._tasks.put((2, next(self._order), None, None))
        for thread in self._threads:
            thread.join()


class _Shard:
    """One shard's drain: the pool its items run on, whether a younger tick was found reading it, and whether an
    older one was (see `Processor._drain`)."""

    def __init__(self, number: int, pool: ClaimsFirst) -> None:
        self.number = number
        self.pool = pool
        self.yielded = threading.Event()
        self.older = threading.Event()


# -- the processor ---------------------------------------------------------------------------------------------


class Processor:
    """One tick. Each shard is read a page at a time; a page's items run on a pool shared by all shards (a hot
    shard gets every worker). A claim moves the item's `stDue` to the end of its lease, so a tick that overlaps
    this one (started while this one still runs) does not read it; the lease is counted from the tick's start,
    which also tells two ticks that read the same items apart: the older one leaves the shard to the younger,
    which has more time left."""

    def __init__(
        self,
        config: HandlerConfig,
        clients: Clients,
        now: Callable[[], float],
        time_left: Callable[[], float],
        shards: Sequence[int] | None = None,
    ):
        self.config = config
        self.polling = config["polling"]
        # The shards this invocation takes: every one, or (fanned out) its group's.
        self.shards = list(range(self.polling["shards"]) if shards is None else shards)
        self.clients = clients
        self.now = now
        self.time_left = time_left
        self.keys = key_names(config)
        # A claim outlives the invocation that made it: the lease is the Lambda timeout + 30 s from the tick's start.
        self.lease = int(now()) + self.polling["leaseSeconds"]
        self.workers = config["maxWorkers"]
        # A cold container's first page of a shard, before any pace is known: its share of one round of the pool.
        self.first_page = max(1, self.workers // max(1, len(self.shards)))

    def tick(self) -> TickReport:
        report = TickReport()
        shards = self.shards
        if not shards:
            return report
        # The readers only query and wait; the items' work runs on `pool`, which outlives them (the last `with` is
        # left first), so an item's claim can still queue its dispatch there.
        with (
            ClaimsFirst(self.workers) as pool,
            ThreadPoolExecutor(max_workers=min(self.workers, len(shards))) as readers,
        ):
            drained = list(readers.map(lambda shard: self._drain(_Shard(shard, pool)), shards))
        for shard, (counts, _) in zip(shards, drained, strict=True):
            report.add(counts)
            report.shards[shard] = counts.dispatched
        log.metrics(
            "ScheduledTable",
            {"Table": self.config["table"], "Mode": MODE},
            properties={"yieldedShards": report.yielded_shards, "outOfTime": report.out_of_time},
            Dispatched=report.dispatched,
            Retried=report.retried,
            Failed=report.failed,
            Unsettled=report.unsettled,
            Backlog=report.backlog,
            BackloggedShards=report.backlogged_shards,
        )
        for _, error in drained:
            if error is not None:
                raise error  # after the metrics: what the other shards did is reported
        return report

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

    def _drain(self, shard: _Shard) -> tuple[TickReport, Exception | None]:
        """Take the shard's due items a page at a time until none is left, the time is up, or a younger tick is
        found reading it. Each page is no larger than the time left can take at the shard's pace, so a tick that
        runs out of time has read little it does not take (the next tick would read it again)."""
        counts = TickReport()
        query = self.due_query(shard.number)
        ddb = self.clients.get("dynamodb")
        began: float | None = None
        handled = 0
        try:
            while True:
                left = self.time_left()
                if began is None:
                    began = left
                elif handled and began > left:
                    _PACE[(self.config["table"], shard.number)] = handled / (began - left)
                limit = self._page_limit(shard.number, handled, began - left, left)
                if limit == 0:  # the next item would not be done before the margin
                    counts.out_of_time = True
                    counts.backlogged_shards = 1
                    return counts, None
                page: dict[str, Any] = self._query(ddb, {**query, "Limit": limit})
                outcomes, error = self._run_page(page.get("Items", []), shard)
                counts.tally(outcomes)
                if error is not None:
                    return counts, error
                handled += sum(1 for o in outcomes if o is not Outcome.LEFT)
                if Outcome.LEFT in outcomes:
                    counts.out_of_time = True
                    counts.backlogged_shards = 1
                    return counts, None
                if shard.yielded.is_set():
                    counts.yielded_shards = 1
                    log.info("shard-yielded", shard=shard.number, note="a younger tick is reading this shard")
                    return counts, None
                if shard.older.is_set():
                    # An older tick is reading this shard in the same order, just ahead: reading on, this tick would
                    # read what the other is about to claim, page after page. So it turns round and reads from the
                    # shard's latest due items down; the two meet once, and where they meet (an older claim again)
                    # everything below is the other's, claimed or in the page it is claiming: this tick stops.
                    if query.get("ScanIndexForward") is False:
                        log.info("shard-met", shard=shard.number, note="an older tick took the shard from the start")
                        return counts, None
                    shard.older.clear()
                    query["ScanIndexForward"] = False
                    query.pop("ExclusiveStartKey", None)
                    continue
                if not page.get("LastEvaluatedKey"):
                    return counts, None
                query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        except Exception as exc:  # a failed query: the shard stops, the others go on
            return counts, exc

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

    def _run_page(self, items: list[dict[str, Any]], shard: _Shard) -> tuple[list[Outcome], Exception | None]:
        """Claim every item of the page on the pool, then dispatch the claimed ones, as many a call as the target
        takes (`dispatch.batch_entries`: 10 to a queue or a bus), each batch on the pool (claims go before every
        waiting dispatch, so what this tick read is claimed, out of other ticks' sight, before more is
        dispatched)."""
        takes = [shard.pool.submit(self._take, raw, shard, first=True) for raw in items]
        outcomes: list[Outcome] = []
        claimed: list[dict[str, Any]] = []
        error: Exception | None = None
        for take in takes:
            try:
                taken = take.result()
            except Exception as exc:  # every item is waited for before the shard stops
                error = error or exc
                continue
            if isinstance(taken, Outcome):
                outcomes.append(taken)
            else:
                claimed.append(taken)
        size = batch_entries(self.config["target"])
        runs = [shard.pool.submit(self._run, claimed[n : n + size]) for n in range(0, len(claimed), size)]
        for run in runs:
            try:
                done, failure = run.result()
            except Exception as exc:
                error = error or exc
                continue
            outcomes.extend(done)
            error = error or failure
        return outcomes, error

    def _key(self, raw: dict[str, Any]) -> dict[str, Any]:
        return {k: raw[k] for k in self.keys}

    def _take(self, raw: dict[str, Any], shard: _Shard) -> Outcome | dict[str, Any]:
        """Claim one item the page read: the item (to dispatch) when this tick took it, else what became of it."""
        if self._out_of_time():
            return Outcome.LEFT
        key, due = self._key(raw), int(raw[DUE]["N"])
        moved = self._moved(raw)
        if moved is not None:
            if raw.get(STATUS, {}).get("S") != Status.PENDING.value:
                self._reindex(key, due, raw, moved)
            return Outcome.SKIPPED
        claim = self._try_claim(key, due, self.lease, raw)
        if claim is Claim.TAKEN:
            return raw
        if claim is Claim.YOUNGER:
            shard.yielded.set()
            return Outcome.YIELDED
        if claim is Claim.OLDER:
            shard.older.set()
        return Outcome.SKIPPED

    def _run(self, claimed: list[dict[str, Any]]) -> tuple[list[Outcome], Exception | None]:
        """Dispatch claimed items in one call to the target where it takes a batch (`dispatch.send_many`), then
        complete each the target took, and back off (or dead-letter) each it refused, by itself: one refused
        entry is retried alone, never with the ones already sent. Each entry's bookkeeping is its own (`_settle`):
        one that fails (a throttle outlasting the retries) leaves that entry claimed, and the others are still
        completed, so none the target took is sent again; the first such error is returned, for the tick to fail
        with after the rest is done."""
        lease, target = self.lease, self.config["target"]
        outcomes: list[Outcome] = []
        errors: list[Exception] = []
        ready: list[tuple[dict[str, Any], dict[str, Any], int, str, str]] = []
        for raw in claimed:
            key, due = self._key(raw), task_due(raw)
            named = item_keys(key, self.config)
            moment = datetime.fromtimestamp(due, UTC)
            occurrence = occurrence_id(named, moment)
            try:
                item = without_index(decode_image(raw) or {})
                event = due_event(
                    mode=MODE,
                    table=self.config["table"],
                    keys=named.plain,
                    due=moment,
                    item=item,
                    occurrence=occurrence,
                )
                payload = target_input(target, event)
            except Exception as exc:
                self._settle(outcomes, errors, key, partial(self._failed, key, raw, lease, exc), sent=False)
                continue
            ready.append((raw, key, due, occurrence, payload))
        refused = send_many(target, [(payload, occurrence) for *_, occurrence, payload in ready], clients=self.clients)
        for (raw, key, due, _, _), error in zip(ready, refused, strict=True):
            if error is not None:
                self._settle(outcomes, errors, key, partial(self._failed, key, raw, lease, error), sent=False)
            else:
                self._settle(outcomes, errors, key, partial(self._dispatched, key, due, lease), sent=True)
        return outcomes, errors[0] if errors else None

    def _dispatched(self, key: dict[str, Any], due: int, lease: int) -> Outcome:
        persist(partial(self._done, key, lease))
        log.info(
            "dispatched",
            keys=decode_image(key),
            dueAt=format_due(datetime.fromtimestamp(due, UTC)),
            lateSeconds=round(self.now() - due, 3),
        )
        return Outcome.DISPATCHED

    @staticmethod
    def _settle(
        outcomes: list[Outcome],
        errors: list[Exception],
        key: dict[str, Any],
        step: Callable[[], Outcome],
        *,
        sent: bool,
    ) -> None:
        """Record one entry's outcome, by itself: a bookkeeping write that fails (the completion, the backoff, the
        dead letter) is logged and kept in `errors`, and the entry counted UNSETTLED; it stays claimed, due again
        when its lease ends: sent again then if it was sent (at least once, never lost), sent for the first time
        if not."""
        try:
            outcomes.append(step())
        except Exception as exc:
            errors.append(exc)
            outcomes.append(Outcome.UNSETTLED)
            log.error(
                "unsettled",
                keys=decode_image(key),
                sent=sent,
                reason=f"{type(exc).__name__}: {str(exc)[:500]}",
                note="stays claimed: due again when its lease ends" + (", and sent again" if sent else ""),
            )

    def _moved(self, raw: dict[str, Any]) -> int | None:
        """The due time the item's time attribute gives, when it is not the one of the occurrence the index entry
        stands for: the user moved the item since it was indexed (running it now would run it at its old time).
        A waiting (PENDING) item is left for the assigner, which sees that move; a claimed or backed-off one is not
        passed to the assigner (its filter passes moves of waiting items only), so `_reindex` puts it back."""
        value = raw.get(self.config["timeAttribute"])
        status = raw.get(STATUS, {}).get("S")
        if value is None or (status == Status.RETRY.value and TASK_DUE not in raw):
            return None  # no time attribute; or backed off before `stTaskDue` was kept: its occurrence is unknown
        try:
            moved = int(parse_due(decode_image({"t": value})["t"]).timestamp())  # type: ignore[index]
        except PermanentError:
            return None
        return moved if moved != task_due(raw) else None

    def _reindex(self, key: dict[str, Any], due: int, raw: dict[str, Any], moved: int) -> None:
        """Put a claimed (its lease over) or backed-off item its user moved back in the index at its new time, as
        the assigner would have (conditional on the item being as the index showed it, like a claim)."""
        names = {
            "#due": DUE,
            "#status": STATUS,
            "#claim": CLAIM,
            "#task": TASK_DUE,
            "#attempts": ATTEMPTS,
            "#error": ERROR,
            "#time": self.config["timeAttribute"],
        }
        values = {
            ":due": {"N": str(due)},
            ":moved": {"N": str(moved)},
            ":pending": {"S": Status.PENDING.value},
            ":now": {"N": str(int(self.now()))},
            ":time": raw[names["#time"]],
        }
        as_indexed = "#due = :due AND (attribute_not_exists(#claim) OR #claim <= :now) AND #time = :time"
        try:
            self.clients.get("dynamodb").update_item(
                TableName=self.config["table"],
                Key=key,
                UpdateExpression="SET #due = :moved, #status = :pending REMOVE #claim, #task, #attempts, #error",
                ConditionExpression=as_indexed,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return
        log.info("reindexed", keys=decode_image(key), dueAt=format_due(datetime.fromtimestamp(moved, UTC)))

    def _claim(self, key: dict[str, Any], due: int, lease: int, raw: dict[str, Any] | None = None) -> bool:
        return self._try_claim(key, due, lease, raw) is Claim.TAKEN

    def _try_claim(self, key: dict[str, Any], due: int, lease: int, raw: dict[str, Any] | None = None) -> Claim:
        """Take the item until `lease`, only if it is still at `due` in the index, nobody holds a live claim and
        (given the item as the index showed it) its time attribute is unchanged since (the index is eventually
        consistent). The claim moves the item's `stDue` to `lease`: out of every tick's `stDue <= now` until the
        lease ends, when a claim never completed is due again; `stTaskDue` keeps the occurrence's own time."""
        names = {"#claim": CLAIM, "#status": STATUS, "#due": DUE, "#task": TASK_DUE}
        values: dict[str, Any] = {
            ":lease": {"N": str(lease)},
            ":claimed": {"S": Status.CLAIMED.value},
            ":due": {"N": str(due)},
            ":now": {"N": str(int(self.now()))},
            ":task": {"N": str(task_due(raw) if raw is not None else due)},
        }
        condition = "#due = :due AND (attribute_not_exists(#claim) OR #claim <= :now)"
        if raw is not None:
            names["#time"] = self.config["timeAttribute"]
            if names["#time"] in raw:
                condition += " AND #time = :time"
                values[":time"] = raw[names["#time"]]
            else:
                condition += " AND attribute_not_exists(#time)"
        try:
            self.clients.get("dynamodb").update_item(
                TableName=self.config["table"],
                Key=key,
                UpdateExpression="SET #claim = :lease, #status = :claimed, #due = :lease, #task = :task",
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",  # no extra cost: tells who holds it
            )
        except Exception as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return self._refused_by(exc, lease)
            raise
        return Claim.TAKEN

    def _refused_by(self, refused: Exception, lease: int) -> Claim:
        """Whom a refused claim met: the claim of a tick that started after this one (a later lease end: YOUNGER)
        or before it (OLDER), on the item (claimed) or on its completion (done); else GONE. A claimed or done item
        is out of the due range, so this tick read it before the other claimed it: both are reading the same part
        of the shard, and each reading on would read what the other is about to claim. The older one stops (its
        Lambda's time ends first); the younger turns round (`_drain`)."""
        old = getattr(refused, "response", {}).get("Item") or {}
        holder = old.get(CLAIM, {}).get("N")
        if old.get(STATUS, {}).get("S") not in (Status.CLAIMED.value, Status.DONE.value) or holder is None:
            return Claim.GONE
        if Decimal(holder) > lease:
            return Claim.YOUNGER
        return Claim.OLDER if Decimal(holder) < lease else Claim.GONE

    def _done(self, key: dict[str, Any], lease: int) -> None:
        ddb = self.clients.get("dynamodb")
        ours = {":lease": {"N": str(lease)}}
        try:
            if self.polling["onDone"] == "delete":
                ddb.delete_item(
                    TableName=self.config["table"],
                    Key=key,
                    ConditionExpression="#claim = :lease",
                    ExpressionAttributeNames={"#claim": CLAIM},
                    ExpressionAttributeValues=ours,
                )
                return
            # The lease stays on the done item: a tick that read it before it was claimed, and finds it done, tells
            # by it whether a younger tick ran it (see `_refused_by`).
            ddb.update_item(
                TableName=self.config["table"],
                Key=key,
                UpdateExpression="SET #status = :done, #doneAt = :at REMOVE #shard, #due, #error, #task",
                ConditionExpression="#claim = :lease",
                ExpressionAttributeNames={
                    "#status": STATUS,
                    "#doneAt": DONE_AT,
                    "#shard": SHARD,
                    "#due": DUE,
                    "#claim": CLAIM,
                    "#error": ERROR,
                    "#task": TASK_DUE,
                },
                ExpressionAttributeValues={
                    **ours,
                    ":done": {"S": Status.DONE.value},
                    ":at": {"S": format_due(datetime.fromtimestamp(self.now(), UTC))},
                },
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            log.warning(
                "lease-lost",
                keys=decode_image(key),
                note="dispatched after the lease ran out, or after the item was deleted or replaced since its claim",
            )

    def _failed(self, key: dict[str, Any], raw: dict[str, Any], lease: int, exc: Exception) -> Outcome:
        """Back the item off (back in the index at a later `stDue`, its `stTaskDue` kept, so the next attempt is the
        same occurrence), or after the last attempt dead-letter it and take it out of the index."""
        attempts = int(raw.get(ATTEMPTS, {}).get("N", "0")) + 1
        reason = kms_reason(exc) or f"{type(exc).__name__}: {str(exc)[:500]}{advice(exc)}"
        final = not is_transient(exc) or attempts >= self.polling["maxAttempts"]
        ddb = self.clients.get("dynamodb")
        names = {"#claim": CLAIM, "#status": STATUS, "#attempts": ATTEMPTS, "#error": ERROR, "#due": DUE}
        values: dict[str, Any] = {
            ":lease": {"N": str(lease)},
            ":attempts": {"N": str(attempts)},
            ":error": {"S": reason},
        }
        if final:
            self._dead_letter(raw, reason, attempts)
            update = "SET #status = :failed, #attempts = :attempts, #error = :error REMOVE #shard, #due, #claim, #task"
            names.update({"#shard": SHARD, "#task": TASK_DUE})
            values[":failed"] = {"S": Status.FAILED.value}
            outcome = Outcome.FAILED
        else:
            backoff = self.polling["backoffSeconds"] * 2 ** (attempts - 1)
            update = "SET #status = :retry, #attempts = :attempts, #error = :error, #due = :next REMOVE #claim"
            values.update({":retry": {"S": Status.RETRY.value}, ":next": {"N": str(int(self.now()) + backoff)}})
            outcome = Outcome.RETRIED
        try:
            ddb.update_item(
                TableName=self.config["table"],
                Key=key,
                UpdateExpression=update,
                ConditionExpression="#claim = :lease",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as write_error:
            if error_code(write_error) != "ConditionalCheckFailedException":
                raise
        log.warning("dispatch-failed", keys=decode_image(key), attempts=attempts, final=final, reason=reason)
        return outcome

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
        self.clients.get("sqs").send_message(QueueUrl=self.polling["deadLetterUrl"], MessageBody=fit(body, "item", {}))


def task_due(raw: dict[str, Any]) -> int:
    """The due time of the occurrence an index entry stands for: `stDue` until a claim moves it (to a lease end or,
    after a failed dispatch, a backoff), then `stTaskDue`."""
    return int((raw.get(TASK_DUE) or raw[DUE])["N"])


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
    due = set(processor.due_shards())
    groups = [group for group in shard_groups(config["polling"]["shards"], _groups(config)) if due.intersection(group)]
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
    """The shards a fanned-out invocation was given (`{"shards": [...]}`), those in range; None for the rule's
    own event (it has no `shards`)."""
    if not isinstance(event, dict) or "shards" not in event:
        return None
    given, shards = event["shards"], config["polling"]["shards"]
    group = [s for s in given if isinstance(s, int) and 0 <= s < shards] if isinstance(given, list) else []
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
) -> TickReport:
    """One tick of `shards` (every shard when None)."""
    return Processor(config, clients, now, time_left, shards).tick()


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
    if context is None:
        report = process(config, shards=group)
    else:
        report = process(config, time_left=lambda: context.get_remaining_time_in_millis() / 1000, shards=group)
    return {
        "dispatched": report.dispatched,
        "retried": report.retried,
        "failed": report.failed,
        "backlog": report.backlog,
        "backloggedShards": report.backlogged_shards,
        "yieldedShards": report.yielded_shards,
        "outOfTime": report.out_of_time,
    }


# -- the assigner's former entry point -------------------------------------------------------------------------
# The assigner is `polling_assign.handler` (its own module: neither function's cold start compiles the other's
# code). These two stay for functions deployed with `polling.assign` by an earlier version of the component, which
# keep working while a deploy moves them to the new entry point (Lambda updates code and configuration in two steps).


def handle_assign_batch(
    event: DynamoDBStreamEvent | object,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> BatchResponse:
    """One stream batch for the assigner (see polling_assign.py)."""
    from polling_assign import handle_assign_batch

    return handle_assign_batch(event, config, clients=clients, now=now)


def assign(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """The assigner's entry point before `polling_assign.handler` (see above)."""
    log.invoked(context)
    return handle_assign_batch(event, load_config())
