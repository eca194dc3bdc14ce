"""DynamoDB stream records as Lambda delivers them: shapes, validation, and decoding of DynamoDB JSON.

Lambda's stream events differ from what boto3 returns for the same records, and the handlers only ever see
Lambda's form: `B`/`BS` values are base64 text, `N` values are decimal strings of up to 38 significant digits and
`ApproximateCreationDateTime` is epoch seconds. Decoding keeps numbers exact (int, or Decimal when fractional: never
a float) and binary as base64 text; `to_request` turns a stream image back into what boto3 expects in a request
(bytes for binary), so a key read from a record addresses the same item when written back.
"""

from __future__ import annotations

import base64
import binascii
from decimal import Context, Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from .errors import PermanentError
from .jsontext import compact

EVENT_NAMES = ("INSERT", "MODIFY", "REMOVE")


# The records' shapes, for the type checker only (st_core/shapes.py): at run time they are plain dicts, and no
# handler compiles or builds those TypedDict classes on its cold path.
if TYPE_CHECKING:
    from collections.abc import Mapping

    from .shapes import AttributeValue as AttributeValue
    from .shapes import BatchItemFailure as BatchItemFailure
    from .shapes import BatchResponse as BatchResponse
    from .shapes import DynamoDBStreamEvent as DynamoDBStreamEvent
    from .shapes import DynamoDBStreamRecord as DynamoDBStreamRecord
    from .shapes import Image as Image
    from .shapes import StreamRecordData as StreamRecordData
    from .shapes import UserIdentity as UserIdentity
else:
    StreamRecordData = UserIdentity = DynamoDBStreamRecord = DynamoDBStreamEvent = dict
    BatchItemFailure = BatchResponse = AttributeValue = Image = dict


def split_event(event: object) -> tuple[list[DynamoDBStreamRecord], list[tuple[object, str]]]:
    """The well-formed stream records of an invocation, and everything else with the reason it cannot be processed.
    Anything can arrive: a console test event, a scheduled event, a record that is null or a string."""
    if event is None or event == {} or (isinstance(event, dict) and event.get("Records") == []):
        return [], []
    if not isinstance(event, dict) or not isinstance(event.get("Records"), list):
        return [], [(event, "not a DynamoDB stream event (no Records list)")]
    good: list[DynamoDBStreamRecord] = []
    bad: list[tuple[object, str]] = []
    for record in event["Records"]:
        problem = record_problem(record)
        if problem:
            bad.append((record, problem))
        else:
            good.append(record)
    return good, bad


def record_problem(record: object) -> str:
    """Why a record is not a DynamoDB stream record Lambda could have sent, or "" when it is one."""
    if not isinstance(record, dict):
        return f"stream record is {type(record).__name__}, not an object"
    if record.get("eventName") not in EVENT_NAMES:
        return f"stream record has eventName {str(record.get('eventName'))[:40]!r}, not INSERT, MODIFY or REMOVE"
    data = record.get("dynamodb")
    if not isinstance(data, dict):
        return f"stream record's dynamodb field is {type(data).__name__}, not an object"
    if not isinstance(data.get("Keys"), dict) or not data["Keys"]:
        return "stream record has no dynamodb.Keys"
    for name, value in data["Keys"].items():
        # DynamoDB keys are strings, numbers or binary: anything else is not a record DynamoDB wrote.
        if not (isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("S", "N", "B")):
            return f"stream record's key {str(name)[:40]!r} is {str(value)[:40]}, not a string, number or binary"
    if not isinstance(data.get("SequenceNumber"), str) or not data["SequenceNumber"]:
        return "stream record has no dynamodb.SequenceNumber"
    for image in ("NewImage", "OldImage"):
        if image in data and not isinstance(data[image], dict):
            return f"stream record's dynamodb.{image} is {type(data[image]).__name__}, not an object"
    view = data.get("StreamViewType")
    if view is not None and view != "NEW_AND_OLD_IMAGES":
        # Only a table the component does not own can have another view type (an existing table).
        return (
            f"the table's stream view type is {str(view)[:30]}; ScheduledTable needs NEW_AND_OLD_IMAGES (set the "
            "table's StreamSpecification StreamViewType to NEW_AND_OLD_IMAGES, then redrive this record)"
        )
    return ""


# What each DynamoDB type tag is, in the words a parked record's reason uses.
TYPE_NAMES = {
    "S": "string",
    "N": "number",
    "B": "binary",
    "BOOL": "boolean",
    "NULL": "null",
    "M": "map",
    "L": "list",
    "SS": "string set",
    "NS": "number set",
    "BS": "binary set",
}


def due_type_problem(image: Image | None, attribute: str, usable: tuple[str, ...] = ("S", "N")) -> str:
    """Why the image's due attribute (as DynamoDB typed it) cannot be a due time, or "" when it is absent or of a
    `usable` type. Read before decoding: a binary value decodes to base64 text, which could even read as a number,
    and a null one to None, which reads as no due time at all."""
    value = (image or {}).get(attribute)
    if not isinstance(value, dict) or len(value) != 1:
        return ""
    tag = next(iter(value))
    if tag in usable:
        return ""
    wanted = " or ".join(f"{t} ({TYPE_NAMES[t]})" for t in usable)
    return (
        f"due attribute {attribute!r} is a DynamoDB {tag} ({TYPE_NAMES.get(str(tag), 'unknown type')}) value, not a "
        f"time: write it as {wanted}"
    )


def to_plain(value: AttributeValue) -> Any:
    """One attribute value as plain data: exact numbers (int or Decimal), sets as sorted lists, binary as base64
    text (the form Lambda delivers and due events carry)."""
    if not isinstance(value, dict) or len(value) != 1:
        raise PermanentError(f"not a DynamoDB attribute value: {str(value)[:80]}")
    ((tag, raw),) = value.items()
    if tag == "S":
        return raw
    if tag == "N":
        return number(raw)
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
        return sorted((number(n) for n in raw), key=Decimal)
    if tag == "BS":
        return sorted(_b64(b) for b in raw)
    raise PermanentError(f"unknown DynamoDB type tag {tag!r}")


def decode_image(image: Image | None) -> dict[str, Any] | None:
    """A whole stream image (NewImage/OldImage/Keys) as a plain dict, or None when the record has no such image."""
    if image is None:
        return None
    return {name: to_plain(value) for name, value in image.items()}


def to_request(image: Image) -> Image:
    """A stream image (Lambda's form) as a boto3 request wants it: binary values as bytes, so that boto3's own
    base64 encoding does not encode them a second time."""
    return {name: request_value(value) for name, value in image.items()}


def request_value(value: AttributeValue) -> AttributeValue:
    ((tag, raw),) = value.items()
    if tag == "B":
        return {"B": _bytes(raw)}
    if tag == "BS":
        return {"BS": [_bytes(b) for b in raw]}
    if tag == "M":
        return {"M": to_request(raw)}
    if tag == "L":
        return {"L": [request_value(v) for v in raw]}
    return value


def key_identity(record: DynamoDBStreamRecord) -> str:
    """A canonical string for the item a record belongs to; type tags included so 1 and "1" differ."""
    try:
        keys = record["dynamodb"]["Keys"]
    except (KeyError, TypeError) as exc:
        raise PermanentError("stream record has no dynamodb.Keys") from exc
    return identity_of(keys)


def identity_of(typed_keys: Mapping[str, Any]) -> str:
    """The canonical string of an item's keys in DynamoDB JSON: numbers normalised (1.0 and 1 are one key in
    DynamoDB), binary as base64 text, whichever form (Lambda's or boto3's) the keys came in."""
    return compact(lambda_keys(typed_keys))


def lambda_keys(typed_keys: Mapping[str, Any]) -> Image:
    """An item's keys in DynamoDB JSON as Lambda delivers them (binary as base64 text, numbers normalised),
    whichever form they came in: JSON text can carry them, and `to_request` reads them back."""
    return {name: _canonical(value) for name, value in typed_keys.items()}


def sequence_number(record: object) -> str:
    data = record.get("dynamodb") if isinstance(record, dict) else None
    return str(data.get("SequenceNumber", "")) if isinstance(data, dict) else ""


def changed_at(record: DynamoDBStreamRecord) -> float | None:
    """When the change happened (epoch seconds, as Lambda gives it), or None when the record does not say."""
    value = record["dynamodb"].get("ApproximateCreationDateTime")
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def number(raw: str) -> int | Decimal:
    """A DynamoDB number exactly: int when whole, otherwise Decimal (never float, which has 15-17 digits)."""
    try:
        value = Decimal(raw)
    except (InvalidOperation, TypeError) as exc:
        raise PermanentError(f"{str(raw)[:50]!r} is not a DynamoDB number") from exc
    if not value.is_finite():
        raise PermanentError(f"{raw!r} is not a DynamoDB number")
    if value == value.to_integral_value():
        return int(value)
    return value


# DynamoDB's numbers have up to 38 significant digits: normalised in the default context (28) two keys that differ
# past the 28th would round to one identity, and name one item for another.
_DYNAMODB_DIGITS = Context(prec=38)


def _canonical(value: AttributeValue) -> AttributeValue:
    if not isinstance(value, dict) or len(value) != 1:
        return value
    ((tag, raw),) = value.items()
    if tag == "N":
        exact = number(raw)
        return {"N": str(exact.normalize(_DYNAMODB_DIGITS) if isinstance(exact, Decimal) else exact)}
    if tag == "B":
        return {"B": _b64(raw)}
    return value


def _b64(raw: bytes | str) -> str:
    # Lambda delivers binary attributes base64-encoded already; boto3 hands over bytes.
    return raw if isinstance(raw, str) else base64.b64encode(raw).decode("ascii")


def _bytes(raw: bytes | str) -> bytes:
    if isinstance(raw, bytes | bytearray):
        return bytes(raw)
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise PermanentError(f"binary value {str(raw)[:40]!r} is not base64") from exc
