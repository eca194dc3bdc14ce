"""JSON text for everything the handlers send: compact, sorted keys, and numbers exactly as DynamoDB holds them.

`json.dumps` cannot write a Decimal as a number, and converting to float would lose digits (DynamoDB keeps 38):
two items whose keys differ in the 10th decimal place must never be sent the same `keys`.
"""

from __future__ import annotations

import json
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any

# json.dumps(..., ensure_ascii=False, separators=(",", ":"), sort_keys=True), its encoder made once (json.dumps makes
# one per call given any option).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _unknown(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The C encoder that `_ENCODER.encode` builds again on every call, built once: the same arguments, less the check for
# circular references (these documents are trees). None where json has no C accelerator.
_MAKE = getattr(json.encoder, "c_make_encoder", None)  # (json's typing stubs do not name it)
_C_ENCODE = None if _MAKE is None else _MAKE(None, _unknown, encode_basestring, None, ":", ",", True, False, True)


def compact(document: Any) -> str:
    """`json.dumps(document, ensure_ascii=False, separators=(",", ":"), sort_keys=True)` of a document of JSON's
    own types; TypeError for a value of any other type."""
    if _C_ENCODE is None:
        return _ENCODER.encode(document)
    return "".join(_C_ENCODE(document, 0))


def dumps(document: Any, *, str_keys: bool = False) -> str:
    """Like `json.dumps(document, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`, with Decimals
    written as exact JSON numbers and anything else unknown as its string form. `str_keys`: the caller vouches that
    every key is a string (a document made of DynamoDB items, whose attribute names and map keys always are), so
    json's own encoder is tried without walking the document first, and only a value it cannot write (a Decimal)
    sends it to the exact writer."""
    if str_keys:
        try:
            return compact(document)
        except TypeError:
            return "".join(_parts(document))
    if _native(document):  # json's own encoder writes it exactly as `_parts` would, in a fraction of the time
        return compact(document)
    return "".join(_parts(document))


def _native(value: Any) -> bool:
    """Only JSON's own types (exactly: no subclasses, no Decimal), every key a string: the documents `json.dumps`
    writes as `_parts` does (it sorts and writes keys of other types otherwise)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        return True
    if kind is dict:
        return all(type(key) is str and _native(item) for key, item in value.items())
    if kind is list or kind is tuple:
        return all(_native(item) for item in value)
    return False


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
