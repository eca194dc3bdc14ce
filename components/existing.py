"""Bring your own table: the component acts on a table it does not own, given its name (and stream ARN).

What the component then makes: its consumers, schedules, queues, roles, ledger and alarms, scoped to that table and
stream. Given only the name, it looks the table up at deploy time (`aws.dynamodb.getTable`) for its stream ARN and
checks everything below, failing `pulumi up`/`preview` with the setting to change; given the stream ARN too (a
table in another account or stack, say), nothing is looked up and what it needs is named at run time instead.
What it cannot make, and each mode needs of the table:
- every mode: a stream with view type NEW_AND_OLD_IMAGES (a record without both images is parked with a reason
  that names the setting);
- `ttl`: TTL enabled on `time_attribute`;
- `polling`: the due index (`stDueIndex`: partition key `stShard` N, sort key `stDue` N, projection ALL).
Options that only shape a table the component creates (billing, capacities, point-in-time recovery, encryption,
deletion protection, key types) are refused beside it: they would be silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

# arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>
STREAM_ARN = re.compile(r"^(arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table/[A-Za-z0-9_.-]{3,255})/stream/.+$")
# The options that only shape a table the component creates (their defaults are what "not set" looks like).
TABLE_OPTIONS = (
    "billing_mode",
    "read_capacity",
    "write_capacity",
    "point_in_time_recovery",
    "server_side_encryption",
    "deletion_protection",
    "partition_key_type",
    "sort_key_type",
)


@dataclass(frozen=True)
class ExistingTable:
    """A DynamoDB table you already have. `stream_arn` is its latest stream's ARN (the stream must be enabled, view
    type NEW_AND_OLD_IMAGES); leave it out to have the component look the table up by name when it deploys and
    check what its mode needs (stream, TTL, due index, key names). Either may be a plain string or an Output
    (another resource's or a stack reference's). Give the component the table's own `partition_key`/`sort_key`
    names, and `kms_key_arn` if the table is encrypted with a customer-managed key (the roles then get kms:Decrypt
    on it)."""

    name: pulumi.Input[str]
    stream_arn: pulumi.Input[str] | None = None


# What `polling` needs of a table it does not own (the names are the handlers', see st_core/pending.py).
def _due_index() -> tuple[str, str, str]:
    from .packaging import runtime_module

    pending = runtime_module("pending")
    return pending.INDEX_NAME, pending.SHARD, pending.DUE


def table_problems(
    found: Mapping[str, Any],
    *,
    mode: str,
    partition_key: str,
    sort_key: str | None,
    time_attribute: str,
) -> list[str]:
    """What a looked-up table (getTable's result, snake_case) lacks for `mode`, each with the fix (pure)."""
    name = found.get("name")
    problems = []
    if not found.get("stream_enabled") or not found.get("stream_arn"):
        problems.append(f"table {name!r} has no stream; enable one with view type NEW_AND_OLD_IMAGES")
    elif found.get("stream_view_type") != "NEW_AND_OLD_IMAGES":
        problems.append(
            f"table {name!r} streams {found.get('stream_view_type')}; ScheduledTable needs NEW_AND_OLD_IMAGES "
            "(a stream's view type cannot change: disable the stream, then enable it with NEW_AND_OLD_IMAGES)"
        )
    if found.get("hash_key") and found.get("hash_key") != partition_key:
        problems.append(
            f"table {name!r} has partition key {found.get('hash_key')!r}, not {partition_key!r}; "
            f"pass partition_key={found.get('hash_key')!r}"
        )
    if found.get("hash_key") and (found.get("range_key") or None) != sort_key:
        problems.append(
            f"table {name!r} has sort key {found.get('range_key') or None!r}, not {sort_key!r}; "
            f"pass sort_key={found.get('range_key') or None!r}"
        )
    ttl = found.get("ttl") or {}
    if mode == "ttl" and not (ttl.get("enabled") and ttl.get("attribute_name") == time_attribute):
        problems.append(
            f"table {name!r} does not expire items by {time_attribute!r}; enable TTL on {time_attribute!r} "
            "(ttl mode acts when TTL deletes an item)"
        )
    if mode == "polling":
        index, shard, due = _due_index()
        have = {i.get("name"): i for i in found.get("global_secondary_indexes") or []}
        given = have.get(index) or {}
        # The processor builds each due event from the index's copy of the item: it must hold the whole item.
        if (given.get("hash_key"), given.get("range_key"), given.get("projection_type") or "ALL") != (
            shard,
            due,
            "ALL",
        ):
            problems.append(
                f"table {name!r} has no due index; add global secondary index {index!r} with partition key "
                f"{shard!r} (N) and sort key {due!r} (N), projection ALL"
            )
    return problems


def looked_up(result: Any) -> dict[str, Any]:
    """getTable's result as a plain mapping (the SDK's result object, or a dict from a test's mocks)."""
    if isinstance(result, Mapping):
        return dict(result)
    fields = ("name", "arn", "stream_arn", "stream_enabled", "stream_view_type", "hash_key", "range_key")
    plain: dict[str, Any] = {f: getattr(result, f, None) for f in fields}
    ttl = getattr(result, "ttl", None)
    plain["ttl"] = {"enabled": getattr(ttl, "enabled", None), "attribute_name": getattr(ttl, "attribute_name", None)}
    plain["global_secondary_indexes"] = [
        {"name": i.name, "hash_key": i.hash_key, "range_key": i.range_key, "projection_type": i.projection_type}
        for i in getattr(result, "global_secondary_indexes", None) or []
    ]
    return plain


def table_arn_of(stream_arn: str) -> str:
    """The table's ARN from its stream's (the stream ARN is the table ARN plus `/stream/<label>`)."""
    match = STREAM_ARN.match(stream_arn)
    if not match:
        raise ValueError(stream_arn_problem(stream_arn) or "not a stream ARN")
    return match.group(1)


def stream_arn_problem(value: object) -> str | None:
    """Why a plain value cannot be a DynamoDB stream ARN (None if it can; an Output is checked when known)."""
    if not isinstance(value, str):
        return None
    if STREAM_ARN.match(value):
        return None
    return (
        f"{value[:100]!r} is not a DynamoDB stream ARN; use the table's LatestStreamArn "
        "(arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>)"
    )


def same_table(name: object, stream_arn: object) -> str | None:
    """Why a plain name and stream ARN cannot belong to one table (None when they can, or either is an Output)."""
    if not isinstance(name, str) or not isinstance(stream_arn, str) or not STREAM_ARN.match(stream_arn):
        return None
    table = table_arn_of(stream_arn).split(":table/", 1)[1]
    if table != name:
        return f"the stream ARN belongs to table {table!r}, not {name!r}; pass that table's name and stream ARN"
    return None
