"""aggregate's records (pure, no AWS calls): what one stream record contributes to each group's total
(`contributions`), and a group's records cut into writes (`chunks`), with what a write plans and counts."""

from __future__ import annotations

import math
from collections.abc import Iterator
from decimal import Context, Decimal, Inexact, InvalidOperation, Overflow, Underflow
from enum import StrEnum
from functools import cached_property
from threading import Lock
from typing import TYPE_CHECKING, Any

from st_core import log
from st_core.errors import PermanentError
from st_core.idempotency import record_digest
from st_core.stream import (
    AttributeValue,
    DynamoDBStreamRecord,
    changed_at,
    decode_image,
    identity_of,
    request_value,
    sequence_number,
)

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import AggregateConfig

# No AWS calls here.
AWS_ACTIONS: tuple[str, ...] = ()

MODE = "aggregate"
MARKER_PREFIX = "aggregate#"
# Records per write: a transaction holds at most 100 actions (the total's update and up to 99 markers).
RECORDS_PER_WRITE = 99
# DynamoDB allows 300 operators and functions in an expression. A write's condition has 2 per record (`contains`
# and an `OR`, or the bucket's `NOT`), 1 per bucket (its `AND`) and 4 for the ledger guard: chunks stay below this.
# The 4 KB limit on an expression's length follows: 2.2 KB for 99 records in one bucket, at most 2.9 KB (95 records
# in as many buckets); the update expression stays under 1.5 KB with 40 expired buckets to remove.
MAX_OPERATORS = 290
# Ids are grouped by the record's creation time into buckets of this many seconds. Fixed, not derived from the
# horizon, so a changed configuration never moves a record to another bucket than the one its id was written to;
# 15 minutes keeps about 5 buckets (5 attribute names) on a total at the default horizon while holding ids at most
# 15 minutes beyond it.
BUCKET_SECONDS = 900
# DynamoDB numbers: 38 significant digits, magnitudes 1E-130 to 9.99..E+125. Every inexact or out-of-range result
# is an error here, as it is in DynamoDB, never a silent rounding.
DYNAMODB_NUMBERS = Context(prec=38, Emax=125, Emin=-130, traps=[Inexact, Overflow, Underflow, InvalidOperation])


class Aggregation(StrEnum):
    SUM = "sum"
    COUNT = "count"


# The records below are plain classes, not dataclasses: a dataclass generates and compiles its methods when the
# module is imported, 0.5-0.9 ms each on every cold start.


class Contribution:
    """One record's change to one group's total."""

    def __init__(
        self,
        group: str,  # the group key's canonical identity (type tag included)
        key: AttributeValue,  # the group key as a request value (the total's partition key)
        delta: Decimal,
        event_id: str,
        sequence: str,
        created: float | None = None,  # the record's ApproximateCreationDateTime (epoch seconds)
        record: DynamoDBStreamRecord | None = None,
    ) -> None:
        self.group, self.key, self.delta, self.event_id, self.sequence = group, key, delta, event_id, sequence
        self.created, self.record = created, record
        self.ledger_only = False  # a replay of a record parked unapplied: checked in the ledger, whatever its age

    @property
    def marker(self) -> str:
        return f"{MARKER_PREFIX}{self.event_id}#{self.group}"

    @cached_property
    def digest(self) -> bytes:
        return record_digest(self.event_id, self.group)

    @property
    def step_marker(self) -> str:
        """Its marker on another account's table, where a journal names records by digest (`LedgerPath.in_steps`)."""
        return journal_marker(self.group, self.digest)

    @property
    def bucket(self) -> int | None:
        """The bucket its id lives in; None when the record does not say when it was made (ledger only)."""
        return None if self.created is None else math.floor(self.created / BUCKET_SECONDS)


def journal_marker(group: str, digest: bytes) -> str:
    """The ledger marker of a record by its digest (a journal holds digests, not the records' event ids)."""
    return f"{MARKER_PREFIX}{digest.hex()}#{group}"


class Collected:
    def __init__(self) -> None:
        self.contributions: list[Contribution] = []
        self.lock = Lock()

    def add(self, items: list[Contribution]) -> None:
        with self.lock:
            self.contributions.extend(items)


def _value(image: dict[str, Any], settings: AggregateConfig) -> Decimal:
    if Aggregation(settings["aggregation"]) is Aggregation.COUNT:
        return Decimal(1)
    value = image.get(settings["valueAttribute"])
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise PermanentError(
            f"value attribute {settings['valueAttribute']!r} is {type(value).__name__} {str(value)[:40]!r}, "
            "not a number"
        )
    return Decimal(value)


def _group(image: dict[str, Any], typed: dict[str, Any], settings: AggregateConfig) -> tuple[str, AttributeValue]:
    """The group's identity and its key value (string or binary, as the table's partition key is typed)."""
    group = image.get(settings["groupFrom"])
    tag = next(iter(typed.get(settings["groupFrom"]) or {"NULL": True}))
    if tag not in ("S", "B") or not isinstance(group, str) or not group:
        raise PermanentError(f"group attribute {settings['groupFrom']!r} is missing or not a string or binary")
    if tag == "S" and group.startswith(settings["sourcePrefix"]):
        # Its total would itself look like a source item and count itself: refuse rather than loop.
        raise PermanentError(f"group {group[:60]!r} starts with the source prefix {settings['sourcePrefix']!r}")
    value = typed[settings["groupFrom"]]
    return identity_of({"group": value}), request_value(value)


def _created(record: DynamoDBStreamRecord) -> float | None:
    moment = changed_at(record)
    return moment if moment is not None and math.isfinite(moment) else None


def contributions(record: DynamoDBStreamRecord, settings: AggregateConfig) -> list[Contribution]:
    """What one record changes, per group (pure). INSERT adds; with `onChange=adjust` a MODIFY applies the
    difference (moving between groups if the group changed) and a REMOVE subtracts."""
    data = record["dynamodb"]
    new_typed, old_typed = data.get("NewImage"), data.get("OldImage")
    new, old = decode_image(new_typed), decode_image(old_typed)
    event_id, sequence = str(record.get("eventID", "")), sequence_number(record)
    if not event_id:
        raise PermanentError("stream record has no eventID to apply it exactly once")
    adjust = settings["onChange"] == "adjust"
    parts: list[tuple[tuple[str, AttributeValue], Decimal]] = []
    name = record["eventName"]
    if name == "INSERT" and new is not None and new_typed is not None:
        parts.append((_group(new, new_typed, settings), _value(new, settings)))
    elif name == "MODIFY" and adjust and new is not None and old is not None and new_typed and old_typed:
        parts.append((_group(new, new_typed, settings), _value(new, settings)))
        parts.append((_group(old, old_typed, settings), _value(old, settings).copy_negate()))
    elif name == "REMOVE" and adjust and old is not None and old_typed is not None:
        parts.append((_group(old, old_typed, settings), _value(old, settings).copy_negate()))
    merged: dict[str, tuple[AttributeValue, Decimal]] = {}
    try:
        for (group, key), delta in parts:
            merged[group] = (key, DYNAMODB_NUMBERS.add(merged.get(group, (key, Decimal(0)))[1], delta))
    except ArithmeticError as exc:
        raise PermanentError(f"the record's change is not a DynamoDB number: {type(exc).__name__}") from exc
    created = _created(record)
    return [
        Contribution(group=g, key=k, delta=d, event_id=event_id, sequence=sequence, created=created, record=record)
        for g, (k, d) in merged.items()
        if d != 0
    ]


class Unwritable(PermanentError):
    """A group's total can never be written: the reason, and the records of it that were not applied."""

    def __init__(self, reason: str, records: list[Contribution], code: str = "") -> None:
        super().__init__(reason)
        self.records = records
        self.code = code


class Plan:
    """One write of a chunk of one group's records: which path, what it adds, checks and removes."""

    def __init__(self, *, ledger: bool, add_ids: bool, set_until: bool, expired: list[int]) -> None:
        self.ledger = ledger
        self.add_ids = (
            add_ids  # put the chunk's ids on the total (always on the ring path; on the ledger path when they fit)
        )
        self.set_until = set_until  # stamp stLedgerUntil: some record is applied without its id on the total
        self.expired = expired  # buckets every record of which is past the horizon


class Outcome:
    def __init__(self) -> None:
        self.applied = 0
        self.skipped = 0  # records applied before (found on the total, in this container's memory of it, or the ledger)
        self.units = 0.0  # write units DynamoDB reported (ConsumedCapacity) for the successful writes
        self.failed_writes = 0  # conditional writes that failed (each also costs at least one write unit)
        self.writes = 0
        self.ledger_writes = 0

    def add(self, other: Outcome) -> None:
        for name in ("applied", "skipped", "units", "failed_writes", "writes", "ledger_writes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def chunks(items: list[Contribution]) -> Iterator[list[Contribution]]:
    """A group's records in writes that fit a transaction and DynamoDB's expression limits (by bucket, so that each
    write's condition names few buckets)."""
    ordered = sorted(items, key=lambda c: (c.bucket is None, c.bucket or 0))
    chunk: list[Contribution] = []
    buckets: set[int | None] = set()
    for item in ordered:
        grown = buckets | {item.bucket}
        if chunk and (len(chunk) == RECORDS_PER_WRITE or 2 * (len(chunk) + 1) + len(grown) + 4 > MAX_OPERATORS):
            yield chunk
            chunk, grown = [], {item.bucket}
        chunk.append(item)
        buckets = grown
    if chunk:
        yield chunk


def consumed_units(response: dict[str, Any]) -> float:
    """Write units of a successful write, as DynamoDB reports them (ReturnConsumedCapacity=TOTAL)."""
    consumed = response.get("ConsumedCapacity") or []
    entries = consumed if isinstance(consumed, list) else [consumed]
    return float(sum(e.get("CapacityUnits", 0) for e in entries if isinstance(e, dict)))


def note_applied(
    group: str, chunk: list[Contribution], plan: Plan, request: dict[str, Any], write_units: float
) -> None:
    """Logs a write that applied a chunk (at DEBUG)."""
    delta = request["ExpressionAttributeValues"][":delta"]["N"]
    path = "ledger" if plan.ledger else "ring"
    log.debug("total-updated", group=group, delta=delta, records=len(chunk), path=path, writeUnits=write_units)
