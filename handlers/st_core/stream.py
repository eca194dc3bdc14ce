"""DynamoDB stream records as Lambda delivers them: shapes, and decoding of DynamoDB JSON into plain JSON."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from typing import Any, Literal, NotRequired, TypedDict

from .errors import PermanentError

AttributeValue = dict[str, Any]
Image = dict[str, AttributeValue]


class StreamRecordData(TypedDict):
    Keys: Image
    SequenceNumber: str
    NewImage: NotRequired[Image]
    OldImage: NotRequired[Image]
    ApproximateCreationDateTime: NotRequired[float]
    StreamViewType: NotRequired[str]


class UserIdentity(TypedDict):
    type: str
    principalId: str


class DynamoDBStreamRecord(TypedDict):
    eventID: str
    eventName: Literal["INSERT", "MODIFY", "REMOVE"]
    dynamodb: StreamRecordData
    eventSource: NotRequired[str]
    eventSourceARN: NotRequired[str]
    awsRegion: NotRequired[str]
    userIdentity: NotRequired[UserIdentity]


class DynamoDBStreamEvent(TypedDict):
    Records: list[DynamoDBStreamRecord]


class BatchItemFailure(TypedDict):
    itemIdentifier: str


class BatchResponse(TypedDict):
    batchItemFailures: list[BatchItemFailure]


def to_plain(value: AttributeValue) -> Any:
    """One DynamoDB attribute value as plain JSON: numbers as numbers, sets as sorted lists, binary as base64."""
    if not isinstance(value, dict) or len(value) != 1:
        raise PermanentError(f"not a DynamoDB attribute value: {str(value)[:80]}")
    ((tag, raw),) = value.items()
    if tag == "S":
        return raw
    if tag == "N":
        return _number(raw)
    if tag == "BOOL":
        return bool(raw)
    if tag == "NULL":
        return None
    if tag == "B":
        return _b64(raw)
    if tag == "M":
        return {k: to_plain(v) for k, v in raw.items()}
    if tag == "L":
        return [to_plain(v) for v in raw]
    if tag == "SS":
        return sorted(raw)
    if tag == "NS":
        return sorted((_number(n) for n in raw), key=Decimal)
    if tag == "BS":
        return sorted(_b64(b) for b in raw)
    raise PermanentError(f"unknown DynamoDB type tag {tag!r}")


def decode_image(image: Image | None) -> dict[str, Any] | None:
    """A whole stream image (NewImage/OldImage/Keys) as a plain dict, or None when the record has no such image."""
    if image is None:
        return None
    return {name: to_plain(value) for name, value in image.items()}


def key_identity(record: DynamoDBStreamRecord) -> str:
    """A canonical string for the item a record belongs to; type tags included so 1 and "1" differ."""
    try:
        keys = record["dynamodb"]["Keys"]
    except (KeyError, TypeError) as exc:
        raise PermanentError("stream record has no dynamodb.Keys") from exc
    return identity_of(keys)


def identity_of(typed_keys: dict[str, Any]) -> str:
    """The canonical string of an item's keys in DynamoDB JSON (what `key_identity` gives for its records)."""
    return json.dumps(typed_keys, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sequence_number(record: DynamoDBStreamRecord) -> str:
    return str(record.get("dynamodb", {}).get("SequenceNumber", ""))


def _number(raw: str) -> int | float:
    number = Decimal(raw)
    return int(number) if number == number.to_integral_value() else float(number)


def _b64(raw: bytes | str) -> str:
    # Lambda delivers binary attributes base64-encoded already; moto and boto3 hand over bytes.
    return raw if isinstance(raw, str) else base64.b64encode(raw).decode("ascii")
