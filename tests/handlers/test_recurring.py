"""Recurring schedules from data (`eventbridge` mode): the time attribute holds a Scheduler `rate(...)` or
`cron(...)` expression, read in the item's time zone, with optional start and end attributes."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

import eventbridge
import pytest
from st_core.clients import CLIENTS
from st_core.timeparse import parse_due

from tests.handlers.conftest import Env
from tests.handlers.test_eventbridge import at, iso

WEEKLY = "cron(0 9 ? * MON *)"
NOW = datetime.now(UTC).replace(microsecond=0)


def zoned(env: Env) -> Env:
    """The component's runtime config for `time_zone_attribute="timeZone"` and the default start/end names."""
    config = copy.deepcopy(env.config)
    config["eventbridge"].update(
        {"timeZoneAttribute": "timeZone", "startAttribute": "recurrenceStart", "endAttribute": "recurrenceEnd"}
    )
    env.config = config
    return env


def item(**extra: Any) -> dict[str, Any]:
    return {"PK": "u", "SK": "weekly", "dueAt": WEEKLY, "timeZone": "Europe/London", **extra}


def run(env: Env) -> dict[str, Any]:
    batch = env.event()
    assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    return batch


def test_a_recurring_item_gets_one_schedule_that_stays_and_carries_the_scheduled_time(env: Env) -> None:
    zoned(env).put(item(name="Ada"))
    run(env)
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == WEEKLY
    assert schedule["ScheduleExpressionTimezone"] == "Europe/London"
    assert schedule["ActionAfterCompletion"] == "NONE"  # a recurring schedule must outlive its first firing
    assert "StartDate" not in schedule and "EndDate" not in schedule
    event = json.loads(schedule["Target"]["Input"])
    # Scheduler replaces this with each firing's time; the expression and zone say which rule it came from.
    assert event["dueAt"] == "<aws.scheduler.scheduled-time>"
    assert (event["recurrence"], event["timeZone"]) == (WEEKLY, "Europe/London")
    assert event["keys"] == {"PK": "u", "SK": "weekly"} and event["item"]["name"] == "Ada"
    assert env.messages(env.due_queue_url) == []  # nothing delivered by the function itself


def test_changing_the_expression_or_zone_updates_the_same_schedule(env: Env) -> None:
    zoned(env).put(item())
    run(env)
    (first,) = env.schedules()
    env.put(item(dueAt="cron(30 18 ? * FRI *)", timeZone="America/New_York"))
    run(env)
    (second,) = env.schedules()
    assert second["Name"] == first["Name"]
    assert (second["ScheduleExpression"], second["ScheduleExpressionTimezone"]) == (
        "cron(30 18 ? * FRI *)",
        "America/New_York",
    )


def test_removing_the_item_or_its_recurrence_deletes_the_schedule(env: Env) -> None:
    zoned(env).put(item())
    run(env)
    env.delete("u", "weekly")
    removal = run(env)
    assert env.schedules() == []
    assert eventbridge.handle_batch(removal, env.config) == {"batchItemFailures": []}  # redelivered: still nothing
    # An item that goes from a recurrence to a one-time time: the recurring schedule goes, an at() one comes.
    env.put(item())
    run(env)
    once = NOW + timedelta(days=2)
    env.put(item(dueAt=iso(once), timeZone="UTC"))
    run(env)
    assert [s["ScheduleExpression"] for s in env.schedules()] == [at(once)]


def test_a_redelivered_batch_repeats_only_idempotent_calls(env: Env) -> None:
    zoned(env).put(item())
    env.put(item(dueAt="rate(2 hours)"))
    env.delete("u", "weekly")
    env.put(item(dueAt="rate(1 day)"))
    batch = run(env)
    assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == "rate(1 day)"
    # Lambda's retry from a sequence number in the middle, with every record after it.
    batch["Records"] = batch["Records"][2:]
    assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    assert [s["ScheduleExpression"] for s in env.schedules()] == ["rate(1 day)"]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"dueAt": "cron(0 9 * * MON *)"}, "exactly one of day-of-month and day-of-week must be '?'"),
        ({"dueAt": "cron(0 9 ? * MON)"}, "5 fields, not six"),
        ({"dueAt": "rate(1 minutes)"}, "the unit is singular for 1"),
        ({"dueAt": "rate(0 hours)"}, "a rate is a positive whole number"),
        ({"timeZone": "Europe/Londn"}, "time zone 'Europe/Londn' is not an IANA zone name"),
        ({"timeZone": 5}, "time zone attribute 'timeZone' must be a string"),
        ({"recurrenceStart": "soon"}, "recurrenceStart: due time 'soon' is not ISO-8601"),
        (
            {"recurrenceStart": iso(NOW + timedelta(days=9)), "recurrenceEnd": iso(NOW + timedelta(days=2))},
            "recurrence ends",
        ),
    ],
)
def test_a_bad_recurrence_is_parked_with_its_reason_and_makes_nothing(
    env: Env, changes: dict[str, Any], reason: str
) -> None:
    zoned(env).put(item(**changes))
    run(env)
    (parked,) = env.messages(env.poison_url)
    assert reason in parked["reason"], parked["reason"]
    assert env.schedules() == []


def test_a_bad_new_recurrence_on_a_scheduled_item_keeps_nothing_stale(env: Env) -> None:
    zoned(env).put(item())
    run(env)
    env.put(item(dueAt="cron(nonsense)"))
    run(env)
    # The old rule no longer holds for the item: its schedule is deleted, and the bad value is parked.
    assert env.schedules() == []
    assert "cron(nonsense)" in env.messages(env.poison_url)[0]["reason"]


def test_start_and_end_become_the_schedules_window(env: Env) -> None:
    start, end = NOW + timedelta(days=3), NOW + timedelta(days=60)
    zoned(env).put(item(recurrenceStart=iso(start), recurrenceEnd=iso(end)))
    run(env)
    (schedule,) = env.schedules()
    assert (schedule["StartDate"], schedule["EndDate"]) == (start, end)
    # Scheduler deletes it once it completes at its end (without an end it stays: see the first test).
    assert schedule["ActionAfterCompletion"] == "DELETE"


def test_a_start_already_past_is_dropped_and_a_rate_keeps_its_phase(env: Env) -> None:
    # Scheduler refuses a StartDate more than five minutes ago (tests/aws_rules.py). A cron rule does not depend on
    # its start; a rate does (every 6 hours from 01:00), so it starts at its next firing instead.
    now = datetime.now(UTC)
    started = now.replace(minute=0, second=0, microsecond=0) - timedelta(days=3, hours=5)
    zoned(env).put(item(dueAt="rate(6 hours)", recurrenceStart=iso(started)))
    run(env)
    (schedule,) = env.schedules()
    first = schedule["StartDate"]
    assert first > now and (first - started).total_seconds() % (6 * 3600) == 0
    assert first - datetime.now(UTC) <= timedelta(hours=6, seconds=10)
    env.put(item(dueAt=WEEKLY, recurrenceStart=iso(started), note="x"))
    run(env)
    (schedule,) = env.schedules()
    assert "StartDate" not in schedule


def test_a_recurrence_whose_end_has_passed_has_no_schedule(env: Env) -> None:
    zoned(env).put(item())
    run(env)
    env.put(item(recurrenceEnd=iso(NOW - timedelta(days=1))))
    run(env)
    assert env.schedules() == []
    assert env.messages(env.poison_url) == []


def test_a_write_that_keeps_the_recurrence_and_item_makes_no_call(env: Env) -> None:
    zoned(env).put(item())
    run(env)
    calls: list[str] = []
    # The handler's own client (st_core.clients), not the test's.
    CLIENTS.get("scheduler").meta.events.register(
        "before-call.scheduler.*", lambda model, **_: calls.append(model.name)
    )
    env.put(item())  # the same item written again: DynamoDB still streams a MODIFY
    run(env)
    assert calls == [] and len(env.schedules()) == 1


def test_a_one_time_due_time_without_an_offset_is_read_in_the_items_zone(env: Env) -> None:
    local = (NOW + timedelta(days=5)).replace(hour=9, minute=0, second=0, tzinfo=None)
    zoned(env).put({"PK": "u", "SK": "appt", "dueAt": local.isoformat(), "timeZone": "America/New_York"})
    run(env)
    expected = local.replace(tzinfo=ZoneInfo("America/New_York")).astimezone(UTC)
    assert expected.hour in (13, 14)  # 09:00 in New York: 14:00 UTC in winter, 13:00 in summer
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == at(expected)
    # An explicit offset wins over the zone.
    env.put({"PK": "u", "SK": "appt", "dueAt": local.isoformat() + "Z", "timeZone": "America/New_York"})
    run(env)
    assert [s["ScheduleExpression"] for s in env.schedules()] == [at(local.replace(tzinfo=UTC))]


def test_without_the_option_an_items_zone_attribute_is_not_read(env: Env) -> None:
    local = (NOW + timedelta(days=5)).replace(hour=9, minute=0, second=0, tzinfo=None)
    env.put({"PK": "u", "SK": "appt", "dueAt": local.isoformat(), "timeZone": "Asia/Tokyo"})
    run(env)
    assert [s["ScheduleExpression"] for s in env.schedules()] == [at(local.replace(tzinfo=UTC))]
    env.put(item(timeZone="Asia/Tokyo"))
    run(env)
    (schedule,) = [s for s in env.schedules() if s["ScheduleExpression"] == WEEKLY]
    assert schedule["ScheduleExpressionTimezone"] == "UTC"


def test_wall_times_the_clocks_skip_or_repeat_are_read_as_documented() -> None:
    london = ZoneInfo("Europe/London")
    # 29 March 2026: 01:00 GMT becomes 02:00 BST; 01:30 does not exist and lands as far past the gap as it was in.
    assert parse_due("2026-03-29T01:30:00", london) == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    # 25 October 2026: 01:30 happens twice (BST, then GMT); it is the first.
    assert parse_due("2026-10-25T01:30:00", london) == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert parse_due("2026-07-01T09:00:00", london) == datetime(2026, 7, 1, 8, 0, tzinfo=UTC)


def test_a_rate_without_a_start_runs_on_its_own_grid_and_an_update_does_not_restart_it(env: Env) -> None:
    # Scheduler starts a rate without a StartDate at once, from each create or update: a consumer that writes back
    # after each firing would fire it again with every write. So every rate gets a start on a fixed grid.
    zoned(env).put(item(dueAt="rate(1 hour)"))
    run(env)
    (schedule,) = env.schedules()
    first = schedule["StartDate"]
    now = datetime.now(UTC)
    assert (first.minute, first.second) == (0, 0) and timedelta(0) < first - now <= timedelta(hours=1, seconds=10)
    env.put(item(dueAt="rate(1 hour)", lastFired="just now"))  # the consumer's write-back
    run(env)
    (schedule,) = env.schedules()
    assert schedule["StartDate"] == first


def test_a_rule_scheduler_refuses_for_good_deletes_the_old_schedule_and_is_parked(env: Env) -> None:
    zoned(env).put(item())
    run(env)

    def refuse(**_: Any) -> Any:
        error = {"Error": {"Code": "ValidationException", "Message": "Invalid Schedule Expression"}}
        return SimpleNamespace(status_code=400, headers={}), error

    CLIENTS.get("scheduler").meta.events.register("before-call.scheduler.UpdateSchedule", refuse)
    env.put(item(dueAt="cron(0 9 ? * 2#5 *)"))  # one our parser takes; here Scheduler says no
    run(env)
    assert env.schedules() == []  # the old Monday rule does not go on firing
    assert "Invalid Schedule Expression" in env.messages(env.poison_url)[0]["reason"]


def test_an_empty_zone_is_utc(env: Env) -> None:
    zoned(env).put(item(timeZone=""))
    run(env)
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpressionTimezone"] == "UTC" and env.messages(env.poison_url) == []


def test_a_past_due_time_in_the_items_zone_is_delivered_once_at_once(env: Env) -> None:
    # Delivered directly: the handler reads the item back to check it still holds that time, in its zone.
    local = (NOW - timedelta(days=1)).replace(hour=9, minute=0, second=0, tzinfo=None)
    zoned(env).put({"PK": "u", "SK": "late", "dueAt": local.isoformat(), "timeZone": "America/New_York"})
    batch = run(env)
    assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}  # redelivered
    (event,) = env.messages(env.due_queue_url)
    assert event["dueAt"] == iso(local.replace(tzinfo=ZoneInfo("America/New_York")).astimezone(UTC))


# -- a create replayed after a newer change (issue 24, defect 7) --------------------------------------------------


def test_a_create_replayed_after_the_items_delete_brings_no_schedule_back(env: Env) -> None:
    zoned(env).put(item())
    create = run(env)
    env.delete("u", "weekly")
    run(env)
    assert env.schedules() == []
    # An old batch handled after a newer one (a redrive, any out-of-order replay): it must not make the schedule
    # again, which would then fire every Monday forever for an item that is gone.
    assert eventbridge.handle_batch(copy.deepcopy(create), env.config) == {"batchItemFailures": []}
    assert env.schedules() == []


def test_a_create_replayed_after_the_expression_changed_keeps_the_new_expression(env: Env) -> None:
    zoned(env).put(item())
    create = run(env)
    env.put(item(dueAt="rate(2 hours)", timeZone="UTC"))
    run(env)
    assert eventbridge.handle_batch(copy.deepcopy(create), env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert (schedule["ScheduleExpression"], schedule["ScheduleExpressionTimezone"]) == ("rate(2 hours)", "UTC")


def test_a_replayed_write_of_a_recurring_item_schedules_the_item_as_it_is_now(env: Env) -> None:
    zoned(env).put(item(note="old"))
    first = run(env)
    env.put(item(note="new"))
    run(env)
    assert eventbridge.handle_batch(copy.deepcopy(first), env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert json.loads(schedule["Target"]["Input"])["item"]["note"] == "new"


# -- a firing that came before the schedule existed (issue 28) -----------------------------------------------------

MONDAY = datetime(2030, 1, 7, 9, 0, tzinfo=UTC)  # 09:00 in London in winter: a firing of WEEKLY
NEXT_MONDAY = MONDAY + timedelta(days=7)


def handled(env: Env, batch: dict[str, Any], at: datetime) -> None:
    """The batch handled by the function at `at` (a first delivery, or Lambda delivering it again)."""
    assert eventbridge.handle_batch(copy.deepcopy(batch), env.config, now=lambda: at) == {"batchItemFailures": []}


def test_a_firing_between_the_write_and_the_schedule_is_delivered_once_as_scheduler_would(env: Env) -> None:
    # The item is written 90 s before Monday's firing; its batch reaches the function 20 s into that minute (a slow
    # batch, a retry, a throttled CreateSchedule): the schedule Scheduler makes now first fires next Monday.
    zoned(env).put(item(name="Ada"))
    batch = env.event(at=MONDAY - timedelta(seconds=90))
    handled(env, batch, MONDAY + timedelta(seconds=20))
    (schedule,) = env.schedules()
    (event,) = env.messages(env.due_queue_url)
    # The id and time Scheduler gives that firing (a schedule made inside the firing's minute could run it too: this
    # one starts after it, see test_a_firing_near_the_schedules_creation_is_sent_once_by_the_handler_or_by_scheduler).
    template = json.loads(schedule["Target"]["Input"].replace("<aws.scheduler.scheduled-time>", iso(MONDAY)))
    assert event["occurrenceId"] == template["occurrenceId"] == f"{schedule['Name']}@{iso(MONDAY)}"
    assert event["dueAt"] == iso(MONDAY)
    assert (event["recurrence"], event["timeZone"]) == (WEEKLY, "Europe/London")
    assert event["keys"] == template["keys"] and event["item"]["name"] == "Ada"
    # Lambda delivers the batch again: within the minute, and after the next Monday's firing (which the schedule,
    # there since the first delivery, ran itself). Nothing more from the function.
    handled(env, batch, MONDAY + timedelta(seconds=40))
    handled(env, batch, NEXT_MONDAY + timedelta(minutes=5))
    assert env.messages(env.due_queue_url) == []


def test_a_schedule_made_before_the_firing_leaves_it_to_scheduler_even_when_the_batch_comes_again(env: Env) -> None:
    zoned(env).put(item())
    batch = env.event(at=MONDAY - timedelta(seconds=90))
    handled(env, batch, MONDAY - timedelta(seconds=80))
    handled(env, batch, MONDAY + timedelta(seconds=30))  # redelivered after the firing that Scheduler ran
    assert env.messages(env.due_queue_url) == []


def test_a_write_back_keeping_the_rule_delivers_nothing_and_a_batch_with_both_delivers_once(env: Env) -> None:
    zoned(env).put(item())
    handled(env, env.event(at=MONDAY - timedelta(minutes=5)), MONDAY - timedelta(minutes=5))
    env.put(item(lastFired=iso(MONDAY)))  # the consumer's write-back after Scheduler's firing
    handled(env, env.event(at=MONDAY + timedelta(seconds=5)), MONDAY + timedelta(seconds=30))
    assert env.messages(env.due_queue_url) == []
    # Another item, written before the firing, and changed (same rule) after it, both records in one late batch.
    env.put(item(SK="other"))
    env.put(item(SK="other", lastFired="x"))
    handled(env, env.event(at=MONDAY - timedelta(seconds=30)), MONDAY + timedelta(seconds=50))
    (event,) = env.messages(env.due_queue_url)
    assert event["keys"] == {"PK": "u", "SK": "other"} and event["dueAt"] == iso(MONDAY)


def test_a_late_batch_delivers_only_the_latest_missed_firing(env: Env) -> None:
    zoned(env).put(item())
    handled(env, env.event(at=MONDAY - timedelta(minutes=1)), NEXT_MONDAY + timedelta(hours=2))
    (event,) = env.messages(env.due_queue_url)
    assert event["dueAt"] == iso(NEXT_MONDAY)  # missed firings are not fired in a burst


def test_a_missed_rate_firing_counts_from_the_rates_start(env: Env) -> None:
    start = MONDAY - timedelta(minutes=20)
    zoned(env).put(item(dueAt="rate(1 hour)", recurrenceStart=iso(start)))
    handled(env, env.event(at=MONDAY + timedelta(minutes=39)), MONDAY + timedelta(minutes=41))
    (event,) = env.messages(env.due_queue_url)
    assert event["dueAt"] == iso(start + timedelta(hours=1))
    (schedule,) = env.schedules()
    assert schedule["StartDate"] == start + timedelta(hours=2)  # the next one is Scheduler's


def test_a_firing_before_the_end_is_delivered_though_the_end_has_passed(env: Env) -> None:
    zoned(env).put(item(recurrenceEnd=iso(MONDAY + timedelta(seconds=30))))
    handled(env, env.event(at=MONDAY - timedelta(minutes=1)), MONDAY + timedelta(minutes=1))
    assert env.schedules() == []  # nothing is left to fire
    (event,) = env.messages(env.due_queue_url)
    assert event["dueAt"] == iso(MONDAY)


def test_a_firing_before_the_start_or_before_the_write_is_not_delivered(env: Env) -> None:
    zoned(env).put(item(recurrenceStart=iso(MONDAY + timedelta(seconds=1))))
    handled(env, env.event(at=MONDAY - timedelta(minutes=1)), MONDAY + timedelta(minutes=1))
    zoned(env).put(item(SK="late"))
    handled(env, env.event(at=MONDAY), MONDAY + timedelta(minutes=1))  # written at the firing: after it
    assert env.messages(env.due_queue_url) == []


def test_a_new_rule_catches_up_but_a_changed_end_of_the_same_rule_does_not(env: Env) -> None:
    zoned(env).put(item())
    handled(env, env.event(at=MONDAY - timedelta(days=1)), MONDAY - timedelta(days=1))
    # Only the end changes, handled once the firing's minute was over: the schedule that was there ran it.
    env.put(item(recurrenceEnd=iso(MONDAY + timedelta(days=30))))
    handled(env, env.event(at=MONDAY - timedelta(seconds=30)), MONDAY + timedelta(seconds=62))
    assert env.messages(env.due_queue_url) == []
    # A new rule whose firing came between the write and the schedule: delivered.
    env.put(item(dueAt="cron(1 9 ? * MON *)"))
    handled(env, env.event(at=MONDAY + timedelta(seconds=40)), MONDAY + timedelta(seconds=80))
    (event,) = env.messages(env.due_queue_url)
    assert event["dueAt"] == iso(MONDAY + timedelta(minutes=1))


def test_a_firings_id_becomes_a_step_functions_execution_name_it_takes() -> None:
    from st_core.target_types.stepfunctions import execution_name

    firing = f"{'u-weekly-' + 'a' * 55}@{iso(MONDAY)}"  # a schedule's 64 characters, then the time: colons, 85 long
    name = execution_name(firing)
    assert name != firing and len(name) <= 80 and name.isalnum()
    assert execution_name(firing) == name  # the same firing, the same execution: a copy starts nothing
    plain = "u-weekly-0123456789abcdef01234567"
    assert execution_name(plain) == plain  # an occurrence id is used as it is, as before


def test_a_rule_changed_within_one_late_batch_catches_up_only_the_rule_the_item_holds(env: Env) -> None:
    zoned(env).put(item(dueAt="cron(0 9 ? * MON *)"))  # the item's first rule: Monday 09:00
    env.put(item(dueAt="cron(2 9 ? * MON *)"))  # changed at 09:01 (below) to 09:02, before any schedule was made
    batch = env.event(at=MONDAY + timedelta(minutes=1))
    batch["Records"][0]["dynamodb"]["ApproximateCreationDateTime"] = int((MONDAY - timedelta(minutes=1)).timestamp())
    handled(env, batch, MONDAY + timedelta(minutes=3))
    (event,) = env.messages(env.due_queue_url)
    # 09:00 came while the item held the first rule, but it had left it when the batch was handled: not sent (the
    # limit docs/offsets-and-recurrence.md states); 09:02, of the rule it holds, is.
    assert event["dueAt"] == iso(MONDAY + timedelta(minutes=2)) and event["recurrence"] == "cron(2 9 ? * MON *)"


def test_a_delete_replayed_after_the_item_came_back_keeps_its_new_schedule(env: Env) -> None:
    zoned(env).put(item())
    run(env)
    env.delete("u", "weekly")
    removal = run(env)
    env.put(item(dueAt="cron(30 9 ? * MON *)"))  # the item comes back, with another rule
    run(env)
    # WHEN the delete's batch is delivered again after the re-insert's (Lambda, a redrive)
    assert eventbridge.handle_batch(copy.deepcopy(removal), env.config) == {"batchItemFailures": []}
    # THEN the item's schedule (one per item, whatever its rule) stays: deleting it would silence the item
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == "cron(30 9 ? * MON *)"


def test_a_firing_within_seconds_of_the_schedule_is_sent_at_its_time_by_the_handler_too(env: Env) -> None:
    # Made 3 s before Monday 09:00: as for at() schedules, Scheduler may not fire a schedule stored that close to
    # its time. The handler waits for the firing's time (never early) and sends it, once.
    zoned(env).put(item())
    made = MONDAY - timedelta(seconds=3)
    slept: list[float] = []
    batch = env.event(at=MONDAY - timedelta(seconds=5))
    assert eventbridge.handle_batch(batch, env.config, now=lambda: made, sleep=slept.append) == {
        "batchItemFailures": []
    }
    assert slept == [3.0]
    (event,) = env.messages(env.due_queue_url)
    assert event["dueAt"] == iso(MONDAY)
    handled(env, batch, MONDAY + timedelta(minutes=2))  # delivered again: not sent again
    assert env.messages(env.due_queue_url) == []
    # A rate written 4 s before a firing on its grid: its schedule starts at the next one; the handler sends this one.
    zoned(env).put(item(SK="hourly", dueAt="rate(1 hour)", timeZone="UTC"))
    slept.clear()
    batch = env.event(at=MONDAY + timedelta(minutes=59, seconds=55))
    at = MONDAY + timedelta(minutes=59, seconds=56)
    assert eventbridge.handle_batch(batch, env.config, now=lambda: at, sleep=slept.append) == {"batchItemFailures": []}
    assert slept == [4.0]
    (event,) = env.messages(env.due_queue_url)
    assert event["dueAt"] == iso(MONDAY + timedelta(hours=1))
    (hourly,) = [s for s in env.schedules() if s["ScheduleExpression"] == "rate(1 hour)"]
    assert hourly["StartDate"] == MONDAY + timedelta(hours=2)


def test_a_new_rules_record_delivered_again_leaves_its_schedule_alone(env: Env) -> None:
    # An update in a firing's minute could disturb that firing (Scheduler does not document what it does then), and
    # an unchanged schedule needs none: the ledger says this record's rule already had its schedule made.
    zoned(env).put(item())
    batch = env.event(at=MONDAY - timedelta(minutes=2))
    handled(env, batch, MONDAY - timedelta(minutes=2))
    calls: list[str] = []

    def count(event_name: str, **_: Any) -> None:
        calls.append(event_name.rsplit(".", 1)[-1])

    CLIENTS.get("scheduler").meta.events.register("before-call.scheduler", count)
    try:
        handled(env, batch, MONDAY + timedelta(seconds=20))  # delivered again inside the firing's minute
    finally:
        CLIENTS.get("scheduler").meta.events.unregister("before-call.scheduler", count)
    assert calls == []
    assert env.messages(env.due_queue_url) == []  # and the firing is Scheduler's: the schedule was there before it
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == WEEKLY


def scheduler_first_run(schedule: dict[str, Any], made: datetime) -> datetime | None:
    """The first firing EventBridge Scheduler runs of a recurring schedule stored at `made`: not before its StartDate,
    and any whose minute has not ended by then (Scheduler fires anywhere in the minute, so a schedule made inside a
    firing's minute, or seconds before it, may run it). The local cloud's model of Scheduler (localcloud.recurring)."""
    from localcloud.recurring import next_firing

    return next_firing(schedule, made - timedelta(minutes=1))


@pytest.mark.parametrize(
    ("expression", "written", "handled", "answered", "firing"),
    [
        # A weekly rule written 5 s before Monday 09:00, its schedule made 3 s before (a first backfill, a batch
        # late by seconds): the handler sends 09:00 at its time; Scheduler must not run it too.
        (WEEKLY, MONDAY - timedelta(seconds=5), MONDAY - timedelta(seconds=3), 0.0, MONDAY),
        # The same, made 5 s into the firing's minute: Scheduler may still run it there.
        (WEEKLY, MONDAY - timedelta(seconds=30), MONDAY + timedelta(seconds=5), 0.0, MONDAY),
        # An hourly rate handled 10.5 s before a firing on its grid, CreateSchedule answering 1 s later: the
        # schedule starts at that firing, so the handler must not send it too.
        (
            "rate(1 hour)",
            MONDAY + timedelta(minutes=59, seconds=45),
            MONDAY + timedelta(minutes=59, seconds=49.5),
            1.0,
            MONDAY + timedelta(hours=1),
        ),
    ],
    ids=["cron-3s-before", "cron-inside-its-minute", "rate-slow-create"],
)
def test_a_firing_near_the_schedules_creation_is_sent_once_by_the_handler_or_by_scheduler(
    env: Env, expression: str, written: datetime, handled: datetime, answered: float, firing: datetime
) -> None:
    zoned(env).put(item(dueAt=expression, timeZone="UTC"))
    clock = [handled]

    def scheduler_answered(**_: Any) -> None:
        clock[0] += timedelta(seconds=answered)

    events = CLIENTS.get("scheduler").meta.events
    events.register("after-call.scheduler.CreateSchedule", scheduler_answered)
    try:
        batch = env.event(at=written)

        def sleep(seconds: float) -> None:
            clock[0] += timedelta(seconds=seconds)

        assert eventbridge.handle_batch(batch, env.config, now=lambda: clock[0], sleep=sleep) == {
            "batchItemFailures": []
        }
    finally:
        events.unregister("after-call.scheduler.CreateSchedule", scheduler_answered)
    sent = [e["dueAt"] for e in env.messages(env.due_queue_url)]
    assert all(datetime.fromisoformat(d.replace("Z", "+00:00")) >= firing for d in sent)  # never early
    (schedule,) = env.schedules()
    made = handled + timedelta(seconds=answered)
    by_scheduler = [iso(firing)] if scheduler_first_run(schedule, made) == firing else []
    # Once: by the handler or by Scheduler, never both (the consumer would otherwise get it twice).
    assert sorted(sent + by_scheduler) == [iso(firing)]
    # Lambda delivers the batch again after the firing: nothing more.
    handled_again = firing + timedelta(minutes=2)
    assert eventbridge.handle_batch(copy.deepcopy(batch), env.config, now=lambda: handled_again) == {
        "batchItemFailures": []
    }
    assert env.messages(env.due_queue_url) == []


def test_a_change_made_before_a_firing_and_handled_inside_its_minute_sends_that_firing(env: Env) -> None:
    """Scheduler runs a firing anywhere in its minute: an update handled 30 s into it (the write 30 s before it,
    only the end changed) may land before Scheduler ran it, and the updated schedule starts after it. The handler
    sends it (a second copy with the same id if Scheduler had run it: docs/offsets-and-recurrence.md)."""
    zoned(env).put(item())
    handled(env, env.event(at=MONDAY - timedelta(days=1)), MONDAY - timedelta(days=1))
    env.put(item(recurrenceEnd=iso(MONDAY + timedelta(days=30))))
    handled(env, env.event(at=MONDAY - timedelta(seconds=30)), MONDAY + timedelta(seconds=30))
    (event,) = env.messages(env.due_queue_url)
    assert event["dueAt"] == iso(MONDAY)


def test_a_record_redriven_days_later_still_looks_for_the_firings_just_after_its_write() -> None:
    """The firings an earlier handling may owe come just after the write (its first handling was within the
    stream's 24 h); a `rate(1 minute)` record redriven ten days later must look at those, not at the latest ones."""
    from eventbridge.firings import first_after
    from eventbridge.planning import Recurrence
    from st_core import recurrence

    written = MONDAY + timedelta(seconds=50)
    spec = Recurrence("rate(1 minute)", "UTC")
    found = first_after(spec, recurrence.parse(spec.expression), written, written + timedelta(days=10))
    assert found == [MONDAY + timedelta(minutes=m) for m in (1, 2, 3)]
