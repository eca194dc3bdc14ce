"""One tick: each shard with something due drained a page at a time, under its lease, each page's items read again
consistently, judged (`Triage`), sent (`Sender`) and settled (`Settler`), and what the tick did reported and logged
as metrics."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

from st_core import log
from st_core.dispatch import batch_entries
from st_core.errors import error_code
from st_core.naming import key_names

from polling.budget import call_limits, pace_of, page_limit, remember_pace
from polling.index import DueIndex
from polling.items import MODE, Unusable, key_identity, key_of
from polling.lease import Lease
from polling.report import Outcome, TickReport
from polling.sending import Sender
from polling.settle import Settler, unsettled
from polling.shards import ShardCount
from polling.triage import Triage

if TYPE_CHECKING:
    from st_core.clients import Clients
    from st_core.config import HandlerConfig

# Read a page's items again (a consistent BatchGetItem).
AWS_ACTIONS = ("dynamodb:BatchGetItem",)

# BatchGetItem's tries for keys DynamoDB leaves unprocessed (throttling) before the rest is left for the next tick.
READ_ATTEMPTS = 5
# The errors of a BatchGetItem throttled as a whole: its keys are left for the next tick, as unprocessed ones are.
READ_THROTTLED = frozenset({"ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded"})

Identity = tuple[Any, ...]


class Processor:
    """One tick. Each shard with something due is held by one invocation at a time (a `Lease`, one conditional write
    a shard, not one an item), read a page at a time; each page's items are read again, consistently, in one
    BatchGetItem (the index is eventually consistent: it may still show an item that was completed, moved or
    deleted), and those still as the index showed them are sent, as many a call as the target takes, on a pool
    shared by all shards (a hot shard gets every worker). Each sent item is completed by a write conditional on it
    being unchanged since that read. The lease ends at the Lambda timeout + 30 s from the tick's start, so an
    invocation that dies leaves its shards to the next tick after that; one that ends releases them.

    Its parts are made from the class attributes below, so a subclass can stand in for one of them (a test's
    Lambda that dies between two steps)."""

    lease_type: type[Lease] = Lease
    settler_type: type[Settler] = Settler
    sender_type: type[Sender] = Sender

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
        # The shards this invocation takes: every one (`ShardCount.index_shards`, found at the tick), or (fanned
        # out) its group's.
        self.whole = shards is None
        self.shards = list(range(self.polling["shards"]) if shards is None else shards)
        # The reads and the leases keep the generous limits of `clients` (a slow read only stops a shard's drain);
        # the sends and the item writes that follow them (completions, backoffs, dead letters) keep the processor's
        # own (`budget.call_limits`, the handler's `processor_clients`), which a send's budget counts on.
        self.clients = clients
        send_clients = clients if sending is None else sending
        self.now = now
        self.time_left = time_left
        self.workers = config["maxWorkers"]
        self.keys = key_names(config)
        # The longest one of its calls may take: what a send and its completions are budgeted by.
        call_seconds = call_limits(self.polling["budgetMarginSeconds"]).worst_seconds()
        # A cold container's first page of a shard, before any pace is known: its share of one round of the pool.
        self.first_page = max(1, self.workers // max(1, len(self.shards)))
        self.index = DueIndex(config, clients, now, self.workers)
        self.lease = self.lease_type(self.polling, clients, now)
        self.settler = self.settler_type(config, send_clients, now, time_left, call_seconds, self.keys)
        self.triage = Triage(config, clients, self.settler, now, self.keys)
        self.sender = self.sender_type(config, send_clients, self.settler, time_left, call_seconds, self.keys)

    def tick(self) -> TickReport:
        report = TickReport()
        if self.whole:
            self.shards = ShardCount(self.polling, self.clients, self.index, self.now).index_shards()
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

    def _drain(self, shard: int, pool: ThreadPoolExecutor) -> tuple[TickReport, Exception | None]:
        """Take the shard's due items a page at a time until none is left or the time is up. The shard is held
        (`Lease.hold`) once its first page shows something due, and released at the end, whatever happened. Each
        page is no larger than the time left can take at the shard's pace (`budget.page_limit`), so a tick that runs
        out of time has read little it does not take (the next tick would read it again)."""
        counts = TickReport()
        query = self.index.due_query(shard)
        table = self.config["table"]
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
                    remember_pace(table, shard, handled / (began - left))
                limit = page_limit(
                    handled=handled,
                    spent=began - left,
                    left=left,
                    margin=self.polling["budgetMarginSeconds"],
                    pace=pace_of(table, shard),
                    first_page=self.first_page,
                )
                if limit == 0:  # the next item would not be done before the margin
                    counts.out_of_time = True
                    counts.backlogged_shards = 1
                    return counts, failure
                page: dict[str, Any] = self.index.page({**query, "Limit": limit})
                entries = page.get("Items", [])
                if not entries:
                    return counts, failure
                if not held:
                    held = self.lease.hold(shard)
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
                self.lease.release(shard)

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
            identity = key_identity(entry, self.keys)
            item = current.get(identity)
            if item is None:
                if identity in current:  # not read (throttled past every try): counted UNREAD above
                    continue
                outcomes.append(Outcome.SKIPPED)  # deleted since the index showed it
                continue
            # Each entry by itself: one that cannot be handled is parked, one whose write fails waits for the next
            # tick; neither stops the page (the shard would starve while it stays first).
            key = key_of(item, self.keys)
            try:
                outcome = self.triage.triage(item, entry)
            except Unusable as exc:
                self.settler.settle(outcomes, errors, key, partial(self.triage.park, item, exc), sent=False)
                continue
            except Exception as exc:
                unsettled(outcomes, errors, key, exc, sent=False)
                continue
            if outcome is None:
                ready.append(item)
            else:
                outcomes.append(outcome)
        size = batch_entries(self.config["target"])
        runs = [pool.submit(self.sender.run, ready[n : n + size]) for n in range(0, len(ready), size)]
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

    def _read_current(self, entries: list[dict[str, Any]]) -> tuple[dict[Identity, Any], int]:
        """The page's items as they are now: one consistent BatchGetItem (a page is at most 100 keys, the call's
        limit), keys DynamoDB leaves unprocessed asked again with a backoff. An item found maps to itself, one not
        found (deleted) is absent; one never read (still unprocessed after every try) maps to None, with their
        count: they are left for the next tick."""
        ddb = self.clients.get("dynamodb")
        table = self.config["table"]
        found: dict[Identity, Any] = {}
        request: dict[str, Any] = {table: {"Keys": [key_of(e, self.keys) for e in entries], "ConsistentRead": True}}
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
                    found[key_identity(item, self.keys)] = item
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return found, 0
        unread = [key for keys in request.values() for key in keys["Keys"]]
        for key in unread:
            found[key_identity(key, self.keys)] = None
        log.warning("read-throttled", unread=len(unread), note="left for the next tick")
        return found, len(unread)
