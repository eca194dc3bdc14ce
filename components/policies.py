"""IAM documents as pure functions of plain strings: least privilege, no `*` action, tested without Pulumi."""

from __future__ import annotations

import json
from typing import Any

from .arns import arn_parts, schedules_in_group, ses_identity_arns

Statement = dict[str, Any]

# The one action each target kind needs from whoever invokes it.
_TARGET_ACTIONS: dict[str, list[str]] = {
    "sqs": ["sqs:SendMessage"],
    "lambda": ["lambda:InvokeFunction"],
    "stepfunctions": ["states:StartExecution"],
    "sns": ["sns:Publish"],
    "email": ["ses:SendEmail"],
}


def document(statements: list[Statement]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def assume_role_policy(service: str, source_account: str | None = None) -> str:
    """Trust policy for a service principal; with `source_account`, only on behalf of that account (confused
    deputy protection, which Scheduler supports)."""
    statement: Statement = {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    if source_account:
        statement["Condition"] = {"StringEquals": {"aws:SourceAccount": source_account}}
    return document([statement])


def target_statements(kind: str, target_arn: str, *, table_arn: str, sender: str | None = None) -> list[Statement]:
    """Exactly the target's action on exactly the target's resource."""
    if kind == "email":
        if not sender:
            raise ValueError("an email target needs its sender to scope ses:SendEmail")
        resources = ses_identity_arns(table_arn, sender)
    elif kind == "lambda":
        resources = [target_arn, f"{target_arn}:*"]  # the function and its versions/aliases
    else:
        resources = [target_arn]
    return [{"Effect": "Allow", "Action": _TARGET_ACTIONS[kind], "Resource": resources}]


def scheduler_execution_policy(target: list[Statement], target_dlq_arn: str) -> str:
    """What Scheduler may do when a schedule fires: call the target, or park the event in the target DLQ."""
    return document([*target, {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [target_dlq_arn]}])


def stream_consumer_statements(
    *, table_arn: str | None, log_group_arn: str, send_queue_arns: list[str], kms_key_arn: str | None
) -> list[Statement]:
    """What every handler needs: write its own logs, reach its queues; with `table_arn`, read that table's stream."""
    statements: list[Statement] = []
    if table_arn is not None:
        statements.append(
            {
                "Effect": "Allow",
                "Action": [
                    "dynamodb:DescribeStream",
                    "dynamodb:GetRecords",
                    "dynamodb:GetShardIterator",
                    "dynamodb:ListStreams",
                ],
                "Resource": [f"{table_arn}/stream/*"],
            }
        )
    statements += [
        {
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": [log_group_arn, f"{log_group_arn}:*"],
        },
        {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": sorted(send_queue_arns)},
    ]
    if kms_key_arn:
        statements.append({"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [kms_key_arn]})
    return statements


def scheduling_statements(*, group_arn: str, scheduler_role_arn: str) -> list[Statement]:
    """Manage schedules in this table's group only, and hand Scheduler its role and no other."""
    return [
        {
            "Effect": "Allow",
            # Create, update and delete only: the handlers never read a schedule back.
            "Action": ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"],
            "Resource": [schedules_in_group(group_arn)],
        },
        {
            "Effect": "Allow",
            "Action": ["iam:PassRole"],
            "Resource": [scheduler_role_arn],
            "Condition": {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
        },
    ]


def direct_dispatch_statements(kind: str, target_arn: str, *, table_arn: str, sender: str | None) -> list[Statement]:
    """The handler delivers due-now items itself: the target's action, plus the queue URL lookup for SQS."""
    statements = target_statements(kind, target_arn, table_arn=table_arn, sender=sender)
    if kind == "sqs":
        statements.append({"Effect": "Allow", "Action": ["sqs:GetQueueUrl"], "Resource": [target_arn]})
    return statements


def table_item_statements(table_arn: str, actions: list[str]) -> list[Statement]:
    """Item-level actions on one table (no index, no stream, no other table)."""
    return [{"Effect": "Allow", "Action": sorted(f"dynamodb:{a}" for a in actions), "Resource": [table_arn]}]


def index_query_statements(table_arn: str, index_name: str) -> list[Statement]:
    """Query one index of one table."""
    return [{"Effect": "Allow", "Action": ["dynamodb:Query"], "Resource": [f"{table_arn}/index/{index_name}"]}]


def ledger_statements(ledger_arn: str) -> list[Statement]:
    """Claim, complete and release occurrences in the idempotency ledger."""
    return table_item_statements(ledger_arn, ["DeleteItem", "GetItem", "PutItem", "UpdateItem"])


def account_of(arn: str) -> str:
    return arn_parts(arn)[3]
