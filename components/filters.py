"""Event source mapping filter patterns: the Lambda is invoked only for records that can change something."""

from __future__ import annotations

import json
from typing import Any

# A time attribute is a string (ISO-8601) or a number (epoch seconds); `exists` only matches leaf values, so each
# DynamoDB type tag needs its own pattern.
_TIME_TYPES = ("S", "N")
# The other types an `exists` filter can see (leaf values: binary, boolean, null, and sets, whose members are
# leaves). A due attribute of one of them is no time the mode can use: the function must see it to park the
# record with its reason. A map (M) or list (L) holds objects, which no leaf filter matches: `inspect` lists those.
UNUSABLE_LEAF_TYPES = ("B", "BOOL", "NULL", "SS", "NS", "BS")


def unusable_due_filter(time_attribute: str) -> dict[str, Any]:
    """Inserts and updates whose due attribute is of a type no due time can be (UNUSABLE_LEAF_TYPES), in one filter:
    `$or` over the type tags (EventBridge pattern syntax, which Lambda's event filtering uses), so that the mode
    still fits Lambda's five filters per mapping. Writes without the attribute never match it."""
    either = [{tag: [{"exists": True}]} for tag in UNUSABLE_LEAF_TYPES]
    return {"eventName": ["INSERT", "MODIFY"], "dynamodb": {"NewImage": {time_attribute: {"$or": either}}}}


def eventbridge_filters(time_attribute: str) -> list[dict[str, Any]]:
    """INSERT/MODIFY of items that carry the time attribute (of any leaf type: an unusable one is parked with its
    reason); MODIFY/REMOVE of items that carried a time (S or N: nothing was scheduled for another type). Five
    filters, Lambda's default limit."""
    patterns: list[dict[str, Any]] = []
    for image, events in (("NewImage", ["INSERT", "MODIFY"]), ("OldImage", ["MODIFY", "REMOVE"])):
        for tag in _TIME_TYPES:
            patterns.append({"eventName": events, "dynamodb": {image: {time_attribute: {tag: [{"exists": True}]}}}})
    return [*patterns, unusable_due_filter(time_attribute)]


TTL_SERVICE = {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}


def ttl_filters(time_attribute: str, precise: bool) -> list[dict[str, Any]]:
    """Only TTL deletions (REMOVE by the DynamoDB service): inserts, updates and users' deletes never invoke the
    executor.

    Precise mode must also see: inserts and updates of items with a due time (to keep their schedule; a string
    due time too, to park it with the reason, since TTL ignores it); and updates and removes of items that held a
    numeric due time, which covers users' deletes (a cancel, or due), TTL's deletions, a due time removed, and the
    schedule's fire (`SET stFiredAt = <due> REMOVE <due attribute>`, see handlers/ttl.py). Not passed: the
    executor's own delete of a fired item (it holds no due time), and removes or updates of items whose due time was
    a string (never scheduled, nothing to undo). Inserts and updates whose due attribute is of another leaf type
    (binary, boolean, null, a set) pass too, to be parked with their reason. Four filters of Lambda's five."""
    if precise:
        patterns: list[dict[str, Any]] = [
            {"eventName": ["INSERT", "MODIFY"], "dynamodb": {"NewImage": {time_attribute: {tag: [{"exists": True}]}}}}
            for tag in _TIME_TYPES
        ]
        patterns.append(
            {"eventName": ["MODIFY", "REMOVE"], "dynamodb": {"OldImage": {time_attribute: {"N": [{"exists": True}]}}}}
        )
        return [*patterns, unusable_due_filter(time_attribute)]
    return [{"eventName": ["REMOVE"], "userIdentity": TTL_SERVICE}]


def polling_filters() -> list[dict[str, Any]]:
    """Writes of users, never of the mode itself: items without `stStatus` (new, or replaced by a PutItem), and
    updates of items waiting in the index (PENDING before and after, to pick up a changed due time). The processor's
    writes always change the status (CLAIMED, RETRY, DONE, FAILED) and the assigner's turn none into PENDING, so
    neither comes back to the assigner: no loop."""
    from .packaging import runtime_module

    pending = runtime_module("pending")
    status, waiting = pending.STATUS, pending.Status.PENDING.value
    return [
        {"eventName": ["INSERT", "MODIFY"], "dynamodb": {"NewImage": {status: {"S": [{"exists": False}]}}}},
        {
            "eventName": ["MODIFY"],
            "dynamodb": {"NewImage": {status: {"S": [waiting]}}, "OldImage": {status: {"S": [waiting]}}},
        },
    ]


def aggregate_filters(partition_key: str, prefix: str, on_change: str) -> list[dict[str, Any]]:
    """Source items only, by their key's prefix (seed 003's filter): inserts, and with `adjust` also updates and
    deletes. Totals and ledger markers never have that prefix, so the mode's own writes cannot invoke it."""
    events = ["INSERT", "MODIFY", "REMOVE"] if on_change == "adjust" else ["INSERT"]
    return [{"eventName": events, "dynamodb": {"Keys": {partition_key: {"S": [{"prefix": prefix}]}}}}]


# Lambda's default quota of filters per event source mapping.
MAX_FILTERS = 5


def within_filter_limit(patterns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same records passed in at most MAX_FILTERS filters: the patterns from the fifth on joined into one by a
    top-level `$or` (Lambda ORs its filters, and `$or` ORs the patterns it lists, so nothing passes that did not and
    nothing is dropped). A mode already using all five filters may then add one (another account's table adds the
    stream view type check) without a quota increase."""
    if len(patterns) <= MAX_FILTERS:
        return patterns
    head, tail = patterns[: MAX_FILTERS - 1], patterns[MAX_FILTERS - 1 :]
    return [*head, {"$or": tail}]


def filter_patterns(patterns: list[dict[str, Any]]) -> list[str]:
    """The mapping's filter patterns as JSON text, one filter each (Lambda ORs them; at most MAX_FILTERS)."""
    if not 1 <= len(patterns) <= MAX_FILTERS:
        raise ValueError(f"an event source mapping takes 1 to {MAX_FILTERS} filters, got {len(patterns)}")
    return [json.dumps(p, separators=(",", ":"), sort_keys=True) for p in patterns]
