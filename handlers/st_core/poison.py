"""The poison queue: records that can never succeed, each with the record itself and a readable reason."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from . import constants
from .clients import CLIENTS, Clients
from .jsontext import dumps, size
from .stream import sequence_number

# The AWS actions this module's own calls need (checked by tests/iam): the poison queue.
AWS_ACTIONS = ("sqs:SendMessage",)


def poison_message(*, record: object, reason: str, error: str, mode: str, table: str) -> str:
    """The message body: enough to understand, fix and replay the record without the stream (24 h retention).
    Anything may be parked, a record that is not even an object included."""
    fields = record if isinstance(record, dict) else {}
    body: dict[str, Any] = {
        "reason": reason,
        "error": error,
        "mode": mode,
        "table": table,
        "eventID": fields.get("eventID"),
        "eventName": fields.get("eventName"),
        "sequenceNumber": sequence_number(record) or None,
        "failedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "record": record,
    }
    return fit(body, "record", _slim(record))


def fit(body: dict[str, Any], field: str, slim: Any, limit: int = constants.OWNED_QUEUE_MESSAGE_BYTES) -> str:
    """`body` as JSON text, with `body[field]` replaced by `slim` (and a note) if the whole would not fit in one
    message of the component's own queues: the reason and the keys always reach the queue."""
    text = dumps(body)
    if size(text) <= limit - constants.ENVELOPE_BYTES:
        return text
    text = dumps({**body, field: slim, "note": f"{field} trimmed: larger than an SQS message"})
    if size(text) <= limit - constants.ENVELOPE_BYTES:
        return text
    return dumps({k: v for k, v in body.items() if k != field} | {"note": f"{field} omitted: too large"})


def _slim(record: object) -> object:
    if not isinstance(record, dict):
        return str(record)[:1000]
    data = record.get("dynamodb")
    keys = data.get("Keys") if isinstance(data, dict) else None
    return {**{k: v for k, v in record.items() if k != "dynamodb"}, "dynamodb": {"Keys": keys}}


class PoisonQueue:
    def __init__(self, url: str, *, mode: str, table: str, clients: Clients = CLIENTS) -> None:
        self.url = url
        self.mode = mode
        self.table = table
        self.clients = clients
        self.sent = 0  # parked this invocation (for the batch's metrics); += under the GIL is enough for a count

    def send(self, record: object, reason: str, error: str) -> None:
        """Park the record; raises if SQS refuses, so the caller reports the record for retry instead of losing it."""
        body = poison_message(record=record, reason=reason, error=error, mode=self.mode, table=self.table)
        self.clients.get("sqs").send_message(QueueUrl=self.url, MessageBody=body)
        self.sent += 1
