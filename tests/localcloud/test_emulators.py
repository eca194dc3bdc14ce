"""The emulators' pure parts: schedule times, universal target calls, and the TTL process's delays and records."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from localcloud.emulators import UniversalTargets, _Captured, at_epoch, retryable, universal_call
from localcloud.throttle import (
    AWS_INVOCATIONS_PER_SECOND,
    LOCAL_INVOCATIONS_PER_SECOND,
    SCHEDULER_RATE_VARIABLE,
    InvocationThrottle,
    ThrottledDispatcher,
    configured_rate,
    install,
)
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


# -- Scheduler's invocation throttle (localcloud/throttle.py) --------------------------------------------------------


class _Clock:
    """A clock only `sleep` moves, shared by the submitter and the dispatcher's thread."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0
        self.lock = threading.Lock()

    def time(self) -> float:
        with self.lock:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


def test_a_burst_over_the_throttle_is_delayed_in_order_none_dropped_none_early() -> None:
    clock = _Clock()
    throttle = InvocationThrottle(rate=100.0, clock=clock.time)
    dispatcher = ThrottledDispatcher(throttle, workers=1, sleep=clock.sleep)
    ran: list[tuple[int, float]] = []  # (firing, when it ran)
    turns: list[tuple[float, float]] = []  # (when it asked, its turn)

    def firing(n: int) -> Callable[[], None]:
        return lambda: ran.append((n, clock.time()))

    for n in range(500):  # five seconds' worth, all due at once
        asked = clock.time()
        turns.append((asked, dispatcher.submit(firing(n))))
    dispatcher.close()
    assert [n for n, _ in ran] == list(range(500))  # every one ran, in order
    assert all(at >= turns[n][1] >= turns[n][0] for n, at in ran)  # none before its turn, no turn before it asked
    gaps = [b[1] - a[1] for a, b in itertools.pairwise(turns)]
    assert min(gaps) == pytest.approx(0.01)  # never faster than the rate
    assert turns[-1][1] - turns[0][1] == pytest.approx(4.99)  # delayed, not dropped: the burst drains at the rate
    assert throttle.granted == 500 and throttle.delayed >= 450


def test_firings_under_the_rate_are_not_delayed() -> None:
    clock = _Clock()
    throttle = InvocationThrottle(rate=10.0, clock=clock.time)
    turns = []
    for _ in range(3):
        turns.append(throttle.turn() - clock.time())
        clock.sleep(0.5)  # two a second, under ten
    assert turns == [0.0, 0.0, 0.0] and throttle.delayed == 0


def test_ministacks_scheduler_firings_wait_their_turn_and_others_do_not(monkeypatch: pytest.MonkeyPatch) -> None:
    from ministack import app
    from ministack.services import eventbridge

    fired: list[tuple[str, float]] = []
    monkeypatch.setattr(
        eventbridge, "_invoke_target", lambda target, event, rule, view=None: fired.append((target["Id"], time.time()))
    )
    monkeypatch.setattr(app, "_handle_sqs_messages_request", app._handle_sqs_messages_request)
    dispatcher = install(rate=50.0)
    assert dispatcher is not None
    began = time.time()
    for n in range(20):
        eventbridge._invoke_target({"Id": f"s{n}"}, {"Source": "aws.scheduler"}, {})
    eventbridge._invoke_target({"Id": "rule"}, {"Source": "aws.events"}, {})  # a rule's target: not Scheduler's
    assert fired[0][0] == "rule"  # at once, ahead of the throttled firings
    dispatcher.close()
    scheduled = [(name, at) for name, at in fired if name != "rule"]
    assert [name for name, _ in scheduled] == [f"s{n}" for n in range(20)]
    assert scheduled[-1][1] - began >= 19 / 50.0 - 0.01  # twenty at 50 a second: the last about 0.38 s later


def test_the_throttle_rate_is_configured_and_zero_switches_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SCHEDULER_RATE_VARIABLE, raising=False)
    assert configured_rate() == LOCAL_INVOCATIONS_PER_SECOND == AWS_INVOCATIONS_PER_SECOND / 10
    monkeypatch.setenv(SCHEDULER_RATE_VARIABLE, "0")
    assert configured_rate() == 0 and install() is None
    monkeypatch.setenv(SCHEDULER_RATE_VARIABLE, "-5")
    with pytest.raises(ValueError, match="LOCALCLOUD_SCHEDULER_RATE must be 0"):
        configured_rate()


def test_a_universal_target_waits_its_turn_before_its_call() -> None:
    target = _Target([])
    waits: list[float] = []
    targets = UniversalTargets(
        client=lambda service: target, endpoint="-", region="eu-west-1", sleep=waits.append, turn=lambda: 2.5
    )
    definition = {"Arn": "arn:aws:scheduler:::aws-sdk:dynamodb:updateItem", "Input": json.dumps({"TableName": "t"})}
    targets._fire(_Captured("g", "s", "arn:aws:scheduler:eu-west-1:000000000000:schedule/g/s", 0.0, definition, "", ""))
    targets.close()
    assert waits == [2.5] and target.calls == 1
