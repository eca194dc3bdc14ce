"""The poison queue: records that can never succeed, each with the record itself and a readable reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from .clients import CLIENTS, Clients

# SQS takes up to 256 KiB per message; two 400 KB item images do not fit, the keys always do.
_MAX_BODY_BYTES = 250_000


def poison_message(*, record: dict[str, Any], reason: str, error: str, mode: str, table: str) -> str:
    """The message body: enough to understand, fix and replay the record without the stream (24 h retention)."""
    body: dict[str, Any] = {
        "reason": reason,
        "error": error,
        "mode": mode,
        "table": table,
        "eventID": record.get("eventID"),
        "eventName": record.get("eventName"),
        "sequenceNumber": record.get("dynamodb", {}).get("SequenceNumber"),
        "failedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "record": record,
    }
    text = json.dumps(body, default=str, ensure_ascii=False)
    if len(text.encode("utf-8")) > _MAX_BODY_BYTES:
        slim = {k: v for k, v in record.items() if k != "dynamodb"}
        slim["dynamodb"] = {"Keys": record.get("dynamodb", {}).get("Keys")}
        body["record"] = slim
        body["note"] = "item images omitted: the record is larger than an SQS message"
        text = json.dumps(body, default=str, ensure_ascii=False)
    return text


class PoisonQueue:
    def __init__(self, url: str, *, mode: str, table: str, clients: Clients = CLIENTS) -> None:
        self.url = url
        self.mode = mode
        self.table = table
        self.clients = clients
        self.sent = 0  # parked this invocation (for the batch's metrics); += under the GIL is enough for a count

    def send(self, record: dict[str, Any], reason: str, error: str) -> None:
        """Park the record; raises if SQS refuses, so the caller reports the record for retry instead of losing it."""
        body = poison_message(record=record, reason=reason, error=error, mode=self.mode, table=self.table)
        self.clients.get("sqs").send_message(QueueUrl=self.url, MessageBody=body)
        self.sent += 1
