"""The emulators' pure parts: schedule times, universal target calls, and the TTL process's delays and records."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError, EndpointConnectionError

from localcloud.emulators import UniversalTargets, _Captured, at_epoch, retryable, universal_call
from localcloud.ttl import TtlProcess


def test_at_expressions_honour_their_time_zone() -> None:
    utc = datetime(2026, 11, 21, 10, 0, tzinfo=UTC).timestamp()
    assert at_epoch("at(2026-11-21T10:00:00)", None) == utc
    assert at_epoch("at(2026-11-21T11:00:00)", "Europe/Paris") == utc
    assert at_epoch("rate(5 minutes)", None) is None


def test_universal_target_arns_name_the_boto3_method() -> None:
    assert universal_call("arn:aws:scheduler:::aws-sdk:sesv2:sendEmail") == ("sesv2", "send_email")
    assert universal_call("arn:aws:scheduler:::aws-sdk:dynamodb:deleteItem") == ("dynamodb", "delete_item")


def test_the_ttl_process_marks_only_its_own_deletions_as_the_service_s() -> None:
    process = TtlProcess()
    user_delete = {"eventName": "REMOVE", "dynamodb": {"Keys": {"PK": {"S": "a"}}}}
    assert "userIdentity" not in process.mark(dict(user_delete))
    process._emitting.ttl = True
    assert process.mark(dict(user_delete))["userIdentity"] == {
        "type": "Service",
        "principalId": "dynamodb.amazonaws.com",
    }


def test_the_ttl_process_deletes_after_its_delay_once_switched_on() -> None:
    process = TtlProcess()
    assert not process.enabled
    process.configure({"start": ["1"], "delay": ["5"], "delays": [json.dumps({"offers-table": 200})]})
    assert process.enabled
    assert process.expires("sessions-table", 1000.0) == 1005.0
    assert process.expires("offers-table", 1000.0) == 1200.0
    process.configure({})  # a read changes nothing
    assert process.enabled
    process.configure({"stop": ["1"]})
    assert not process.enabled


class _Target:
    """A universal target's service (throttles first, then answers), the DLQ's SQS and Scheduler, as one client."""

    def __init__(self, failures: list[str]) -> None:
        self.failures = failures
        self.calls = 0
        self.dead_letters: list[dict[str, Any]] = []

    def update_item(self, **_: Any) -> dict[str, Any]:
        self.calls += 1
        if self.failures:
            code = self.failures.pop(0)
            status = 400 if code != "InternalServerError" else 500
            raise ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "UpdateItem")
        return {}

    def get_queue_url(self, QueueName: str) -> dict[str, str]:
        return {"QueueUrl": f"https://sqs.local/{QueueName}"}

    def send_message(self, **message: Any) -> None:
        self.dead_letters.append(message)

    def delete_schedule(self, **_: Any) -> None:
        pass


def _fire(failures: list[str], retry: dict[str, int] | None = None) -> tuple[_Target, list[float]]:
    target = _Target(failures)
    waits: list[float] = []
    targets = UniversalTargets(client=lambda service: target, endpoint="-", region="eu-west-1", sleep=waits.append)
    definition: dict[str, Any] = {
        "Arn": "arn:aws:scheduler:::aws-sdk:dynamodb:updateItem",
        "Input": json.dumps({"TableName": "offers"}),
        "DeadLetterConfig": {"Arn": "arn:aws:sqs:eu-west-1:000000000000:offers-target-dlq"},
    }
    if retry is not None:
        definition["RetryPolicy"] = retry
    captured = _Captured(
        "g", "s", "arn:aws:scheduler:eu-west-1:000000000000:schedule/g/s", time.time(), definition, "", ""
    )
    targets._fire(captured)
    targets.close()
    return target, waits


def test_a_throttled_universal_target_is_retried_as_scheduler_retries_it_and_not_dead_lettered() -> None:
    target, waits = _fire(["ThrottlingException", "InternalServerError"])
    assert target.calls == 3 and target.dead_letters == []
    assert waits == [1.0, 2.0]  # a growing wait between attempts


def test_a_failure_that_cannot_pass_is_dead_lettered_at_once() -> None:
    target, waits = _fire(["ConditionalCheckFailedException"])
    assert target.calls == 1 and waits == []
    [letter] = target.dead_letters
    assert letter["MessageAttributes"]["ERROR_CODE"]["StringValue"] == "ConditionalCheckFailedException"
    assert letter["MessageAttributes"]["RETRY_ATTEMPTS"]["StringValue"] == "0"


def test_retries_stop_at_the_schedules_retry_policy_and_the_event_is_dead_lettered() -> None:
    target, waits = _fire(["ThrottlingException"] * 5, {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 3600})
    assert target.calls == 3 and len(waits) == 2
    [letter] = target.dead_letters
    assert letter["MessageAttributes"]["ERROR_CODE"]["StringValue"] == "ThrottlingException"
    assert letter["MessageAttributes"]["RETRY_ATTEMPTS"]["StringValue"] == "2"


def test_a_dropped_connection_is_retried_and_a_refusal_is_not() -> None:
    assert retryable(EndpointConnectionError(endpoint_url="http://127.0.0.1:1"))
    denied = ClientError({"Error": {"Code": "AccessDeniedException"}, "ResponseMetadata": {"HTTPStatusCode": 400}}, "X")
    assert not retryable(denied)
