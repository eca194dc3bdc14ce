"""Event source mapping filter patterns: the Lambda is invoked only for records that can change something. What
every mode's filters share is here (the unusable due types, Lambda's five-filter limit, the patterns as text); each
mode's own filters are in its module (components/modes/)."""

from __future__ import annotations

import json
from typing import Any

# A time attribute is a string (ISO-8601) or a number (epoch seconds); `exists` only matches leaf values, so each
# DynamoDB type tag needs its own pattern.
TIME_TYPES = ("S", "N")
# The other types an `exists` filter can see (leaf values: null, boolean, binary, and sets, whose members are
# leaves). A due attribute of one of them is no time the mode can use: the function must see it to park the record
# with its reason. A map (M) or list (L) holds objects, which no leaf filter matches: `inspect` lists those.
#
# Lambda's filter syntax has no `$or` across fields (the Lambda developer guide's "Filter rule syntax" lists none;
# the EventBridge guide's comparison operators table marks "Or (multiple fields)", `$or`, as unsupported by
# EventBridge Pipes, which filters as Lambda does): each type is a filter of its own, and a mapping takes five by
# default. So the mode's own filters come first and these fill what is left, in this order: NULL first (a null
# otherwise reads as "no due time"), then BOOL; the types left out never reach the function, and `inspect` (which
# scans for every type the stack's filters do not pass) and `reconcile` (which parks them) report them.
UNUSABLE_LEAF_TYPES = ("NULL", "BOOL", "B", "SS", "NS", "BS")
# Lambda's default quota of filters per event source mapping.
MAX_FILTERS = 5


def unusable_due_filters(time_attribute: str, room: int) -> list[dict[str, Any]]:
    """Inserts and updates whose due attribute is of a type no due time can be: one filter per type, the first
    `room` of UNUSABLE_LEAF_TYPES. Writes without the attribute never match them."""
    return [
        {"eventName": ["INSERT", "MODIFY"], "dynamodb": {"NewImage": {time_attribute: {tag: [{"exists": True}]}}}}
        for tag in UNUSABLE_LEAF_TYPES[: max(0, room)]
    ]


def is_unusable_due_filter(pattern: dict[str, Any]) -> bool:
    """Whether `pattern` is one of `unusable_due_filters` (the ones a mapping can do without)."""
    image = (pattern.get("dynamodb") or {}).get("NewImage") or {}
    return len(image) == 1 and all(
        isinstance(v, dict) and list(v) in ([t] for t in UNUSABLE_LEAF_TYPES) for v in image.values()
    )


def within_filter_limit(patterns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most MAX_FILTERS filters: a filter a mode needs may be added (another account's table adds the stream view
    type check) in place of the last unusable-type ones (`unusable_due_filters`), whose types then reach the
    function no longer and are reported by `inspect` and `reconcile` instead. ValueError when the needed ones alone
    are too many."""
    kept = list(patterns)
    while len(kept) > MAX_FILTERS:
        optional = [i for i, p in enumerate(kept) if is_unusable_due_filter(p)]
        if not optional:
            raise ValueError(f"an event source mapping takes at most {MAX_FILTERS} filters, {len(kept)} are needed")
        del kept[optional[-1]]
    return kept


def filter_patterns(patterns: list[dict[str, Any]]) -> list[str]:
    """The mapping's filter patterns as JSON text, one filter each (Lambda ORs them; at most MAX_FILTERS)."""
    if not 1 <= len(patterns) <= MAX_FILTERS:
        raise ValueError(f"an event source mapping takes 1 to {MAX_FILTERS} filters, got {len(patterns)}")
    return [json.dumps(p, separators=(",", ":"), sort_keys=True) for p in patterns]
