"""Reconcile of an eventbridge table after drift (changes the stream never carried): a schedule whose item is gone
or holds another time is deleted, an item missing its schedule gets it; --dry-run reports each kind with counts and
examples and changes nothing; a second run finds nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import eventbridge

from tests.backfill.conftest import command, consumer, run, schedules
from tests.backfill.test_eventbridge import expected_name, iso
from tests.handlers.conftest import Env

NOW = datetime.now(UTC).replace(microsecond=0)


def test_reconcile_deletes_stale_schedules_and_makes_missing_ones(env: Env) -> None:
    due = NOW + timedelta(days=2)
    for pk in ("keep", "gone", "moved", "lost"):
        env.put({"PK": pk, "SK": "A", "dueAt": iso(due)})
    eventbridge.handle_batch(env.event(), env.config)
    assert len(schedules(env)) == 4
    # Drift: the stream was off while these happened.
    env.delete("gone", "A")
    env.put({"PK": "moved", "SK": "A", "dueAt": iso(due + timedelta(hours=1))})
    env.scheduler.delete_schedule(Name=expected_name(env, "lost", due), GroupName=env.group)
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "reconcile", "--dry-run")

    assert status == 0, lines
    assert any("2 would delete schedule" in line and "gone" in line for line in lines), lines
    assert any("2 would schedule" in line for line in lines), lines  # "moved" at its new time, and "lost"
    assert len(schedules(env)) == 3

    status, lines = command(function, "reconcile")

    assert status == 0, lines
    assert set(schedules(env)) == {
        expected_name(env, "keep", due),
        expected_name(env, "moved", due + timedelta(hours=1)),
        expected_name(env, "lost", due),
    }
    status, lines = command(function, "reconcile")
    assert status == 0 and any("0 acted on" in line for line in lines), lines


def test_an_item_given_the_time_again_while_its_schedule_is_deleted_keeps_its_schedule(env: Env) -> None:
    """Between reconcile's read (the item holds another time) and its delete, a live write gives the item the old
    time back and the live function makes its schedule: reconcile reads the item again after the delete, and makes
    it again."""
    from typing import Any

    from tests.redrive.conftest import aws

    due = NOW + timedelta(days=2)
    env.put({"PK": "back", "SK": "A", "dueAt": iso(due)})
    eventbridge.handle_batch(env.event(), env.config)
    env.put({"PK": "back", "SK": "A", "dueAt": iso(due + timedelta(hours=1))})  # drift: the stream missed it
    env.stream.read()
    function = consumer(env)
    real = aws(function)
    live = env.config

    class Racing:
        def __init__(self, client: Any) -> None:
            self.client = client

        def __getattr__(self, name: str) -> Any:
            return getattr(self.client, name)

        def delete_schedule(self, **request: Any) -> Any:
            if request["Name"] == expected_name(env, "back", due):
                env.put({"PK": "back", "SK": "A", "dueAt": iso(due)})
                eventbridge.handle_batch(env.event(), live)
            return self.client.delete_schedule(**request)

    def client(service: str) -> Any:
        return Racing(real(service)) if service == "scheduler" else real(service)

    status, lines = command(function, "reconcile", client=client)

    assert status == 0, lines
    assert expected_name(env, "back", due) in schedules(env)


def status_of(env: Env, name: str) -> str | None:
    """The ledger's status of an occurrence (None: no entry)."""
    ledger = env.config["eventbridge"]["ledgerTable"]
    item = env.ddb.get_item(TableName=ledger, Key={"id": {"S": name}}, ConsistentRead=True).get("Item")
    return item["status"]["S"] if item else None


def test_a_schedule_whose_minute_began_is_left_to_scheduler_while_it_may_still_be_retrying(env: Env) -> None:
    """The item moved after its due time while Scheduler was still retrying the schedule's target (throttled or
    down: Scheduler keeps the schedule and retries for up to 24 h, then dead-letters). The live cancel leaves it to
    run; so does reconcile, minutes and hours later: deleting it would end the retries with nothing dead-lettered and
    the marker claiming the occurrence, so nothing would deliver it. Once its retries are over, a schedule still there
    will never run: it is deleted, its marker kept.
    Before: reconcile deleted it minutes after its minute, and the occurrence was never delivered."""
    from backfill.sweep import RETRIES_MARGIN_SECONDS

    env.configure(schedule_max_event_age_seconds=86400)  # Scheduler's longest: retries for 24 h
    due = NOW.replace(second=0) - timedelta(minutes=10)
    env.put({"PK": "busy", "SK": "A", "dueAt": iso(due)})
    eventbridge.handle_batch(env.event(), env.config, now=lambda: due - timedelta(days=1))
    name = expected_name(env, "busy", due)
    env.put({"PK": "busy", "SK": "A", "dueAt": iso(due + timedelta(days=1))})  # moved, 5 minutes after its time
    eventbridge.handle_batch(env.event(), env.config, now=lambda: due + timedelta(minutes=5))
    assert name in schedules(env) and status_of(env, name) == "SCHEDULED"  # the live cancel left it to run
    function = consumer(env)
    retries_over = timedelta(seconds=86400 + RETRIES_MARGIN_SECONDS)

    for after in (
        timedelta(seconds=-0.5),
        timedelta(minutes=10),
        timedelta(hours=20),
        retries_over - timedelta(seconds=1),
    ):
        at = (due + after).timestamp()
        _, finished, lines = run(env, function, command="reconcile", now=lambda: at)  # noqa: B023 (called here)
        assert finished, lines
        assert name in schedules(env) and status_of(env, name) == "SCHEDULED", (after, lines)

    _, finished, lines = run(env, function, command="reconcile", now=lambda: (due + retries_over).timestamp())
    assert finished and name not in schedules(env), lines
    assert status_of(env, name) == "SCHEDULED"  # it may have run: a return to that time is not delivered again


def test_a_schedule_deleted_before_its_minute_takes_its_marker_with_it(env: Env) -> None:
    """The other side of the rule, as the live cancel has it: a schedule whose item left its time is deleted up to
    the second before its minute (less the clocks' skew), and its marker goes with it."""
    due = NOW.replace(second=0) + timedelta(hours=1)
    env.put({"PK": "moved", "SK": "A", "dueAt": iso(due)})
    eventbridge.handle_batch(env.event(), env.config, now=lambda: due - timedelta(days=1))
    name = expected_name(env, "moved", due)
    env.put({"PK": "moved", "SK": "A", "dueAt": iso(due + timedelta(days=1))})
    env.stream.read()  # drift: the stream missed the move
    function = consumer(env)

    _, finished, lines = run(env, function, command="reconcile", now=lambda: (due - timedelta(seconds=1.5)).timestamp())

    assert finished and name not in schedules(env), lines
    assert status_of(env, name) is None


def forget(env: Env, after: timedelta = timedelta(hours=49)) -> int:
    """DynamoDB's TTL on the ledger, `after` from now: every entry whose `expiresAt` has passed by then is deleted
    (an entry without one stays). The number deleted."""
    ledger = env.config["eventbridge"]["ledgerTable"]
    horizon = (NOW + after).timestamp()
    gone = 0
    for item in env.ddb.scan(TableName=ledger, ConsistentRead=True)["Items"]:
        if "expiresAt" in item and float(item["expiresAt"]["N"]) < horizon:
            env.ddb.delete_item(TableName=ledger, Key={"id": item["id"]})
            gone += 1
    return gone


def test_a_past_due_item_whose_delivery_the_ledger_forgot_is_reported_not_delivered_again(env: Env) -> None:
    """Backfill's first run delivers a past-due item once; 48 hours on, DynamoDB's TTL has removed the ledger's
    entry. Reconcile, and a later backfill, report it and deliver nothing; `--deliver-past-due` delivers it, as the
    operator asked."""
    from backfill.timed import FORGOTTEN

    from tests.backfill.test_eventbridge import delivered

    env.config["eventbridge"]["existingTable"] = True  # the items predate the stack: the first run delivers "late"
    env.put({"PK": "late", "SK": "A", "dueAt": iso(NOW - timedelta(days=3))})
    env.put({"PK": "next", "SK": "A", "dueAt": iso(NOW + timedelta(days=5))})
    env.stream.read()
    function = consumer(env)
    status, lines = command(function, "backfill")
    assert status == 0, lines
    assert [m["keys"]["PK"] for m in delivered(env)] == ["late"]
    assert forget(env) == 1  # the delivery's entry ("next"'s schedule marker lives until its own time + 48 h)

    for args in (("reconcile",), ("reconcile", "--dry-run"), ("backfill",)):
        status, lines = command(function, *args)
        assert status == 0, lines
        assert any(f"1 {FORGOTTEN}" in line and "late" in line for line in lines), lines
        assert delivered(env) == []

    status, lines = command(function, "reconcile", "--deliver-past-due")
    assert status == 0, lines
    assert [m["keys"]["PK"] for m in delivered(env)] == ["late"]


def test_a_past_due_item_never_delivered_is_delivered_while_the_ledger_would_remember_it(env: Env) -> None:
    """Written while the stream was off, an hour after its time: within the ledger's window its absence from the
    ledger means it was never delivered, so reconcile delivers it (once)."""
    from tests.backfill.test_eventbridge import delivered

    env.put({"PK": "missed", "SK": "A", "dueAt": iso(NOW - timedelta(hours=1))})
    env.stream.read()
    function = consumer(env)
    status, lines = command(function, "reconcile")
    assert status == 0, lines
    assert [m["keys"]["PK"] for m in delivered(env)] == ["missed"]
    status, lines = command(function, "reconcile")
    assert status == 0 and delivered(env) == [], lines


def test_an_offset_forgotten_is_not_delivered_when_its_item_is_fed_for_another(env: Env) -> None:
    """Offsets -3 days and 0: the reminder was delivered long ago and forgotten, the due time's schedule was lost.
    Reconcile makes the schedule through the handler, which delivers every past occurrence the ledger does not
    hold: the forgotten one is marked first, so nothing is delivered."""
    import copy

    from tests.backfill.test_eventbridge import delivered

    config = copy.deepcopy(env.config)
    config["eventbridge"]["offsets"] = [-3 * 86400, 0]
    config["eventbridge"]["existingTable"] = True  # the item predates the stack: the first run delivers the reminder
    env.config = config
    due = NOW + timedelta(hours=3)
    env.put({"PK": "soon", "SK": "A", "dueAt": iso(due)})
    env.stream.read()
    function = consumer(env)
    status, lines = command(function, "backfill")
    assert status == 0 and len(delivered(env)) == 1, lines  # the reminder, two days and 21 hours late
    forget(env)
    for schedule in env.schedules():
        env.scheduler.delete_schedule(Name=schedule["Name"], GroupName=env.group)

    status, lines = command(function, "reconcile")

    assert status == 0, lines
    assert delivered(env) == []
    assert len(env.schedules()) == 1


def test_a_recurring_rule_zone_start_or_end_changed_while_the_stream_was_off_is_repaired(env: Env) -> None:
    from tests.handlers.test_recurring import zoned

    zoned(env)
    start = (NOW + timedelta(days=3)).replace(minute=0, second=0)
    env.put({"PK": "rule", "SK": "A", "dueAt": "cron(0 9 ? * MON *)", "timeZone": "Europe/London"})
    env.put({"PK": "zone", "SK": "A", "dueAt": "cron(0 9 ? * MON *)", "timeZone": "Europe/London"})
    env.put({"PK": "start", "SK": "A", "dueAt": "rate(1 hour)"})
    env.put({"PK": "end", "SK": "A", "dueAt": "rate(1 day)"})
    env.put({"PK": "same", "SK": "A", "dueAt": "rate(1 day)", "recurrenceStart": iso(start)})
    eventbridge.handle_batch(env.event(), env.config)
    before = {s["Name"]: s for s in env.schedules()}
    # Drift: the stream was off while these happened.
    env.put({"PK": "rule", "SK": "A", "dueAt": "cron(30 18 ? * FRI *)", "timeZone": "Europe/London"})
    env.put({"PK": "zone", "SK": "A", "dueAt": "cron(0 9 ? * MON *)", "timeZone": "America/New_York"})
    env.put({"PK": "start", "SK": "A", "dueAt": "rate(1 hour)", "recurrenceStart": iso(start + timedelta(minutes=7))})
    env.put({"PK": "end", "SK": "A", "dueAt": "rate(1 day)", "recurrenceEnd": iso(start + timedelta(days=30))})
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "reconcile", "--dry-run")
    assert status == 0, lines
    assert any("4 would reschedule" in line for line in lines), lines

    status, lines = command(function, "reconcile")

    assert status == 0, lines
    after = {s["Name"]: s for s in env.schedules()}
    assert set(after) == set(before)
    held = {json.loads(s["Target"]["Input"])["keys"]["PK"]: s for s in after.values()}
    assert held["rule"]["ScheduleExpression"] == "cron(30 18 ? * FRI *)"
    assert held["zone"]["ScheduleExpressionTimezone"] == "America/New_York"
    assert held["start"]["StartDate"] == start + timedelta(minutes=7)
    assert held["end"]["EndDate"] == start + timedelta(days=30)
    status, lines = command(function, "reconcile")
    assert status == 0 and any("0 acted on" in line for line in lines), lines


def test_reconcile_reports_due_attributes_no_filter_can_match_and_feeds_unusable_ones(env: Env) -> None:
    """A map or a list matches no leaf filter, so the function never saw the item: reported with its keys. A
    boolean passes the mapping's filter and is parked there, so reconcile feeds it to be parked the same way."""
    typed = {"map": {"M": {"at": {"S": iso(NOW)}}}, "list": {"L": [{"S": iso(NOW)}]}, "flag": {"BOOL": True}}
    for pk, value in typed.items():
        env.ddb.put_item(TableName=env.table, Item={"PK": {"S": pk}, "SK": {"S": "A"}, "dueAt": value})
    env.put({"PK": "plain", "SK": "A"})
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "reconcile", "--dry-run")

    assert status == 0, lines
    [unseen] = [line for line in lines if "due attribute is a map or a list" in line]
    assert unseen.split()[0] == "2" and '"map"' in unseen and '"list"' in unseen, unseen
    assert any("1 would park (unusable due time)" in line for line in lines), lines
    assert any("1 no due time" in line for line in lines), lines


def test_a_raised_window_does_not_make_reconcile_deliver_again_what_the_ledger_forgot_under_the_old_one(
    env: Env,
) -> None:
    """A delivery's entry keeps the expiry it was written with (48 h here). The window is raised to 7 days; 50 hours
    after the delivery DynamoDB's TTL has removed the entry, and the occurrence is well within the new window. The
    ledger never held it for 7 days: reconcile judges it by the narrowest window it has run with (recorded in the
    ledger), reports it, and delivers nothing.
    Before: reconcile judged by the new window, took the missing entry for "never delivered" and delivered again."""
    import time

    from backfill.timed import FORGOTTEN

    from tests.backfill.test_eventbridge import delivered

    env.put({"PK": "missed", "SK": "A", "dueAt": iso(NOW - timedelta(hours=1))})  # written while the stream was off
    env.stream.read()
    function = consumer(env)
    status, lines = command(function, "reconcile")
    assert status == 0 and [m["keys"]["PK"] for m in delivered(env)] == ["missed"], lines

    env.configure(idempotency_window_seconds=7 * 86400)  # raised (the stack deployed again)
    assert forget(env, after=timedelta(hours=50)) == 1  # TTL: the delivery's entry is gone
    later = time.time() + 50 * 3600

    tally, finished, lines = run(env, function, command="reconcile", now=lambda: later)

    assert finished and delivered(env) == [], lines
    assert tally.kinds.get(FORGOTTEN) == 1 and "missed" in tally.examples[FORGOTTEN][0], tally.to_json()
    from backfill.timed import WINDOW

    ledger = env.config["eventbridge"]["ledgerTable"]
    recorded = env.ddb.get_item(TableName=ledger, Key={"id": {"S": WINDOW}})["Item"]["seconds"]["N"]
    assert recorded == "172800"  # the narrowest window a run has seen, kept after the raise


def test_a_recurring_schedule_of_second_precision_whose_item_is_gone_is_deleted(env: Env) -> None:
    """precision="second": the recurring schedule's input is a release message with Scheduler's placeholders still
    in it (no firing time yet): reconcile reads the item's keys from it and deletes the schedule of a deleted item,
    and leaves the live item's alone."""
    from tests.lifetime.world import second_precision

    second_precision(env)
    for pk in ("kept", "gone"):
        env.put({"PK": pk, "SK": "A", "dueAt": "rate(1 hour)"})
    eventbridge.handle_batch(env.event(), env.config)
    assert all("<aws.scheduler.scheduled-time>" in s["Target"]["Input"] for s in env.schedules())
    env.delete("gone", "A")  # the stream was off
    env.stream.read()

    status, lines = command(consumer(env), "reconcile")

    assert status == 0, lines
    (left,) = env.schedules()
    assert json.loads(left["Target"]["Input"])["scheduledTableRelease"]["keys"]["PK"] == {"S": "kept"}
