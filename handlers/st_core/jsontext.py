"""JSON text for everything the handlers send: compact, sorted keys, and numbers exactly as DynamoDB holds them.

`json.dumps` cannot write a Decimal as a number, and converting to float would lose digits (DynamoDB keeps 38):
two items whose keys differ in the 10th decimal place must never be sent the same `keys`.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any


def dumps(document: Any) -> str:
    """Like `json.dumps(document, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`, with Decimals
    written as exact JSON numbers and anything else unknown as its string form."""
    return "".join(_parts(document))


def _parts(value: Any) -> list[str]:
    if isinstance(value, Decimal):
        if not value.is_finite():
            return [json.dumps(str(value))]
        return [str(value)]
    if isinstance(value, dict):
        out = ["{"]
        for index, key in enumerate(sorted(value, key=str)):
            if index:
                out.append(",")
            out.append(json.dumps(str(key), ensure_ascii=False))
            out.append(":")
            out.extend(_parts(value[key]))
        out.append("}")
        return out
    if isinstance(value, list | tuple):
        out = ["["]
        for index, element in enumerate(value):
            if index:
                out.append(",")
            out.extend(_parts(element))
        out.append("]")
        return out
    if value is None or isinstance(value, bool | int | float | str):
        return [json.dumps(value, ensure_ascii=False)]
    return [json.dumps(str(value), ensure_ascii=False)]


def size(text: str) -> int:
    """Bytes on the wire (AWS limits count UTF-8 bytes, not characters)."""
    return len(text.encode("utf-8"))
