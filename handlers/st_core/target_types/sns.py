"""An SNS topic, standard or FIFO: the due event is the message. A FIFO topic's message group is the item's (from
its keys) and its deduplication id the occurrence's, as for a FIFO queue. Scheduler's SNS target can set neither
(it has no SNS parameters), so only the functions deliver to a FIFO topic (the component refuses one in eventbridge
mode)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import constants
from ..errors import error_code
from ..fifo import fifo_parameters
from . import GRANT_ARN, each_alone, listed_results

if TYPE_CHECKING:
    from collections.abc import Sequence

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
# IAM authorizes PublishBatch as sns:Publish (SNS's API permissions reference: "both publish and publish batch").
SEND_ACTIONS = ("sns:Publish",)
SCHEDULER_ACTIONS = ("sns:Publish",)
SCHEDULER_ARN = ""
KMS_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
PAYLOAD_BYTES = constants.SNS_MESSAGE_BYTES
# PublishBatch takes 10 messages a call, 256 KiB in all (a topic's default MaximumMessageSize, which bounds a batch's
# total too). A larger message goes alone, by Publish.
BATCH_ENTRIES = constants.BATCH_ENTRIES
BATCH_BYTES = constants.SNS_MESSAGE_BYTES
# SNS refuses a whole batch over the topic's limit with this code (400, nothing published); each entry is then
# published alone.
BATCH_TOO_LONG = "BatchRequestTooLong"
AWS_ACTIONS = SEND_ACTIONS


def request(target: TargetConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    return None


def send(clients: Clients, target: TargetConfig, payload: str, occurrence: str) -> None:
    fifo = fifo_parameters(target, payload, occurrence)
    clients.get("sns").publish(TopicArn=target["arn"], Message=payload, **fifo)


def send_batch(clients: Clients, target: TargetConfig, batch: Sequence[tuple[str, str]]) -> list[Exception | None]:
    """One PublishBatch of up to BATCH_ENTRIES due events (payload, occurrence), a FIFO topic's each with its group
    and deduplication id as `send` gives them: per entry, None when SNS took it, else the error of its refusal (the
    call answers 200 and lists it in `Failed`; one listed in neither was not taken). A call refused whole for its
    total size publishes each entry alone, as SQS's batch does."""
    entries = [
        {"Id": str(n), "Message": payload, **fifo_parameters(target, payload, occurrence)}
        for n, (payload, occurrence) in enumerate(batch)
    ]
    try:
        response = clients.get("sns").publish_batch(TopicArn=target["arn"], PublishBatchRequestEntries=entries)
    except Exception as exc:
        if error_code(exc) != BATCH_TOO_LONG:
            raise
        return each_alone(send, clients, target, batch)
    return listed_results(len(entries), response, "PublishBatch")


def scheduler_parameters(target: TargetConfig, payload: str) -> dict[str, Any]:
    return {}
