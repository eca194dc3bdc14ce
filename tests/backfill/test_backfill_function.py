"""The backfill function's resources and policy (`backfill_function=True`): the consumer's permissions without the
stream, plus the scan and reads on this table and this group's schedules; its handler is the shipped entry point."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

from components.backfill_function import STREAM_ACTIONS, backfill_statements, build_backfill
from components.parts import Consumer, Made, Owner
from components.testing import run_with_mocks

TABLE = "arn:aws:dynamodb:eu-west-1:123456789012:table/items"
GROUP = "arn:aws:scheduler:eu-west-1:123456789012:schedule-group/items"
STREAM_DLQ = "arn:aws:sqs:eu-west-1:123456789012:items-stream-dlq"
POISON = "arn:aws:sqs:eu-west-1:123456789012:items-poison"
CONSUMER = [
    {
        "Effect": "Allow",
        "Action": sorted(STREAM_ACTIONS),
        "Resource": [f"{TABLE}/stream/*"],
    },
    {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": ["consumer-logs"]},
    {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [POISON, STREAM_DLQ]},
    {
        "Effect": "Allow",
        "Action": ["scheduler:CreateSchedule"],
        "Resource": [f"{GROUP.replace('schedule-group', 'schedule')}/*"],
    },
]


def test_the_policy_is_the_consumers_without_the_stream_plus_the_scan() -> None:
    statements = backfill_statements(CONSUMER, mode="eventbridge", table_arn=TABLE, stream_dlq_arn=STREAM_DLQ)
    actions = {a for s in statements for a in s["Action"]}
    assert not actions & STREAM_ACTIONS
    assert {"dynamodb:Scan", "dynamodb:BatchGetItem", "scheduler:CreateSchedule", "scheduler:GetSchedule"} <= actions
    read = next(s for s in statements if "scheduler:GetSchedule" in s["Action"])
    assert read["Resource"] == [f"{GROUP.replace('schedule-group', 'schedule')}/*"]  # the consumer's group only
    scan = next(s for s in statements if "dynamodb:Scan" in s["Action"])
    assert scan["Resource"] == [TABLE]  # this table only: no index, no stream, no other table


def test_the_backfill_role_sends_to_the_poison_queue_and_not_to_the_stream_dlq() -> None:
    # Only the consumer's event source mapping sends to the stream DLQ (with the consumer's role); a backfill has no
    # mapping, and its code parks in the poison queue only.
    statements = backfill_statements(CONSUMER, mode="eventbridge", table_arn=TABLE, stream_dlq_arn=STREAM_DLQ)
    sends = [s for s in statements if "sqs:SendMessage" in s["Action"]]
    assert sends == [{"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [POISON]}]


def test_a_consumer_without_schedules_gets_no_scheduler_permission() -> None:
    statements = backfill_statements(CONSUMER[:3], mode="polling", table_arn=TABLE, stream_dlq_arn=STREAM_DLQ)
    assert not any(a.startswith("scheduler:") for s in statements for a in s["Action"])


def test_build_backfill_deploys_the_entry_point_with_the_consumers_code_and_configuration() -> None:
    def program() -> dict[str, Any]:
        role = aws.iam.Role("items-consumer-role", assume_role_policy="{}")
        policy = aws.iam.RolePolicy(
            "items-consumer-policy", role=role.id, policy=json.dumps({"Version": "2012-10-17", "Statement": CONSUMER})
        )
        logs = aws.cloudwatch.LogGroup("items-consumer-logs")
        function = aws.lambda_.Function(
            "items-consumer",
            handler="eventbridge.handler",
            runtime="python3.12",
            role=role.arn,
            memory_size=512,
            code=pulumi.AssetArchive({}),
            environment=aws.lambda_.FunctionEnvironmentArgs(variables={"SCHEDULED_TABLE_CONFIG": '{"mode":"x"}'}),
        )
        consumer = Consumer(function=function, role=role, log_group=logs, policy=policy)
        owner = Owner(name="items", parent=None, tags={}, made=Made())  # type: ignore[arg-type]
        made = build_backfill(
            owner=owner,
            consumer=consumer,
            mode="eventbridge",
            table_arn=TABLE,
            stream_dlq_arn=STREAM_DLQ,
            log_retention_days=14,
        )
        return {"name": made.name}

    stack = run_with_mocks(program)
    function = stack.mocks.by_name["items-backfill"]
    assert function.inputs["handler"] == "backfill.handler"
    assert function.inputs["timeout"] == 900
    assert function.inputs["environment"]["variables"] == {"SCHEDULED_TABLE_CONFIG": '{"mode":"x"}'}
    statements = json.loads(stack.mocks.by_name["items-backfill-policy"].inputs["policy"])["Statement"]
    logs = next(s for s in statements if "logs:PutLogEvents" in s["Action"])
    assert "consumer-logs" not in logs["Resource"]  # its own log group, not the consumer's
    assert not {a for s in statements for a in s["Action"]} & STREAM_ACTIONS
