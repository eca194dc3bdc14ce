"""A model check of `polling` mode: random sequences of user writes, time passing, the assigner's stream lag and
batch redeliveries (in order, and old batches out of order), and processor ticks, compared with a plain reference
model of the guarantee.

The guarantee (README, "Guarantees, per mode" and "`polling` mode, in detail"): each task runs exactly once, never
before its `stDue` (its due time rounded up to a second). A task is what a user's write asks for: a new item, or a
PutItem with a new time over a done one, is a new task; so is a writer's PutItem of an item it indexed itself
(`pending_attributes`, at the time its time attribute gives or, by mistake, at another), which moves a task that has
not run; a write to a task that has not run yet (a PutItem, or an update of its time) moves it; a rewrite of a done
item that keeps its time, or an update of a done item, is not a new task; a delete, or the removal of the item's
time attribute (with no delay configured), cancels a task that has not run, and a time written again after such a
removal is a new task. Stream records are delivered at least once, at any later time. Ticks may overlap (the rule
ticks again while a tick still runs), and a tick may die holding its shards, before or after sending (what it sent
and did not complete may run once more: at least once, never lost). A tick may also be killed at any AWS call, by a
crash or by its Lambda timeout on a clock its calls move (`tick_killed`): the timeout never cuts a send off from its
completions, so it sends nothing twice.

`MODEL_EXAMPLES` sets the number of sequences (50 by default); `MODEL_RANDOM=1` draws new sequences instead of the
fixed ones `make test` runs; hypothesis prints a failing sequence shrunk.
"""

from __future__ import annotations

import copy
import itertools
import math
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from unittest.mock import patch

import polling
import polling_assign
from botocore.exceptions import ClientError
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from moto import mock_aws
from polling import budget, settle
from polling.lease import Lease
from polling.sending import Sender
from polling.settle import Settler
from st_core.clients import CLIENTS
from st_core.errors import error_code, persist
from st_core.pending import without_index

from components import pending_attributes
from components.filters import filter_patterns
from components.modes.polling import polling_filters
from tests.handlers.conftest import Env, use_shards
from tests.handlers.faults import RefusedEntries, Throttled
from tests.handlers.model_support import StreamDelivery, TargetQueue, due_time, model_env, model_test
from tests.iam.enforce import acting
from tests.support.patterns import LambdaFilter

START = datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC)
KEYS = ["a", "b", "c"]
SAME_SHARD = ("b", "c")  # of the model's 4 shards (checked where it matters)
SK = "T"
FORMS = ["epoch", "iso", "iso-fraction"]
TIMEOUT_SECONDS = 60  # the processor's Lambda timeout: the env's lease (90 s) is the timeout + 30 s
# The AWS operations a tick makes (`tick_killed` slows one call of one of them down).
OPERATIONS = ["GetItem", "Query", "PutItem", "BatchGetItem", "SendMessageBatch", "UpdateItem", "DeleteItem"]


def raw_time(moment: datetime, form: str) -> Any:
    """A due time as a user writes it."""
    if form == "epoch":
        return int(moment.timestamp())
    if form == "iso":
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + ".700Z"  # runs at the next second, never before


def st_due(raw: Any) -> int:
    if isinstance(raw, int):
        return raw
    return math.ceil(datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp())


_IDS = itertools.count(1)


@dataclass
class Task:
    pk: str
    id: int = field(default_factory=lambda: next(_IDS))
    ran_at: float | None = None
    cancelled: bool = False  # its time attribute was removed before it ran


@dataclass
class Item:
    raw: Any  # the time attribute as stored (None: removed)
    task: Task
    marked: bool = False  # carries stStatus=DONE: the processor marked it, and no PutItem has replaced it since


@dataclass
class Reference:
    items: dict[str, Item] = field(default_factory=dict)
    tasks: list[Task] = field(default_factory=list)

    def put(self, pk: str, raw: Any) -> None:
        """A user's PutItem."""
        item = self.items.get(pk)
        if item is None or item.task.cancelled or (item.task.ran_at is not None and raw != item.raw):
            task = Task(pk)
            self.tasks.append(task)
            self.items[pk] = Item(raw, task)
            return
        item.raw = raw  # a waiting task moves (or stays); a done item rewritten with its time is no new task
        item.marked = False  # a PutItem replaces the whole item, its stStatus too

    def writer_put(self, pk: str, raw: Any) -> None:
        """A writer's PutItem of the item indexed by itself (`pending_attributes`): the index entry is the
        writer's request to run it, so a new task unless one waits (which it moves), even over a done item."""
        item = self.items.get(pk)
        if item is None or item.task.cancelled or item.task.ran_at is not None:
            task = Task(pk)
            self.tasks.append(task)
            self.items[pk] = Item(raw, task)
            return
        item.raw = raw
        item.marked = False

    def update_time(self, pk: str, raw: Any) -> None:
        """A user's UpdateItem of the time attribute: moves a waiting task; a done item that still carries its
        DONE mark stays done; one a PutItem replaced since (no mark) is like any item without a status: a new time
        is a new task."""
        item = self.items[pk]
        if item.task.cancelled or (item.task.ran_at is not None and not item.marked and raw != item.raw):
            task = Task(pk)
            self.tasks.append(task)
            self.items[pk] = Item(raw, task)
            return
        item.raw = raw

    def remove_time(self, pk: str) -> None:
        """A user's UpdateItem removing the time attribute: cancels a task that has not run (the model's table has
        no default delay, so nothing indexes it again until a time is written)."""
        item = self.items[pk]
        if item.task.ran_at is None:
            item.task.cancelled = True
        item.raw = None

    def delete(self, pk: str) -> None:
        self.items.pop(pk, None)


class PollingModel(StreamDelivery):
    def __init__(self) -> None:
        super().__init__()
        self.mock = mock_aws()
        self.mock.start()
        self.env = _env()
        self.now = START
        self.reference = Reference()
        self.lambda_filter = LambdaFilter(filter_patterns(polling_filters()))
        self.queue = TargetQueue(self.env, lambda: self.now)
        self.queue.watch()
        self.start_stream()
        self.runs = 0
        self.problems: list[str] = []
        # Tasks sent by a tick that could not complete them: each may run once more (`tick_failing_a_completion`).
        self.may_run_again: set[int] = set()
        # Items whose time a user removed: the assigner parks each such write (an item without a time).
        self.untimed: set[str] = set()

    def teardown(self) -> None:
        CLIENTS.reset()
        self.mock.stop()

    # -- the world -------------------------------------------------------------------------------------------------

    @rule(pk=st.sampled_from(KEYS), seconds=st.integers(-60, 120), form=st.sampled_from(FORMS), at_once=st.booleans())
    def put(self, pk: str, seconds: int, form: str, at_once: bool) -> None:
        raw = raw_time(self.now + timedelta(seconds=seconds), form)
        self.env.put({"PK": pk, "SK": SK, "dueAt": raw, "v": uuid.uuid4().hex[:6]})
        self.reference.put(pk, raw)
        self._read()
        if at_once:  # Lambda delivers it (and what waits before it) straight away, as it mostly does
            self.lambda_delivers(len(self.history))

    @rule(
        pk=st.sampled_from(KEYS),
        seconds=st.integers(-60, 120),
        form=st.sampled_from(FORMS),
        off=st.sampled_from([0, -45, 45]),
    )
    def writer_indexes(self, pk: str, seconds: int, form: str, off: int) -> None:
        """A writer puts the item indexed by itself (`pending_attributes`): at its time, or (its mistake) at an
        `stDue` `off` seconds from the time its time attribute gives. The assigner's filter passes no such insert;
        the item runs once, at its time attribute's time."""
        raw = raw_time(self.now + timedelta(seconds=seconds), form)
        index = pending_attributes({"PK": pk, "SK": SK}, st_due(raw) + off, shards=4)
        self.env.put({"PK": pk, "SK": SK, "dueAt": raw, "v": uuid.uuid4().hex[:6], **index})
        self.reference.writer_put(pk, raw)
        self._read()

    @precondition(lambda self: self._timed() != [])
    @rule(data=st.data())
    def rewrite(self, data: st.DataObject) -> None:
        """The user writes the item again (a PutItem) with the time it has and another payload."""
        pk = data.draw(st.sampled_from(self._timed()), label="item")
        item = self.reference.items[pk]
        self.env.put({"PK": pk, "SK": SK, "dueAt": item.raw, "v": uuid.uuid4().hex[:6]})
        self.reference.put(pk, item.raw)
        self._read()

    @precondition(lambda self: self._done() != [])
    @rule(data=st.data())
    def consumer_writes_back(self, data: st.DataObject) -> None:
        """The task's consumer marks a done item sent by writing it back (a PutItem keeping its time)."""
        self._write_back(data.draw(st.sampled_from(self._done()), label="done item"))

    def _write_back(self, pk: str) -> None:
        raw = self.reference.items[pk].raw
        self.env.put({"PK": pk, "SK": SK, "dueAt": raw, "v": uuid.uuid4().hex[:6], "sent": True})
        self.reference.put(pk, raw)
        self._read()

    @precondition(lambda self: self.reference.items != {})
    @rule(data=st.data())
    def write_back(self, data: st.DataObject) -> None:
        """A consumer (or user) updates another attribute (an UpdateItem)."""
        pk = self._existing(data)
        self._update(pk, "SET v = :v", {":v": {"S": uuid.uuid4().hex[:6]}})

    @precondition(lambda self: self.reference.items != {})
    @rule(data=st.data(), seconds=st.integers(-60, 120), form=st.sampled_from(FORMS))
    def move(self, data: st.DataObject, seconds: int, form: str) -> None:
        """The user changes the item's time (an UpdateItem)."""
        pk = self._existing(data)
        raw = raw_time(self.now + timedelta(seconds=seconds), form)
        value = {"N": str(raw)} if isinstance(raw, int) else {"S": raw}
        self._update(pk, "SET dueAt = :d", {":d": value})
        self.reference.update_time(pk, raw)

    @precondition(lambda self: self.reference.items != {})
    @rule(data=st.data(), seconds=st.integers(-60, 120), form=st.sampled_from(FORMS), tick_after=st.integers(0, 120))
    def move_racing_the_tick(self, data: st.DataObject, seconds: int, form: str, tick_after: int) -> None:
        """The user moves an item's time and the rule ticks before the assigner has seen the move (stream lag)."""
        self.move(data, seconds, form)
        self.tick(tick_after)

    @precondition(lambda self: self._timed() != [])
    @rule(data=st.data(), tick_after=st.integers(0, 120), racing=st.booleans())
    def remove_time(self, data: st.DataObject, tick_after: int, racing: bool) -> None:
        """The user removes the item's time attribute (an UpdateItem), cancelling it if it has not run; with
        `racing`, the rule ticks before the assigner has seen the removal (stream lag)."""
        pk = data.draw(st.sampled_from(self._timed()), label="item")
        found = self.env.ddb.get_item(TableName=self.env.table, Key=_key(pk), ConsistentRead=True).get("Item", {})
        self.env.ddb.update_item(TableName=self.env.table, Key=_key(pk), UpdateExpression="REMOVE dueAt")
        self.reference.remove_time(pk)
        self.untimed.add(pk)
        self._read()
        if "stDue" in found and "stTimed" not in found:
            # Indexed by its writer at its time (the processor cannot tell it from an item a writer indexed without
            # a time attribute): the cancel holds once the assigner has seen the removal, as documented.
            self.lambda_delivers(len(self.history))
        elif racing:
            self.tick(tick_after)

    @precondition(lambda self: self.reference.items != {})
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        pk = self._existing(data)
        self.env.delete(pk, SK)
        self.reference.delete(pk)
        self._read()

    @precondition(lambda self: self._timed() != [])
    @rule(data=st.data())
    def reinsert(self, data: st.DataObject) -> None:
        """The user deletes the item and puts its content (without the index's bookkeeping) back: a new task."""
        pk = data.draw(st.sampled_from(self._timed()), label="item")
        item = self.reference.items[pk]
        found = self.env.ddb.get_item(TableName=self.env.table, Key=_key(pk), ConsistentRead=True)["Item"]
        self.env.delete(pk, SK)
        self.reference.delete(pk)
        self.env.ddb.put_item(TableName=self.env.table, Item=without_index(found))
        self.reference.put(pk, item.raw)
        self._read()

    @rule(seconds=st.integers(0, 120), write_backs=st.sampled_from([2, 0, 1]))
    def tick(self, seconds: int, write_backs: int = 0) -> None:
        """Time passes, and the rule invokes the processor; the consumer then writes back each item it received
        `write_backs` times (a PutItem keeping its time, to mark it sent: a common consumer)."""
        self.now += timedelta(seconds=seconds)
        moment = self.now.timestamp()
        report = polling.process(self.env.config, now=lambda: moment)
        assert (report.retried, report.failed) == (0, 0), report
        received = self._collect()
        self._read()  # the processor's own writes: the assigner's filter keeps them out
        for pk in received * write_backs:
            self._write_back(pk)

    @rule(seconds=st.integers(0, 120), later=st.integers(0, TIMEOUT_SECONDS), at_call=st.integers(1, 8))
    def overlapping_ticks(self, seconds: int, later: int, at_call: int) -> None:
        """The rule ticks while the last tick still runs (a tick longer than the interval): tick B starts `later`
        seconds after tick A, at A's `at_call`-th look at its time left (before a page, or before a claim), and
        runs whole while A's other threads go on; then A finishes. B starts within A's Lambda timeout: a tick is
        never alive after it (a shard's lease is the timeout + 30 s)."""
        self.now += timedelta(seconds=seconds)
        first, second = self.now.timestamp(), (self.now + timedelta(seconds=later)).timestamp()
        looks = itertools.count(1)
        reports: list[polling.TickReport] = []

        def time_left() -> float:
            if next(looks) == at_call:
                self.now += timedelta(seconds=later)  # B's sends are stamped with B's time, A's from now on too
                reports.append(polling.process(self.env.config, now=lambda: second))
            return 900.0

        reports.append(polling.process(self.env.config, now=lambda: first, time_left=time_left))
        if len(reports) == 1:  # A looked fewer times: B starts as A ends
            self.now += timedelta(seconds=later)
            reports.append(polling.process(self.env.config, now=lambda: second))
        assert all((r.retried, r.failed) == (0, 0) for r in reports), reports
        self._collect()
        self._read()

    @rule(
        seconds=st.integers(0, 120),
        groups=st.sampled_from([2, 4]),
        delays=st.lists(st.integers(0, 20), min_size=4, max_size=4),
        at_call=st.integers(0, 8),
    )
    def fanned_out_tick(self, seconds: int, groups: int, delays: list[int], at_call: int) -> None:
        """The rule's invocation fans out (`shard_groups`): one processor invocation per group of shards, each
        starting after its own wait in Lambda's asynchronous queue (its own clock), the first of them overlapping
        the second (which runs whole at the first's `at_call`-th look at its time left; 0: none overlap)."""
        self.now += timedelta(seconds=seconds)
        base = self.now
        starts = sorted(
            ((base + timedelta(seconds=delays[g])).timestamp(), group)
            for g, group in enumerate(polling.shard_groups(4, groups))
        )
        reports: list[polling.TickReport] = []
        looks = itertools.count(1)
        overlapped: list[tuple[float, list[int]]] = []

        def run(start: float, group: list[int], time_left: Any = None) -> None:
            self.now = max(self.now, datetime.fromtimestamp(start, UTC))  # the world's clock is the invocation's
            kwargs = {} if time_left is None else {"time_left": time_left}
            reports.append(polling.process(self.env.config, now=lambda: start, shards=group, **kwargs))

        def first_looks() -> float:
            if next(looks) == at_call and len(starts) > 1:
                overlapped.append(starts[1])
                run(*starts[1])
            return 900.0

        run(*starts[0], time_left=first_looks)
        for start, group in starts[1:]:
            if (start, group) not in overlapped:
                run(start, group)
        assert all((r.retried, r.failed) == (0, 0) for r in reports), reports
        self._collect()
        self._read()

    @rule(seconds=st.integers(0, 120), refused=st.sets(st.integers(0, 9), min_size=1))
    def tick_refusing_entries(self, seconds: int, refused: set[int]) -> None:
        """Time passes and the rule ticks, but SQS refuses some entries of each SendMessageBatch (a 200 listing them
        in `Failed`, an internal error): those are not sent, and run once after their backoff; the rest run now."""
        self.now += timedelta(seconds=seconds)
        moment = self.now.timestamp()
        refusal = RefusedEntries(lambda entry: int(entry["Id"]) in refused)
        refusal.attach(CLIENTS.get("sqs"))
        try:
            with acting("processor", self.env.config):
                report = polling.process(self.env.config, now=lambda: moment)
        finally:
            refusal.detach(CLIENTS.get("sqs"))
        assert report.failed == 0 and report.retried == len(refusal.refused), report
        self._collect()
        self._read()

    @rule(seconds=st.integers(0, 120), form=st.sampled_from(FORMS))
    def herd_failing_a_completion(self, seconds: int, form: str) -> None:
        """Time passes; the user makes two items of one shard due now (a herd: one batch), and the rule ticks, but
        DynamoDB throttles the completion of the batch's first item for longer than every retry (a hot partition):
        the tick fails after completing the rest, none of which runs again; that item, sent but left due, may
        run once more at a later tick (at least once, for it alone)."""
        self.now += timedelta(seconds=seconds)
        for pk in SAME_SHARD:
            self.put(pk, 0, form, at_once=True)
        items = [self.env.ddb.get_item(TableName=self.env.table, Key=_key(pk))["Item"] for pk in SAME_SHARD]
        assert len({str(item.get("stShard")) for item in items if "stShard" in item}) <= 1, items
        moment = self.now.timestamp()
        chosen: dict[str, Any] = {}

        def first_completion(params: dict[str, Any]) -> bool:
            if ":done" not in params.get("ExpressionAttributeValues", {}) or params["Key"]["PK"]["S"] not in SAME_SHARD:
                return False
            return bool(chosen.setdefault("key", params["Key"]) == params["Key"])

        throttle = Throttled(first_completion)
        throttle.attach(CLIENTS.get("dynamodb"), "UpdateItem")
        try:
            with (
                acting("processor", self.env.config),
                patch.object(settle, "persist", partial(persist, delay=0)),
                # a warm container's pace: each shard's due items in one page, so the herd is one batch
                patch.dict(budget.PACES, {(self.env.table, shard): 100.0 for shard in range(4)}),
            ):
                polling.process(self.env.config, now=lambda: moment)
        except ClientError as exc:
            assert error_code(exc) == "ProvisionedThroughputExceededException" and throttle.throttled, exc
        else:
            assert throttle.throttled == 0
        finally:
            throttle.detach()
        received = self._collect()
        if throttle.throttled:
            pk = chosen["key"]["PK"]["S"]
            assert pk in received, (pk, received)
            item = self.reference.items[pk]
            item.marked = False  # the processor could not mark it DONE: it stays PENDING
            self.may_run_again.add(item.task.id)
        self._read()

    @rule(seconds=st.integers(0, 120))
    def tick_dies(self, seconds: int) -> None:
        """Time passes and the processor dies holding the shards with something due, before sending any of it:
        those items run once the shards' leases have ended, at their own time (or the time a user moved them to
        meanwhile)."""
        self.now += timedelta(seconds=seconds)
        moment = self.now.timestamp()
        with acting("processor", self.env.config):
            _DiesBeforeSending(self.env.config, CLIENTS, lambda: moment, lambda: 900.0).tick()
        assert self._collect() == []
        self._read()

    @rule(seconds=st.integers(0, 120))
    def tick_dies_after_sending(self, seconds: int) -> None:
        """Time passes and the processor dies (its Lambda timed out) after sending what is due, before completing
        any of it: its shards wait for their leases, then those items may run once more (at least once)."""
        self.now += timedelta(seconds=seconds)
        moment = self.now.timestamp()
        with acting("processor", self.env.config):
            _DiesAfterSending(self.env.config, CLIENTS, lambda: moment, lambda: 900.0).tick()
        for pk in self._collect():
            item = self.reference.items[pk]
            item.marked = False  # never marked DONE: still PENDING
            self.may_run_again.add(item.task.id)
        self._read()

    @rule(
        seconds=st.integers(0, 120),
        spent=st.integers(0, TIMEOUT_SECONDS),
        fast=st.sampled_from([0.0, 0.001, 0.01]),
        slow_call=st.tuples(st.sampled_from(OPERATIONS), st.integers(1, 3)),
        slow=st.floats(0, 1),
        crash_at=st.none() | st.integers(1, 40),
        applied=st.booleans(),
        herd=st.booleans(),
    )
    def tick_killed(
        self,
        seconds: int,
        spent: int,
        fast: float,
        slow_call: tuple[str, int],
        slow: float,
        crash_at: int | None,
        applied: bool,
        herd: bool,
    ) -> None:
        """Time passes and the rule invokes the processor, whose invocation is killed at any point: every AWS call
        takes a share of the worst its limits allow (`fast`; `slow` for one call, the n-th of an operation:
        `slow_call`), on the invocation's own clock, which starts `spent` s into the Lambda timeout (a cold start,
        a wait in Lambda's queue); the timeout kills it in whichever call it falls (one the service `applied` or
        not, its answer lost), or, with `crash_at`, a crash (memory, the runtime) kills it before that call,
        wherever it is: between two reads, between a send and its completion, in a lease's release. Nothing is
        completed or released after. Its shards stay held until their leases end; then another tick takes them.
        A kill by the timeout sends nothing twice: no send starts unless it and its completions fit the time left
        at their worst. A crash between a send and its completion sends those items again after the lease
        (documented: at least once at the target), and no others. With `herd`, the user first makes two items of
        one shard due now (one batch)."""
        self.now += timedelta(seconds=seconds)
        if herd:
            for pk in SAME_SHARD:
                self.put(pk, 0, "epoch", at_once=True)
        moment = self.now.timestamp()
        config = copy.deepcopy(self.env.config)
        config["maxWorkers"] = 1  # one call at a time: the invocation's clock is the sum of its calls
        worst = polling.call_limits(config["polling"]["budgetMarginSeconds"]).worst_seconds()
        kill = Kill(
            TIMEOUT_SECONDS, spent, lambda call: (slow if call == slow_call else fast) * worst, crash_at, applied
        )
        with kill.attached(), suppress(Killed):
            polling.process(config, now=lambda: moment, time_left=kill.left)
        for pk in self._collect():
            found = self.env.ddb.get_item(TableName=self.env.table, Key=_key(pk), ConsistentRead=True).get("Item", {})
            if found.get("stStatus", {}).get("S") == "DONE":
                continue
            item = self.reference.items[pk]
            item.marked = False  # sent, never completed: still PENDING
            if kill.crashed:
                self.may_run_again.add(item.task.id)
            else:
                self.problems.append(f"{pk} was sent and the Lambda timeout cut its completion off: sent again later")
        self.now += timedelta(seconds=kill.elapsed)
        self._read()

    # -- the guarantee -----------------------------------------------------------------------------------------------

    @invariant()
    def each_task_once_never_early(self) -> None:
        assert self.problems == [], "\n".join(self.problems)

    def check_the_end(self) -> None:
        """Every record assigned, and two ticks long after (the first indexes again, at its time, an item a writer
        indexed at another): every task that waits has run, once."""
        self.lambda_delivers(len(self.history))
        self.tick(24 * 3600)
        self.tick(60)
        self.each_task_once_never_early()
        waiting = [i.task for i in self.reference.items.values() if i.task.ran_at is None and not i.task.cancelled]
        assert waiting == [], f"never ran: {waiting}"

    # -- plumbing ----------------------------------------------------------------------------------------------------

    def _collect(self) -> list[str]:
        """Check what the target received against the reference; the keys of the items it received."""
        received = []
        for sent in self.queue.receive():
            moment = sent.at.timestamp()  # the clock of the tick that sent it
            pk, due = sent.body["keys"]["PK"], int(due_time(sent.body).timestamp())
            self.runs += 1
            item = self.reference.items.get(pk)
            if moment < due:
                self.problems.append(f"{pk} ran at {moment:.0f}, before its stDue {due}")
            if item is None:
                self.problems.append(f"{pk} (stDue {due}) ran, but the item was deleted before")
            elif item.task.cancelled or item.raw is None:
                self.problems.append(f"{pk} task {item.task.id} ran at stDue {due}, but its time was removed before")
            elif item.task.ran_at is not None and item.task.id not in self.may_run_again:
                self.problems.append(f"{pk} task {item.task.id} ran twice: at {item.task.ran_at:.0f} and {moment:.0f}")
            elif due != st_due(item.raw):
                self.problems.append(f"{pk} task {item.task.id} ran at stDue {due}, not at its time {item.raw!r}")
            else:
                if item.task.ran_at is not None:  # its completion failed: this once more, and no more
                    self.may_run_again.discard(item.task.id)
                item.task.ran_at = moment
                item.marked = True
                received.append(pk)
        return received

    def _done(self) -> list[str]:
        return sorted(pk for pk in self._timed() if self.reference.items[pk].task.ran_at is not None)

    def _timed(self) -> list[str]:
        """The items that have a time attribute."""
        return sorted(pk for pk, item in self.reference.items.items() if item.raw is not None)

    def _existing(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(sorted(self.reference.items)), label="item")

    def _update(self, pk: str, expression: str, values: dict[str, Any]) -> None:
        self.env.ddb.update_item(
            TableName=self.env.table, Key=_key(pk), UpdateExpression=expression, ExpressionAttributeValues=values
        )
        self._read()

    def _read(self) -> None:
        self.history += self.lambda_filter(self.env.stream.read(at=self.now))

    def deliver(self, records: list[dict[str, Any]]) -> None:
        now = self.now
        response = polling_assign.handle_assign_batch({"Records": records}, self.env.config, now=lambda: now)
        assert response == {"batchItemFailures": []}
        for parked in self.env.messages(self.env.poison_url):  # only writes that removed an item's time
            keys = parked["record"]["dynamodb"]["Keys"]
            assert keys["PK"]["S"] in self.untimed and "neither 'dueAt'" in parked["reason"], parked
        self._read()  # the assigner's own writes: its filter keeps them out


class Killed(BaseException):
    """The invocation is gone: raised in whatever call it was making (a BaseException, so no `except Exception` of
    the handler's turns it into a handled failure and goes on)."""


class Kill:
    """One invocation's clock and its end. Each AWS call the handlers make (on `CLIENTS`) moves the clock on by
    `cost((operation, n))` s (its operation's n-th call); the call in which the clock passes `timeout` is the last
    (applied or not, as drawn), and so is the `crash_at`-th call of all (not applied); every call after raises
    `Killed`."""

    def __init__(
        self,
        timeout: float,
        spent: float,
        cost: Callable[[tuple[str, int]], float],
        crash_at: int | None,
        applied: bool,
    ) -> None:
        self.timeout = timeout
        self.clock = float(spent)
        self.cost = cost
        self.crash_at = crash_at
        self.applied = applied
        self.calls = 0
        self.made: dict[str, int] = {}
        self.dead = False
        self.crashed = False
        self.start = float(spent)
        self._lock = threading.Lock()

    @property
    def elapsed(self) -> float:
        return min(self.clock, self.timeout) - self.start

    def left(self) -> float:
        """The Lambda context's remaining time."""
        return max(0.0, self.timeout - self.clock)

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        with self._lock:
            if self.dead:
                raise Killed
            self.calls += 1
            if self.calls == self.crash_at:
                self.dead = self.crashed = True
                raise Killed
            made = self.made[model.name] = self.made.get(model.name, 0) + 1
            self.clock += self.cost((model.name, made))
            if self.clock > self.timeout:
                self.dead = True
                context["killed"] = True
                if not self.applied:
                    raise Killed

    def _after(self, context: dict[str, Any], **_: Any) -> None:
        if context.get("killed"):
            raise Killed  # the call was applied; its answer never reached the invocation

    @contextmanager
    def attached(self) -> Iterator[None]:
        clients = [CLIENTS.get(service) for service in ("dynamodb", "sqs")]
        for client in clients:
            client.meta.events.register("before-call.*.*", self._before)
            client.meta.events.register("after-call.*.*", self._after)
        try:
            yield
        finally:
            for client in clients:
                client.meta.events.unregister("before-call.*.*", self._before)
                client.meta.events.unregister("after-call.*.*", self._after)


def _key(pk: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": SK}}


class _NeverReleased(Lease):
    """The leases of a Lambda that died: never released, they hold their shards until they end."""

    def release(self, shard: int) -> None:
        return None


class _NeverSent(Sender):
    """A Lambda that died before its sends: nothing sent, nothing settled."""

    def run(self, batch: list[dict[str, Any]]) -> tuple[list[polling.Outcome], Exception | None]:
        return [polling.Outcome.SKIPPED] * len(batch), None


class _NeverCompleted(Settler):
    """A Lambda that died after its sends: nothing it sent is completed."""

    def done(self, item: dict[str, Any]) -> None:
        return None


class _DiesBeforeSending(polling.Processor):
    """A processor whose Lambda dies after holding its shards and reading their pages: nothing is sent, completed
    or released."""

    lease_type = _NeverReleased
    sender_type = _NeverSent


class _DiesAfterSending(polling.Processor):
    """A processor whose Lambda dies after sending: nothing it sent is completed, and its shards are not
    released."""

    lease_type = _NeverReleased
    settler_type = _NeverCompleted


def _env() -> Env:
    env = model_env(due_index=True)
    use_shards(env, 4)
    # The most attempts the component allows: a refused send backs off (doubling from a minute) and runs later,
    # never dead-lettered within any run of the model.
    return env.configure(max_attempts=100)


test_polling_model = model_test(PollingModel)
