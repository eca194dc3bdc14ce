"""ttl handler against moto. moto never expires items, so a TTL deletion is a real DeleteItem whose REMOVE record,
read back from moto's stream, gets the `userIdentity` DynamoDB's TTL process writes."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
import ttl
from botocore.exceptions import ClientError
from st_core.clients import CLIENTS
from st_core.errors import TransientError
from st_core.idempotency import Ledger
from st_core.timeparse import format_due, minute_at_or_after
from ttl import decide, next_item

from components.runtime_config import Value
from components.targets import EmailTarget, FunctionTarget, StateMachineTarget, TopicTarget
from tests.handlers.conftest import ACCOUNT, Env, SchedulerClock
from tests.iam.enforce import acting

TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
def ttl_env(env: Env) -> Env:
    """The env as plain ttl mode, with the component's default attribute names."""
    return env.configure(mode="ttl")


def precise(env: Env) -> Env:
    return env.configure(precise=True)


def expire(env: Env, pk: str, sk: str = "S") -> Any:
    """DynamoDB's TTL deleting the item: the REMOVE record, as a service deletion."""
    env.delete(pk, sk)
    records = env.event()["Records"]
    removes = [r for r in records if r["eventName"] == "REMOVE"]
    return {"Records": [{**r, "userIdentity": TTL_IDENTITY} for r in removes]}


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def test_a_ttl_deletion_delivers_the_due_event_built_from_the_old_image(ttl_env: Env) -> None:
    due = NOW - timedelta(minutes=12)
    ttl_env.put({"PK": "session#1", "SK": "S", "dueAt": epoch(due), "user": "ada"})
    ttl_env.event()
    response = ttl.handle_batch(expire(ttl_env, "session#1"), ttl_env.config)
    assert response == {"batchItemFailures": []}
    [message] = ttl_env.messages(ttl_env.due_queue_url)
    assert message["mode"] == "ttl" and message["keys"] == {"PK": "session#1", "SK": "S"}
    assert message["dueAt"] == due.strftime("%Y-%m-%dT%H:%M:%SZ") and message["item"]["user"] == "ada"


def test_a_users_delete_and_inserts_do_not_act_without_precise(ttl_env: Env) -> None:
    ttl_env.put({"PK": "session#1", "SK": "S", "dueAt": epoch(NOW)})
    ttl_env.delete("session#1", "S")
    response = ttl.handle_batch(ttl_env.event(), ttl_env.config)
    assert response == {"batchItemFailures": []}
    assert ttl_env.messages(ttl_env.due_queue_url) == []


def test_the_same_record_delivered_twice_acts_once(ttl_env: Env) -> None:
    ttl_env.put({"PK": "session#1", "SK": "S", "dueAt": epoch(NOW)})
    ttl_env.event()
    event = expire(ttl_env, "session#1")
    ttl.handle_batch(event, ttl_env.config)
    ttl.handle_batch(event, ttl_env.config)
    assert len(ttl_env.messages(ttl_env.due_queue_url)) == 1


def _client_error(code: str, status: int, operation: str) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "injected"}, "ResponseMetadata": {"HTTPStatusCode": status}}, operation
    )


def test_a_failed_action_releases_its_claim_so_the_retry_acts_once(ttl_env: Env) -> None:
    ttl_env.put({"PK": "session#1", "SK": "S", "dueAt": epoch(NOW)})
    ttl_env.event()
    event = expire(ttl_env, "session#1")
    # GIVEN the target fails once
    fail_once = {"n": 0}

    def fail_first_send(**_: Any) -> None:
        if fail_once["n"] == 0:
            fail_once["n"] += 1
            raise _client_error("ServiceUnavailable", 503, "SendMessage")

    CLIENTS.get("sqs").meta.events.register("before-call.sqs.SendMessage", fail_first_send)
    first = ttl.handle_batch(event, ttl_env.config)
    # THEN the record is retried, and the retry acts (the claim was released), once
    assert first["batchItemFailures"] != []
    assert ttl.handle_batch(event, ttl_env.config) == {"batchItemFailures": []}
    assert len(ttl_env.messages(ttl_env.due_queue_url)) == 1


def test_a_claim_under_a_live_lease_is_retried_and_a_done_one_is_skipped(ttl_env: Env) -> None:
    ledger = Ledger(ttl_env.config["ttl"]["ledgerTable"], clients=CLIENTS, lease_seconds=90, window_seconds=3600)
    with acting("executor", dict(ttl_env.config)):
        assert ledger.claim("occ", now=1000.0) is True
        with pytest.raises(TransientError, match="being acted on"):
            ledger.claim("occ", now=1010.0)
        assert ledger.claim("occ", now=1100.0) is True  # the lease ran out: the holder died
        ledger.complete("occ")
        assert ledger.claim("occ", now=5000.0) is False


def _recorder(service: str, operation: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def record(params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        calls.append(params)
        return SimpleNamespace(status_code=200, headers={}), {}

    CLIENTS.get(service).meta.events.register(f"before-call.{service}.{operation}", record)
    return calls


@pytest.mark.parametrize(
    ("kind", "service", "operation", "arn"),
    [
        ("lambda", "lambda", "Invoke", f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:f"),
        ("stepfunctions", "stepfunctions", "StartExecution", f"arn:aws:states:eu-west-1:{ACCOUNT}:stateMachine:m"),
        ("sns", "sns", "Publish", f"arn:aws:sns:eu-west-1:{ACCOUNT}:t"),
        ("email", "sesv2", "SendEmail", f"arn:aws:ses:eu-west-1:{ACCOUNT}:identity/example.com"),
    ],
)
def test_each_target_kind_gets_its_one_call(ttl_env: Env, kind: str, service: str, operation: str, arn: str) -> None:
    subject, body = "Your offer {PK} expired", "Hello {user}"
    targets: dict[str, Callable[[], Any]] = {
        "lambda": lambda: FunctionTarget(function_arn=arn),
        "stepfunctions": lambda: StateMachineTarget(state_machine_arn=arn),
        "sns": lambda: TopicTarget(topic_arn=arn),
        "email": lambda: EmailTarget(sender="offers@example.com", subject=subject, body=body),
    }
    ttl_env.names[Value.TARGET_ARN] = arn  # the email sender's identity, which the component looks up
    ttl_env.configure(target=targets[kind]())
    calls = _recorder(service, operation)
    ttl_env.put({"PK": "offer#1", "SK": "S", "dueAt": epoch(NOW), "user": "ada", "email": "ada@example.com"})
    ttl_env.event()
    assert ttl.handle_batch(expire(ttl_env, "offer#1"), ttl_env.config) == {"batchItemFailures": []}
    assert len(calls) == 1
    sent = json.dumps(calls[0], default=str)
    assert ("Your offer offer#1 expired" in sent) if kind == "email" else ('"offer#1"' in sent or "offer#1" in sent)


def test_a_repeating_item_is_written_back_once_with_its_next_time(ttl_env: Env) -> None:
    # GIVEN a reminder every hour that was due 2.5 hours ago (TTL was late): two occurrences were missed
    due = NOW - timedelta(hours=2, minutes=30)
    ttl_env.put({"PK": "pill#1", "SK": "S", "dueAt": epoch(due), "repeatEvery": 3600, "occurrence": 4})
    ttl_env.event()
    event = expire(ttl_env, "pill#1")
    # WHEN it expires, and the record is delivered twice
    ttl.handle_batch(event, ttl_env.config)
    ttl.handle_batch(event, ttl_env.config)
    # THEN one action, and the item is back once, due at the next hour after now, not in a burst of missed ones
    assert len(ttl_env.messages(ttl_env.due_queue_url)) == 1
    item = ttl_env.ddb.get_item(TableName=ttl_env.table, Key={"PK": {"S": "pill#1"}, "SK": {"S": "S"}})["Item"]
    assert int(item["dueAt"]["N"]) == epoch(due + timedelta(hours=3))
    assert item["occurrence"]["N"] == "5"


def test_a_repeat_stops_at_its_end() -> None:
    config: Any = {
        "timeAttribute": "dueAt",
        "ttl": {"repeatAttribute": "every", "repeatUntilAttribute": "until", "occurrenceAttribute": "n"},
    }
    item = {"every": 60, "until": epoch(NOW + timedelta(seconds=90))}
    assert next_item({}, item, NOW, NOW, config)["dueAt"] == {"N": str(epoch(NOW + timedelta(seconds=60)))}
    assert next_item({}, item, NOW + timedelta(seconds=60), NOW + timedelta(seconds=60), config) is None


def test_a_bad_repeat_still_fires_and_is_parked_with_the_reason(ttl_env: Env) -> None:
    ttl_env.put({"PK": "pill#2", "SK": "S", "dueAt": epoch(NOW), "repeatEvery": "hourly"})
    ttl_env.event()
    response = ttl.handle_batch(expire(ttl_env, "pill#2"), ttl_env.config)
    assert response == {"batchItemFailures": []}
    assert len(ttl_env.messages(ttl_env.due_queue_url)) == 1
    [poison] = ttl_env.messages(ttl_env.poison_url)
    assert "not repeated" in poison["reason"] and "repeatEvery" in poison["reason"]


def test_a_transient_target_failure_reports_the_record_for_retry(ttl_env: Env) -> None:
    ttl_env.put({"PK": "session#9", "SK": "S", "dueAt": epoch(NOW)})
    ttl_env.event()
    event = expire(ttl_env, "session#9")

    def throttle(**_: Any) -> None:
        raise ClientError(
            {
                "Error": {"Code": "ThrottlingException", "Message": "slow down"},
                "ResponseMetadata": {"HTTPStatusCode": 400},
            },
            "SendMessage",
        )

    CLIENTS.get("sqs").meta.events.register("before-call.sqs.SendMessage", throttle)
    response = ttl.handle_batch(event, ttl_env.config)
    assert response["batchItemFailures"] == [{"itemIdentifier": event["Records"][0]["dynamodb"]["SequenceNumber"]}]


# -- precise --------------------------------------------------------------------------------------------------------


def test_precise_insert_schedules_a_conditional_fire_of_the_item(ttl_env: Env) -> None:
    env = precise(ttl_env)
    due = NOW + timedelta(days=1)
    env.put({"PK": "offer#1", "SK": "S", "dueAt": epoch(due)})
    assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    [schedule] = env.schedules()
    assert schedule["ScheduleExpression"] == f"at({minute_at_or_after(due).strftime('%Y-%m-%dT%H:%M:%S')})"
    assert schedule["Target"]["Arn"] == "arn:aws:scheduler:::aws-sdk:dynamodb:updateItem"
    request = json.loads(schedule["Target"]["Input"])
    assert request["Key"] == {"PK": {"S": "offer#1"}, "SK": {"S": "S"}}
    assert request["UpdateExpression"] == "SET #fired = :due REMOVE #due"
    assert request["ConditionExpression"] == "#due = :due"
    assert request["ExpressionAttributeNames"] == {"#due": "dueAt", "#fired": "stFiredAt"}
    assert request["ExpressionAttributeValues"] == {":due": {"N": str(epoch(due))}}
    assert schedule["Target"]["DeadLetterConfig"]["Arn"] == env.target_dlq_arn


def test_precise_delete_at_the_due_time_acts_and_an_early_delete_is_a_cancellation(ttl_env: Env) -> None:
    env = precise(ttl_env)
    env.put({"PK": "due", "SK": "S", "dueAt": epoch(NOW + timedelta(days=1))})
    env.put({"PK": "cancelled", "SK": "S", "dueAt": epoch(NOW + timedelta(days=2))})
    ttl.handle_batch(env.event(), env.config)
    assert len(env.schedules()) == 2
    later = NOW + timedelta(days=1, minutes=1)
    # The scheduled delete of "due" runs in the minute after its time; "cancelled" is deleted by its user a day
    # before its time. Both are judged by when they happened, although both are processed later still.
    env.delete("due", "S")
    removes = env.event(at=NOW + timedelta(days=1, seconds=30))["Records"]
    env.delete("cancelled", "S")
    removes += env.event(at=NOW)["Records"]
    response = ttl.handle_batch({"Records": removes}, env.config, now=lambda: later)
    assert response == {"batchItemFailures": []}
    [message] = env.messages(env.due_queue_url)
    assert message["keys"]["PK"] == "due"


def test_precise_user_delete_before_due_time_fires_nothing_and_removes_the_schedule(ttl_env: Env) -> None:
    env = precise(ttl_env)
    env.put({"PK": "offer#2", "SK": "S", "dueAt": epoch(NOW + timedelta(days=1))})
    ttl.handle_batch(env.event(), env.config)
    env.delete("offer#2", "S")
    assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert env.messages(env.due_queue_url) == [] and env.schedules() == []


def test_precise_item_due_now_is_fired_at_once_and_then_acted_on_and_deleted(ttl_env: Env) -> None:
    env = precise(ttl_env)
    due = NOW - timedelta(seconds=5)
    env.put({"PK": "late", "SK": "S", "dueAt": epoch(due)})
    ttl.handle_batch(env.event(), env.config)
    # Fired as its schedule would fire it: the due time moved into the marker.
    fired = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": "late"}, "SK": {"S": "S"}})["Item"]
    assert "dueAt" not in fired and fired["stFiredAt"] == {"N": str(epoch(due))}
    ttl.handle_batch(env.event(), env.config)
    assert len(env.messages(env.due_queue_url)) == 1 and env.schedules() == []
    assert env.ddb.get_item(TableName=env.table, Key={"PK": {"S": "late"}, "SK": {"S": "S"}}).get("Item") is None


def test_precise_ttl_that_is_not_a_number_is_parked_with_the_reason(ttl_env: Env) -> None:
    env = precise(ttl_env)
    env.put({"PK": "bad", "SK": "S", "dueAt": "2026-12-01T10:00:00Z"})
    assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    [poison] = env.messages(env.poison_url)
    assert "never expires" in poison["reason"]


def test_decide_ignores_non_ttl_records_without_precise(ttl_env: Env) -> None:
    ttl_env.put({"PK": "a", "SK": "S", "dueAt": epoch(NOW)})
    (record,) = ttl_env.event()["Records"]
    assert decide(record, ttl_env.config, NOW).step.value == "ignore"


# -- precise: the schedule's fire, told apart from a user's delete ---------------------------------------------------


def _scheduled(env: Env, pk: str, due: datetime, **extra: Any) -> dict[str, Any]:
    """An item with a precise schedule (its insert processed); the schedule."""
    env.put({"PK": pk, "SK": "S", "dueAt": epoch(due), **extra})
    assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    [schedule] = [s for s in env.schedules() if pk in json.dumps(s["Target"]["Input"])]
    return schedule


def _item(env: Env, pk: str) -> Any:
    return env.ddb.get_item(TableName=env.table, Key={"PK": {"S": pk}, "SK": {"S": "S"}}, ConsistentRead=True).get(
        "Item"
    )


def test_precise_user_delete_inside_the_due_minute_before_the_due_second_cancels(ttl_env: Env) -> None:
    env = precise(ttl_env)
    due = (NOW + timedelta(days=1)).replace(second=45)
    _scheduled(env, "offer#3", due)
    # WHEN the user deletes it at 12:00:30 for 12:00:45: inside the due minute, 15 s early
    env.delete("offer#3", "S")
    removes = env.event(at=due - timedelta(seconds=15))
    slept: list[float] = []
    response = ttl.handle_batch(removes, env.config, now=lambda: due - timedelta(seconds=14), sleep=slept.append)
    # THEN it is a cancel: nothing fires, now or later, and its schedule is gone
    assert response == {"batchItemFailures": []}
    assert env.messages(env.due_queue_url) == [] and env.schedules() == [] and slept == []
    assert ttl.handle_batch(removes, env.config, now=lambda: due + timedelta(minutes=5)) == {"batchItemFailures": []}
    assert env.messages(env.due_queue_url) == []


def test_precise_user_delete_at_the_due_second_or_after_acts(ttl_env: Env) -> None:
    env = precise(ttl_env)
    due = (NOW + timedelta(days=1)).replace(second=45)
    _scheduled(env, "offer#4", due)
    env.delete("offer#4", "S")
    removes = env.event(at=due)
    assert ttl.handle_batch(removes, env.config, now=lambda: due + timedelta(seconds=1)) == {"batchItemFailures": []}
    [message] = env.messages(env.due_queue_url)
    assert message["keys"]["PK"] == "offer#4" and env.schedules() == []


def test_precise_schedule_fires_the_item_the_executor_acts_once_and_deletes_it(ttl_env: Env) -> None:
    env = precise(ttl_env)
    due = (NOW + timedelta(days=1)).replace(second=45)
    schedule = _scheduled(env, "offer#5", due, user="ada")
    clock = SchedulerClock(env)
    ran = clock.instant(schedule)
    assert ran >= due  # on the minute after the due second: never early
    clock.run(schedule)
    fire = env.event(at=ran)
    [modify] = fire["Records"]
    assert modify["eventName"] == "MODIFY" and precise_passes(modify)
    # WHEN the fire is delivered, and delivered again (Lambda redelivers whole batches)
    for _ in range(2):
        assert ttl.handle_batch(fire, env.config, now=lambda: ran + timedelta(seconds=1)) == {"batchItemFailures": []}
    # THEN one action, built from the item as it was, and the item is gone
    [message] = env.messages(env.due_queue_url)
    assert message["keys"]["PK"] == "offer#5" and message["item"]["user"] == "ada"
    assert message["dueAt"] == format_due(due) and "stFiredAt" not in message["item"]
    assert _item(env, "offer#5") is None
    # The executor's own delete holds no due time: the mapping never passes it, and it would change nothing
    [own_delete] = env.event(at=ran + timedelta(seconds=1))["Records"]
    assert own_delete["eventName"] == "REMOVE" and not precise_passes(own_delete)
    assert ttl.handle_batch({"Records": [own_delete]}, env.config) == {"batchItemFailures": []}
    assert env.messages(env.due_queue_url) == []


def test_precise_fire_redelivered_after_a_crash_before_the_delete_still_deletes_once(ttl_env: Env) -> None:
    env = precise(ttl_env)
    due = (NOW + timedelta(days=1)).replace(second=10)
    schedule = _scheduled(env, "offer#6", due)
    clock = SchedulerClock(env)
    clock.run(schedule)
    fire = env.event(at=clock.instant(schedule))

    # GIVEN the action was done and completed, but the invocation died before deleting the item
    def refuse_delete(**_: Any) -> None:
        raise _client_error("InternalServerError", 500, "DeleteItem")

    CLIENTS.get("dynamodb").meta.events.register("before-call.dynamodb.DeleteItem", refuse_delete)
    later = clock.instant(schedule) + timedelta(seconds=1)
    assert ttl.handle_batch(fire, env.config, now=lambda: later)["batchItemFailures"] != []
    CLIENTS.get("dynamodb").meta.events.unregister("before-call.dynamodb.DeleteItem", refuse_delete)
    assert _item(env, "offer#6") is not None
    # WHEN the batch comes again THEN no second action, and the item is deleted
    assert ttl.handle_batch(fire, env.config, now=lambda: later) == {"batchItemFailures": []}
    assert len(env.messages(env.due_queue_url)) == 1 and _item(env, "offer#6") is None


def test_precise_writes_to_a_fired_item_and_its_delete_change_no_schedule(ttl_env: Env) -> None:
    """The mapping passes neither (no due time in either image); delivered anyway (a redrive, another mapping),
    they must not delete the item's schedule, which may already be its next one."""
    env = precise(ttl_env)
    due = NOW - timedelta(seconds=5)
    env.put({"PK": "done", "SK": "S", "dueAt": epoch(due)})
    ttl.handle_batch(env.event(), env.config)  # fired at once
    env.ddb.update_item(
        TableName=env.table,
        Key={"PK": {"S": "done"}, "SK": {"S": "S"}},
        UpdateExpression="SET v = :v",
        ExpressionAttributeValues={":v": {"S": "x"}},
    )
    fire, write = env.event()["Records"]
    assert not precise_passes(write)
    assert decide(write, env.config, NOW).step.value == "ignore"
    ttl.handle_batch({"Records": [fire]}, env.config)
    [delete] = env.event()["Records"]
    assert delete["eventName"] == "REMOVE" and decide(delete, env.config, NOW).step.value == "ignore"
    assert len(env.messages(env.due_queue_url)) == 1


def test_precise_user_change_after_the_fire_keeps_their_write_and_schedules_it(ttl_env: Env) -> None:
    env = precise(ttl_env)
    due = (NOW + timedelta(days=1)).replace(second=20)
    schedule = _scheduled(env, "offer#7", due)
    clock = SchedulerClock(env)
    ran = clock.instant(schedule)
    clock.run(schedule)
    # GIVEN the user gives the fired item a new due time before the executor got to it
    again = due + timedelta(days=1)
    env.ddb.update_item(
        TableName=env.table,
        Key={"PK": {"S": "offer#7"}, "SK": {"S": "S"}},
        UpdateExpression="SET dueAt = :d",
        ExpressionAttributeValues={":d": {"N": str(epoch(again))}},
    )
    records = env.event(at=ran)
    assert ttl.handle_batch(records, env.config, now=lambda: ran + timedelta(seconds=1)) == {"batchItemFailures": []}
    # THEN the fired occurrence acts once, the item stays with its new due time, which is scheduled
    [message] = env.messages(env.due_queue_url)
    assert message["dueAt"] == format_due(due)
    assert _item(env, "offer#7")["dueAt"] == {"N": str(epoch(again))}
    [rescheduled] = env.schedules()
    assert json.loads(rescheduled["Target"]["Input"])["ExpressionAttributeValues"] == {":due": {"N": str(epoch(again))}}


def test_precise_repeating_item_fired_by_its_schedule_is_written_back_with_its_next_time(ttl_env: Env) -> None:
    env = precise(ttl_env)
    due = (NOW + timedelta(days=1)).replace(second=0)
    schedule = _scheduled(env, "pill#7", due, repeatEvery=3600, occurrence=1)
    clock = SchedulerClock(env)
    ran = clock.instant(schedule)
    clock.run(schedule)
    fire = env.event(at=ran)
    assert ttl.handle_batch(fire, env.config, now=lambda: ran + timedelta(seconds=1)) == {"batchItemFailures": []}
    assert len(env.messages(env.due_queue_url)) == 1
    item = _item(env, "pill#7")
    assert item["dueAt"] == {"N": str(epoch(due + timedelta(hours=1)))} and item["occurrence"] == {"N": "2"}
    assert "stFiredAt" not in item
    # Its write-back (a MODIFY with the next due time) schedules the next occurrence
    assert ttl.handle_batch(env.event(), env.config, now=lambda: ran + timedelta(seconds=2)) == {
        "batchItemFailures": []
    }
    [following] = env.schedules()
    assert json.loads(following["Target"]["Input"])["ExpressionAttributeValues"][":due"]["N"] == str(
        epoch(due + timedelta(hours=1))
    )


def test_a_marker_set_before_the_due_time_is_not_the_schedules_and_is_parked(ttl_env: Env) -> None:
    env = precise(ttl_env)
    due = NOW + timedelta(days=1)
    _scheduled(env, "forged", due)
    env.ddb.update_item(
        TableName=env.table,
        Key={"PK": {"S": "forged"}, "SK": {"S": "S"}},
        UpdateExpression="SET stFiredAt = dueAt REMOVE dueAt",
    )
    assert ttl.handle_batch(env.event(at=NOW), env.config) == {"batchItemFailures": []}
    assert env.messages(env.due_queue_url) == []
    [poison] = env.messages(env.poison_url)
    assert "before its due time" in poison["reason"]


def precise_passes(record: dict[str, Any]) -> bool:
    """Whether the precise mapping's filters (Lambda's event filtering, moto's matcher) let the record through."""
    from components.filters import filter_patterns
    from components.modes.ttl import ttl_filters
    from tests.support.patterns import passes

    return passes(filter_patterns(ttl_filters("dueAt", precise=True)), record)


def test_precise_cost_per_item_is_measured(ttl_env: Env) -> None:
    """What one item costs in precise mode, counted on the calls made (the README's cost paragraph quotes this):
    the insert's read and schedule, writes to the table (Scheduler's fire, the executor's delete), ledger writes
    (claim, complete), stream records
    (insert, fire, delete) and the ones the mapping passes (insert, fire: the delete is filtered out). The original
    design made one table write (Scheduler's delete) and two records, both passed, plus a DeleteSchedule call."""
    env = precise(ttl_env)
    calls: list[str] = []

    def count(event_name: str, **_: Any) -> None:
        calls.append(event_name.rsplit(".", 1)[-1])

    for service in ("dynamodb", "scheduler", "sqs"):
        CLIENTS.get(service).meta.events.register(f"before-call.{service}", count)
    due = (NOW + timedelta(days=1)).replace(second=30)
    env.put({"PK": "offer#9", "SK": "S", "dueAt": epoch(due)})
    records = env.event()["Records"]
    passed = [r for r in records if precise_passes(r)]
    assert ttl.handle_batch({"Records": passed}, env.config) == {"batchItemFailures": []}
    [schedule] = env.schedules()
    # The insert: one consistent read of the item's due time (an old record handled again must not undo a newer
    # one's schedule), then the schedule.
    assert [c for c in calls if c not in ("ListSchedules", "GetSchedule")] == ["GetItem", "CreateSchedule"], calls
    calls.clear()
    clock = SchedulerClock(env)
    ran = clock.instant(schedule)
    clock.run(schedule)  # Scheduler's one UpdateItem (outside the handler's clients)
    fire = env.event(at=ran)["Records"]
    records += fire
    passed_fire = [r for r in fire if precise_passes(r)]
    assert ttl.handle_batch({"Records": passed_fire}, env.config, now=lambda: ran) == {"batchItemFailures": []}
    tail = env.event(at=ran)["Records"]
    records += tail
    passed += passed_fire + [r for r in tail if precise_passes(r)]
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
    assert [r["eventName"] for r in passed] == ["INSERT", "MODIFY"]  # two invocations' worth, as before
    # The executor on the fire: claim (PutItem on the ledger), send, complete (UpdateItem), delete; no DeleteSchedule
    # (Scheduler deletes a fired schedule itself). GetQueueUrl is cached by a warm function.
    expected = ["PutItem", "SendMessage", "UpdateItem", "DeleteItem"]
    assert [c for c in calls if c != "GetQueueUrl"] == expected, calls


# -- precise: an old record handled again must not undo a newer one's schedule (issue 28) ---------------------------


def _fire_value(schedule: dict[str, Any]) -> Any:
    return json.loads(schedule["Target"]["Input"])["ExpressionAttributeValues"][":due"]


def _move(env: Env, pk: str, due: datetime) -> None:
    env.put({"PK": pk, "SK": "S", "dueAt": epoch(due)})


def test_precise_insert_replayed_after_a_move_keeps_the_new_times_schedule(ttl_env: Env) -> None:
    env = precise(ttl_env)
    first, moved = (NOW + timedelta(days=1)).replace(second=30), (NOW + timedelta(days=1, minutes=1)).replace(second=5)
    _scheduled(env, "offer#10", first)
    create = {"Records": env.stream.since(0)[-1:]}  # the INSERT, as Lambda delivered it
    _move(env, "offer#10", moved)
    assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    # WHEN the INSERT's batch is handled again after the move's (a retry of an old batch, a redrive)
    assert ttl.handle_batch(copy.deepcopy(create), env.config) == {"batchItemFailures": []}
    # THEN the schedule still fires the moved time: the old one would fail its condition into the target DLQ (the
    # soak's two dead letters) and leave the moved time to TTL's delay
    [schedule] = env.schedules()
    assert _fire_value(schedule) == {"N": str(epoch(moved))}
    clock = SchedulerClock(env)
    ran = clock.instant(schedule)
    clock.run(schedule)
    assert _item(env, "offer#10").get("stFiredAt") == {"N": str(epoch(moved))}  # the condition held
    assert ttl.handle_batch(env.event(at=ran), env.config, now=lambda: ran) == {"batchItemFailures": []}
    [message] = env.messages(env.due_queue_url)
    assert message["dueAt"] == format_due(moved)


def test_precise_insert_replayed_after_the_delete_makes_no_schedule(ttl_env: Env) -> None:
    env = precise(ttl_env)
    due = NOW + timedelta(days=1)
    _scheduled(env, "offer#11", due)
    create = {"Records": env.stream.since(0)[-1:]}
    env.delete("offer#11", "S")
    assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert ttl.handle_batch(copy.deepcopy(create), env.config) == {"batchItemFailures": []}
    assert env.schedules() == []  # a schedule here could only fail its condition, into the target DLQ


def test_precise_past_due_insert_replayed_after_a_move_leaves_the_new_schedule(ttl_env: Env) -> None:
    env = precise(ttl_env)
    past = NOW - timedelta(seconds=30)
    env.put({"PK": "offer#12", "SK": "S", "dueAt": epoch(past)})
    create = env.event()
    # The item moves to tomorrow before its past-due insert is handled; the move is handled first (a replay order).
    moved = NOW + timedelta(days=1)
    _move(env, "offer#12", moved)
    assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert ttl.handle_batch(create, env.config) == {"batchItemFailures": []}
    [schedule] = env.schedules()
    assert _fire_value(schedule) == {"N": str(epoch(moved))}
    assert _item(env, "offer#12")["dueAt"] == {"N": str(epoch(moved))}  # not fired for the old time either


def test_precise_cancel_replayed_after_a_reinsert_keeps_the_new_schedule(ttl_env: Env) -> None:
    env = precise(ttl_env)
    _scheduled(env, "offer#13", NOW + timedelta(days=1))
    env.delete("offer#13", "S")
    cancel = env.event()
    assert ttl.handle_batch(cancel, env.config) == {"batchItemFailures": []}
    again = NOW + timedelta(days=2)
    _scheduled(env, "offer#13", again)
    # WHEN the cancel is handled again after the re-insert (an out-of-order replay or a redrive of its record)
    assert ttl.handle_batch(copy.deepcopy(cancel), env.config) == {"batchItemFailures": []}
    # THEN the re-inserted item's schedule stays (deleting it would leave the item to TTL's delay)
    [schedule] = env.schedules()
    assert _fire_value(schedule) == {"N": str(epoch(again))}


def test_precise_move_handled_while_the_old_time_may_be_firing_names_the_expected_dead_letter(
    ttl_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    """The residual race (docs/modes/ttl.md): an update or delete of a schedule cannot stop a firing under way. The
    stale firing fails its condition into the target DLQ; the executor says so, naming the schedule."""
    env = precise(ttl_env)
    due = (NOW + timedelta(days=1)).replace(second=50)
    schedule = _scheduled(env, "offer#14", due)
    _move(env, "offer#14", due + timedelta(minutes=5))
    firing = minute_at_or_after(due) + timedelta(seconds=2)
    with caplog.at_level("WARNING", logger="scheduled_table"):
        assert ttl.handle_batch(env.event(at=due), env.config, now=lambda: firing) == {"batchItemFailures": []}
    [line] = [json.loads(r.getMessage()) for r in caplog.records if "stale-firing-possible" in r.getMessage()]
    assert line["schedule"] == schedule["Name"] and line["dueAt"] == format_due(due)
    caplog.clear()
    # A move handled well before the old time's minute changes the schedule in time: no such line.
    _move(env, "offer#14", due + timedelta(minutes=9))
    with caplog.at_level("WARNING", logger="scheduled_table"):
        assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert not [r for r in caplog.records if "stale-firing-possible" in r.getMessage()]
