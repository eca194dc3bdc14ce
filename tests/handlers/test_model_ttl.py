"""A model check of `ttl` mode (mostly with `precise=True`): random sequences of user writes, time passing, stream
lag, batch redeliveries, Scheduler running the precise delete anywhere in its minute and DynamoDB's TTL deleting
expired items, compared with a plain reference model of the guarantee.

The guarantee (README, "Guarantees, per mode" and "`ttl` mode, in detail"): the action is tied to the item's
removal. An occurrence (item keys + due time) is acted on exactly once when the item gives it up: removed holding it
by DynamoDB's TTL, fired by its precise schedule (or by the executor, for a due time already past), or (precise)
deleted by anyone at or after its due second; never before its due second; and never when a user deleted the item
before that second (a cancel, even inside the due minute), however late the REMOVE is processed. Without `precise`
only TTL deletions act. The system itself never fires an item before its due second, and with `precise` (records
delivered in order) nothing expired or fired is left in the table.

`MODEL_EXAMPLES` sets the number of sequences (50 by default); `MODEL_RANDOM=1` draws new sequences instead of the
fixed ones `make test` runs; hypothesis prints a failing sequence shrunk. Scheduler's firing instants come from a
fixed seed, so they are part of the sequence.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import ttl
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule
from moto import mock_aws
from st_core.clients import CLIENTS
from st_core.timeparse import minute_start

from components.filters import filter_patterns
from components.modes.ttl import ttl_filters
from tests.handlers.conftest import Env, SchedulerClock
from tests.handlers.model_support import (
    TTL_IDENTITY,
    HandlerClock,
    StreamDelivery,
    TargetQueue,
    due_time,
    model_env,
    model_test,
    ttl_config,
)
from tests.support.patterns import LambdaFilter

START = datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC)
KEYS = ["a", "b", "c"]
SK = "S"


@dataclass(frozen=True)
class Removal:
    """An item giving up `due`: deleted by its user or by DynamoDB's TTL, or fired (the due time moved into
    `stFiredAt`) by Scheduler (the precise schedule) or by the handler itself (a due time already past)."""

    pk: str
    due: datetime
    at: datetime
    by: str


@dataclass
class Reference:
    precise: bool
    current: dict[str, datetime | None] = field(default_factory=dict)
    removals: list[Removal] = field(default_factory=list)

    def acts(self, removal: Removal) -> bool:
        if removal.by == "ttl":
            return True
        if not self.precise:
            return False
        return removal.by != "user" or removal.at >= removal.due

    def must_act(self) -> set[tuple[str, datetime]]:
        return {(r.pk, r.due) for r in self.removals if self.acts(r)}

    def cancelled(self) -> set[tuple[str, datetime]]:
        return {(r.pk, r.due) for r in self.removals if not self.acts(r)} - self.must_act()


class TtlModel(StreamDelivery):
    def __init__(self) -> None:
        super().__init__()
        self.mock = mock_aws()
        self.mock.start()
        self.ready = False

    @initialize(precise=st.booleans().map(lambda plain: not plain), seed=st.integers(0, 2**32 - 1))
    def setup(self, precise: bool, seed: int) -> None:
        """`seed`: where in its minute each precise delete runs, drawn per sequence (so early and late firings both
        come up) and part of it (so a failure replays)."""
        self.env = _env(precise)
        self.reference = Reference(precise)
        self.lambda_filter = LambdaFilter(filter_patterns(ttl_filters("dueAt", precise)))
        self.scheduler = SchedulerClock(self.env, seed=seed)
        self.now = START
        self.queue = TargetQueue(self.env, lambda: self.now)
        self.queue.watch()
        self.start_stream()
        self.delivered: list[tuple[str, datetime, datetime]] = []  # (pk, due, sent at)
        self.fired: set[str] = set()  # items fired and not yet deleted or written again (no due time)
        self.ready = True

    def teardown(self) -> None:
        CLIENTS.reset()
        self.mock.stop()

    # -- the world -------------------------------------------------------------------------------------------------

    @rule(pk=st.sampled_from(KEYS), minutes=st.integers(-2, 4), second=st.integers(0, 59), at_once=st.booleans())
    def put(self, pk: str, minutes: int, second: int, at_once: bool) -> None:
        """A user's PutItem; `at_once`: Lambda delivers it (and what waits before it) straight away, as it mostly
        does, so the precise delete is scheduled before the due time."""
        due = self.now.replace(second=second, microsecond=0) + timedelta(minutes=minutes)
        self.env.put({"PK": pk, "SK": SK, "dueAt": int(due.timestamp()), "v": uuid.uuid4().hex[:6]})
        self._read(self.now, "user")
        if at_once:
            self.lambda_delivers(len(self.history))

    @precondition(lambda self: self.ready and self._existing() != [])
    @rule(data=st.data())
    def write_back(self, data: st.DataObject) -> None:
        """A consumer (or user) changes the item but not its due time."""
        pk = self._draw_existing(data)
        self._update(pk, "SET v = :v", {":v": {"S": uuid.uuid4().hex[:6]}})

    @precondition(lambda self: self.ready and self._existing() != [])
    @rule(data=st.data(), seconds=st.integers(-120, 240))
    def move(self, data: st.DataObject, seconds: int) -> None:
        """The user gives the item a new due time (an UpdateItem), relative to its current one."""
        pk = self._draw_existing(data)
        current = self.reference.current[pk]
        assert current is not None
        self._update(pk, "SET dueAt = :d", {":d": {"N": str(int((current + timedelta(seconds=seconds)).timestamp()))}})

    @precondition(lambda self: self.ready and self._existing() != [])
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        self._delete(self._draw_existing(data))

    @precondition(lambda self: self.ready and self._existing() != [])
    @rule(data=st.data())
    def reinsert(self, data: st.DataObject) -> None:
        """The user deletes the item and writes the same content back at once."""
        pk = self._draw_existing(data)
        item = self.env.ddb.get_item(TableName=self.env.table, Key=_key(pk), ConsistentRead=True)["Item"]
        self.env.delete(pk, SK)
        self.env.ddb.put_item(TableName=self.env.table, Item=item)
        self._read(self.now, "user")

    @precondition(lambda self: self.ready and self._expired() != [])
    @rule(data=st.data())
    def ttl_expires(self, data: st.DataObject) -> None:
        """DynamoDB's TTL deletes an expired item, some time after it expired (now)."""
        self._expire(data.draw(st.sampled_from(self._expired()), label="expired"))

    @precondition(lambda self: self.ready and self.reference.precise and (self.fired or self._existing()))
    @rule(data=st.data(), what=st.sampled_from(["delete", "rearm", "write_back"]), seconds=st.integers(-60, 240))
    def touch_fired(self, data: st.DataObject, what: str, seconds: int) -> None:
        """A user writes to an item that has fired but is not deleted yet (the executor has not processed the fire):
        deletes it, gives it a new due time, or changes something else. With none fired yet, time first passes to
        the next schedule's run."""
        if not self.fired:
            runs = [self.scheduler.instant(s) for s in self.env.schedules()]
            if not runs:
                return
            self._advance(min(runs))
            if not self.fired:
                return
        pk = data.draw(st.sampled_from(sorted(self.fired)), label="fired item")
        if what == "delete":
            self._delete(pk)
        elif what == "rearm":
            self._update(
                pk, "SET dueAt = :d", {":d": {"N": str(int((self.now + timedelta(seconds=seconds)).timestamp()))}}
            )
        else:
            self._update(pk, "SET v = :v", {":v": {"S": uuid.uuid4().hex[:6]}})

    @precondition(lambda self: self.ready and self._inside_minute_ahead() != [])
    @rule(data=st.data())
    def delete_in_its_due_minute(self, data: st.DataObject) -> None:
        """Time passes into the item's due minute, and the user deletes it before its due second: a cancel, although
        its schedule's minute has begun (the original code took any delete in the due minute for the schedule's)."""
        pk = data.draw(st.sampled_from(self._inside_minute_ahead()), label="item")
        due = self.reference.current[pk]
        assert due is not None
        earliest = max(0, int((minute_start(due) - self.now).total_seconds()))
        seconds = data.draw(st.integers(earliest, int((due - self.now).total_seconds()) - 1), label="seconds")
        self._advance(self.now + timedelta(seconds=seconds))
        if self.reference.current.get(pk) == due:  # not deleted meanwhile by its schedule
            self._delete(pk)

    @rule(seconds=st.integers(1, 180))
    def time_passes(self, seconds: int) -> None:
        self._advance(self.now + timedelta(seconds=seconds))

    # -- the guarantee -----------------------------------------------------------------------------------------------

    @invariant()
    def acts_once_never_early_never_cancelled(self) -> None:
        if not self.ready:
            return
        for pk, due, at in self.delivered:
            assert at >= due, f"{pk} due {due} acted on early, at {at}"
        twice = sorted(k for k, n in Counter((pk, due) for pk, due, _ in self.delivered).items() if n > 1)
        assert twice == [], f"acted on twice: {twice}"
        must = self.reference.must_act()
        unwarranted = sorted({(pk, due) for pk, due, _ in self.delivered} - must)
        cancelled = self.reference.cancelled()
        assert unwarranted == [], (
            f"acted on without a removal that counts: {unwarranted} "
            f"({'cancelled by a user delete before the due second' if set(unwarranted) & cancelled else 'no removal'})"
        )
        early = [r for r in self.reference.removals if r.by != "user" and r.at < r.due]
        assert early == [], f"the system deleted items before their due second: {early}"

    def check_the_end(self) -> None:
        """Everything processed, every schedule fired: exactly what was removed as due was acted on, once."""
        self._drain()
        left = {pk: due for pk, due in self.reference.current.items() if due is not None}
        if self.reference.precise and not self.stale:
            assert left == {}, f"precise: expired items left for TTL: {left}"
            assert self.fired == set(), f"precise: fired items never deleted: {sorted(self.fired)}"
        for pk in self._expired():
            self._expire(pk)
        self._drain()
        self.acts_once_never_early_never_cancelled()
        acted = {(pk, due) for pk, due, _ in self.delivered}
        lost = sorted(self.reference.must_act() - acted)
        assert lost == [], f"removed as due but never acted on: {lost}"

    # -- plumbing ----------------------------------------------------------------------------------------------------

    def _existing(self) -> list[str]:
        return sorted(pk for pk, due in self.reference.current.items() if due is not None)

    def _draw_existing(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(self._existing()), label="item")

    def _inside_minute_ahead(self) -> list[str]:
        """Items whose due second is ahead and not on a minute boundary (so their minute starts before it)."""
        return [pk for pk in self._existing() if (due := self.reference.current[pk]) and due > self.now and due.second]

    def _delete(self, pk: str) -> None:
        self.env.delete(pk, SK)
        self._read(self.now, "user")

    def _expired(self) -> list[str]:
        return sorted(pk for pk, due in self.reference.current.items() if due is not None and due <= self.now)

    def _expire(self, pk: str) -> None:
        self.env.delete(pk, SK)
        self._read(self.now, "ttl")

    def _update(self, pk: str, expression: str, values: dict[str, Any]) -> None:
        self.env.ddb.update_item(
            TableName=self.env.table, Key=_key(pk), UpdateExpression=expression, ExpressionAttributeValues=values
        )
        self._read(self.now, "user")

    def _read(self, at: datetime, by: str) -> None:
        """The stream's new records, stamped `at`; REMOVEs are `by` whoever removed the item."""
        records = self.env.stream.read(at=at)
        for record in records:
            pk = record["dynamodb"]["Keys"]["PK"]["S"]
            old, new = record["dynamodb"].get("OldImage") or {}, record["dynamodb"].get("NewImage") or {}
            if record["eventName"] == "REMOVE":
                if by == "ttl":
                    record["userIdentity"] = dict(TTL_IDENTITY)
                self.fired.discard(pk)
                if "dueAt" in old:  # a fired item's delete gives up no due time: it gave it up when it fired
                    self.reference.removals.append(Removal(pk, _due(old), at, by))
                self.reference.current[pk] = None
            elif "dueAt" not in new and "dueAt" not in old:
                assert pk in self.fired, f"{pk}: a write without a due time: {record}"  # a user's, on a fired item
            elif "dueAt" not in new:
                assert new.get("stFiredAt") == old["dueAt"], f"{pk}: lost its due time: {record}"
                assert by in ("scheduler", "handler"), f"{pk} fired by {by}"
                self.reference.removals.append(Removal(pk, _due(old), at, by))
                self.reference.current[pk] = None
                self.fired.add(pk)
            else:
                self.fired.discard(pk)
                self.reference.current[pk] = _due(new)
        self.history += self.lambda_filter(records)

    def _advance(self, until: datetime) -> None:
        """Time passes; Scheduler runs each precise delete at an instant anywhere in its minute."""
        runs = sorted((self.scheduler.instant(s), s["Name"], s) for s in self.env.schedules())
        for moment, _, schedule in runs:
            if moment <= until:
                self.scheduler.run(schedule)
                self._read(moment, "scheduler")
        self.now = max(self.now, until)

    def deliver(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        clock = HandlerClock(self.now)
        latest = [self.now]

        def now() -> datetime:
            moment = clock.now()
            latest.append(moment)
            return moment

        self.queue.clock = now
        response = ttl.handle_batch({"Records": records}, self.env.config, now=now, sleep=clock.sleep)
        assert response == {"batchItemFailures": []}
        assert self.env.messages(self.env.poison_url) == []
        done = max(latest)
        self._read(done, "handler")  # a due time already past is deleted at once: that REMOVE comes back later
        for sent in self.queue.receive():
            self.delivered.append((sent.body["keys"]["PK"], due_time(sent.body), sent.at))
        self._advance(done)  # the invocation took this long (it waits for a due second inside the minute)

    def _drain(self) -> None:
        """An hour of stream lag (every schedule fires meanwhile), then everything pending is processed; again, until
        nothing is left to process or to fire."""
        for _ in range(20):
            self._advance(self.now + timedelta(hours=1))
            self.lambda_delivers(len(self.history))
            if self.pending == len(self.history) and not self.env.schedules():
                return
        raise AssertionError("still busy after 20 rounds")


def _key(pk: str) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": SK}}


def _due(image: dict[str, Any]) -> datetime:
    return datetime.fromtimestamp(int(image["dueAt"]["N"]), UTC)


def _env(precise: bool) -> Env:
    return ttl_config(model_env(), precise=precise)


test_ttl_model = model_test(TtlModel)
