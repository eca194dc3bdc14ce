"""An SNS topic, standard or FIFO: the due event is the message. A FIFO topic's message group is the item's (from
its keys) and its deduplication id the occurrence's, as for a FIFO queue. Scheduler's SNS target can set neither
(it has no SNS parameters), so only the functions deliver to a FIFO topic (the component refuses one in eventbridge
mode)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import constants
from ..fifo import fifo_parameters
from . import GRANT_ARN

if TYPE_CHECKING:
    from ..clients import Clients
    from ..config import TargetConfig

KIND = "sns"
SERVICE = "sns"
NOUN = "topic"
ARN_RESOURCE = r"[A-Za-z0-9_-]{1,256}(\.fifo)?"
ARN_EXAMPLE = "arn:aws:sns:eu-west-1:123456789012:news"
FIFO = True
SCHEDULER_FIFO = False  # Scheduler's SNS target has no parameters: no message group
GRANT = GRANT_ARN
SEND_ACTIONS = ("sns:Publish",)
SCHEDULER_ACTIONS = ("sns:Publish",)
SCHEDULER_ARN = ""
KMS_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
PAYLOAD_BYTES = constants.SNS_MESSAGE_BYTES
AWS_ACTIONS = SEND_ACTIONS


def request(target: TargetConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    return None


def send(clients: Clients, target: TargetConfig, payload: str, occurrence: str) -> None:
    fifo = fifo_parameters(target, payload, occurrence)
    clients.get("sns").publish(TopicArn=target["arn"], Message=payload, **fifo)


def scheduler_parameters(target: TargetConfig, payload: str) -> dict[str, Any]:
    return {}
