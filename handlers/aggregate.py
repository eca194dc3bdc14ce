"""`aggregate` mode (seed 003): source items (partition key starting `SCORE`) keep a running total per group (the
user) in the same table, at `PK=<group>`, `SK=TOTAL`.

Exactly once, one write per group per batch: the batch's records are coalesced into one delta per group, and each
group's delta is applied in one DynamoDB transaction together with one marker per record in the ledger table (a
conditional put on the record's stream `eventID`). A record applied before (a redelivered batch, a retry from a
failed sequence number, another concurrent batch) fails its marker's condition; the transaction is retried without
it. The ledger has no stream and the total's key does not start with the source prefix, so nothing written here
can invoke this function again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from threading import Lock
from typing import Any

from st_core import log
from st_core.batch import batch_metrics, process_batch
from st_core.clients import CLIENTS, Clients
from st_core.config import AggregateConfig, HandlerConfig, load_config
from st_core.errors import PermanentError, TransientError, error_code
from st_core.poison import PoisonQueue
from st_core.stream import (
    BatchResponse,
    DynamoDBStreamEvent,
    DynamoDBStreamRecord,
    decode_image,
    sequence_number,
)

MODE = "aggregate"
# A transaction holds at most 100 actions: the total's update and up to 99 record markers.
MARKERS_PER_TRANSACTION = 99
MARKER_PREFIX = "aggregate#"


class Aggregation(StrEnum):
    SUM = "sum"
    COUNT = "count"


@dataclass(frozen=True)
class Contribution:
    group: str
    delta: Decimal
    event_id: str
    sequence: str


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
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise PermanentError(
            f"value attribute {settings['valueAttribute']!r} is {type(value).__name__} {str(value)[:40]!r}, "
            "not a number"
        )
    return Decimal(str(value))


def _group(image: dict[str, Any], settings: AggregateConfig) -> str:
    group = image.get(settings["groupFrom"])
    if not isinstance(group, str) or not group:
        raise PermanentError(f"group attribute {settings['groupFrom']!r} is missing or not a string")
    if group.startswith(settings["sourcePrefix"]):
        # Its total would itself look like a source item and count itself: refuse rather than loop.
        raise PermanentError(f"group {group[:60]!r} starts with the source prefix {settings['sourcePrefix']!r}")
    return group


def contributions(record: DynamoDBStreamRecord, settings: AggregateConfig) -> list[Contribution]:
    """What one record changes, per group (pure). INSERT adds; with `onChange=adjust` a MODIFY applies the
    difference (moving between groups if the group changed) and a REMOVE subtracts."""
    data = record["dynamodb"]
    new, old = decode_image(data.get("NewImage")), decode_image(data.get("OldImage"))
    event_id, sequence = str(record.get("eventID", "")), sequence_number(record)
    if not event_id:
        raise PermanentError("stream record has no eventID to apply it exactly once")
    adjust = settings["onChange"] == "adjust"
    parts: list[tuple[str, Decimal]] = []
    name = record["eventName"]
    if name == "INSERT" and new is not None:
        parts.append((_group(new, settings), _value(new, settings)))
    elif name == "MODIFY" and adjust and new is not None and old is not None:
        parts.append((_group(new, settings), _value(new, settings)))
        parts.append((_group(old, settings), -_value(old, settings)))
    elif name == "REMOVE" and adjust and old is not None:
        parts.append((_group(old, settings), -_value(old, settings)))
    merged: dict[str, Decimal] = {}
    for group, delta in parts:
        merged[group] = merged.get(group, Decimal(0)) + delta
    return [Contribution(g, d, event_id, sequence) for g, d in merged.items() if d != 0]


class Totals:
    """Applies coalesced deltas: one transaction per group (per 99 records), markers making each record count once."""

    def __init__(self, config: HandlerConfig, clients: Clients, now: Callable[[], float]) -> None:
        self.config = config
        self.settings = config["aggregate"]
        self.clients = clients
        self.now = now

    def apply(self, group: str, items: list[Contribution], attempts: int = 3) -> int:
        """Returns how many of `items` were new (applied now)."""
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
        delta = sum((c.delta for c in chunk), Decimal(0))
        expires = str(int(self.now()) + s["windowSeconds"])
        actions: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self.config["table"],
                    "Key": {
                        self.config["partitionKey"]: {"S": group},
                        str(self.config["sortKey"]): {"S": s["totalSortKey"]},
                    },
                    "UpdateExpression": "ADD #total :delta",
                    "ExpressionAttributeNames": {"#total": s["totalAttribute"]},
                    "ExpressionAttributeValues": {":delta": {"N": str(delta)}},
                }
            }
        ]
        actions += [
            {
                "Put": {
                    "TableName": s["ledgerTable"],
                    "Item": {"id": {"S": MARKER_PREFIX + c.event_id}, "expiresAt": {"N": expires}},
                    "ConditionExpression": "attribute_not_exists(id)",
                }
            }
            for c in chunk
        ]
        try:
            self.clients.get("dynamodb").transact_write_items(TransactItems=actions)
        except Exception as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            reasons = getattr(exc, "response", {}).get("CancellationReasons", [])
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
    event: DynamoDBStreamEvent,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], float] = time.time,
) -> BatchResponse:
    settings = config["aggregate"]
    poison = PoisonQueue(config["poisonQueueUrl"], mode=MODE, table=config["table"], clients=clients)
    collected = Collected()
    # Phase 1, per record: what it contributes; bad records go to the poison queue with the reason.
    parsed = process_batch(
        event.get("Records", []),
        lambda record: collected.add(contributions(record, settings)),
        poison=poison,
        max_workers=config["maxWorkers"],
    )
    # Phase 2, per group: one transaction for the whole batch's delta.
    by_group: dict[str, list[Contribution]] = {}
    for item in collected.contributions:
        by_group.setdefault(item.group, []).append(item)
    totals = Totals(config, clients, now)

    def apply(group: str) -> str | None:
        """None, or the sequence number to retry from when this group's total could not be written."""
        items = by_group[group]
        try:
            totals.apply(group, items)
        except Exception as exc:
            # Retried from this group's first record; what was applied meanwhile is skipped by its marker.
            log.warning("total-failed", group=group, error=type(exc).__name__, reason=str(exc)[:300])
            return min((c.sequence for c in items), key=_as_number)
        return None

    failed = [f["itemIdentifier"] for f in parsed["batchItemFailures"]]
    # Groups are independent (different items, ADD is atomic): their transactions run concurrently.
    workers = max(1, min(config["maxWorkers"], len(by_group)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        failed += [seq for seq in pool.map(apply, list(by_group)) if seq is not None]
    response: BatchResponse = {
        "batchItemFailures": [{"itemIdentifier": seq} for seq in sorted(set(failed), key=_as_number)]
    }
    batch_metrics(config, mode=MODE, records=len(event.get("Records", [])), poison=poison, response=response)
    return response


def _as_number(sequence: str) -> int:
    return int(sequence) if sequence.isdigit() else 0


def handler(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """Lambda entry point (`aggregate.handler`)."""
    return handle_batch(event, load_config())
