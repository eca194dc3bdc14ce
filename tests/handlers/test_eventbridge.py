"""eventbridge handler against moto: stream records from moto's own stream, schedules read back with get_schedule."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import eventbridge
import pytest
from botocore.exceptions import ClientError
from st_core.clients import CLIENTS
from st_core.timeparse import minute_at_or_after

from tests.handlers.conftest import Env, SchedulerClock

FUTURE = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def at(moment: datetime) -> str:
    """The `at()` a due time gets: its first whole minute at or after (Scheduler fires anywhere in the minute)."""
    return f"at({minute_at_or_after(moment).strftime('%Y-%m-%dT%H:%M:%S')})"


def fail_on(operation: str, code: str, status: int, only_if: str = "") -> list[int]:
    """Make the handler's Scheduler client fail `operation` (optionally only when the request mentions `only_if`)."""
    calls: list[int] = []

    def hook(params: dict[str, Any], **_: Any) -> None:
        if only_if in json.dumps(params, default=str):
            calls.append(1)
            raise ClientError(
                {"Error": {"Code": code, "Message": "injected"}, "ResponseMetadata": {"HTTPStatusCode": status}},
                operation,
            )

    CLIENTS.get("scheduler").meta.events.register(f"before-call.scheduler.{operation}", hook)
    return calls


def count_scheduler_calls() -> list[str]:
    return count_calls("scheduler")


# -- creating schedules -----------------------------------------------------------------------------------------


def test_insert_with_iso_time_creates_one_at_schedule_with_target_dlq_and_retry(env: Env) -> None:
    # GIVEN an appointment due in two days
    env.put({"PK": "user#1", "SK": "appt#1", "dueAt": iso(FUTURE), "name": "Ada"})
    # WHEN the stream batch is handled
    response = eventbridge.handle_batch(env.event(), env.config)
    # THEN exactly one schedule exists that fires at that time and delivers the due event to the queue
    assert response == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == at(FUTURE)
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["ActionAfterCompletion"] == "DELETE"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    target = schedule["Target"]
    assert target["Arn"] == env.due_queue_arn
    assert target["RoleArn"] == env.config["scheduler"]["roleArn"]
    assert target["DeadLetterConfig"] == {"Arn": env.target_dlq_arn}
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 5}
    assert json.loads(target["Input"]) == {
        "source": "scheduled-table",
        "occurrenceId": schedule["Name"],  # the occurrence's one id: its schedule's name, its ledger id
        "mode": "eventbridge",
        "table": env.table,
        "keys": {"PK": "user#1", "SK": "appt#1"},
        "dueAt": iso(FUTURE),
        "item": {"PK": "user#1", "SK": "appt#1", "dueAt": iso(FUTURE), "name": "Ada"},
    }


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        pytest.param("2031-03-04T05:06:07+02:00", "at(2031-03-04T03:07:00)", id="iso-with-offset"),
        pytest.param("2031-03-04T05:06:07", "at(2031-03-04T05:07:00)", id="iso-without-offset-is-utc"),
        pytest.param("2031-03-04T05:06:59.900Z", "at(2031-03-04T05:07:00)", id="iso-fraction-rounded-up"),
        pytest.param("2031-03-04T05:06:00Z", "at(2031-03-04T05:06:00)", id="whole-minute-kept"),
        pytest.param(1930367167, "at(2031-03-04T05:07:00)", id="epoch-seconds-number"),
        pytest.param("1930367167", "at(2031-03-04T05:07:00)", id="epoch-seconds-string"),
    ],
)
def test_time_formats_become_utc_at_expressions(env: Env, written: object, expected: str) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": written})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == expected


def test_numbers_in_the_item_arrive_as_json_numbers(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE), "count": 3, "price": Decimal("9.5"), "tags": {"a", "b"}})
    eventbridge.handle_batch(env.event(), env.config)
    (schedule,) = env.schedules()
    item = json.loads(schedule["Target"]["Input"])["item"]
    assert item["count"] == 3 and item["price"] == 9.5 and item["tags"] == ["a", "b"]


# -- due now ----------------------------------------------------------------------------------------------------


def test_due_time_in_the_past_is_delivered_now_not_dropped(env: Env) -> None:
    due = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    env.put({"PK": "p", "SK": "late", "dueAt": iso(due)})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert env.schedules() == []
    (message,) = env.messages(env.due_queue_url)
    assert message["dueAt"] == iso(due) and message["keys"] == {"PK": "p", "SK": "late"}


def test_a_due_time_seconds_away_is_scheduled_not_delivered_early(env: Env) -> None:
    # Before this round, anything due within 60 s was sent at once: up to a minute early.
    now = datetime.now(UTC).replace(microsecond=0)
    due = now + timedelta(seconds=20)
    env.put({"PK": "p", "SK": "soon", "dueAt": iso(due)})
    assert eventbridge.handle_batch(env.event(), env.config, now=lambda: now) == {"batchItemFailures": []}
    assert env.messages(env.due_queue_url) == []
    (schedule,) = env.schedules()
    fire = datetime.fromisoformat(schedule["ScheduleExpression"][3:-1]).replace(tzinfo=UTC)
    assert fire >= due and fire.second == 0 and fire - now >= timedelta(seconds=10)


def test_moving_a_due_time_into_the_past_fires_now_and_removes_the_old_schedule(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE)})
    eventbridge.handle_batch(env.event(), env.config)
    env.put({"PK": "p", "SK": "s", "dueAt": iso(datetime.now(UTC) - timedelta(minutes=5))})
    eventbridge.handle_batch(env.event(), env.config)
    assert env.schedules() == []
    assert len(env.messages(env.due_queue_url)) == 1


# -- updates and cancellation -----------------------------------------------------------------------------------


def test_modify_that_changes_the_time_updates_the_schedule(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE)})
    eventbridge.handle_batch(env.event(), env.config)
    later = FUTURE + timedelta(hours=5)
    env.put({"PK": "p", "SK": "s", "dueAt": iso(later)})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == at(later)


def test_modify_that_changes_the_payload_updates_the_input(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE), "note": "old"})
    eventbridge.handle_batch(env.event(), env.config)
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE), "note": "new"})
    eventbridge.handle_batch(env.event(), env.config)
    (schedule,) = env.schedules()
    assert json.loads(schedule["Target"]["Input"])["item"]["note"] == "new"


def test_modify_that_changes_nothing_relevant_makes_no_api_call(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE)})
    eventbridge.handle_batch(env.event(), env.config)
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE), "x": 1})
    (modify,) = env.event()["Records"]
    # GIVEN a MODIFY whose old and new images yield the same schedule (as a rewrite with equal values does)
    modify["dynamodb"]["OldImage"] = modify["dynamodb"]["NewImage"]
    calls = count_scheduler_calls()
    assert eventbridge.handle_batch({"Records": [modify]}, env.config) == {"batchItemFailures": []}
    assert calls == []


def test_modify_that_removes_the_time_attribute_deletes_the_schedule(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE)})
    eventbridge.handle_batch(env.event(), env.config)
    env.put({"PK": "p", "SK": "s"})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert env.schedules() == []


def test_remove_deletes_the_schedule_and_a_missing_schedule_is_fine(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE)})
    eventbridge.handle_batch(env.event(), env.config)
    env.delete("p", "s")
    removal = env.event()
    assert eventbridge.handle_batch(removal, env.config) == {"batchItemFailures": []}
    assert env.schedules() == []
    # The same REMOVE again (at-least-once delivery): the schedule is already gone, which is no error.
    assert eventbridge.handle_batch(removal, env.config) == {"batchItemFailures": []}
    assert env.messages(env.poison_url) == []


def test_records_of_one_item_in_one_batch_apply_in_stream_order(env: Env) -> None:
    last = FUTURE + timedelta(days=1)
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE)})
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE + timedelta(hours=1))})
    env.put({"PK": "p", "SK": "s", "dueAt": iso(last)})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == at(last)


# -- an item's records in one batch act by their net effect ------------------------------------------------------


def test_an_item_inserted_and_removed_in_one_batch_makes_no_schedule_only_a_safety_delete(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE)})
    env.delete("p", "s")
    calls = count_scheduler_calls()
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    # A DeleteSchedule (an earlier run of this batch may have made the schedule), never a CreateSchedule.
    assert calls == ["DeleteSchedule"]
    assert env.schedules() == []


def count_calls(service: str) -> list[str]:
    """The names of the API calls the handlers' client of `service` makes from now on."""
    calls: list[str] = []
    CLIENTS.get(service).meta.events.register(f"before-call.{service}", lambda model, **_: calls.append(model.name))
    return calls


def test_a_payload_update_keeping_the_due_time_makes_one_schedule_call(env: Env) -> None:
    """GIVEN an item of a sort-key table with its schedule
    WHEN a write changes its payload and keeps its due time
    THEN one UpdateSchedule, and no ledger DeleteItem."""
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE), "name": "Ada"})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE), "name": "Grace"})
    calls, ledger = count_scheduler_calls(), count_calls("dynamodb")
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert calls == ["UpdateSchedule"]
    assert "DeleteItem" not in ledger
    (schedule,) = env.schedules()
    assert "Grace" in schedule["Target"]["Input"]


def test_a_cancel_of_a_scheduled_item_deletes_one_schedule_and_one_marker(env: Env) -> None:
    """GIVEN an item of a sort-key table with its schedule
    WHEN the item is deleted
    THEN one DeleteSchedule and one ledger DeleteItem."""
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE)})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    env.delete("p", "s")
    calls, ledger = count_scheduler_calls(), count_calls("dynamodb")
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert calls == ["DeleteSchedule"]
    assert ledger.count("DeleteItem") == 1
    assert env.schedules() == []


def test_a_late_item_is_delivered_with_no_ledger_read(env: Env) -> None:
    """GIVEN an item of a sort-key table written with a due time already past
    WHEN the handler sees it
    THEN its DynamoDB calls are the batch's read of the item, the claim and the completion: no consistent read of the
    ledger (under another name of the occurrence) before the claim."""
    due = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    env.put({"PK": "p", "SK": "late", "dueAt": iso(due)})
    calls = count_calls("dynamodb")
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert calls == ["BatchGetItem", "PutItem", "UpdateItem"]
    assert len(env.messages(env.due_queue_url)) == 1


def test_a_new_recurring_item_makes_one_schedule_call(env: Env) -> None:
    """GIVEN a new item of a sort-key table holding a rule
    WHEN the handler sees it
    THEN one CreateSchedule, and no DeleteSchedule (of the item's schedule under another name) before it."""
    env.put({"PK": "p", "SK": "s", "dueAt": "rate(1 day)"})
    calls = count_scheduler_calls()
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert calls == ["CreateSchedule"]
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == "rate(1 day)"


def test_five_changes_of_one_item_make_one_schedule_call_for_its_final_time(env: Env) -> None:
    times = [FUTURE + timedelta(hours=n) for n in range(5)]
    for due in times:
        env.put({"PK": "p", "SK": "s", "dueAt": iso(due)})
    calls = count_scheduler_calls()
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert calls.count("CreateSchedule") == 1 and "UpdateSchedule" not in calls
    # One per due time the item left (an earlier run of this batch may have made its schedule), each finding nothing.
    assert calls.count("DeleteSchedule") == 4
    (schedule,) = env.schedules()
    assert schedule["ScheduleExpression"] == at(times[-1])


def test_a_payload_rewritten_in_the_same_batch_is_scheduled_once_with_the_last_payload(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE), "note": "old"})
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE), "note": "new"})
    calls = count_scheduler_calls()
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert calls == ["CreateSchedule"]
    (schedule,) = env.schedules()
    assert json.loads(schedule["Target"]["Input"])["item"]["note"] == "new"


@pytest.mark.parametrize("then", ["move", "remove"])
def test_a_schedule_made_by_an_earlier_run_is_cancelled_when_the_batch_comes_back_longer(env: Env, then: str) -> None:
    # GIVEN a first delivery that held only the INSERT (its run timed out after making the schedule)
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE)})
    (insert,) = env.event()["Records"]
    assert eventbridge.handle_batch({"Records": [insert]}, env.config) == {"batchItemFailures": []}
    # WHEN Lambda delivers the batch again, now with the item's next change after the INSERT
    if then == "move":
        env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE + timedelta(hours=3))})
    else:
        env.delete("p", "s")
    (change,) = env.event()["Records"]
    assert eventbridge.handle_batch({"Records": [insert, change]}, env.config) == {"batchItemFailures": []}
    # THEN the first due time's schedule is gone: coalescing the INSERT away must not forget the schedule it made
    expected = [at(FUTURE + timedelta(hours=3))] if then == "move" else []
    assert [s["ScheduleExpression"] for s in env.schedules()] == expected


def test_schedule_markers_that_cannot_be_written_send_their_records_back(env: Env) -> None:
    # GIVEN 30 new items (a full BatchWriteItem of markers mid-batch, 5 more at its end) and a ledger that throttles
    for n in range(30):
        env.put({"PK": f"user#{n}", "SK": "appt", "dueAt": iso(FUTURE)})
    batch = env.event()
    throttled: list[int] = []

    def throttle(**_: Any) -> None:
        throttled.append(1)
        raise ClientError(
            {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}}, "BatchWriteItem"
        )

    ddb = CLIENTS.get("dynamodb")
    ddb.meta.events.register("before-call.dynamodb.BatchWriteItem", throttle)
    response = eventbridge.handle_batch(batch, env.config)
    # THEN every record whose marker is missing is retried (from the lowest: Lambda resumes there), none is dropped
    assert throttled and len(env.schedules()) == 30
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert failed == {r["dynamodb"]["SequenceNumber"] for r in batch["Records"]}
    # AND once the ledger answers, the retried batch records all 30 markers
    ddb.meta.events.unregister("before-call.dynamodb.BatchWriteItem", throttle)
    assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    ledger = env.config["eventbridge"]["ledgerTable"]
    assert env.ddb.scan(TableName=ledger, Select="COUNT")["Count"] == 30


def test_a_batch_logs_one_summary_line_at_info(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    for n in range(5):
        env.put({"PK": f"user#{n}", "SK": "appt", "dueAt": iso(FUTURE)})
    batch = env.event()
    with caplog.at_level(logging.INFO, logger="scheduled_table"):
        assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    (summary,) = [json.loads(r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert summary["Records"] == 5 and summary["scheduled"] == 5 and summary["Mode"] == "eventbridge"


# -- at-least-once delivery -------------------------------------------------------------------------------------


def test_the_same_batch_delivered_twice_leaves_the_same_schedules(env: Env) -> None:
    for n in range(12):
        env.put({"PK": f"user#{n}", "SK": "appt", "dueAt": iso(FUTURE + timedelta(minutes=n))})
    batch = env.event()
    assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    first = {s["Name"]: (s["ScheduleExpression"], s["Target"]) for s in env.schedules()}
    assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    second = {s["Name"]: (s["ScheduleExpression"], s["Target"]) for s in env.schedules()}
    assert first == second and len(first) == 12
    assert env.messages(env.poison_url) == []


# -- bad input: poison queue ------------------------------------------------------------------------------------


def test_unparsable_time_goes_to_poison_with_reason_and_the_rest_of_the_batch_proceeds(env: Env) -> None:
    env.put({"PK": "bad", "SK": "s", "dueAt": "next tuesday-ish"})
    env.put({"PK": "good", "SK": "s", "dueAt": iso(FUTURE)})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert len(env.schedules()) == 1
    (poisoned,) = env.messages(env.poison_url)
    assert "not ISO-8601 or epoch seconds" in poisoned["reason"]
    assert poisoned["record"]["dynamodb"]["Keys"] == {"PK": {"S": "bad"}, "SK": {"S": "s"}}
    assert poisoned["mode"] == "eventbridge" and poisoned["eventName"] == "INSERT"


def test_epoch_milliseconds_are_refused_with_a_hint(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": 1930367167000})
    eventbridge.handle_batch(env.event(), env.config)
    (poisoned,) = env.messages(env.poison_url)
    assert "milliseconds" in poisoned["reason"]


def test_changing_the_time_to_garbage_cancels_the_old_schedule_and_parks_the_record(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE)})
    eventbridge.handle_batch(env.event(), env.config)
    env.put({"PK": "p", "SK": "s", "dueAt": "soon"})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert env.schedules() == []
    assert len(env.messages(env.poison_url)) == 1


def test_a_payload_the_api_rejects_goes_to_poison_not_retry(env: Env) -> None:
    fail_on("CreateSchedule", "ValidationException", 400, only_if="too-big")
    env.put({"PK": "p", "SK": "too-big", "dueAt": iso(FUTURE)})
    env.put({"PK": "p", "SK": "fine", "dueAt": iso(FUTURE)})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (poisoned,) = env.messages(env.poison_url)
    assert poisoned["error"] == "ValidationException" and "injected" in poisoned["reason"]
    (kept,) = env.schedules()
    assert kept["Name"].startswith("p-fine-")


# -- transient errors: retry from the failed record -------------------------------------------------------------


def test_throttling_reports_the_failed_record_and_holds_back_later_records_of_that_item(env: Env) -> None:
    env.put({"PK": "a", "SK": "s", "dueAt": iso(FUTURE)})
    env.put({"PK": "b", "SK": "s", "dueAt": iso(FUTURE)})
    env.put({"PK": "b", "SK": "s", "dueAt": iso(FUTURE + timedelta(hours=1))})
    batch = env.event()
    b_first = batch["Records"][1]["dynamodb"]["SequenceNumber"]
    calls = fail_on("CreateSchedule", "ThrottlingException", 400, only_if="b-s-")
    response = eventbridge.handle_batch(batch, env.config)
    assert response == {"batchItemFailures": [{"itemIdentifier": b_first}]}
    assert len(calls) == 1  # the later MODIFY of item b was not applied ahead of its INSERT
    assert [s["Name"].startswith("a-") for s in env.schedules()] == [True]
    assert env.messages(env.poison_url) == []


@pytest.mark.parametrize(("code", "status"), [("InternalServerException", 500), ("ServiceUnavailable", 503)])
def test_server_errors_are_retried_not_poisoned(env: Env, code: str, status: int) -> None:
    env.put({"PK": "a", "SK": "s", "dueAt": iso(FUTURE)})
    batch = env.event()
    fail_on("CreateSchedule", code, status)
    response = eventbridge.handle_batch(batch, env.config)
    assert response["batchItemFailures"] == [{"itemIdentifier": batch["Records"][0]["dynamodb"]["SequenceNumber"]}]
    assert env.messages(env.poison_url) == []


def test_an_unreachable_poison_queue_turns_a_poison_record_into_a_retry(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": "garbage"})
    batch = env.event()
    config = {**env.config, "poisonQueueUrl": env.poison_url + "-missing"}
    response = eventbridge.handle_batch(batch, config)  # type: ignore[arg-type]
    assert response["batchItemFailures"] == [{"itemIdentifier": batch["Records"][0]["dynamodb"]["SequenceNumber"]}]


# -- email target -----------------------------------------------------------------------------------------------


def email_config(env: Env) -> Any:
    return {
        **env.config,
        "target": {
            "kind": "email",
            "arn": "arn:aws:scheduler:::aws-sdk:sesv2:sendEmail",
            "email": {
                "sender": "reminders@example.com",
                "recipientAttribute": "email",
                "subject": "Your appointment at {REMINDER_TIMESTAMP}",
                "body": "Hello {name}, see you at {REMINDER_TIMESTAMP}.",
            },
        },
    }


def test_email_target_schedules_a_rendered_ses_message_through_the_universal_target(env: Env) -> None:
    env.put({"PK": "p", "SK": "s", "dueAt": iso(FUTURE), "email": "ada@example.com", "name": "Ada",
             "REMINDER_TIMESTAMP": "10:30"})  # fmt: skip
    assert eventbridge.handle_batch(env.event(), email_config(env)) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert schedule["Target"]["Arn"] == "arn:aws:scheduler:::aws-sdk:sesv2:sendEmail"
    assert json.loads(schedule["Target"]["Input"]) == {
        "FromEmailAddress": "reminders@example.com",
        "Destination": {"ToAddresses": ["ada@example.com"]},
        "Content": {
            "Simple": {
                "Subject": {"Data": "Your appointment at 10:30", "Charset": "UTF-8"},
                "Body": {"Text": {"Data": "Hello Ada, see you at 10:30.", "Charset": "UTF-8"}},
            }
        },
    }


def test_an_email_names_its_configuration_set_when_sent_now_and_when_scheduled(env: Env) -> None:
    """Both sends are checked against the roles the component renders (tests/iam/enforce.py), which SES authorizes
    on the configuration set as well as on the sender's identity."""
    import boto3
    from st_core.clients import CLIENTS

    config = email_config(env)
    config["target"]["email"]["configurationSet"] = "reminders"
    ses = boto3.client("sesv2", region_name="eu-west-1")
    ses.create_email_identity(EmailIdentity="reminders@example.com")
    ses.create_configuration_set(ConfigurationSetName="reminders")
    sent: list[dict[str, Any]] = []
    CLIENTS.get("sesv2").meta.events.register(
        "before-parameter-build.sesv2.SendEmail", lambda params, **_: sent.append(dict(params))
    )
    past = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    for sk, due in (("now", past), ("later", FUTURE)):
        env.put({"PK": "p", "SK": sk, "dueAt": iso(due), "email": "ada@example.com", "name": "A",
                 "REMINDER_TIMESTAMP": "x"})  # fmt: skip
    assert eventbridge.handle_batch(env.event(), config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert json.loads(schedule["Target"]["Input"])["ConfigurationSetName"] == "reminders"
    assert [(m["ConfigurationSetName"], m["Destination"]) for m in sent] == [
        ("reminders", {"ToAddresses": ["ada@example.com"]})
    ]


def test_email_missing_a_template_attribute_is_poison_for_that_record_only(env: Env) -> None:
    env.put({"PK": "p", "SK": "no-name", "dueAt": iso(FUTURE), "email": "a@example.com", "REMINDER_TIMESTAMP": "x"})
    env.put({"PK": "p", "SK": "ok", "dueAt": iso(FUTURE), "email": "b@example.com", "REMINDER_TIMESTAMP": "x",
             "name": "B"})  # fmt: skip
    assert eventbridge.handle_batch(env.event(), email_config(env)) == {"batchItemFailures": []}
    assert len(env.schedules()) == 1
    (poisoned,) = env.messages(env.poison_url)
    assert "name" in poisoned["reason"]


# -- schedule names ---------------------------------------------------------------------------------------------


def test_schedule_names_are_valid_and_distinct_for_awkward_keys(env: Env) -> None:
    awkward = ["ünïcødé#1", "a" * 300, "#", "user#1", "user 1", "USER#1", "日本語のキー"]
    for pk in awkward:
        env.put({"PK": pk, "SK": "s", "dueAt": iso(FUTURE)})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    names = [s["Name"] for s in env.schedules()]
    assert len(set(names)) == len(awkward)
    assert all(re.fullmatch(r"[0-9A-Za-z_.-]{1,64}", n) for n in names)


# -- a due time moved away and back while its schedule's minute comes (issue 24, defect 5) ----------------------


class LastInstant(SchedulerClock):
    """Scheduler running every schedule at the last instant of its minute (so a delete early in the minute finds
    it not yet run)."""

    def _draw(self, schedule: dict[str, Any]) -> datetime:
        return datetime.fromisoformat(schedule["ScheduleExpression"][3:-1]).replace(tzinfo=UTC) + timedelta(
            seconds=59.999
        )


ON_THE_MINUTE = FUTURE.replace(second=0)


def handled(env: Env, moment: datetime) -> None:
    """The table's new records, changed and handled at `moment`."""
    assert eventbridge.handle_batch(env.event(at=moment), env.config, now=lambda: moment) == {"batchItemFailures": []}


def deliveries(env: Env, clock: SchedulerClock) -> list[datetime]:
    """Due times of everything the target got, after every schedule has run."""
    clock.fire_due(ON_THE_MINUTE + timedelta(hours=2))
    return sorted(datetime.fromisoformat(m["dueAt"].replace("Z", "+00:00")) for m in env.messages(env.due_queue_url))


@pytest.mark.parametrize(
    ("away", "back"),
    [
        pytest.param(-5, -3, id="both-within-the-lead"),
        pytest.param(-5, 20, id="back-after-the-minute-began"),
        pytest.param(-30, -4, id="away-before-the-lead-back-within-it"),
    ],
)
def test_a_due_time_moved_away_and_back_before_its_minute_is_delivered_once(env: Env, away: int, back: int) -> None:
    # GIVEN an item due on a minute, scheduled ten minutes before
    clock = SchedulerClock(env)
    item = {"PK": "p", "SK": "s", "dueAt": iso(ON_THE_MINUTE)}
    env.put(item)
    handled(env, ON_THE_MINUTE - timedelta(minutes=10))
    # WHEN it moves away seconds before that minute (its own batch: the schedule is deleted, before it can run)
    env.put({**item, "dueAt": iso(ON_THE_MINUTE + timedelta(hours=1))})
    handled(env, ON_THE_MINUTE + timedelta(seconds=away))
    # AND comes back to the same due time in a later batch
    env.put({**item, "note": "back"})
    handled(env, ON_THE_MINUTE + timedelta(seconds=back))
    # THEN that due time is delivered once (it was lost: the cancel kept the schedule's ledger marker, so the return
    # found the occurrence owned by the schedule it had just deleted), and the time it left for a moment never
    assert deliveries(env, clock) == [ON_THE_MINUTE]


@pytest.mark.parametrize("same_batch", [False, True], ids=["separate-batches", "same-batch"])
def test_a_due_time_moved_away_and_back_after_its_minute_began_is_delivered_once(env: Env, same_batch: bool) -> None:
    # GIVEN a scheduled item whose schedule will run late in its minute
    clock = LastInstant(env)
    item = {"PK": "p", "SK": "s", "dueAt": iso(ON_THE_MINUTE)}
    env.put(item)
    handled(env, ON_THE_MINUTE - timedelta(minutes=10))
    # WHEN it moved away and back before its due time, but the stream handles the move only once the minute began
    env.put({**item, "dueAt": iso(ON_THE_MINUTE + timedelta(hours=1))})
    away = env.event(at=ON_THE_MINUTE - timedelta(seconds=2))
    env.put({**item, "note": "back"})
    back = env.event(at=ON_THE_MINUTE - timedelta(seconds=1))
    late = ON_THE_MINUTE + timedelta(seconds=5)
    for batch in [{"Records": away["Records"] + back["Records"]}] if same_batch else [away, back]:
        assert eventbridge.handle_batch(batch, env.config, now=lambda: late) == {"batchItemFailures": []}
    # THEN it is delivered once: a schedule that may be running is left to run (deleting it could not tell whether
    # it had already delivered), and its marker keeps the return from delivering a second time
    assert deliveries(env, clock) == [ON_THE_MINUTE]


def test_a_cancel_handled_within_the_lead_still_cancels(env: Env) -> None:
    clock = SchedulerClock(env)
    env.put({"PK": "p", "SK": "s", "dueAt": iso(ON_THE_MINUTE)})
    handled(env, ON_THE_MINUTE - timedelta(minutes=10))
    env.delete("p", "s")
    handled(env, ON_THE_MINUTE - timedelta(seconds=5))
    assert env.schedules() == [] and deliveries(env, clock) == []


def test_a_cancel_handled_once_the_schedules_minute_began_leaves_it_to_run(env: Env) -> None:
    # The documented limit: from its minute on, a schedule may be running; deleting it then cannot tell whether it
    # delivered, so it is left to deliver (once), as a cancel processed after the firing always was.
    clock = LastInstant(env)
    env.put({"PK": "p", "SK": "s", "dueAt": iso(ON_THE_MINUTE)})
    handled(env, ON_THE_MINUTE - timedelta(minutes=10))
    env.delete("p", "s")
    eventbridge.handle_batch(env.event(at=ON_THE_MINUTE - timedelta(seconds=2)), env.config, now=lambda: ON_THE_MINUTE)
    assert deliveries(env, clock) == [ON_THE_MINUTE]


def test_a_cancel_retried_after_its_marker_could_not_be_forgotten_forgets_it(env: Env) -> None:
    # GIVEN a cancel whose schedule was deleted but whose ledger marker could not be removed (throttled throughout)
    clock = SchedulerClock(env)
    item = {"PK": "p", "SK": "s", "dueAt": iso(ON_THE_MINUTE)}
    env.put(item)
    handled(env, ON_THE_MINUTE - timedelta(minutes=10))
    env.put({**item, "dueAt": iso(ON_THE_MINUTE + timedelta(hours=1))})
    away = env.event(at=ON_THE_MINUTE - timedelta(minutes=2))

    def throttle(params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") == env.config["eventbridge"]["ledgerTable"]:
            raise ClientError(
                {"Error": {"Code": "ThrottlingException", "Message": "injected"}, "ResponseMetadata": {}},
                "DeleteItem",
            )

    ddb = CLIENTS.get("dynamodb")
    ddb.meta.events.register("before-parameter-build.dynamodb.DeleteItem", throttle)
    moment = ON_THE_MINUTE - timedelta(minutes=2)
    assert eventbridge.handle_batch(away, env.config, now=lambda: moment)["batchItemFailures"] != []
    ddb.meta.events.unregister("before-parameter-build.dynamodb.DeleteItem", throttle)
    # WHEN Lambda retries it (the schedule is gone by now) and the item then comes back to the due time
    assert eventbridge.handle_batch(away, env.config, now=lambda: moment) == {"batchItemFailures": []}
    env.put({**item, "note": "back"})
    handled(env, ON_THE_MINUTE + timedelta(seconds=20))
    # THEN it is delivered once (now, by the handler): a schedule that cannot have run yet owns nothing, whoever
    # deleted it
    assert deliveries(env, clock) == [ON_THE_MINUTE]
