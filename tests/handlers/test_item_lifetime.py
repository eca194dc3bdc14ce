"""eventbridge over an item's whole life, not minutes: items change days after their occurrences, the ledger's
entries are removed by DynamoDB's TTL once they expire, recurring items are written every few seconds across many
firings, parked records are redriven days later. Scheduler as AWS runs it: anywhere in a firing's minute."""

from __future__ import annotations

import copy
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import eventbridge
import pytest
from botocore.exceptions import ClientError
from st_core.clients import CLIENTS

from tests.handlers.conftest import SEED, Env, SchedulerClock
from tests.handlers.test_eventbridge import FUTURE, iso
from tests.handlers.test_precision import BASE, ReleaseQueue, queue, run_until, stream  # noqa: F401
from tests.handlers.test_recurring import zoned

DUE = FUTURE.replace(second=0)  # on a minute, two days ahead of the wall clock (Scheduler takes no past at())
WINDOW = timedelta(seconds=172800)  # the env's `windowSeconds`: the default 48 h


def handled(env: Env, moment: datetime, batch: dict[str, Any] | None = None) -> dict[str, Any]:
    """The table's new records (or `batch` again), changed and handled at `moment`; the batch."""
    batch = env.event(at=moment) if batch is None else batch
    assert eventbridge.handle_batch(copy.deepcopy(batch), env.config, now=lambda: moment) == {"batchItemFailures": []}
    return batch


def ttl_removes_expired(env: Env, moment: datetime) -> int:
    """DynamoDB's TTL on the ledger at `moment`, at its most prompt: every entry whose `expiresAt` has passed is
    gone (TTL may take days; it never deletes earlier). The number removed."""
    ledger = env.config["eventbridge"]["ledgerTable"]
    gone = 0
    for entry in env.ddb.scan(TableName=ledger, ConsistentRead=True)["Items"]:
        if "expiresAt" in entry and float(entry["expiresAt"]["N"]) < moment.timestamp():
            env.ddb.delete_item(TableName=ledger, Key={"id": entry["id"]})
            gone += 1
    return gone


def sent(env: Env) -> list[str]:
    """The `dueAt` of every due event the target has received since the last look, in order."""
    return sorted(message["dueAt"] for message in env.messages(env.due_queue_url))


# -- an occurrence's item leaves its due time days later -----------------------------------------------------------

TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def leave(env: Env, how: str, item: dict[str, Any], moment: datetime) -> None:
    """The item leaves its due time at `moment`, as an app or a cleanup TTL on the user's table does, handled then."""
    if how == "moved":
        env.put({**item, "dueAt": iso(moment + timedelta(days=7))})
    else:
        env.delete(item["PK"], item["SK"])
    batch = env.event(at=moment)
    if how == "cleanup-ttl":
        batch["Records"] = [{**record, "userIdentity": TTL_IDENTITY} for record in batch["Records"]]
    handled(env, moment, batch)


@pytest.mark.parametrize("how", ["deleted", "moved", "cleanup-ttl"])
@pytest.mark.parametrize("delivered_by", ["schedule", "handler"])
def test_an_item_leaving_its_due_time_days_after_it_came_is_not_delivered_again(
    env: Env, how: str, delivered_by: str
) -> None:
    # GIVEN an occurrence delivered on Monday: by its schedule, or by the handler (written after its time)
    clock = SchedulerClock(env)
    item = {"PK": "appt", "SK": "1", "dueAt": iso(DUE)}
    env.put(item)
    handled(env, DUE - timedelta(minutes=10) if delivered_by == "schedule" else DUE + timedelta(minutes=5))
    clock.fire_due(DUE + timedelta(minutes=2))
    assert sent(env) == [iso(DUE)]
    # AND by Thursday DynamoDB's TTL has removed the ledger's entry of it (it expired after the 48 h window)
    thursday = DUE + timedelta(days=3)
    assert ttl_removes_expired(env, thursday) == 1
    # WHEN the app deletes the item, moves it, or a cleanup TTL removes it, on Thursday
    leave(env, how, item, thursday)
    # THEN Monday's occurrence is not delivered again (it was, before: the claim found no entry and let it through)
    clock.fire_due(thursday + timedelta(days=8))
    assert [s for s in sent(env) if s == iso(DUE)] == []


def test_after_the_window_is_raised_an_entry_written_under_the_old_one_is_judged_by_it(env: Env) -> None:
    # GIVEN Monday's occurrence delivered by its schedule under the 48 h window, which a reconcile ran with (it
    # records the narrowest window the table ran with)
    from st_core.idempotency import NARROWEST_WINDOW

    clock = SchedulerClock(env)
    item = {"PK": "appt", "SK": "1", "dueAt": iso(DUE)}
    env.put(item)
    handled(env, DUE - timedelta(minutes=10))
    clock.fire_due(DUE + timedelta(minutes=2))
    assert sent(env) == [iso(DUE)]
    ledger = env.config["eventbridge"]["ledgerTable"]
    recorded = {"id": {"S": NARROWEST_WINDOW}, "seconds": {"N": str(int(WINDOW.total_seconds()))}}
    env.ddb.put_item(TableName=ledger, Item=recorded)
    # AND the window raised to 7 days on Tuesday; the entry keeps the expiry it was written with, and TTL removes it
    env.configure(idempotency_window_seconds=7 * 86400)
    thursday = DUE + timedelta(days=3)
    assert ttl_removes_expired(env, thursday) == 1
    # WHEN the item is deleted on Thursday (within the new window, past the old one)
    leave(env, "deleted", item, thursday)
    # THEN it is not delivered again: the ledger is judged by the window its entries were written with
    assert sent(env) == []


def test_at_second_precision_an_item_leaving_its_due_time_days_later_is_not_delivered_again(
    env: Env,
    queue: ReleaseQueue,  # noqa: F811
) -> None:
    # The release consumer delivered it at its second (its claim takes the schedule's marker over); the settle of
    # a later change takes a marker over too, so without the horizon it would deliver again once TTL removed the entry.
    releases = queue
    due = BASE + timedelta(seconds=19)
    env.put({"PK": "sale", "SK": "x", "dueAt": iso(due)})
    stream(env, releases)
    run_until(env, releases, due + timedelta(minutes=2), scheduler=SchedulerClock(env))
    assert len(releases.delivered()["sale"]) == 1
    thursday = due + timedelta(days=3)
    assert ttl_removes_expired(env, thursday) == 1
    releases.clock.t = thursday
    env.delete("sale", "x")
    stream(env, releases)
    run_until(env, releases, thursday + timedelta(minutes=2), scheduler=SchedulerClock(env))
    assert len(releases.delivered()["sale"]) == 1


def test_within_the_window_a_never_delivered_occurrence_is_delivered_once_and_after_it_not_at_all(env: Env) -> None:
    # An item written just before its time and deleted just after, both records reaching the function only later in
    # one batch: its schedule was never made, so the handler's settle is the delivery. Handled within the window
    # less an hour (the ledger surely remembers any delivery): delivered once, however often the batch comes back.
    env.put({"PK": "a", "SK": "1", "dueAt": iso(DUE)})
    env.delete("a", "1")
    late = env.event(at=DUE + timedelta(seconds=30))
    for moment in (DUE + timedelta(hours=1), DUE + WINDOW - timedelta(hours=2)):
        handled(env, moment, late)
    assert sent(env) == [iso(DUE)]
    # Handled past that (a batch redriven days later): "delivered long ago" and "never delivered" look the same once
    # the entry may be gone, so it is not delivered again; reconcile reports such occurrences the same way.
    env.put({"PK": "b", "SK": "1", "dueAt": iso(DUE)})
    env.delete("b", "1")
    later = env.event(at=DUE + timedelta(seconds=30))
    handled(env, DUE + WINDOW - timedelta(minutes=30), later)
    assert sent(env) == []


def test_an_item_written_long_past_due_and_removed_before_the_handler_saw_it_is_delivered_once(env: Env) -> None:
    # GIVEN reminders a day before each due time, and an item written 41 h after its due time (its reminder's own
    # time 65 h past, older than the ledger remembers) whose cleanup TTL had passed: DynamoDB's TTL removes it half
    # an hour later, and both records reach the function in one batch an hour after the write
    env.configure(offsets=[-86400, 0])
    written = DUE + timedelta(hours=41)
    env.put({"PK": "late", "SK": "1", "dueAt": iso(DUE)})
    records = env.event(at=written)["Records"]
    env.delete("late", "1")
    removal = env.event(at=written + timedelta(minutes=30))["Records"]
    batch = {"Records": records + [{**record, "userIdentity": TTL_IDENTITY} for record in removal]}
    handled(env, written + timedelta(hours=1), batch)

    def offsets_sent() -> list[int]:
        return sorted(message["offsetSeconds"] for message in env.messages(env.due_queue_url))

    # THEN both occurrences are delivered: the write alone would have delivered them (a past due time is delivered
    # at once), and no delivery of them can be older than the write, so the ledger's memory counts from it (the
    # reminder was lost: judged from its own time, the settle took it for forgotten)
    assert offsets_sent() == [-86400, 0]
    # AND the same batch delivered again a day later delivers nothing more (the claims' entries are there)
    later = written + timedelta(days=1)
    ttl_removes_expired(env, later)
    handled(env, later, batch)
    assert offsets_sent() == []
    # AND redriven once the ledger has forgotten those deliveries (TTL removed their entries after the window),
    # nothing either
    redriven = written + WINDOW + timedelta(hours=2)
    assert ttl_removes_expired(env, redriven) == 2
    handled(env, redriven, batch)
    assert offsets_sent() == []


def test_the_handler_and_reconcile_share_one_horizon() -> None:
    """One definition of how long the ledger remembers (st_core.idempotency.remembered), used by the live handler
    and by reconcile and backfill (backfill.timed.remembered, with the narrowest window they have run with)."""
    import backfill.timed
    from st_core.idempotency import remembered

    # A run whose narrowest window (backfill.timed.memory_seconds, read once per run) is the default.
    run: Any = type("Run", (), {"memory": WINDOW.total_seconds()})()
    for age in (timedelta(0), WINDOW - timedelta(minutes=61), WINDOW - timedelta(minutes=59), WINDOW):
        expected = remembered(DUE, DUE + age, WINDOW.total_seconds())
        assert backfill.timed.remembered(run, DUE, DUE + age) is expected
    assert remembered(DUE, DUE + WINDOW - timedelta(minutes=61), WINDOW.total_seconds())
    assert not remembered(DUE, DUE + WINDOW - timedelta(minutes=59), WINDOW.total_seconds())


# -- a recurring item written every few seconds --------------------------------------------------------------------


class RecurringScheduler:
    """EventBridge Scheduler running the group's recurring schedules (localcloud.recurring's model): each firing at
    an instant drawn anywhere in its minute, within StartDate and EndDate; a schedule changed counts its firings
    from the change, never running one it missed. What it runs goes to the target queue with its scheduled time."""

    def __init__(self, env: Env, seed: int) -> None:
        from localcloud.recurring import RecurringTicker

        self.env = env
        self.random = random.Random(seed)
        self.instants: dict[str, float] = {}
        self.ticker = RecurringTicker(self._instant)
        self.fired: list[str] = []

    def _instant(self, what: str, scheduled: float) -> float:
        if what not in self.instants:
            minute = scheduled - scheduled % 60
            self.instants[what] = minute + self.random.uniform(0, 59.999)
        return self.instants[what]

    def tick(self, now: datetime) -> None:
        from localcloud.recurring import render_input

        for schedule in self.env.schedules():
            fired = self.ticker.due(schedule["Name"], schedule, now)
            if fired is not None:
                body = render_input(schedule["Target"]["Input"], scheduled=fired, arn=schedule["Arn"], execution="e")
                self.env.sqs.send_message(QueueUrl=self.env.due_queue_url, MessageBody=body)
                self.fired.append(iso(fired))

    def instants_after(self, now: datetime) -> list[datetime]:
        """When the firings lined up next will run, those still to come after `now`."""
        lined_up = [(key, entry.scheduled) for key, entry in self.ticker.pending.items() if entry.scheduled]
        moments = [self._instant(f"{key}@{at.isoformat()}", at.timestamp()) for key, at in lined_up]
        # A microsecond on: the datetime of a float instant may round below it, and the ticker would not fire yet.
        return [datetime.fromtimestamp(m, UTC) + timedelta(microseconds=1) for m in moments if m > now.timestamp()]


class Life:
    """A recurring item's minutes: the app's writes at the times `writes` holds (more are added as it goes), each
    handled at once by the function (its sleeps move the clock), Scheduler ticking every second, and a consumer
    that writes the item back a few seconds after each due event it receives (`write_back`)."""

    def __init__(self, env: Env, expression: str, seed: int, *, write_back: bool) -> None:
        self.env = env
        self.expression = expression
        self.seed = seed
        self.draw = random.Random(seed)
        self.scheduler = RecurringScheduler(env, seed)
        self.write_back = write_back
        self.clock = DUE + timedelta(seconds=17)
        self.begin = self.clock
        self.writes: list[datetime] = [self.clock]
        self.written = 0
        self.received: dict[str, list[tuple[str, datetime]]] = {}
        zoned(env)

    def sleep(self, seconds: float) -> None:
        self.clock += timedelta(seconds=seconds)

    def write(self) -> None:
        self.env.put({"PK": "u", "SK": "job", "dueAt": self.expression, "timeZone": "UTC", "n": self.written})
        batch = self.env.event(at=self.clock)
        response = eventbridge.handle_batch(batch, self.env.config, now=lambda: self.clock, sleep=self.sleep)
        assert response == {"batchItemFailures": []}
        self.written += 1

    def collect(self) -> None:
        for message in self.env.messages(self.env.due_queue_url):
            self.received.setdefault(message["dueAt"], []).append((message["occurrenceId"], self.clock))
            if self.write_back:
                self.writes.append(self.clock + timedelta(seconds=self.draw.uniform(0.5, 3)))

    def run(self, minutes: int, steady: bool) -> None:
        """Event by event: each write when its time comes (Scheduler then sees the changed schedule at once), each
        firing at its instant, until `minutes` have passed."""
        end = self.begin + timedelta(minutes=minutes)
        while self.clock < end:
            self.writes.sort()
            if self.writes and self.writes[0] <= self.clock:
                self.writes.pop(0)
                self.write()
                if steady:
                    self.writes.append(self.clock + timedelta(seconds=self.draw.uniform(1, 7)))
            self.scheduler.tick(self.clock)
            self.collect()
            if not (self.writes and min(self.writes) <= self.clock):
                coming = [w for w in self.writes if w > self.clock] + self.scheduler.instants_after(self.clock)
                self.clock = min([end, *coming])

    def firings(self, step: int, until: datetime) -> list[str]:
        """The rule's firings (every `step` s on its grid) from the first whole minute after the item came."""
        first = self.begin.replace(second=0) + timedelta(minutes=1)
        while first.timestamp() % step:
            first += timedelta(minutes=1)
        return [
            iso(first + timedelta(seconds=step * k)) for k in range(int((until - first).total_seconds()) // step + 1)
        ]

    def assert_each_once(self, expected: list[str]) -> None:
        """Each firing reached the target exactly once (Scheduler's or the handler's, under the one
        occurrenceId), never before its time."""
        got = {due: copies for due, copies in self.received.items() if due in expected}
        assert sorted(got) == expected, f"lost {sorted(set(expected) - set(got))} (SCHEDULER_SEED={self.seed})"
        assert {due: c for due, c in got.items() if len(c) != 1} == {}, f"doubled (SCHEDULER_SEED={self.seed})"
        for due, ((occurrence, at), *_) in got.items():
            assert occurrence.endswith(f"@{due}") and at >= datetime.fromisoformat(due.replace("Z", "+00:00")), due


@pytest.mark.parametrize(
    ("expression", "minutes"),
    [("rate(1 minute)", 5), ("rate(2 minutes)", 8), ("cron(* * * * ? *)", 5)],
)
def test_a_recurring_item_written_every_few_seconds_loses_no_firing_and_doubles_none(
    env: Env, expression: str, minutes: int
) -> None:
    # GIVEN a recurring item whose app writes it every 1 to 7 s (a status, a counter), each write handled at once,
    # a consumer writing it back after each firing, Scheduler firing anywhere in each firing's minute
    life = Life(env, expression, SEED, write_back=True)
    life.run(minutes, steady=True)
    # THEN every firing reached the target exactly once, never early (they were lost: each update started the
    # schedule past the next firing, and writes every few seconds stopped the item for good)
    step = 120 if expression == "rate(2 minutes)" else 60
    life.assert_each_once(life.firings(step, life.clock - timedelta(minutes=1)))
    assert life.written > minutes * 60 / 5


@pytest.mark.parametrize("expression", ["rate(2 minutes)", "cron(0/2 * * * ? *)"])
def test_writes_before_some_firings_and_write_backs_after_each_deliver_every_firing_once(
    env: Env, expression: str
) -> None:
    # GIVEN a recurring item every two minutes, written by the app a few seconds before every other firing (and
    # again inside its minute), at random in the quiet minutes between, and written back by its consumer seconds after
    # every firing it receives: some firings are Scheduler's, some are taken from it by an update
    life = Life(env, expression, SEED, write_back=True)
    firings = life.firings(120, life.begin + timedelta(minutes=12))
    for index, firing in enumerate(datetime.fromisoformat(f.replace("Z", "+00:00")) for f in firings):
        if index % 2:
            life.writes.append(firing - timedelta(seconds=life.draw.uniform(1.5, 9.5)))
            life.writes += [
                firing + timedelta(seconds=life.draw.uniform(0, 59)) for _ in range(life.draw.randint(0, 2))
            ]
        life.writes += [firing + timedelta(seconds=life.draw.uniform(61, 109)) for _ in range(life.draw.randint(0, 3))]
    life.run(13, steady=False)
    # THEN each reached the target once: a consumer's write-back inside a firing's minute doubles none, an update
    # in the seconds before one loses none
    expected = [f for f in firings if f <= iso(life.clock - timedelta(minutes=1))]
    life.assert_each_once(expected)
    by_scheduler = [f for f in expected if f in life.scheduler.fired]
    assert 0 < len(by_scheduler) < len(expected), f"both paths run (SCHEDULER_SEED={life.seed})"


# -- a new rule's record parked, redriven days later ---------------------------------------------------------------

HOUR = DUE.replace(minute=0) + timedelta(hours=1)  # a firing of rate(1 hour) (on the hour)


def test_a_new_rules_record_redriven_days_later_sends_the_firing_it_missed_not_one_scheduler_ran(env: Env) -> None:
    # GIVEN an item given an hourly rule 90 s before a firing, its record reaching the function 20 s after it: the
    # schedule is made (it first fires at the next hour), and the firing it missed is the handler's to send
    zoned(env).put({"PK": "u", "SK": "hourly", "dueAt": "rate(1 hour)", "timeZone": "UTC"})
    batch = env.event(at=HOUR - timedelta(seconds=90))

    def refuse(params: dict[str, Any], **_: Any) -> None:
        if env.due_queue_url.rsplit("/", 1)[-1] in json.dumps(params, default=str):  # the serialized request
            raise ClientError(
                {"Error": {"Code": "AWS.SimpleQueueService.NonExistentQueue", "Message": "injected"}}, "SendMessage"
            )

    # AND the target refuses it for good (a queue deleted by mistake): the record is parked with the reason
    events = CLIENTS.get("sqs").meta.events
    events.register("before-call.sqs.SendMessage", refuse)
    try:
        response = eventbridge.handle_batch(copy.deepcopy(batch), env.config, now=lambda: HOUR + timedelta(seconds=20))
    finally:
        events.unregister("before-call.sqs.SendMessage", refuse)
    assert response == {"batchItemFailures": []}
    (parked,) = env.messages(env.poison_url)
    assert "NonExistentQueue" in parked["reason"]
    (schedule,) = env.schedules()
    assert schedule["StartDate"] == HOUR + timedelta(hours=1)  # Scheduler runs every firing from the next hour on
    # WHEN the queue is back and the operator redrives the record three days later, once DynamoDB's TTL has removed
    # what had expired in the ledger by then
    later = HOUR + timedelta(days=3, minutes=7)
    ttl_removes_expired(env, later)
    handled(env, later, batch)
    # THEN the firing the schedule missed is sent, once; not the latest one, which Scheduler ran
    assert sent(env) == [iso(HOUR)]
    handled(env, later + timedelta(minutes=5), batch)  # redriven again: nothing more
    assert sent(env) == []


@pytest.mark.parametrize("lag", [77, -4], ids=["handled-after-scheduler-ran-it", "handled-before-it"])
def test_a_rule_changed_just_before_a_firing_both_rules_share_delivers_that_firing_once(env: Env, lag: int) -> None:
    # GIVEN a daily item (it fires at midnight UTC), its schedule made hours before midnight
    midnight = (DUE + timedelta(days=1)).replace(hour=0, minute=0)
    scheduler = RecurringScheduler(env, SEED)
    zoned(env).put({"PK": "u", "SK": "daily", "dueAt": "rate(1 day)", "timeZone": "UTC"})
    handled(env, midnight - timedelta(hours=3))
    scheduler.tick(midnight - timedelta(hours=3))
    # AND the app gives it an hourly rule five seconds before midnight (both rules fire then, under one
    # occurrenceId), its record reaching the function 77 s after midnight (Lambda's lag), once Scheduler ran the
    # daily firing, or 4 s before midnight
    env.put({"PK": "u", "SK": "daily", "dueAt": "rate(1 hour)", "timeZone": "UTC"})
    batch = env.event(at=midnight - timedelta(seconds=5))
    clock = [midnight + timedelta(seconds=lag)]
    if lag > 0:
        scheduler.tick(midnight + timedelta(seconds=60))

    def sleep(seconds: float) -> None:
        clock[0] += timedelta(seconds=seconds)

    # WHEN the function handles it
    response = eventbridge.handle_batch(batch, env.config, now=lambda: clock[0], sleep=sleep)
    assert response == {"batchItemFailures": []}
    scheduler.tick(midnight + timedelta(seconds=60))
    # THEN midnight reached the target once: Scheduler's when it ran before the update (the handler sent it again
    # as a firing the new rule missed: only a start or end change counted as the old schedule having fired it), the
    # handler's when the update took it from Scheduler
    assert sent(env) == [iso(midnight)]
    assert scheduler.fired == ([iso(midnight)] if lag > 0 else [])
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == "rate(1 hour)" and schedule["StartDate"] == midnight + timedelta(hours=1)


def test_a_new_rules_record_redriven_after_its_first_scheduled_entry_may_be_gone_sends_nothing(env: Env) -> None:
    # A record redriven later than the rule's first-scheduled entry lives (longer than SQS keeps a parked message, so
    # only from a copy kept elsewhere): when the schedule was made is unknown, so is what it missed; nothing is sent,
    # rather than a firing Scheduler ran.
    zoned(env).put({"PK": "u", "SK": "hourly", "dueAt": "rate(1 hour)", "timeZone": "UTC"})
    batch = handled(env, HOUR - timedelta(seconds=30), env.event(at=HOUR - timedelta(seconds=90)))
    assert sent(env) == []  # the schedule was made before the firing: Scheduler's
    later = HOUR + timedelta(days=20, minutes=7)
    ttl_removes_expired(env, later)
    handled(env, later, batch)
    assert sent(env) == []
    (schedule,) = env.schedules()
    assert json.loads(schedule["Target"]["Input"])["recurrence"] == "rate(1 hour)"
