"""`aggregate` mode (seed 003): source items (partition key starting `SCORE`) keep a running total per group (the
user) in the same table, at `PK=<group>`, `SK=TOTAL`.

Exactly once, one write per group per batch: the batch's records are coalesced into one delta per group, and each
group's delta is applied in one DynamoDB transaction together with one marker per record and group in the ledger
table (a conditional put on the record's stream `eventID` and the group: a record that moves a score between groups
has one marker per side). A record applied before (a redelivered batch, a retry from a failed sequence number,
another concurrent batch) fails its marker's condition; the transaction is retried without it. The ledger has no
stream and the total's key does not start with the source prefix, so nothing written here can invoke this function
again.

Sums use DynamoDB's number arithmetic exactly (38 significant digits; Python's default context has 28). A total
that can never be written (the sum leaves DynamoDB's range, the total attribute is not a number) is parked with the
reason, record by record, instead of blocking the shard until its retries run out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Context, Decimal, Inexact, InvalidOperation, Overflow, Underflow
from enum import StrEnum
from threading import Lock
from typing import Any

from st_core import log
from st_core.batch import batch_metrics, park_malformed, process_batch
from st_core.clients import CLIENTS, Clients
from st_core.config import AggregateConfig, HandlerConfig, load_config
from st_core.errors import PermanentError, TransientError, error_code, is_transient
from st_core.idempotency import marker_put
from st_core.poison import PoisonQueue
from st_core.stream import (
    AttributeValue,
    BatchResponse,
    DynamoDBStreamEvent,
    DynamoDBStreamRecord,
    decode_image,
    identity_of,
    request_value,
    sequence_number,
    split_event,
)

MODE = "aggregate"
# A transaction holds at most 100 actions: the total's update and up to 99 record markers.
MARKERS_PER_TRANSACTION = 99
MARKER_PREFIX = "aggregate#"
# DynamoDB numbers: 38 significant digits, magnitudes 1E-130 to 9.99..E+125. Every inexact or out-of-range result
# is an error here, as it is in DynamoDB, never a silent rounding.
DYNAMODB_NUMBERS = Context(prec=38, Emax=125, Emin=-130, traps=[Inexact, Overflow, Underflow, InvalidOperation])


class Aggregation(StrEnum):
    SUM = "sum"
    COUNT = "count"


@dataclass(frozen=True)
class Contribution:
    group: str  # the group key's canonical identity (type tag included)
    key: AttributeValue  # the group key as a request value (the total's partition key)
    delta: Decimal
    event_id: str
    sequence: str
    record: DynamoDBStreamRecord | None = field(default=None, compare=False, repr=False)

    @property
    def marker(self) -> str:
        return f"{MARKER_PREFIX}{self.event_id}#{self.group}"


@dataclass
class Collected:
    contributions: list[Contribution] = field(default_factory=list)
    lock: Lock = field(default_factory=Lock)

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
    return [Contribution(g, k, d, event_id, sequence, record) for g, (k, d) in merged.items() if d != 0]


class Totals:
    """Applies coalesced deltas: one transaction per group (per 99 records), markers making each record count once."""

    def __init__(self, config: HandlerConfig, clients: Clients, now: Callable[[], float]) -> None:
        self.config = config
        self.settings = config["aggregate"]
        self.clients = clients
        self.now = now

    def apply(self, group: str, items: list[Contribution], attempts: int = 3) -> int:
        """Returns how many of `items` were new (applied now). PermanentError when the total can never be written."""
        applied = 0
        for start in range(0, len(items), MARKERS_PER_TRANSACTION):
            chunk = items[start : start + MARKERS_PER_TRANSACTION]
            for _ in range(attempts):
                try:
                    self._transact(group, chunk)
                    applied += len(chunk)
                    break
                except _AlreadyApplied as seen:
                    chunk = [c for i, c in enumerate(chunk) if i not in seen.indexes]
                    if not chunk:
                        break
            else:
                raise TransientError(f"group {group!r}: transaction kept conflicting")
        return applied

    def _transact(self, group: str, chunk: list[Contribution]) -> None:
        s = self.settings
        try:
            delta = Decimal(0)
            for c in chunk:
                delta = DYNAMODB_NUMBERS.add(delta, c.delta)
        except ArithmeticError as exc:
            raise PermanentError(
                f"group {group!r}: the batch's change to the total is beyond DynamoDB's numbers (38 digits, "
                f"magnitude up to 1E+126): {type(exc).__name__}"
            ) from exc
        expires = int(self.now()) + s["windowSeconds"]
        actions: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.config["table"],
                    "Key": {
                        self.config["partitionKey"]: chunk[0].key,
                        str(self.config["sortKey"]): {"S": s["totalSortKey"]},
                    },
                    "UpdateExpression": "ADD #total :delta",
                    "ExpressionAttributeNames": {"#total": s["totalAttribute"]},
                    "ExpressionAttributeValues": {":delta": {"N": str(delta)}},
                }
            }
        ]
        actions += [marker_put(s["ledgerTable"], c.marker, expires) for c in chunk]
        try:
            self.clients.get("dynamodb").transact_write_items(TransactItems=actions)
        except Exception as exc:
            code = error_code(exc)
            if code == "ValidationException":
                raise PermanentError(f"group {group!r}: the total cannot be written: {str(exc)[:300]}") from exc
            if code != "TransactionCanceledException":
                raise
            reasons = getattr(exc, "response", {}).get("CancellationReasons", [])
            invalid = [r for r in reasons if r.get("Code") in ("ValidationError", "ValidationException")]
            if invalid:
                # The total is not a number, or the sum leaves DynamoDB's range: retrying cannot help.
                message = invalid[0].get("Message") or invalid[0].get("Code")
                raise PermanentError(f"group {group!r}: the total cannot be written: {message}") from exc
            seen = {i - 1 for i, r in enumerate(reasons) if i > 0 and r.get("Code") == "ConditionalCheckFailed"}
            if seen:
                raise _AlreadyApplied(seen) from exc
            raise TransientError(f"group {group!r}: transaction cancelled ({reasons})") from exc
        log.info("total-updated", group=group, delta=str(delta), records=len(chunk))


class _AlreadyApplied(Exception):
    def __init__(self, indexes: set[int]) -> None:
        super().__init__(f"{len(indexes)} record(s) already applied")
        self.indexes = indexes


def handle_batch(
    event: DynamoDBStreamEvent | object,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], float] = time.time,
) -> BatchResponse:
    settings = config["aggregate"]
    poison = PoisonQueue(config["poisonQueueUrl"], mode=MODE, table=config["table"], clients=clients)
    records, malformed = split_event(event)
    park_malformed(poison, malformed)
    collected = Collected()
    # Phase 1, per record: what it contributes; bad records go to the poison queue with the reason.
    parsed = process_batch(
        records,
        lambda record: collected.add(contributions(record, settings)),
        poison=poison,
        max_workers=config["maxWorkers"],
    )
    # Phase 2, per group: one transaction for the whole batch's delta.
    by_group: dict[str, list[Contribution]] = {}
    for item in collected.contributions:
        by_group.setdefault(item.group, []).append(item)
    totals = Totals(config, clients, now)

    def apply(group: str) -> list[str]:
        """The sequence numbers to retry from when this group's total could not be written (none if parked)."""
        items = by_group[group]
        try:
            totals.apply(group, items)
        except Exception as exc:
            if isinstance(exc, PermanentError) or not is_transient(exc):
                return _park_group(poison, items, str(exc), error_code(exc))
            # Retried from this group's first record; what was applied meanwhile is skipped by its marker.
            log.warning("total-failed", group=group, error=type(exc).__name__, reason=str(exc)[:300])
            return [min((c.sequence for c in items), key=_as_number)]
        return []

    failed = [f["itemIdentifier"] for f in parsed["batchItemFailures"]]
    # Groups are independent (different items, ADD is atomic): their transactions run concurrently.
    workers = max(1, min(config["maxWorkers"], len(by_group)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for sequences in pool.map(apply, list(by_group)):
            failed += sequences
    response: BatchResponse = {
        "batchItemFailures": [{"itemIdentifier": seq} for seq in sorted(set(failed), key=_as_number)]
    }
    batch_metrics(config, mode=MODE, records=len(records) + len(malformed), poison=poison, response=response)
    return response


def _park_group(poison: PoisonQueue, items: list[Contribution], reason: str, code: str) -> list[str]:
    """Park each record of a group whose total can never be written; those the queue refuses are retried."""
    retry: list[str] = []
    for item in items:
        try:
            poison.send(item.record, reason, code)
        except Exception as exc:
            log.error("poison-failed", sequenceNumber=item.sequence, error=error_code(exc), reason=reason)
            retry.append(item.sequence)
    log.warning("total-parked", records=len(items), reason=reason[:300])
    return retry


def _as_number(sequence: str) -> int:
    return int(sequence) if sequence.isdigit() else 0


def handler(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """Lambda entry point (`aggregate.handler`)."""
    return handle_batch(event, load_config())
