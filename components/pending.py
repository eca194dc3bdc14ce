"""Pre-insertion scheduling for `polling` mode: a writer that puts items straight into the due index."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from .packaging import runtime_module


def pending_attributes(keys: dict[str, Any], due: datetime | str | int | float, shards: int = 8) -> dict[str, Any]:
    """The attributes to add to an item you write so the processor finds it without the assigner: `keys` are the
    item's key attributes as plain values, `due` a datetime (without a time zone: UTC, as ISO-8601 text without
    an offset is read), ISO-8601 text or epoch seconds, `shards` the component's `shards`. The shard is the one the
    assigner would choose, computed by the same code; `stDue` is `due` rounded up to a whole second, never before
    it. Give the time the item's time attribute holds: where they differ, the time attribute is the one that counts
    (the processor indexes the item again at it)."""
    if not 1 <= shards <= 100:
        raise ValueError(f"shards: {shards} is out of range; use the component's shards (1 to 100)")
    if isinstance(due, datetime):
        moment = due if due.tzinfo is not None else due.replace(tzinfo=UTC)
    else:
        moment = runtime_module("timeparse").parse_due(due)
    identity = runtime_module("stream").identity_of({name: _typed(value) for name, value in keys.items()})
    attributes: dict[str, Any] = runtime_module("pending").pending_attributes(identity, moment, shards)
    return attributes


def _typed(value: Any) -> dict[str, str]:
    """A key value in DynamoDB JSON (keys are strings, numbers or binary)."""
    if isinstance(value, bool):
        raise ValueError("a key attribute cannot be a boolean")
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, int | float | Decimal):
        return {"N": str(value)}
    if isinstance(value, bytes):
        return {"B": base64.b64encode(value).decode("ascii")}
    raise ValueError(f"a key attribute must be a string, number or bytes, got {type(value).__name__}")
