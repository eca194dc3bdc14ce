"""The shape of what backfill hands the mode's code: a scanned item as Lambda delivers images (`B` as base64 text,
`N` as strings), and the stream record a change of it would produce (INSERT, MODIFY or REMOVE, with a synthetic
sequence number and event id). Pure functions: no AWS call, nothing imported from a mode."""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from st_core.config import HandlerConfig

if TYPE_CHECKING:
    from st_core.stream import DynamoDBStreamRecord

# The AWS actions this module's own calls need (checked by tests/iam): none.
AWS_ACTIONS: tuple[str, ...] = ()

Record = dict[str, Any]
Failure = tuple[Record, str]
Feed = Callable[[list[Record]], list[Failure]]


def wire(value: Any) -> Any:
    """A boto3 item (binary as bytes) as Lambda delivers images (binary as base64 text); numbers stay strings."""
    return json.loads(json.dumps(value, default=_wire_json))


def _wire_json(value: object) -> object:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not in a DynamoDB item")


_SERIAL = itertools.count(1)
_SERIAL_LOCK = threading.Lock()


def _sequence() -> str:
    """A synthetic sequence number: digits, increasing within the process (Lambda's are 21+ digit decimals)."""
    with _SERIAL_LOCK:
        return f"9{int(time.time() * 1000):013d}{next(_SERIAL):09d}"


def key_names(config: HandlerConfig) -> tuple[str, ...]:
    """The table's key attributes, partition key first (`naming.key_names`: the order every name follows)."""
    from st_core.naming import key_names as names

    return names(config)


def change(config: HandlerConfig, old: Record | None, new: Record | None, now: float) -> Record:
    """The stream record of a change from `old` to `new` (Lambda-shaped images; None: absent), as the table's stream
    would carry it now: INSERT, MODIFY or REMOVE, NEW_AND_OLD_IMAGES. The event id is derived from the item and its
    new state, so feeding the same state twice is one record to the handlers that key on it."""
    image = new if new is not None else old
    assert image is not None
    keys = {name: image[name] for name in key_names(config) if name in image}
    data: dict[str, Any] = {
        "Keys": keys,
        "ApproximateCreationDateTime": int(now),
        "SequenceNumber": _sequence(),
        "SizeBytes": len(json.dumps(image)),
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if new is not None:
        data["NewImage"] = new
    if old is not None:
        data["OldImage"] = old
    name = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
    digest = hashlib.sha256(json.dumps([name, old, new], sort_keys=True).encode()).hexdigest()[:32]
    return {
        "eventID": f"backfill-{digest}",
        "eventName": name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "",
        "dynamodb": data,
    }


def stream(record: Record) -> DynamoDBStreamRecord:
    """A synthetic record as the handlers' typed view of a stream record (it has every field Lambda's has)."""
    return cast("DynamoDBStreamRecord", record)


def identity(config: HandlerConfig, image: Record) -> str:
    from st_core.stream import identity_of

    return str(identity_of({n: image[n] for n in key_names(config) if n in image}))


def describe(config: HandlerConfig, image: Record) -> str:
    from st_core.stream import decode_image

    plain = decode_image({n: image[n] for n in key_names(config) if n in image}) or {}
    return json.dumps(plain, default=str, sort_keys=True)


def same(a: Record | None, b: Record | None) -> bool:
    from st_core.stream import decode_image

    return decode_image(a) == decode_image(b)


def kind_of(config: HandlerConfig) -> str:
    """Which backfill a table's mode takes."""
    mode = config["mode"]
    if mode == "ttl":
        return "ttl-precise" if config["ttl"]["precise"] else "ttl"
    return str(mode)
