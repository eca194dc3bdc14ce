"""Bring your own table: the component acts on a table it does not own, given its name and stream ARN.

What the component then makes: its consumers, schedules, queues, roles, ledger and alarms, scoped to that table and
stream. What it cannot make, and each mode needs of the table (checked where it can be, named at run time where not):
- every mode: a stream with view type NEW_AND_OLD_IMAGES (a record without both images is parked with a reason
  that names the setting);
- `ttl`: TTL enabled on `time_attribute`;
- `polling`: the due index (`stDueIndex`: partition key `stShard` N, sort key `stDue` N, projection ALL).
Options that only shape a table the component creates (billing, capacities, point-in-time recovery, encryption,
deletion protection, key types) are refused beside it: they would be silently ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
    type NEW_AND_OLD_IMAGES). Either may be a plain string or an Output (another resource's or a stack
    reference's). Give the component the table's own `partition_key`/`sort_key` names, and `kms_key_arn` if the
    table is encrypted with a customer-managed key (the roles then get kms:Decrypt on it)."""

    name: pulumi.Input[str]
    stream_arn: pulumi.Input[str]


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
