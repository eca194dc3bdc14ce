"""What EventBridge Scheduler asks IAM for, with the schedule's execution role, when a schedule fires: its target's
action (templated targets by the target ARN's service; universal targets `arn:aws:scheduler:::aws-sdk:SERVICE:api`
as that API call with the schedule's Input as its parameters), and, when the target refuses, the send to the
schedule's dead-letter queue."""

from __future__ import annotations

import json
from typing import Any

from st_core import target_types
from st_core.constants import UNIVERSAL_TARGET_PREFIX as UNIVERSAL

from tests.iam import requests


def target_requests(target: dict[str, Any], where: requests.Where) -> list[requests.Request]:
    arn = str(target["Arn"])
    if arn.startswith(UNIVERSAL):
        service, api = arn.removeprefix(UNIVERSAL).split(":", 1)
        parameters = json.loads(target.get("Input") or "{}")
        return requests.authorizations(service, api[0].upper() + api[1:], parameters, where)
    service = arn.split(":")[2]
    return [requests.Request(target_types.templated_actions()[service], arn)]


def dead_letter_requests(target: dict[str, Any]) -> list[requests.Request]:
    dlq = (target.get("DeadLetterConfig") or {}).get("Arn")
    return [requests.Request("sqs:SendMessage", str(dlq))] if dlq else []


def firing_requests(schedule: dict[str, Any], where: requests.Where) -> list[requests.Request]:
    """Everything Scheduler may do with the role for this schedule (CreateSchedule/GetSchedule shape)."""
    target = schedule["Target"]
    return target_requests(target, where) + dead_letter_requests(target)
