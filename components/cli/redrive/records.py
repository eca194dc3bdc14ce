"""Stream records as Lambda hands them to the consumer: their order, identity and a line's worth of their keys."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from .report import short


def sequence_order(record: dict[str, Any]) -> int:
    sequence = str((record.get("dynamodb") or {}).get("SequenceNumber", ""))
    return int(sequence) if sequence.isdigit() else 0


def record_keys(record: object) -> str:
    """The item's keys as plain JSON for a line of output (DynamoDB JSON unwrapped), best effort."""
    data = record.get("dynamodb") if isinstance(record, dict) else None
    keys = data.get("Keys") if isinstance(data, dict) else None
    if keys is None and isinstance(record, dict) and data is None:
        keys = record.get("Keys")  # an item the polling processor parked (`poison.UNUSABLE_ITEM`): not a record
    if not isinstance(keys, dict):
        return "(no keys)"
    plain = {k: next(iter(v.values())) if isinstance(v, dict) and len(v) == 1 else v for k, v in keys.items()}
    return short(plain, 120)


def item_identity(record: dict[str, Any]) -> str:
    return json.dumps(record.get("dynamodb", {}).get("Keys"), sort_keys=True, default=str)


def lambda_shape(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A record as DynamoDB Streams' GetRecords returns it through boto3 -> the record Lambda hands the consumer:
    binary as base64 text, `ApproximateCreationDateTime` in epoch seconds, `eventSourceARN` added."""
    shaped = {**record, "eventSourceARN": stream_arn}
    return dict(json.loads(json.dumps(shaped, default=lambda_json)))


def lambda_json(value: object) -> object:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return int(value.timestamp())
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"{type(value).__name__} is not in a Lambda stream event")


def record_id(record: dict[str, Any]) -> tuple[str, str]:
    """One record, whichever message carries it (a record parked on two deliveries has two): its event id and
    sequence number."""
    return str(record.get("eventID")), str((record.get("dynamodb") or {}).get("SequenceNumber"))
