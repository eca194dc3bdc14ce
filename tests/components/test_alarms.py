"""Alarms and the dashboard, for every mode: what is watched, the thresholds, where alarms go."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from components import ScheduledTableArgs, policies
from components.alarms import dashboard_body, dashboard_name, iterator_age_alarm, queue_alarm

from .conftest import Built

Build = Callable[..., Built]
TOPIC = "arn:aws:sns:eu-west-1:123456789012:ops"


def alarms(built: Built) -> dict[str, dict[str, Any]]:
    return {r.name: r.inputs for r in built.of_type(":MetricAlarm")}


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("eventbridge", {"stream-dlq", "poison", "target-dlq", "scheduler"}),
        ("ttl", {"stream-dlq", "poison", "executor"}),
        ("polling", {"stream-dlq", "poison", "target-dlq", "processor", "assigner"}),
        ("aggregate", {"stream-dlq", "poison", "aggregator"}),
    ],
)
def test_every_dead_letter_queue_and_function_is_watched(build: Build, mode: str, expected: set[str]) -> None:
    names = set(alarms(build(mode=mode)))
    for role in expected:
        assert any(n.startswith(f"rem-{role}-") for n in names), (role, names)
    assert not any(n.startswith("rem-due-") for n in names)  # messages in the due queue are the point


def test_a_dead_letter_alarm_fires_on_the_first_message(build: Build) -> None:
    alarm = alarms(build())["rem-poison-not-empty-alarm"]
    assert (alarm["namespace"], alarm["metricName"], alarm["statistic"]) == (
        "AWS/SQS",
        "ApproximateNumberOfMessagesVisible",
        "Maximum",
    )
    assert (alarm["comparisonOperator"], alarm["threshold"]) == ("GreaterThanThreshold", 0)
    assert alarm["treatMissingData"] == "notBreaching"


def test_stream_consumers_alarm_on_iterator_age_and_the_processor_does_not(build: Build) -> None:
    found = alarms(build(mode="polling", iterator_age_alarm_seconds=120))
    assert found["rem-assigner-iterator-age-alarm"]["threshold"] == 120_000
    assert "rem-processor-iterator-age-alarm" not in found


def test_alarms_go_to_the_given_topic(build: Build) -> None:
    for alarm in alarms(build(alarm_topic_arn=TOPIC)).values():
        assert alarm["alarmActions"] == [TOPIC] and alarm["okActions"] == [TOPIC]


def test_a_created_topic_is_encrypted_with_its_own_key_and_exported(build: Build) -> None:
    built = build(create_alarm_topic=True)
    [topic], [key] = built.of_type(":Topic"), built.of_type(":Key")
    assert topic.inputs["kmsMasterKeyId"] == key.outputs["arn"]  # not alias/aws/sns, which CloudWatch cannot use
    assert key.inputs["enableKeyRotation"] is True and key.inputs["description"]
    assert key.inputs["tags"] == {"scheduled-table:component": "rem"}
    table_arn = built.one("rem-table").outputs["arn"]
    assert json.loads(key.inputs["policy"]) == json.loads(policies.alarm_topic_key_policy(table_arn))
    assert built.outputs["alarm_topic_arn"] == topic.outputs["arn"]
    assert all(a["alarmActions"] == [topic.outputs["arn"]] for a in alarms(built).values())


def test_no_key_without_a_created_topic(build: Build) -> None:
    assert build(alarm_topic_arn=TOPIC).of_type(":Key") == []


def test_the_alarm_topic_key_lets_cloudwatch_use_it_for_this_account_only() -> None:
    document = json.loads(policies.alarm_topic_key_policy("arn:aws:dynamodb:eu-west-1:123456789012:table/t"))
    admin, cloudwatch = document["Statement"]
    assert admin == {
        "Sid": "AccountAdministersTheKey",
        "Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
        "Action": "kms:*",
        "Resource": "*",
    }
    assert cloudwatch["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert cloudwatch["Action"] == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert cloudwatch["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}
    china = json.loads(policies.alarm_topic_key_policy("arn:aws-cn:dynamodb:cn-north-1:123456789012:table/t"))
    assert china["Statement"][0]["Principal"] == {"AWS": "arn:aws-cn:iam::123456789012:root"}


def test_alarms_and_dashboard_can_be_turned_off(build: Build) -> None:
    built = build(alarms=False, dashboard=False)
    assert built.of_type(":MetricAlarm") == [] and built.of_type(":Dashboard") == []


def test_the_dashboard_shows_the_tables_functions_and_queues(build: Build) -> None:
    built = build(mode="polling")
    [dashboard] = built.of_type(":Dashboard")
    body = json.loads(dashboard.inputs["dashboardBody"])
    text = json.dumps(body)
    for name in (
        "rem-processor",
        "rem-assigner",
        "rem-poison",
        "rem-target-dlq",
        "Backlog",
        "BackloggedShards",
        "Throttled",
    ):
        assert name in text
    assert {w["properties"]["title"] for w in body["widgets"]} >= {"Processor backlog (polling)"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alarm_topic_arn": TOPIC, "create_alarm_topic": True}, "create_alarm_topic: conflicts with alarm_topic_arn"),
        ({"alarms": False, "create_alarm_topic": True}, "alarms: is off, so an alarm topic would never be used"),
        ({"alarm_topic_arn": "ops"}, "alarm_topic_arn: 'ops' is not an SNS topic ARN"),
        ({"iterator_age_alarm_seconds": 10}, "iterator_age_alarm_seconds: 10 is out of range"),
    ],
)
def test_alarm_options_are_checked(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScheduledTableArgs(mode="eventbridge", **kwargs)


def test_specs_are_pure() -> None:
    assert queue_alarm("poison", "q").dimensions == {"QueueName": "q"}
    assert iterator_age_alarm("scheduler", "f", 300).threshold == 300_000
    body = json.loads(
        dashboard_body(
            region="eu-west-1", table="t", mode="ttl", functions=["f"], stream_functions=["f"], queues={"poison": "q"}
        )
    )
    assert body["widgets"][0]["properties"]["metrics"][0] == ["ScheduledTable", "Records", "Mode", "ttl", "Table", "t"]


def test_the_dashboard_name_holds_the_stack_so_two_stacks_never_share_one(build: Build) -> None:
    [dashboard] = build().of_type(":Dashboard")
    assert dashboard.inputs["dashboardName"] == f"rem-{pulumi.get_stack()}-scheduled-table"
    # CloudWatch takes letters, digits, '-' and '_' only; a stack name may also hold '.'.
    assert dashboard_name("rem", "team.prod") == "rem-team-prod-scheduled-table"
    assert dashboard_name("rem", "dev") != dashboard_name("rem", "prod")
    assert len(dashboard_name("r" * 200, "s" * 200)) == 255


# -- issue 24.2: alarm_topic_arn takes a Pulumi Output (a topic made in the same program), checked when it resolves


def test_an_alarm_topic_given_as_an_output_is_used(build: Build) -> None:
    built = build(alarm_topic_arn=pulumi.Output.from_input(TOPIC))
    for alarm in alarms(built).values():
        assert alarm["alarmActions"] == [TOPIC] and alarm["okActions"] == [TOPIC]
    assert built.outputs["alarm_topic_arn"] == TOPIC


def test_a_topic_made_in_the_same_program_receives_the_alarms() -> None:
    import pulumi_aws as aws

    from components import ScheduledTable
    from components.testing import run_with_mocks

    def program() -> pulumi.Output[str]:
        topic = aws.sns.Topic("ops")
        ScheduledTable("rem", ScheduledTableArgs(mode="eventbridge", alarm_topic_arn=topic.arn))
        return topic.arn

    stack = run_with_mocks(program)
    assert stack.result.startswith("arn:aws:sns:eu-west-1:123456789012:ops-")
    alarm = stack.one("rem-poison-not-empty-alarm").inputs
    assert alarm["alarmActions"] == [stack.result] and alarm["okActions"] == [stack.result]


NOT_A_TOPIC = (
    "is not an SNS topic ARN; pass the topic's `.arn` (arn:aws:sns:<region>:<account>:<topic>), e.g. "
    "'arn:aws:sns:eu-west-1:123456789012:ops'"
)


@pytest.mark.parametrize(
    "value",
    ["ops", "arn:aws:sqs:eu-west-1:123456789012:ops", "https://sns.eu-west-1.amazonaws.com/ops", "arn:aws:sns:ops"],
)
def test_a_wrong_alarm_topic_fails_with_the_same_message_plain_or_inside_an_output(build: Build, value: str) -> None:
    with pytest.raises(ValueError) as plain:
        ScheduledTableArgs(mode="eventbridge", alarm_topic_arn=value)
    assert str(plain.value) == f"alarm_topic_arn: {value!r} {NOT_A_TOPIC}"
    with pytest.raises(ValueError) as resolved:
        build(alarm_topic_arn=pulumi.Output.from_input(value))
    assert str(resolved.value).splitlines()[-1].endswith(str(plain.value))
