"""Bring your own table: the component acts on a table it does not own, given its name (and stream ARN).

What the component then makes: its consumers, schedules, queues, roles, ledger and alarms, scoped to that table and
stream. Given only the name, it looks the table up at deploy time (`aws.dynamodb.getTable`) for its stream ARN and
checks everything below, failing `pulumi up`/`preview` with the setting to change. Given the stream ARN too (a
table of another stack, say), the table that ARN names is looked up in its region and checked the same way when it
is in the deploying account, and the stream ARN must be its latest; a table in another account cannot be looked up,
so its mapping also takes every record of a stream without both images, which the handlers park with a reason
naming StreamViewType (the modes' filters match on the images: such records would otherwise reach nothing).
What it cannot make, and each mode needs of the table:
- every mode: a stream with view type NEW_AND_OLD_IMAGES (a record without both images is parked with a reason
  that names the setting);
- `ttl`: TTL enabled on `time_attribute`;
- `polling`: the due index (`stDueIndex`: partition key `stShard` N, sort key `stDue` N, projection ALL).
Options that only shape a table the component creates (billing, capacities, point-in-time recovery, encryption,
key types) are refused beside it: they would be silently ignored. `deletion_protection` is not one of them: it is
also the ledger's, the table the component makes beside an existing one (`{name}-ledger`), so
`deletion_protection=False` lets `pulumi destroy` remove the ledger and never touches the existing table.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from . import modes
from .suggest import keyword_hints

# arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>
STREAM_ARN = re.compile(r"^(arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table/[A-Za-z0-9_.-]{3,255})/stream/.+$")
# The options that only shape a table the component creates (their defaults are what "not set" looks like).
TABLE_OPTIONS = (
    "billing_mode",
    "read_capacity",
    "write_capacity",
    "point_in_time_recovery",
    "server_side_encryption",
    "partition_key_type",
    "sort_key_type",
)


@keyword_hints
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
            f"table {name!r} has StreamViewType {found.get('stream_view_type')}; ScheduledTable needs "
            "NEW_AND_OLD_IMAGES (a stream's view type cannot change: disable the stream, then enable it with "
            "NEW_AND_OLD_IMAGES)"
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
    # What the mode needs of it beyond (ttl: TTL on the time attribute; polling: the due index).
    problems += modes.by_name(mode).table_problems(found, time_attribute=time_attribute)
    return problems


def table_key_problem(name: object, key: str, manager: str | None, given: str | None) -> str | None:
    """Why the component cannot act on a looked-up table encrypted with KMS key `key` (None when it can): a
    customer-managed key (`manager` "CUSTOMER") must be the `kms_key_arn` given, or no role is granted its use and
    every read and write of the table, its stream and the ledger is refused at run time. The AWS-managed
    aws/dynamodb key needs nothing: its policy lets the account's DynamoDB callers use it."""
    if manager != "CUSTOMER" or given == key:
        return None
    if given is None:
        return (
            f"existing_table: table {name!r} is encrypted with the customer-managed KMS key {key!r}, which every role "
            f"that reads or writes it must be granted; pass kms_key_arn={key!r}"
        )
    return f"kms_key_arn: {given!r} is not the key of table {name!r}, {key!r}; pass kms_key_arn={key!r}"


def looked_up(result: Any) -> dict[str, Any]:
    """getTable's result as a plain mapping (the SDK's result object, or a dict from a test's mocks), with
    `kms_key_arn` the key that encrypts the table, if one is named."""
    if isinstance(result, Mapping):
        plain = dict(result)
        encryption = plain.get("server_side_encryption") or {}
        plain["kms_key_arn"] = encryption.get("kms_key_arn") if encryption.get("enabled") else None
        return plain
    fields = ("name", "arn", "stream_arn", "stream_enabled", "stream_view_type", "hash_key", "range_key")
    plain = {f: getattr(result, f, None) for f in fields}
    encrypted = getattr(result, "server_side_encryption", None)
    plain["kms_key_arn"] = getattr(encrypted, "kms_key_arn", None) if getattr(encrypted, "enabled", False) else None
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


def existing_table_problem(name: object, stream_arn: object) -> str | None:
    """Why a name and stream ARN cannot be one existing table, as the whole message naming the field and the fix
    (None when they can): checked on plain strings at construction, and on Outputs once they resolve, so both read
    the same. A value not known yet (an Output) passes until it is."""
    if isinstance(name, str) and not name:
        return "existing_table.name: must not be empty; pass the table's name"
    problem = stream_arn_problem(stream_arn)
    if problem:
        return f"existing_table.stream_arn: {problem}; enable the stream (NEW_AND_OLD_IMAGES) and pass its ARN"
    mismatch = same_table(name, stream_arn)
    if mismatch:
        return f"existing_table: {mismatch}; the name and the stream ARN must be the same table's"
    return None


def stream_region_and_account(stream_arn: str) -> tuple[str, str]:
    """The region and account of the table a (valid) stream ARN belongs to."""
    _, _, _, region, account, _ = stream_arn.split(":", 5)
    return region, account


def latest_stream_problem(found: Mapping[str, Any], stream_arn: str) -> str | None:
    """Why `stream_arn` is not the looked-up table's current stream (None if it is): a disabled stream's records
    stay readable for 24 hours, and after that a mapping on it receives nothing."""
    latest = found.get("stream_arn")
    if not latest or latest == stream_arn:
        return None
    return (
        f"existing_table.stream_arn: {stream_arn!r} is not the latest stream of table {found.get('name')!r} "
        f"({latest!r}): its records stop when it is disabled; pass the table's LatestStreamArn"
    )


# A table given by stream ARN that cannot be looked up (another account's) may stream without both images, and its
# records would then match none of a mode's filters (they match on the images): nothing would reach the function,
# nothing would be parked. Its mapping also takes every record of such a stream, which the handlers park with a
# reason naming StreamViewType (a NEW_AND_OLD_IMAGES stream's records never match this pattern).
WRONG_VIEW_TYPE_FILTER: dict[str, Any] = {"dynamodb": {"StreamViewType": ["KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE"]}}


def same_table(name: object, stream_arn: object) -> str | None:
    """Why a plain name and stream ARN cannot belong to one table (None when they can, or either is an Output)."""
    if not isinstance(name, str) or not isinstance(stream_arn, str) or not STREAM_ARN.match(stream_arn):
        return None
    table = table_arn_of(stream_arn).split(":table/", 1)[1]
    if table != name:
        return f"the stream ARN belongs to table {table!r}, not {name!r}; pass that table's name and stream ARN"
    return None


def table_reference(name: str, table_arn: str | None, home_arn: str | None) -> str:
    """What the functions name the table by in their DynamoDB calls: its name when it is in the deploying account
    (`home_arn`'s), its ARN when it is another account's (DynamoDB looks a plain name up in the caller's own account,
    where there is no such table; another account's table is named by its ARN)."""
    if table_arn is None or home_arn is None:
        return name  # not known yet (mocks that echo inputs)
    table_parts, home_parts = table_arn.split(":"), home_arn.split(":")
    if len(table_parts) < 6 or table_parts[2] != "dynamodb" or len(home_parts) < 6:
        return name
    return table_arn if table_parts[4] != home_parts[4] else name
