"""`precision="second"` under Pulumi mocks: the option's rules, the release queue and its consumer, IAM exactly
scoped, and what the handlers are told."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from components import ScheduledTableArgs
from components.eventbridge import RELEASE_MAX_RECEIVES
from components.stack_config import DictConfig, args_from_config
from tests.components.conftest import Built
from tests.components.test_stack_config import FakeConfig

Build = Callable[..., Built]
SECOND = {"precision": "second", "alarms": False, "dashboard": False}


def arn(built: Built, name: str) -> str:
    return str(built.one(name).outputs["arn"])


def url(built: Built, name: str) -> str:
    return str(built.one(name).outputs["url"])


# -- the option ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"precision": "millisecond"}, "precision: 'millisecond' is not a precision; use 'minute' (the default) or "),
        ({"precision": 1}, "precision: expected text, got 1; pass precision as a string, e.g. 'minute'"),
        ({"mode": "ttl", "precision": "second"}, "precision: only applies to mode='eventbridge' (mode is 'ttl'); "),
        (
            {"mode": "polling", "precision": "second"},
            "precision: only applies to mode='eventbridge' (mode is 'polling')",
        ),
        (
            {"precision": "second", "lambda_timeout_seconds": 9},
            "lambda_timeout_seconds: 9 s is too short for precision='second' (the release function holds each due "
            "event up to 1 s before its calls; a run that times out delivers its batch 39 s late); use at least 10 "
            "(the default is 60), or precision='minute'",
        ),
    ],
)
def test_a_bad_precision_is_refused_with_the_fix(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        ScheduledTableArgs(**{"mode": "eventbridge", **kwargs})
    assert str(raised.value).startswith(message)


def test_minute_is_the_default_and_second_comes_from_a_stack_file() -> None:
    assert ScheduledTableArgs(mode="eventbridge").precision == "minute"
    assert ScheduledTableArgs(mode="ttl", precision="minute").precision == "minute"  # the default is no conflict
    # The release function's shortest timeout, and any timeout in minute precision (no release function).
    assert ScheduledTableArgs(mode="eventbridge", precision="second", lambda_timeout_seconds=10).precision == "second"
    assert ScheduledTableArgs(mode="eventbridge", lambda_timeout_seconds=1).lambda_timeout_seconds == 1
    config = DictConfig({"mode": "eventbridge", "precision": "second"}, FakeConfig({}))
    assert args_from_config(config).precision == "second"


# -- resources ---------------------------------------------------------------------------------------------------


def test_second_precision_adds_a_release_queue_and_its_consumer_and_nothing_else(build: Build) -> None:
    minute = {n for n, r in build(alarms=False, dashboard=False).mocks.by_name.items()}
    second = {n for n, r in build(**SECOND).mocks.by_name.items()}
    assert second - minute == {
        "rem-release",
        "rem-releaser",
        "rem-releaser-role",
        "rem-releaser-policy",
        "rem-releaser-logs",
        "rem-release-mapping",
    }
    assert minute <= second


def test_the_release_queue_redrives_to_the_target_dlq_and_outlasts_the_function(build: Build) -> None:
    built = build(lambda_timeout_seconds=45, **SECOND)
    queue = built.one("rem-release").inputs
    assert json.loads(queue["redrivePolicy"]) == {
        "deadLetterTargetArn": arn(built, "rem-target-dlq"),
        "maxReceiveCount": RELEASE_MAX_RECEIVES,
    }
    assert queue["visibilityTimeoutSeconds"] == 75  # >= the function's 45 s (AWS requires it); = the ledger's lease
    assert queue["sqsManagedSseEnabled"] is True and queue["maxMessageSize"] == 1048576
    assert not queue.get("delaySeconds")  # each message carries its own


def test_the_release_consumer_takes_each_message_at_once_and_reports_partial_failures(build: Build) -> None:
    built = build(**SECOND)
    mapping = built.one("rem-release-mapping").inputs
    assert mapping["eventSourceArn"] == arn(built, "rem-release")
    assert mapping["functionName"] == arn(built, "rem-releaser")
    assert mapping["maximumBatchingWindowInSeconds"] == 0
    assert mapping["batchSize"] == 10
    assert mapping["functionResponseTypes"] == ["ReportBatchItemFailures"]
    function = built.one("rem-releaser").inputs
    assert function["handler"] == "release.handler"
    assert "release queue until its second" in function["description"]


def test_the_handlers_are_told_where_the_release_queue_is(build: Build) -> None:
    built = build(**SECOND)
    configs = [
        json.loads(built.one(name).inputs["environment"]["variables"]["SCHEDULED_TABLE_CONFIG"])
        for name in ("rem-scheduler", "rem-releaser")
    ]
    assert configs[0] == configs[1]
    assert configs[0]["eventbridge"]["release"] == {
        "queueArn": arn(built, "rem-release"),
        "queueUrl": url(built, "rem-release"),
        "deadLetterUrl": url(built, "rem-target-dlq"),
    }
    assert "release" not in build(alarms=False, dashboard=False).handler_config()["eventbridge"]


def test_the_environment_check_counts_the_release_queue(build: Build) -> None:
    # The 4 KB check at construction counts the three release values at their longest: a body that fits in minute
    # precision can be too long in second precision, and the error names it.
    from components import EmailTarget

    body = "x" * 1500
    ScheduledTableArgs(mode="eventbridge", target=EmailTarget("a@example.com", body=body))
    with pytest.raises(ValueError, match=r"target\.body: the function environment would be about"):
        ScheduledTableArgs(mode="eventbridge", precision="second", target=EmailTarget("a@example.com", body=body))


# -- IAM, exactly ------------------------------------------------------------------------------------------------


def test_scheduler_may_send_to_the_release_queue_and_the_target_dlq(build: Build) -> None:
    built = build(**SECOND)
    statements = built.statements("rem-scheduler-exec-policy")
    # The target's one action stays for recurring items (they are delivered by Scheduler on the minute).
    assert statements == [
        {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [arn(built, "rem-due")]},
        {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [arn(built, "rem-release")]},
        {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [arn(built, "rem-target-dlq")]},
    ]


def test_the_release_consumer_may_do_exactly_its_work(build: Build) -> None:
    built = build(**SECOND)
    statements = built.statements("rem-releaser-policy")
    logs = built.one("rem-releaser-logs").outputs["arn"]
    assert statements == [
        {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": [logs, f"{logs}:*"]},
        {
            "Effect": "Allow",
            "Action": ["sqs:SendMessage"],
            "Resource": sorted(arn(built, q) for q in ("rem-release", "rem-poison", "rem-target-dlq")),
        },
        # The target (here the owned due queue) and its URL lookup.
        {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [arn(built, "rem-due")]},
        {"Effect": "Allow", "Action": ["sqs:GetQueueUrl"], "Resource": [arn(built, "rem-due")]},
        {
            "Effect": "Allow",
            "Action": ["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
            "Resource": [arn(built, "rem-ledger")],
        },
        {"Effect": "Allow", "Action": ["dynamodb:GetItem"], "Resource": [arn(built, "rem-table")]},
        {
            "Effect": "Allow",
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"],
            "Resource": [arn(built, "rem-release")],
        },
    ]


def test_the_stream_consumer_may_also_send_to_the_release_queue(build: Build) -> None:
    built = build(**SECOND)
    minute = build(alarms=False, dashboard=False).statements("rem-scheduler-policy")
    second = built.statements("rem-scheduler-policy")
    added = [s for s in second if s not in minute]
    assert added == [{"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [arn(built, "rem-release")]}]


def test_minute_precision_is_unchanged(build: Build) -> None:
    built = build(alarms=False, dashboard=False)
    assert not [n for n in built.mocks.by_name if "release" in n]
    assert "release" not in json.dumps(built.statements("rem-scheduler-exec-policy"))
