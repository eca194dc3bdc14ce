"""A model check of `eventbridge` mode: random sequences of user writes, time passing, stream lag, batch
redeliveries and Scheduler firing anywhere in its minute, compared with a plain reference model of the guarantee.

The guarantee (README, "Guarantees, per mode"): an occurrence (item keys + due time) is delivered once if the item
held that due time when it came, never before its due second, and never if the item left it before it came (unless
that cancel was processed only once its schedule might already be firing, which AWS cannot take back).

`MODEL_EXAMPLES` sets the number of sequences (50 by default); `MODEL_RANDOM=1` draws new sequences instead of the
fixed ones `make test` runs; hypothesis prints a failing sequence shrunk.
"""

from __future__ import annotations

import copy
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import eventbridge
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from moto import mock_aws
from st_core.clients import CLIENTS
from st_core.schedules import MIN_LEAD
from st_core.timeparse import format_due, minute_at_or_after

from tests.handlers.conftest import Env, SchedulerClock, build_env
from tests.handlers.model_support import model_test

START = datetime(2030, 6, 1, 12, 0, 0, tzinfo=UTC)
KEYS = ["a", "b", "c"]
# Due seconds, with the edges of the minute drawn more often (a due time on the minute, or in its last seconds,
# puts the schedule's lead before the due time: a change there is a cancel racing the firing).
EDGY_SECONDS = st.one_of(st.integers(0, 59), st.sampled_from([0, 1, 2, 50, 55, 58, 59]))


@dataclass
class Occurrence:
    pk: str
    due: datetime
    written: datetime
    ended: datetime | None = None

    def came_due(self) -> bool:
        return self.ended is None or self.due <= self.ended


@dataclass
class Reference:
    """What the items held, and when: the plain model the deliveries are checked against."""

    current: dict[str, Occurrence | None] = field(default_factory=dict)
    all: list[Occurrence] = field(default_factory=list)

    def write(self, pk: str, due: datetime | None, at: datetime) -> None:
        before = self.current.get(pk)
        if before is not None and due == before.due:
            return  # the same due time: not a new occurrence
        if before is not None:
            before.ended = at
        self.current[pk] = None if due is None else Occurrence(pk, due, at)
        if due is not None:
            self.all.append(self.current[pk])  # type: ignore[arg-type]


class EventBridgeModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mock = mock_aws()
        self.mock.start()
        self.env = _env()
        self.clock = SchedulerClock(self.env, seed=0)  # replaced by the sequence's own (`scheduler_seed`)
        self.now = START
        self.reference = Reference()
        self.history: list[dict[str, Any]] = []  # every record, stamped with its change time
        self.pending = 0  # records from history[pending:] not yet delivered to the handler
        self.processed_at: dict[str, datetime] = {}  # eventID -> when the handler first saw it
        self.delivered: list[tuple[str, datetime, datetime]] = []  # (pk, due, at)

    def teardown(self) -> None:
        CLIENTS.reset()
        self.mock.stop()

    # -- the world -------------------------------------------------------------------------------------------------

    @initialize(seed=st.integers(0, 2**32 - 1))
    def scheduler_seed(self, seed: int) -> None:
        """Where in its minute each schedule runs: drawn per sequence, so early and late firings both come up (one
        fixed seed gave every sequence's first schedule the same instant), and part of the sequence, so a failure
        replays."""
        self.clock = SchedulerClock(self.env, seed=seed)

    @initialize(
        minutes=st.lists(st.integers(1, 12), min_size=len(KEYS), max_size=len(KEYS)),
        seconds=st.lists(EDGY_SECONDS, min_size=len(KEYS), max_size=len(KEYS)),
    )
    def items(self, minutes: list[int], seconds: list[int]) -> None:
        """Every item starts with a due time ahead (not yet handled), so short sequences already move and race
        schedules rather than mostly writing."""
        for pk, minute, second in zip(KEYS, minutes, seconds, strict=True):
            self._put(pk, self.now.replace(second=second) + timedelta(minutes=minute))

    @rule(pk=st.sampled_from(KEYS), minutes=st.integers(-3, 12), second=EDGY_SECONDS)
    def put(self, pk: str, minutes: int, second: int) -> None:
        due = self.now.replace(second=second) + timedelta(minutes=minutes)
        self._put(pk, due)

    @rule(
        pk=st.sampled_from(KEYS),
        near=st.integers(-15, 5),
        settled=st.booleans(),
        away=st.integers(1, 5),
        gap=st.integers(0, 12),
        between=st.booleans(),
    )
    def move_away_and_back(self, pk: str, near: int, settled: bool, away: int, gap: int, between: bool) -> None:
        """The item leaves its due time and comes back to it `gap` seconds later: both records in one batch, or
        (`between`) the first one handled on its own before the second is written. First, time moves to `near`
        seconds from its schedule's minute (its lead, the boundary, just after), if that is still ahead;
        `settled`: the records so far are handled before the move (its schedule exists)."""
        current = self.reference.current.get(pk)
        if current is None:
            return
        due = current.due
        if settled:
            self.lambda_delivers()
        self._time_to(self.schedule_minute(due) + timedelta(seconds=near))
        self._put(pk, due + timedelta(minutes=away))
        if between:
            self.lambda_delivers()
        if gap:
            self.time_passes(gap)
        self._put(pk, due)

    @rule(pk=st.sampled_from(KEYS), offset=st.integers(-15, 5))
    def time_reaches_the_schedule_minute(self, pk: str, offset: int) -> None:
        """Time moves to within seconds of the minute the item's schedule runs in (its lead, the boundary, just
        after): where a change may race the firing."""
        current = self.reference.current.get(pk)
        if current is None:
            return
        self._time_to(self.schedule_minute(current.due) + timedelta(seconds=offset))

    def schedule_minute(self, due: datetime) -> datetime:
        """The minute an occurrence's schedule names (Scheduler runs it anywhere within it)."""
        return minute_at_or_after(due)

    @rule(pk=st.sampled_from(KEYS))
    def write_back(self, pk: str) -> None:
        """A consumer (or user) changes the item but not its due time."""
        current = self.reference.current.get(pk)
        if current is None:
            return
        self.env.put({"PK": pk, "SK": "s", "dueAt": format_due(current.due), "v": uuid.uuid4().hex[:6]})
        self._read()

    @rule(pk=st.sampled_from(KEYS))
    def delete(self, pk: str) -> None:
        if self.reference.current.get(pk) is None:
            return
        self.env.delete(pk, "s")
        self.reference.write(pk, None, self.now)
        self._read()

    @rule(seconds=st.integers(1, 240))
    def time_passes(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)
        self._fire()

    @rule()
    def lambda_delivers(self) -> None:
        self._handle(self.history[self.pending :])
        self.pending = len(self.history)

    @rule(limit=st.integers(1, 2))
    def lambda_delivers_a_small_batch(self, limit: int) -> None:
        """The next record or two alone (the rest waits for the next batch)."""
        end = min(len(self.history), self.pending + limit)
        self._handle(self.history[self.pending : end])
        self.pending = end

    @precondition(lambda self: self.pending > 0)
    @rule(data=st.data())
    def lambda_redelivers(self, data: st.DataObject) -> None:
        """A batch again, whole, from a sequence number with everything after it (as after a timeout)."""
        start = data.draw(st.integers(0, self.pending - 1))
        self._handle(copy.deepcopy(self.history[start : self.pending]))

    # -- the guarantee -----------------------------------------------------------------------------------------------

    @invariant()
    def never_early_never_twice(self) -> None:
        for pk, due, at in self.delivered:
            assert at >= due, f"{pk} due {due} delivered early at {at}"
        twice = [k for k, n in Counter((pk, due) for pk, due, _ in self.delivered).items() if n > 1]
        assert twice == [], f"delivered twice: {twice}"

    def check_the_end(self) -> None:
        """Everything processed and every schedule fired: exactly what came due was delivered."""
        self.lambda_delivers()
        self.now += timedelta(hours=1)
        self._fire()
        self.never_early_never_twice()
        delivered = {(pk, due) for pk, due, _ in self.delivered}
        due = {(o.pk, o.due) for o in self.reference.all if o.came_due()}
        assert due <= delivered, f"lost: {sorted(due - delivered)}"
        extra = delivered - due
        assert extra <= self._late_cancels(), f"delivered though cancelled in time: {sorted(extra)}"

    def _late_cancels(self) -> set[tuple[str, datetime]]:
        """Cancels the handler saw only once the schedule might be firing: AWS cannot take those back."""
        late = set()
        for occurrence in self.reference.all:
            if occurrence.came_due() or occurrence.ended is None:
                continue
            seen = [
                at
                for record, at in self._seen_records()
                if record["eventName"] != "INSERT"  # the change that ended it: a MODIFY or REMOVE from this due time
                and record["dynamodb"]["Keys"]["PK"]["S"] == occurrence.pk
                and (record["dynamodb"].get("OldImage") or {}).get("dueAt") == {"S": format_due(occurrence.due)}
                and (record["dynamodb"].get("NewImage") or {}).get("dueAt") != {"S": format_due(occurrence.due)}
                and int(record["dynamodb"]["ApproximateCreationDateTime"]) == int(occurrence.ended.timestamp())
            ]
            if not seen or min(seen) >= minute_at_or_after(occurrence.due) - MIN_LEAD:
                late.add((occurrence.pk, occurrence.due))
        return late

    # -- plumbing ----------------------------------------------------------------------------------------------------

    def _time_to(self, moment: datetime) -> None:
        if moment > self.now:
            self.now = moment
            self._fire()

    def _put(self, pk: str, due: datetime) -> None:
        self.env.put({"PK": pk, "SK": "s", "dueAt": format_due(due), "v": uuid.uuid4().hex[:6]})
        self.reference.write(pk, due, self.now)
        self._read()

    def _read(self) -> None:
        self.history += self.env.stream.read(at=self.now)

    def _seen_records(self) -> list[tuple[dict[str, Any], datetime]]:
        return [(r, self.processed_at[r["eventID"]]) for r in self.history if r["eventID"] in self.processed_at]

    def _handle(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        now = self.now
        for record in records:
            self.processed_at.setdefault(record["eventID"], now)
        response = eventbridge.handle_batch({"Records": records}, self.env.config, now=lambda: now)
        assert response == {"batchItemFailures": []}
        assert self.env.messages(self.env.poison_url) == []
        self._collect(now)

    def _fire(self) -> None:
        runs = sorted((self.clock.instant(s), s["Name"], s) for s in self.env.schedules())
        for moment, _, schedule in runs:
            if moment <= self.now:
                self.clock.run(schedule)
                self._collect(moment)

    def _collect(self, at: datetime) -> None:
        for message in self.env.messages(self.env.due_queue_url):
            due = datetime.fromisoformat(message["dueAt"].replace("Z", "+00:00"))
            self.delivered.append((message["keys"]["PK"], due, at))


def _env() -> Env:
    env = build_env()
    env.configure(max_workers=4)
    return env


test_eventbridge_model = model_test(EventBridgeModel)
