"""The poison queue: records that can never succeed, each with the record itself and a readable reason."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from . import constants
from .clients import CLIENTS, Clients
from .jsontext import dumps, size
from .stream import sequence_number

# The AWS actions this module's own calls need (checked by tests/iam): the poison queue.
AWS_ACTIONS = ("sqs:SendMessage",)
# The `error` of a message the polling processor parks: an index entry it cannot read, not a stream record. Its
# `record` is {"keys": plain keys, "Keys": the keys in DynamoDB JSON (`stream.lambda_keys`), "item": the item}, and
# its reason names the keys, the attribute and the fix. Nothing replays it: its item waits, out of the due index, for
# its user's fix (`scheduled-table redrive poison` says so, and deletes the message once the item was fixed).
UNUSABLE_ITEM = "UnusableItem"


def message_limit(config: Mapping[str, object]) -> int:
    """The largest message the poison queue takes: a queue of the user's says its own (`poisonMaxMessageBytes`,
    its ExistingQueue's `max_message_bytes`, often SQS's default 256 KiB); the component's own queue takes 1 MiB."""
    given = config.get("poisonMaxMessageBytes")
    return given if isinstance(given, int) and given > 0 else constants.OWNED_QUEUE_MESSAGE_BYTES


def poison_message(
    *, record: object, reason: str, error: str, mode: str, table: str, limit: int = constants.OWNED_QUEUE_MESSAGE_BYTES
) -> str:
    """The message body: enough to understand, fix and replay the record without the stream (24 h retention).
    Anything may be parked, a record that is not even an object included. `limit`: the queue's largest message."""
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
    return fit(body, "record", _slim(record), limit)


def fit(body: dict[str, Any], field: str, slim: Any, limit: int = constants.OWNED_QUEUE_MESSAGE_BYTES) -> str:
    """`body` as JSON text, with `body[field]` replaced by `slim` (and a note, and as much of the whole field's JSON
    text as fits, `{field}Excerpt`) if the whole would not fit in one message of `limit` bytes: the reason and the
    keys always reach the queue."""
    budget = limit - constants.ENVELOPE_BYTES
    text = dumps(body)
    if size(text) <= budget:
        return text
    slimmed = {**body, field: slim, "note": f"{field} trimmed: larger than the queue's {limit:,}-byte messages"}
    text = dumps(slimmed)
    if size(text) <= budget:
        return _with_excerpt(slimmed, f"{field}Excerpt", dumps(body[field]), budget - size(text)) or text
    return dumps({k: v for k, v in body.items() if k != field} | {"note": f"{field} omitted: too large"})


def _with_excerpt(body: dict[str, Any], name: str, whole: str, room: int) -> str | None:
    """`body` with `body[name]` the start of `whole`, as long as the message still fits (`room` bytes to spare);
    None when not even a useful start fits. Escaping can make JSON text up to 6 times longer: halve until it fits."""
    length = room // 2
    while length >= EXCERPT_MIN_CHARS:
        text = dumps({**body, name: whole[:length]})
        if size(text) - size(dumps(body)) <= room:
            return text
        length //= 2
    return None


# Shorter than this, an excerpt tells nothing the keys do not.
EXCERPT_MIN_CHARS = 256


def _slim(record: object) -> object:
    if not isinstance(record, dict):
        return str(record)[:1000]
    if "item" in record and "dynamodb" not in record:  # the processor's (`UNUSABLE_ITEM`): its keys, not its item
        return {k: v for k, v in record.items() if k != "item"}
    data = record.get("dynamodb")
    keys = data.get("Keys") if isinstance(data, dict) else None
    return {**{k: v for k, v in record.items() if k != "dynamodb"}, "dynamodb": {"Keys": keys}}


class PoisonQueue:
    def __init__(
        self,
        url: str,
        *,
        mode: str,
        table: str,
        clients: Clients = CLIENTS,
        limit: int = constants.OWNED_QUEUE_MESSAGE_BYTES,
    ) -> None:
        self.url = url
        self.mode = mode
        self.table = table
        self.clients = clients
        self.limit = limit  # the queue's largest message (`message_limit`)
        self.sent = 0  # parked this invocation (for the batch's metrics); += under the GIL is enough for a count

    def send(self, record: object, reason: str, error: str) -> None:
        """Park the record; raises if SQS refuses, so the caller reports the record for retry instead of losing it."""
        body = poison_message(
            record=record, reason=reason, error=error, mode=self.mode, table=self.table, limit=self.limit
        )
        self.clients.get("sqs").send_message(QueueUrl=self.url, MessageBody=body)
        self.sent += 1
