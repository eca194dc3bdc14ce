"""An SQS queue, standard or FIFO: the due event is the message body."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .. import constants
from ..errors import PermanentError, error_code
from ..fifo import fifo_parameters, is_fifo, message_group
from . import GRANT_ARN, each_alone, listed_results

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..clients import Clients
    from ..config import TargetConfig

KIND = "sqs"
SERVICE = "sqs"
NOUN = "queue"
ARN_RESOURCE = r"[A-Za-z0-9_-]{1,80}(\.fifo)?"
ARN_EXAMPLE = "arn:aws:sqs:eu-west-1:123456789012:jobs"
FIFO = True
SCHEDULER_FIFO = True  # SqsParameters carries the message group
GRANT = GRANT_ARN
# SendMessage takes a URL: the function looks it up once from the ARN.
SEND_ACTIONS = ("sqs:GetQueueUrl", "sqs:SendMessage")
SCHEDULER_ACTIONS = ("sqs:SendMessage",)
SCHEDULER_ARN = ""
# A new message is encrypted with a data key (GenerateDataKey), which SQS may reuse (Decrypt).
KMS_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")
PAYLOAD_BYTES = constants.SQS_DEFAULT_MESSAGE_BYTES
# SendMessageBatch takes 10 messages a call, 256 KiB in all (the batch limit of a queue made before SQS took
# 1 MiB messages; the least any queue takes). A larger message goes alone, by SendMessage.
BATCH_ENTRIES = constants.BATCH_ENTRIES
BATCH_BYTES = constants.SQS_DEFAULT_MESSAGE_BYTES
# A queue's own MaximumMessageSize (which may be below BATCH_BYTES) bounds a batch's total too: SQS refuses the whole
# call with this code (the query protocol's, then the JSON protocol's), and each entry is sent alone instead.
BATCH_TOO_LONG = frozenset({"AWS.SimpleQueueService.BatchRequestTooLong", "BatchRequestTooLong"})
AWS_ACTIONS = SEND_ACTIONS


def request(target: TargetConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    return None


def send(clients: Clients, target: TargetConfig, payload: str, occurrence: str) -> None:
    sqs = clients.get("sqs")
    fifo = fifo_parameters(target, payload, occurrence)
    sqs.send_message(QueueUrl=queue_url(sqs, target["arn"]), MessageBody=payload, **fifo)


def send_batch(clients: Clients, target: TargetConfig, batch: Sequence[tuple[str, str]]) -> list[Exception | None]:
    """One SendMessageBatch of up to BATCH_ENTRIES due events (payload, occurrence), a FIFO queue's each with its
    group and deduplication id: per entry, None when SQS took it, else the error of its refusal (the call answers
    200 and lists it in `Failed`; one listed in neither was not taken). A call refused whole for its total size
    (BATCH_TOO_LONG: nothing was taken) sends each entry alone, so an entry that fits the queue by itself is sent,
    never parked for its neighbours' size."""
    sqs = clients.get("sqs")
    entries = [
        {"Id": str(n), "MessageBody": payload, **fifo_parameters(target, payload, occurrence)}
        for n, (payload, occurrence) in enumerate(batch)
    ]
    try:
        response = sqs.send_message_batch(QueueUrl=queue_url(sqs, target["arn"]), Entries=entries)
    except Exception as exc:
        if error_code(exc) not in BATCH_TOO_LONG:
            raise
        return each_alone(send, clients, target, batch)
    return listed_results(len(entries), response, "SendMessageBatch")


def scheduler_parameters(target: TargetConfig, payload: str) -> dict[str, Any]:
    if not is_fifo(target["arn"]):
        return {}
    # Scheduler can set no deduplication id: the queue's content-based deduplication (which the component
    # requires in eventbridge mode) takes the SHA-256 of the body, the same for every retry of one firing.
    return {"SqsParameters": {"MessageGroupId": message_group(target, payload)}}


def prepare(clients: Clients, target: TargetConfig) -> None:
    """Look the queue's URL up before a send that must keep to a deadline (`dispatch.prepare`)."""
    queue_url(clients.get("sqs"), target["arn"])


@lru_cache(maxsize=64)
def queue_url(sqs: Any, arn: str) -> str:
    """Looked up once per client and queue (clients hash by identity, so a new client looks up again)."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise PermanentError(f"target {arn!r} is not an SQS queue ARN")
    return str(sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"])
