"""Items that carry none of the table's `time_attribute`, and the attribute they seem to use instead.

An item without the configured time attribute is not scheduled, by design: nothing is parked and nothing is logged.
When an application writes its due times under another name (`remindAt` while the component reads the default
`dueAt`), every item is silently ignored. `find` looks at a sample of items and names the attributes holding a time
that the items without `time_attribute` carry, so `inspect` (and the local cloud's summary) can suggest the fix.

Pure: no AWS call, no clock; the caller reads the sample (and says how it was read). A value holds a time when the
handlers would read it as one (`timeparse.parse_due`: ISO-8601 or epoch seconds) and it falls in or after 2000,
so a count or a price (epoch seconds of 1970) is not taken for a time.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, NamedTuple

from ..packaging import runtime_module

# Epoch seconds before this (2000-01-01) are taken for numbers, not times.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
# DynamoDB JSON's tags of the two types a due time is written in (`{"S": "2026-..."}`, `{"N": "1767225600"}`).
TIME_TAGS = ("S", "N")
SHOWN = 3


class TimeHint(NamedTuple):
    """`missing` of the `sampled` items carry no time attribute; `candidates`: the attributes holding a time they
    carry instead, most carried first; `message`: one line saying so, with the fix when there is a candidate."""

    missing: int
    sampled: int
    candidates: tuple[str, ...]
    message: str


def holds_time(value: Any) -> bool:
    """Whether an attribute's value is a time the handlers would read: a plain value, or DynamoDB JSON's
    `{"S": ...}` / `{"N": ...}`."""
    if isinstance(value, dict) and len(value) == 1:
        [(tag, inner)] = value.items()
        if tag not in TIME_TAGS:
            return False
        value = inner
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        return False
    try:
        return bool(runtime_module("timeparse").parse_due(value) >= EARLIEST)
    except Exception:  # PermanentError (not a time) from the handlers' runtime, whose class is not imported here
        return False


def find(items: Iterable[dict[str, Any]], time_attribute: str) -> TimeHint | None:
    """None when every item carries `time_attribute` (or there is no item); else how many do not, of how many,
    and the attributes holding a time those carry, most carried first (ties: the name closest to
    `time_attribute`)."""
    sampled = missing = 0
    carried: Counter[str] = Counter()
    for item in items:
        sampled += 1
        if time_attribute in item:
            continue
        missing += 1
        carried.update(name for name, value in item.items() if holds_time(value))
    if not missing:
        return None

    def rank(name: str) -> tuple[int, float, str]:
        return -carried[name], -difflib.SequenceMatcher(None, name.lower(), time_attribute.lower()).ratio(), name

    candidates = tuple(sorted(carried, key=rank))
    counted = f"{missing} of {sampled} item{'s' * (sampled != 1)} sampled {'has' if missing == 1 else 'have'}"
    they = "it has" if missing == 1 else "they have"
    if not candidates:
        never = "it is never scheduled" if missing == 1 else "they are never scheduled"
        message = f"{counted} no `{time_attribute}` and no other attribute holding a time: {never}"
        return TimeHint(missing, sampled, candidates, message)
    shown = ", ".join(f"`{name}` ({carried[name]})" for name in candidates[:SHOWN])
    more = f" and {len(candidates) - SHOWN} more" if len(candidates) > SHOWN else ""
    message = f"{counted} no `{time_attribute}`; {they} {shown}{more}: set time_attribute={candidates[0]!r}?"
    return TimeHint(missing, sampled, candidates, message)


__all__ = ["TimeHint", "find", "holds_time"]
