"""A Step Functions state machine: one execution per occurrence, the due event as its input."""

from __future__ import annotations

import contextlib
import hashlib
from typing import TYPE_CHECKING, Any

from .. import constants
from . import GRANT_ARN

if TYPE_CHECKING:
    from ..clients import Clients
    from ..config import TargetConfig

KIND = "stepfunctions"
SERVICE = "states"
NOUN = "state machine"
ARN_RESOURCE = r"stateMachine:[A-Za-z0-9_.-]{1,80}"
ARN_EXAMPLE = "arn:aws:states:eu-west-1:123456789012:stateMachine:flow"
FIFO = False
SCHEDULER_FIFO = False
GRANT = GRANT_ARN
SEND_ACTIONS = ("states:StartExecution",)
SCHEDULER_ACTIONS = ("states:StartExecution",)
SCHEDULER_ARN = ""
KMS_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
PAYLOAD_BYTES = constants.STEP_FUNCTIONS_INPUT_BYTES
AWS_ACTIONS = SEND_ACTIONS


def request(target: TargetConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    return None


def send(clients: Clients, target: TargetConfig, payload: str, occurrence: str) -> None:
    sfn = clients.get("stepfunctions")
    # A standard workflow refuses a second execution of the same name: a duplicate delivery starts nothing.
    with contextlib.suppress(sfn.exceptions.ExecutionAlreadyExists):
        sfn.start_execution(stateMachineArn=target["arn"], name=execution_name(occurrence), input=payload)


def scheduler_parameters(target: TargetConfig, payload: str) -> dict[str, Any]:
    return {}


# What Step Functions refuses in an execution name, besides whitespace and control characters.
_EXECUTION_NAME_REFUSES = frozenset('<>{}[]?*"#%\\^|~`$&,;:/')


def execution_name(occurrence: str) -> str:
    """The occurrence as a Step Functions execution name: itself when Step Functions takes it (1-80 characters,
    none of its refused ones: `naming.occurrence_id` always fits), otherwise its SHA-256 in hex. A recurring
    firing's id (`name@2026-03-30T08:00:00Z`) holds colons and can be 85 characters."""
    if 0 < len(occurrence) <= constants.STEP_FUNCTIONS_NAME_CHARS and all(
        "!" <= c <= "~" and c not in _EXECUTION_NAME_REFUSES for c in occurrence
    ):
        return occurrence
    return hashlib.sha256(occurrence.encode("utf-8")).hexdigest()
