"""Deterministic, API-safe names derived from an item's keys: its schedules, and each occurrence's one id."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .timeparse import format_due

# Scheduler names: 1-64 characters of [0-9a-zA-Z-_.]. 24 hex digits (96 bits) of SHA-256 make collisions between
# distinct keys practically impossible; the readable prefix only helps people find a schedule in the console.
# A pattern, compiled on first use (`re` caches it) rather than at import.
_UNSAFE = r"[^0-9A-Za-z_.-]+"
_HASH_CHARS = 24
_PREFIX_CHARS = 64 - _HASH_CHARS - 1


def schedule_name(key_identity: str, readable: str = "") -> str:
    """`<readable prefix>-<hash of the canonical keys>`, always 1-64 chars of [0-9a-zA-Z-_.]."""
    digest = hashlib.sha256(key_identity.encode("utf-8")).hexdigest()[:_HASH_CHARS]
    prefix = re.sub(_UNSAFE, "-", readable).strip("-.")[:_PREFIX_CHARS].rstrip("-.")
    return f"{prefix}-{digest}" if prefix else digest


RECURRING = "recurring"
# Scheduler writes each firing's scheduled time (`2026-03-30T08:00:00Z`) where a target's input says this.
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


class ItemKeys:
    """An item's keys, as every name of the item and of its occurrences is made from them (`item_keys`). A plain
    class: a NamedTuple would cost every cold start about 0.25 ms to build at import (a plain class: 7 us)."""

    __slots__ = ("identity", "plain", "readable")
    identity: str  # the canonical typed form (`stream.identity_of`): what the names' hash covers, in any order
    plain: dict[str, Any]  # the values decoded, in the table's key order: the due event's `keys`
    readable: str  # the names' readable prefix: the key values in the table's key order (partition key, sort key)

    def __init__(self, identity: str, plain: dict[str, Any], readable: str) -> None:
        self.identity, self.plain, self.readable = identity, plain, readable


def key_names(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The table's key attributes in the table's order: its partition key, then its sort key if it has one."""
    return tuple(str(name) for name in (config.get("partitionKey"), config.get("sortKey")) if name)


def item_keys(typed_keys: Mapping[str, Any], config: Mapping[str, Any]) -> ItemKeys:
    """An item's keys (DynamoDB JSON, Lambda's or boto3's form, in whatever order a record lists them) for naming:
    the order of the record never changes a name, the table's definition (`config`'s key names) fixes it."""
    from .stream import identity_of, to_plain

    order = key_names(config)
    ranked = sorted(typed_keys, key=lambda name: (order.index(name) if name in order else len(order), name))
    plain = {name: to_plain(typed_keys[name]) for name in ranked}
    return ItemKeys(identity_of(typed_keys), plain, "-".join(str(value) for value in plain.values()))


def occurrence_id(keys: ItemKeys, due: datetime, offset: int = 0) -> str:
    """THE name of one occurrence (an item's keys + its due time + the offset), in every mode and every place: the
    due event's `occurrenceId`, the idempotency ledger's id, the eventbridge mode's schedule name, the SQS FIFO
    deduplication id and the Step Functions execution name. The readable prefix is the key values in the table's
    key order, the hash covers the keys' canonical form, so it is the same whichever order a record lists the keys
    in and whichever path (stream, backfill, polling, redrive, reconcile) names it. 1-64 characters of
    [0-9a-zA-Z-_.], so every one of those takes it as it is. The offset-0 name is the one a table without offsets
    has always used, so adding offsets keeps its schedules and ledger."""
    return schedule_name(f"{keys.identity}\x1f{format_due(due)}" + (f"\x1f{offset}" if offset else ""), keys.readable)


def recurring_name(keys: ItemKeys) -> str:
    """An item's one recurring schedule (whatever its rule), found again on every change of the item."""
    return schedule_name(f"{keys.identity}\x1f{RECURRING}", keys.readable)


def item_schedule_name(keys: ItemKeys) -> str:
    """Precise ttl's one schedule per item (whatever its due time)."""
    return schedule_name(keys.identity, keys.readable)


def recurring_firing_id(schedule: str, scheduled: str = SCHEDULED_TIME) -> str:
    """One firing of the recurring schedule `schedule`: its name, `@`, and the firing's scheduled time as Scheduler
    writes it (`2026-03-30T08:00:00Z`, `format_due`'s form), or the placeholder Scheduler completes. A firing the
    handler delivers itself (its schedule was made too late for it) gets the id Scheduler would have given it."""
    return f"{schedule}@{scheduled}"
