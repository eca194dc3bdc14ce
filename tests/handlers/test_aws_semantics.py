"""Every guarantee against the AWS behaviour that threatens it (issue 12).

Records come from moto's real stream shaped exactly as Lambda delivers them (base64 binaries, decimal strings, epoch-
second change times: rule("dynamodb-stream-encoding")); schedules fire the way Scheduler may, anywhere in their
minute, including before the second they name (`SchedulerClock`, seeded: `SCHEDULER_SEED=<n>` replays an order);
batches are delivered again, whole, long after; and AWS's limits and idempotency tokens are enforced on every call
(`tests/aws_rules.py`). Each test here failed on the code before this change."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import aggregate
import boto3
import eventbridge
import polling
import polling_assign
import pytest
import ttl
from st_core.clients import CLIENTS
from st_core.pending import INDEX_NAME
from st_core.timeparse import format_due

from components.targets import QueueTarget
from tests.conftest import REGION
from tests.handlers.conftest import Env, SchedulerClock, Stream
from tests.handlers.test_aggregate import agg_env  # noqa: F401  (fixtures)
from tests.handlers.test_polling import _break_target, polling_env  # noqa: F401
from tests.handlers.test_ttl import ttl_env  # noqa: F401
from tests.iam.enforce import acting

NOW = datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime) -> str:
    return format_due(moment)


def due_at(message: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(message["dueAt"].replace("Z", "+00:00"))


def exact(text: str) -> Any:
    return json.loads(text, parse_float=Decimal)


def switch_table(env: Env, *, pk_type: str = "S", index: bool = False) -> None:
    """Point the env at a fresh table whose partition key has `pk_type` (sort key SK, string)."""
    table = f"t{pk_type}-{env.table}"
    attributes = [("PK", pk_type), ("SK", "S")] + ([("stShard", "N"), ("stDue", "N")] if index else [])
    extra: dict[str, Any] = {}
    if index:
        extra["GlobalSecondaryIndexes"] = [
            {
                "IndexName": INDEX_NAME,
                "KeySchema": [
                    {"AttributeName": "stShard", "KeyType": "HASH"},
                    {"AttributeName": "stDue", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ]
    created = env.ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": n, "AttributeType": t} for n, t in attributes],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        **extra,
    )
    env.table = env.config["table"] = table
    env.stream = Stream(created["TableDescription"]["LatestStreamArn"], boto3.client("dynamodbstreams", REGION))


def poisoned(env: Env) -> list[dict[str, Any]]:
    return env.messages(env.poison_url)


# -- 1. never early ---------------------------------------------------------------------------------------------


def test_eventbridge_never_delivers_before_the_due_second_though_scheduler_fires_anywhere_in_the_minute(
    env: Env,
) -> None:
    clock = SchedulerClock(env)
    base = NOW.replace(second=0) + timedelta(days=1)
    dues = {f"i{n}": base + timedelta(seconds=n * 7 + 1) for n in range(40)}  # odd seconds over several minutes
    for pk, due in dues.items():
        env.put({"PK": pk, "SK": "s", "dueAt": iso(due)})
    assert eventbridge.handle_batch(env.event(), env.config, now=lambda: NOW) == {"batchItemFailures": []}
    ran = clock.fire_due(base + timedelta(days=1))
    fired = {json.loads(s["Target"]["Input"])["keys"]["PK"]: moment for moment, s in ran}
    assert len(fired) == 40, f"seed {clock.seed}"
    early = {pk: (fired[pk], dues[pk]) for pk in dues if fired[pk] < dues[pk]}
    assert early == {}, f"delivered before the due second (seed {clock.seed})"
    late = max((fired[pk] - dues[pk]).total_seconds() for pk in dues)
    assert late < 120  # the documented bound: the due time's minute boundary plus Scheduler's minute
    assert len(env.messages(env.due_queue_url)) == 40


def test_ttl_precise_delete_fired_anywhere_in_its_minute_is_due_and_acts_at_or_after_the_due_second(
    ttl_env: Env,  # noqa: F811
) -> None:
    env = ttl_env
    env.configure(precise=True)
    clock = SchedulerClock(env)
    base = NOW.replace(second=0) + timedelta(hours=2)
    dues = {f"o{n}": base + timedelta(seconds=n * 13 + 5) for n in range(12)}
    for pk, due in dues.items():
        env.put({"PK": pk, "SK": "S", "dueAt": int(due.timestamp())})
    ttl.handle_batch(env.event(), env.config, now=lambda: NOW)
    acted: dict[str, datetime] = {}
    for schedule in sorted(env.schedules(), key=lambda s: s["ScheduleExpression"]):
        moment = clock.instant(schedule)
        clock.run(schedule)  # Scheduler deletes the item at that instant
        waited: list[float] = []
        batch = env.event(at=moment)
        response = ttl.handle_batch(batch, env.config, now=lambda m=moment: m, sleep=waited.append)  # type: ignore[misc]
        assert response == {"batchItemFailures": []}
        (message,) = env.messages(env.due_queue_url)
        acted[message["keys"]["PK"]] = moment + timedelta(seconds=sum(waited))
    assert set(acted) == set(dues), f"lost or cancelled by an early firing (seed {clock.seed})"
    assert all(acted[pk] >= dues[pk] for pk in dues), f"acted before the due second (seed {clock.seed})"


def test_ttl_precise_judges_a_delete_by_when_it_happened_not_when_it_is_processed(ttl_env: Env) -> None:  # noqa: F811
    env = ttl_env
    env.configure(precise=True)
    due = NOW.replace(second=30) + timedelta(hours=1)
    env.put({"PK": "in-minute", "SK": "S", "dueAt": int(due.timestamp())})
    env.put({"PK": "cancelled", "SK": "S", "dueAt": int(due.timestamp())})
    ttl.handle_batch(env.event(), env.config, now=lambda: NOW)
    # A user's delete inside the due minute, 20 s before the due second: a cancel (the schedule never deletes, it
    # fires the item with an UpdateItem, so a delete is never mistaken for it), even when processed after the due time.
    env.delete("in-minute", "S")
    inside = due - timedelta(seconds=20)
    waited: list[float] = []
    ttl.handle_batch(env.event(at=inside), env.config, now=lambda: due + timedelta(minutes=1), sleep=waited.append)
    assert env.messages(env.due_queue_url) == [] and waited == []
    # A user's delete two minutes before: cancelled, even when its batch is processed an hour after the due time.
    env.delete("cancelled", "S")
    batch = env.event(at=due - timedelta(minutes=2))
    assert ttl.handle_batch(batch, env.config, now=lambda: due + timedelta(hours=1)) == {"batchItemFailures": []}
    assert env.messages(env.due_queue_url) == []


def test_polling_never_dispatches_before_a_fractional_due_second(polling_env: Env) -> None:  # noqa: F811
    env = polling_env
    base = NOW + timedelta(minutes=5)
    env.put({"PK": "frac", "SK": "T", "dueAt": base.strftime("%Y-%m-%dT%H:%M:%S") + ".700Z"})
    polling_assign.handle_assign_batch(env.event(), env.config)
    half = base.timestamp() + 0.5  # 0.2 s before the item's time
    assert polling.process(env.config, now=lambda: half).dispatched == 0
    assert polling.process(env.config, now=lambda: base.timestamp() + 1).dispatched == 1


# -- 2. eventbridge: once per occurrence -----------------------------------------------------------------------


def test_a_consumer_that_writes_back_after_each_delivery_gets_each_occurrence_once(env: Env) -> None:
    clock = SchedulerClock(env)
    due = NOW + timedelta(minutes=30, seconds=17)
    env.put({"PK": "appt", "SK": "s", "dueAt": iso(due), "sent": False})
    eventbridge.handle_batch(env.event(at=NOW), env.config, now=lambda: NOW)
    ((fired_at, _),) = clock.fire_due(due + timedelta(minutes=5))
    for n in range(3):  # the consumer marks it sent, then edits it again: each is a MODIFY keeping the due time
        after = fired_at + timedelta(seconds=5 + n)
        env.put({"PK": "appt", "SK": "s", "dueAt": iso(due), "sent": True, "edits": n})
        assert eventbridge.handle_batch(env.event(at=after), env.config, now=lambda a=after: a) == {  # type: ignore[misc]
            "batchItemFailures": []
        }
    assert len(env.messages(env.due_queue_url)) == 1 and env.schedules() == []


def test_a_past_due_item_delivered_now_is_not_delivered_again_by_write_backs(env: Env) -> None:
    env.put({"PK": "late", "SK": "s", "dueAt": iso(NOW - timedelta(minutes=10))})
    eventbridge.handle_batch(env.event(), env.config)
    for n in range(3):
        env.put({"PK": "late", "SK": "s", "dueAt": iso(NOW - timedelta(minutes=10)), "sent": n})
        eventbridge.handle_batch(env.event(), env.config)
    assert len(env.messages(env.due_queue_url)) == 1


def test_an_old_batch_redelivered_after_its_schedule_fired_delivers_nothing(env: Env) -> None:
    clock = SchedulerClock(env)
    due = NOW + timedelta(minutes=3)
    env.put({"PK": "a", "SK": "s", "dueAt": iso(due)})
    batch = env.event(at=NOW)
    eventbridge.handle_batch(batch, env.config, now=lambda: NOW)
    clock.fire_due(due + timedelta(minutes=2))
    assert len(env.messages(env.due_queue_url)) == 1
    # Lambda delivers the same batch again an hour later (a timeout, a retry from its sequence number).
    later = due + timedelta(hours=1)
    assert eventbridge.handle_batch(copy.deepcopy(batch), env.config, now=lambda: later) == {"batchItemFailures": []}
    assert env.messages(env.due_queue_url) == [] and env.schedules() == []


def test_a_new_due_time_is_a_new_occurrence_and_a_change_after_the_due_time_keeps_the_old_one(env: Env) -> None:
    clock = SchedulerClock(env)
    first = NOW + timedelta(minutes=10)
    second = NOW + timedelta(minutes=40)
    env.put({"PK": "a", "SK": "s", "dueAt": iso(first)})
    eventbridge.handle_batch(env.event(at=NOW), env.config, now=lambda: NOW)
    # The user moves it after `first` came, but before its schedule ran (Scheduler's minute, stream lag).
    env.put({"PK": "a", "SK": "s", "dueAt": iso(second)})
    moved = first + timedelta(seconds=1)
    eventbridge.handle_batch(env.event(at=moved), env.config, now=lambda: moved)
    clock.fire_due(second + timedelta(minutes=5))
    assert sorted(m["dueAt"] for m in env.messages(env.due_queue_url)) == [iso(first), iso(second)]


def test_a_change_before_the_due_time_cancels_it(env: Env) -> None:
    clock = SchedulerClock(env)
    first, second = NOW + timedelta(minutes=10), NOW + timedelta(minutes=40)
    env.put({"PK": "a", "SK": "s", "dueAt": iso(first)})
    env.put({"PK": "a", "SK": "s", "dueAt": iso(second)})
    env.put({"PK": "b", "SK": "s", "dueAt": iso(first)})
    env.delete("b", "s")
    eventbridge.handle_batch(env.event(at=NOW), env.config, now=lambda: NOW)
    clock.fire_due(second + timedelta(minutes=5))
    assert [m["dueAt"] for m in env.messages(env.due_queue_url)] == [iso(second)]


def test_insert_and_delete_both_processed_after_the_due_time_deliver_nothing(env: Env) -> None:
    due = NOW + timedelta(minutes=5)
    env.put({"PK": "a", "SK": "s", "dueAt": iso(due)})
    insert = env.event(at=NOW)
    env.delete("a", "s")
    remove = env.event(at=NOW + timedelta(minutes=1))
    late = due + timedelta(minutes=30)  # the stream was backed up: both records arrive after the due time
    eventbridge.handle_batch(insert, env.config, now=lambda: late)
    eventbridge.handle_batch(remove, env.config, now=lambda: late)
    assert env.messages(env.due_queue_url) == []


# -- 3. idempotency token per change ----------------------------------------------------------------------------


def test_delete_and_reinsert_of_the_same_content_leaves_a_live_schedule(env: Env) -> None:
    item = {"PK": "a", "SK": "s", "dueAt": iso(NOW + timedelta(days=1)), "note": "same"}
    env.put(item)
    eventbridge.handle_batch(env.event(), env.config)
    env.delete("a", "s")
    eventbridge.handle_batch(env.event(), env.config)
    env.put(item)
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert len(env.schedules()) == 1


# -- 5. polling: exactly once under redelivery ------------------------------------------------------------------


@pytest.mark.parametrize("state", ["DONE", "RETRY", "FAILED"])
def test_polling_redelivered_batch_does_not_put_a_dispatched_item_back(polling_env: Env, state: str) -> None:  # noqa: F811
    env = polling_env
    env.configure(max_attempts=1 if state == "FAILED" else 3)
    env.put({"PK": "job", "SK": "T", "dueAt": iso(NOW - timedelta(seconds=30))})
    batch = env.event()
    polling_assign.handle_assign_batch(batch, env.config)
    if state in ("RETRY", "FAILED"):
        _break_target(env)
    processor = polling.Processor(env.config, CLIENTS, lambda: NOW.timestamp(), lambda: 900.0)
    with acting("processor", env.config):
        processor.tick()
    before = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": "job"}, "SK": {"S": "T"}})["Item"]
    assert before["stStatus"]["S"] == state
    # Lambda delivers the assigner's batch again (its records are older than what the processor wrote).
    assert polling_assign.handle_assign_batch(copy.deepcopy(batch), env.config) == {"batchItemFailures": []}
    after = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": "job"}, "SK": {"S": "T"}})["Item"]
    assert after == before
    if state == "DONE":
        assert polling.process(env.config, now=lambda: NOW.timestamp() + 3600).dispatched == 0
        assert len(env.messages(env.due_queue_url)) == 1


def test_polling_a_users_new_put_after_done_is_indexed_again(polling_env: Env) -> None:  # noqa: F811
    env = polling_env
    env.put({"PK": "job", "SK": "T", "dueAt": iso(NOW - timedelta(seconds=30))})
    polling_assign.handle_assign_batch(env.event(), env.config)
    polling.process(env.config, now=lambda: NOW.timestamp())
    env.put({"PK": "job", "SK": "T", "dueAt": iso(NOW - timedelta(seconds=10))})  # a real new write
    polling_assign.handle_assign_batch(env.event(), env.config)
    polling.process(env.config, now=lambda: NOW.timestamp())
    assert len(env.messages(env.due_queue_url)) == 2


# -- 6. aggregate: exact totals ----------------------------------------------------------------------------------


def total(env: Env, group: str) -> Any:
    found = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": group}, "SK": {"S": "TOTAL"}}).get("Item")
    return None if found is None else found["totalScore"]


def test_aggregate_moving_a_score_between_groups_subtracts_and_adds(agg_env: Env) -> None:  # noqa: F811
    env = agg_env
    env.configure(group_from="owner")
    env.configure(on_change="adjust")
    env.put({"PK": "SCORE#1", "SK": "S", "owner": "USER#alice", "Score": 10})
    aggregate.handle_batch(env.event(), env.config)
    env.put({"PK": "SCORE#1", "SK": "S", "owner": "USER#bob", "Score": 10})
    batch = env.event()
    assert aggregate.handle_batch(batch, env.config) == {"batchItemFailures": []}
    assert aggregate.handle_batch(copy.deepcopy(batch), env.config) == {"batchItemFailures": []}  # redelivered
    assert total(env, "USER#alice") == {"N": "0"} and total(env, "USER#bob") == {"N": "10"}


def test_aggregate_sums_with_dynamodbs_38_digits(agg_env: Env) -> None:  # noqa: F811
    env = agg_env
    for n, value in enumerate([10**30 + 1, 10**30 + 7]):
        env.put({"PK": f"SCORE#{n}", "SK": "USER#a", "Score": value})
    assert aggregate.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert total(env, "USER#a") == {"N": str(2 * 10**30 + 8)}


@pytest.mark.parametrize(
    ("existing", "score", "reason"),
    [({"S": "oops"}, 5, "cannot be written"), ({"N": "9.99E+125"}, Decimal("9.99E+125"), "cannot be written")],
    ids=["total-not-a-number", "sum-beyond-dynamodb-range"],
)
def test_aggregate_a_total_that_can_never_be_written_is_parked_not_retried(
    agg_env: Env,  # noqa: F811
    existing: dict[str, str],
    score: Any,
    reason: str,
) -> None:
    env = agg_env
    env.ddb.put_item(TableName=env.table, Item={"PK": {"S": "USER#x"}, "SK": {"S": "TOTAL"}, "totalScore": existing})
    env.event()  # the total's own record, which the mapping's filter never lets through
    env.put({"PK": "SCORE#1", "SK": "USER#x", "Score": score})
    env.put({"PK": "SCORE#2", "SK": "USER#y", "Score": 3})
    assert aggregate.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (parked,) = poisoned(env)
    assert reason in parked["reason"] and parked["record"]["dynamodb"]["Keys"]["PK"] == {"S": "SCORE#1"}
    assert total(env, "USER#y") == {"N": "3"} and total(env, "USER#x") == existing


# -- 7. exact values and binary keys -----------------------------------------------------------------------------


def test_number_keys_differing_in_the_tenth_decimal_place_get_different_keys(env: Env) -> None:
    switch_table(env, pk_type="N")
    for pk in (Decimal("1234567890.0000000001"), Decimal("1234567890.0000000002")):
        env.put({"PK": pk, "SK": "s", "dueAt": iso(NOW - timedelta(minutes=1)), "big": 12345678901234567890123456789})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    bodies = [
        exact(message["Body"])
        for message in env.sqs.receive_message(QueueUrl=env.due_queue_url, MaxNumberOfMessages=10)["Messages"]
    ]
    assert sorted(b["keys"]["PK"] for b in bodies) == [
        Decimal("1234567890.0000000001"),
        Decimal("1234567890.0000000002"),
    ]
    assert all(b["item"]["big"] == 12345678901234567890123456789 for b in bodies)


def test_a_binary_partition_key_works_in_eventbridge(env: Env) -> None:
    switch_table(env, pk_type="B")
    env.put({"PK": b"\x00\xffkey", "SK": "s", "dueAt": iso(NOW - timedelta(minutes=1))})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (message,) = env.messages(env.due_queue_url)
    assert message["keys"] == {"PK": "AP9rZXk=", "SK": "s"}  # binary in due events: base64 text


def test_a_binary_partition_key_works_in_polling_assign_and_claim(polling_env: Env) -> None:  # noqa: F811
    env = polling_env
    switch_table(env, pk_type="B", index=True)
    env.put({"PK": b"\x01job", "SK": "T", "dueAt": iso(NOW - timedelta(seconds=5))})
    assert polling_assign.handle_assign_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert polling.process(env.config, now=lambda: NOW.timestamp()).dispatched == 1
    (item,) = env.ddb.scan(TableName=env.table)["Items"]
    assert item["PK"] == {"B": b"\x01job"} and item["stStatus"] == {"S": "DONE"}


def test_a_binary_partition_key_works_in_ttl_repeat_and_precise_delete(ttl_env: Env) -> None:  # noqa: F811
    env = ttl_env
    switch_table(env, pk_type="B")
    env.configure(precise=True)
    env.put({"PK": b"\x02sess", "SK": "S", "dueAt": int(NOW.timestamp()) - 5, "repeatEvery": 3600})
    ttl.handle_batch(env.event(), env.config, now=lambda: NOW)  # due: deleted now by key
    assert ttl.handle_batch(env.event(), env.config, now=lambda: NOW) == {"batchItemFailures": []}
    (message,) = env.messages(env.due_queue_url)
    assert message["keys"]["PK"] == "AnNlc3M="
    (item,) = env.ddb.scan(TableName=env.table)["Items"]  # written back under the same key, not a re-encoded one
    assert item["PK"] == {"B": b"\x02sess"} and int(item["dueAt"]["N"]) > NOW.timestamp()


# -- 8. ttl: an unusable repeat never costs the action ---------------------------------------------------------


@pytest.mark.parametrize("every", [Decimal("0.5"), 10**20, "hourly"])
def test_an_unusable_repeat_fires_the_occurrence_then_parks_the_record(ttl_env: Env, every: Any) -> None:  # noqa: F811
    env = ttl_env
    env.put({"PK": "s", "SK": "S", "dueAt": int(NOW.timestamp()) - 5, "repeatEvery": every})
    env.event()
    env.delete("s", "S")
    removes = [
        {**r, "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"}}
        for r in env.event()["Records"]
    ]
    assert ttl.handle_batch({"Records": removes}, env.config, now=lambda: NOW) == {"batchItemFailures": []}
    assert len(env.messages(env.due_queue_url)) == 1
    (parked,) = poisoned(env)
    assert "fired, but not repeated" in parked["reason"] and "repeatEvery" in parked["reason"]


# -- 9. big items -------------------------------------------------------------------------------------------------


def test_a_big_item_is_scheduled_without_its_body_not_parked(env: Env) -> None:
    env.put({"PK": "big", "SK": "s", "dueAt": iso(NOW + timedelta(days=1)), "blob": "x" * 300_000})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    event = json.loads(schedule["Target"]["Input"])
    assert event["itemTrimmed"] is True and event["item"] == {} and event["keys"] == {"PK": "big", "SK": "s"}
    assert poisoned(env) == []


def test_a_big_item_due_now_reaches_a_256_kib_queue_trimmed(env: Env) -> None:
    env.put({"PK": "big", "SK": "s", "dueAt": iso(NOW - timedelta(minutes=1)), "blob": "x" * 300_000})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (message,) = env.messages(env.due_queue_url)
    assert message["itemTrimmed"] is True and message["dueAt"] == iso(NOW - timedelta(minutes=1))


def test_a_queue_that_takes_1_mib_gets_the_whole_big_item(env: Env) -> None:
    env.sqs.set_queue_attributes(QueueUrl=env.due_queue_url, Attributes={"MaximumMessageSize": str(1024 * 1024)})
    env.rules.queue_limits.clear()
    env.configure(target=QueueTarget(queue_arn=env.due_queue_arn, max_message_bytes=1024 * 1024))
    env.put({"PK": "big", "SK": "s", "dueAt": iso(NOW - timedelta(minutes=1)), "blob": "x" * 300_000})
    eventbridge.handle_batch(env.event(), env.config)
    (message,) = env.messages(env.due_queue_url)
    assert "itemTrimmed" not in message and len(message["item"]["blob"]) == 300_000


def test_polling_dead_letters_a_big_item_instead_of_retrying_it_forever(polling_env: Env) -> None:  # noqa: F811
    env = polling_env
    env.configure(max_attempts=1)
    env.put({"PK": "big", "SK": "T", "dueAt": iso(NOW - timedelta(seconds=5)), "blob": "y" * 390_000})
    polling_assign.handle_assign_batch(env.event(), env.config)
    _break_target(env)
    report = polling.process(env.config, now=lambda: NOW.timestamp())
    assert report.failed == 1
    (dead,) = env.messages(env.target_dlq_arn)
    assert dead["keys"] == {"PK": "big", "SK": "T"} and dead["reason"]


# -- 10. malformed input never crashes a batch ------------------------------------------------------------------


HANDLERS = {
    "eventbridge": lambda env, event: eventbridge.handle_batch(event, env.config),
    "ttl": lambda env, event: ttl.handle_batch(event, env.config),
    "polling": lambda env, event: polling_assign.handle_assign_batch(event, env.config),
    "aggregate": lambda env, event: aggregate.handle_batch(event, env.config),
}


@pytest.fixture(params=sorted(HANDLERS))
def mode_env(request: pytest.FixtureRequest) -> Any:
    name = request.param
    fixture = {"eventbridge": "env", "ttl": "ttl_env", "polling": "polling_env", "aggregate": "agg_env"}[name]
    return name, request.getfixturevalue(fixture)


@pytest.mark.parametrize(
    "event",
    [{}, {"Records": []}, {"source": "aws.events", "detail-type": "Scheduled Event"}, {"Records": None}, None, []],
    ids=["empty-object", "empty-batch", "scheduled-event", "records-null", "null", "list"],
)
def test_a_non_stream_event_gets_a_valid_response(mode_env: Any, event: Any) -> None:
    name, env = mode_env
    assert HANDLERS[name](env, event) == {"batchItemFailures": []}


def test_malformed_records_are_parked_and_the_rest_of_the_batch_is_processed(mode_env: Any) -> None:
    name, env = mode_env
    pk = "SCORE#1" if name == "aggregate" else "good"
    env.put({"PK": pk, "SK": "USER#a", "dueAt": int(NOW.timestamp()) + 3600, "Score": 1})
    (good,) = env.event()["Records"]
    broken = [None, "a string", {"eventName": "INSERT", "dynamodb": None}, {"eventName": "INSERT", "dynamodb": "x"}]
    # A key DynamoDB never writes (keys are S, N or B): found by the bad-input fuzzer once due events were checked
    # against their schema (the item was delivered with `keys.PK: true`).
    bool_key = copy.deepcopy(good)
    bool_key["dynamodb"]["Keys"]["PK"] = {"BOOL": True}
    bool_key["dynamodb"]["SequenceNumber"] = "1"
    response = HANDLERS[name](env, {"Records": [*broken, bool_key, good]})
    assert response == {"batchItemFailures": []}
    reasons = [m["reason"] for m in poisoned(env)]
    assert len(reasons) == 5 and all(reasons)
    assert any("not a string, number or binary" in r for r in reasons)
    if name == "aggregate":
        assert total(env, "USER#a") == {"N": "1"}
    if name == "eventbridge":
        assert len(env.schedules()) == 1


# -- found in review: replays of a delete and a re-insert, phantoms, a move racing the tick -----------------------


def test_a_replayed_delete_and_reinsert_still_leaves_the_occurrence_scheduled(env: Env) -> None:
    """Lambda retries from another record's sequence number: the item's REMOVE and INSERT run again. The replayed
    REMOVE deletes the live schedule; the replayed INSERT must create it again (a reused idempotency token would make
    Scheduler answer success and create nothing)."""
    clock = SchedulerClock(env)
    due = NOW + timedelta(hours=1)
    item = {"PK": "a", "SK": "s", "dueAt": iso(due), "note": "v1"}
    env.put(item)
    eventbridge.handle_batch(env.event(at=NOW), env.config, now=lambda: NOW)
    env.delete("a", "s")
    env.put({**item, "note": "v2"})
    batch = env.event(at=NOW + timedelta(seconds=5))
    for _ in range(2):  # first delivery, then the same records again
        assert eventbridge.handle_batch(copy.deepcopy(batch), env.config, now=lambda: NOW) == {"batchItemFailures": []}
    clock.fire_due(due + timedelta(minutes=5))
    assert [m["item"]["note"] for m in env.messages(env.due_queue_url)] == ["v2"]


def test_a_cancel_replayed_after_the_firing_does_not_open_the_way_to_a_second_delivery(env: Env) -> None:
    clock = SchedulerClock(env)
    due = NOW + timedelta(minutes=5)
    item = {"PK": "a", "SK": "s", "dueAt": iso(due)}
    env.put(item)
    eventbridge.handle_batch(env.event(at=NOW), env.config, now=lambda: NOW)
    env.delete("a", "s")
    env.put(item)
    batch = env.event(at=NOW + timedelta(seconds=5))
    eventbridge.handle_batch(copy.deepcopy(batch), env.config, now=lambda: NOW)
    clock.fire_due(due + timedelta(minutes=2))
    later = due + timedelta(minutes=3)
    eventbridge.handle_batch(copy.deepcopy(batch), env.config, now=lambda: later)  # the batch again, after the firing
    assert len(env.messages(env.due_queue_url)) == 1


def test_ttl_precise_replayed_delete_and_reinsert_keeps_the_new_delete_schedule(ttl_env: Env) -> None:  # noqa: F811
    env = ttl_env
    env.configure(precise=True)
    first, second = NOW + timedelta(hours=1), NOW + timedelta(hours=2)
    env.put({"PK": "a", "SK": "s", "dueAt": int(first.timestamp())})
    ttl.handle_batch(env.event(at=NOW), env.config, now=lambda: NOW)
    env.delete("a", "s")
    env.put({"PK": "a", "SK": "s", "dueAt": int(second.timestamp())})
    batch = env.event(at=NOW + timedelta(minutes=1))
    for _ in range(2):
        ttl.handle_batch(copy.deepcopy(batch), env.config, now=lambda: NOW + timedelta(minutes=1))
    (schedule,) = env.schedules()
    assert json.loads(schedule["Target"]["Input"])["ExpressionAttributeValues"][":due"] == {
        "N": str(int(second.timestamp()))
    }


@pytest.mark.parametrize("on_done", ["mark", "delete"])
def test_polling_never_recreates_a_deleted_item(polling_env: Env, on_done: str) -> None:  # noqa: F811
    env = polling_env
    env.configure(on_done=on_done)
    # A task written and cancelled before the assigner saw it
    env.put({"PK": "cancelled", "SK": "T", "delaySeconds": 60})
    env.delete("cancelled", "T")
    # A task dispatched, then its INSERT delivered again
    env.put({"PK": "done", "SK": "T", "delaySeconds": 30})
    batch = [r for r in env.event(at=NOW)["Records"] if r["eventName"] == "INSERT"]
    polling_assign.handle_assign_batch({"Records": copy.deepcopy(batch)}, env.config, now=lambda: NOW)
    polling.process(env.config, now=lambda: NOW.timestamp() + 90)
    polling_assign.handle_assign_batch({"Records": copy.deepcopy(batch)}, env.config, now=lambda: NOW)
    polling.process(env.config, now=lambda: NOW.timestamp() + 300)
    assert [m["keys"]["PK"] for m in env.messages(env.due_queue_url)] == ["done"]
    keys = sorted(i["PK"]["S"] for i in env.ddb.scan(TableName=env.table)["Items"])
    assert keys == ([] if on_done == "delete" else ["done"])


def test_polling_a_time_moved_just_before_the_tick_runs_at_the_new_time(polling_env: Env) -> None:  # noqa: F811
    env = polling_env
    old, new = NOW + timedelta(seconds=50), NOW + timedelta(hours=1)
    env.put({"PK": "job", "SK": "T", "dueAt": iso(old)})
    polling_assign.handle_assign_batch(env.event(at=NOW), env.config, now=lambda: NOW)
    env.ddb.update_item(
        TableName=env.table,
        Key={"PK": {"S": "job"}, "SK": {"S": "T"}},
        UpdateExpression="SET dueAt = :d",
        ExpressionAttributeValues={":d": {"S": iso(new)}},
    )
    moved = env.event(at=NOW + timedelta(seconds=59))
    # The tick comes before the assigner has seen the move (stream lag): it must not run the item at its old time.
    polling.process(env.config, now=lambda: NOW.timestamp() + 60)
    assert env.messages(env.due_queue_url) == []
    polling_assign.handle_assign_batch(moved, env.config, now=lambda: NOW + timedelta(seconds=61))
    polling.process(env.config, now=lambda: new.timestamp() + 60)
    assert [m["dueAt"] for m in env.messages(env.due_queue_url)] == [iso(new)]


@pytest.mark.parametrize(
    "elsewhere",
    ["arn:aws:dynamodb:{region}:210987654321:table/{table}", "arn:aws:dynamodb:us-west-2:{account}:table/{table}"],
    ids=["another account", "another Region"],
)
def test_a_transaction_across_accounts_or_regions_is_refused_as_aws_refuses_it(env: Env, elsewhere: str) -> None:
    """rule("dynamodb-transaction-one-account"): moto lets a transaction write another account's or Region's table
    by ARN; AWS refuses it whole, so the hooks do too. Within one account and Region, by name or ARN, it passes."""
    account = "123456789012"
    mine = f"arn:aws:dynamodb:{REGION}:{account}:table/{env.table}"

    def put(table: str, key: str) -> dict[str, Any]:
        item = {"PK": {"S": key}, "SK": {"S": "s"}, "dueAt": {"S": "2030-01-01T00:00:00Z"}}
        return {"Put": {"TableName": table, "Item": item}}

    env.ddb.transact_write_items(TransactItems=[put(env.table, "a"), put(mine, "b")])
    other = put(elsewhere.format(region=REGION, account=account, table=env.table), "c")
    with pytest.raises(env.ddb.exceptions.ClientError, match="different AWS accounts or Regions"):
        env.ddb.transact_write_items(TransactItems=[put(env.table, "a"), other])
