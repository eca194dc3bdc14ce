"""A Lambda function, invoked asynchronously with the due event."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import constants
from . import GRANT_QUALIFIED

if TYPE_CHECKING:
    from ..clients import Clients
    from ..config import TargetConfig

KIND = "lambda"
SERVICE = "lambda"
NOUN = "function"
ARN_RESOURCE = r"function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]{1,128})?"
ARN_EXAMPLE = "arn:aws:lambda:eu-west-1:123456789012:function:notify"
FIFO = False
SCHEDULER_FIFO = False
GRANT = GRANT_QUALIFIED
SEND_ACTIONS = ("lambda:InvokeFunction",)
SCHEDULER_ACTIONS = ("lambda:InvokeFunction",)
SCHEDULER_ARN = ""
# An invoke uses no key of the function's: its KMS key encrypts its environment, which only Lambda reads.
KMS_ACTIONS: tuple[str, ...] = ()
PAYLOAD_BYTES = constants.LAMBDA_ASYNC_PAYLOAD_BYTES
AWS_ACTIONS = SEND_ACTIONS


def request(target: TargetConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    return None


def send(clients: Clients, target: TargetConfig, payload: str, occurrence: str) -> None:
    clients.get("lambda").invoke(FunctionName=target["arn"], InvocationType="Event", Payload=payload.encode("utf-8"))


def scheduler_parameters(target: TargetConfig, payload: str) -> dict[str, Any]:
    return {}
