"""Baseline, seed 000: the scheduling Lambda. For each record, in sequence, one CreateSchedule named after the
record's eventID, `at(<REMINDER_TIMESTAMP>)`, DELETE after completion, with the record's sequence number as the
client token. No update, no delete, no batching, no partial-batch response."""

from __future__ import annotations

import json
from typing import Any


def handler(event: dict[str, Any], *, clients: Any, group: str, role_arn: str, target_arn: str, dlq_arn: str) -> None:
    scheduler = clients.get("scheduler")
    for record in event["Records"]:
        reminder = record["dynamodb"]["NewImage"]["dueAt"]["S"].replace("Z", "")
        scheduler.create_schedule(
            Name=record["eventID"],
            GroupName=group,
            FlexibleTimeWindow={"Mode": "OFF"},
            ActionAfterCompletion="DELETE",
            Target={
                "RoleArn": role_arn,
                "Arn": target_arn,
                "Input": json.dumps({"keys": record["dynamodb"]["Keys"]}),
                "DeadLetterConfig": {"Arn": dlq_arn},
            },
            ScheduleExpression=f"at({reminder[:19]})",
            ClientToken=record["dynamodb"]["SequenceNumber"],
        )
