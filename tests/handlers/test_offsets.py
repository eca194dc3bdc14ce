"""Several actions per item (`offsets`): one schedule per offset, moved and cancelled with the item."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta

import eventbridge

from tests.handlers.conftest import Env
from tests.handlers.test_eventbridge import at, iso

FUTURE = datetime.now(UTC).replace(microsecond=0) + timedelta(days=3)
OFFSETS = [-86400, -3600, 0]


def with_offsets(env: Env) -> Env:
    config = copy.deepcopy(env.config)
    config["eventbridge"]["offsets"] = OFFSETS
    env.config = config
    return env


def expressions(env: Env) -> list[str]:
    return sorted(s["ScheduleExpression"] for s in env.schedules())


def test_an_item_gets_one_schedule_per_offset_each_saying_which_it_is(env: Env) -> None:
    with_offsets(env).put({"PK": "u", "SK": "appt", "dueAt": iso(FUTURE)})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert expressions(env) == sorted(at(FUTURE + timedelta(seconds=o)) for o in OFFSETS)
    events = sorted((json.loads(s["Target"]["Input"]) for s in env.schedules()), key=lambda e: e["offsetSeconds"])
    assert [e["offsetSeconds"] for e in events] == OFFSETS
    assert {e["dueAt"] for e in events} == {iso(FUTURE)}  # the item's due time; the offset says how far before
    assert len({s["Name"] for s in env.schedules()}) == 3


def test_moving_the_item_moves_every_offset_and_removing_it_cancels_them_all(env: Env) -> None:
    with_offsets(env).put({"PK": "u", "SK": "appt", "dueAt": iso(FUTURE)})
    eventbridge.handle_batch(env.event(), env.config)
    later = FUTURE + timedelta(hours=5)
    env.put({"PK": "u", "SK": "appt", "dueAt": iso(later)})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert expressions(env) == sorted(at(later + timedelta(seconds=o)) for o in OFFSETS)
    env.delete("u", "appt")
    removal = env.event()
    assert eventbridge.handle_batch(removal, env.config) == {"batchItemFailures": []}
    assert env.schedules() == []
    assert eventbridge.handle_batch(removal, env.config) == {"batchItemFailures": []}  # redelivered: still nothing


def test_a_redelivered_batch_leaves_the_same_schedules(env: Env) -> None:
    with_offsets(env).put({"PK": "u", "SK": "appt", "dueAt": iso(FUTURE)})
    batch = env.event()
    eventbridge.handle_batch(batch, env.config)
    first = {s["Name"]: s["ScheduleExpression"] for s in env.schedules()}
    assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    assert {s["Name"]: s["ScheduleExpression"] for s in env.schedules()} == first and len(first) == 3


def test_an_offset_already_past_is_delivered_now_once_and_the_rest_are_scheduled(env: Env) -> None:
    # An appointment 30 minutes away: the day-before and hour-before reminders are late, delivered at once.
    soon = datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=30)
    with_offsets(env).put({"PK": "u", "SK": "appt", "dueAt": iso(soon)})
    batch = env.event()
    assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    assert expressions(env) == [at(soon)]
    delivered = env.messages(env.due_queue_url)
    assert sorted(m["offsetSeconds"] for m in delivered) == [-86400, -3600]
    assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    assert env.messages(env.due_queue_url) == []  # redelivery: the ledger already has them


def test_without_offsets_the_event_has_no_offset_field_and_names_are_unchanged(env: Env) -> None:
    env.put({"PK": "u", "SK": "appt", "dueAt": iso(FUTURE)})
    eventbridge.handle_batch(env.event(), env.config)
    (schedule,) = env.schedules()
    assert "offsetSeconds" not in json.loads(schedule["Target"]["Input"])
    with_offsets(env)
    env.put({"PK": "u", "SK": "appt", "dueAt": iso(FUTURE), "note": "x"})
    eventbridge.handle_batch(env.event(), env.config)
    # The offset-0 schedule is the same one (same name), refreshed; the two new offsets were added.
    assert schedule["Name"] in {s["Name"] for s in env.schedules()} and len(env.schedules()) == 3


def test_a_stream_without_both_images_is_parked_with_the_setting_to_change(env: Env) -> None:
    # An existing table whose stream is KEYS_ONLY: every record is parked, saying what to change; none is lost.
    env.put({"PK": "u", "SK": "appt", "dueAt": iso(FUTURE)})
    batch = env.event()
    for record in batch["Records"]:
        record["dynamodb"]["StreamViewType"] = "KEYS_ONLY"
        record["dynamodb"].pop("NewImage", None)
    assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    (parked,) = env.messages(env.poison_url)
    assert "stream view type is KEYS_ONLY; ScheduledTable needs NEW_AND_OLD_IMAGES" in json.dumps(parked)
    assert env.schedules() == []
