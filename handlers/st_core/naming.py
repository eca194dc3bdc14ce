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


def readable_keys(keys: Mapping[str, Any]) -> str:
    """The key values joined by `-`: the readable prefix of a schedule's name (plain keys, as decoded)."""
    return "-".join(str(v) for v in keys.values())


def occurrence_id(identity: str, keys: Mapping[str, Any], due: datetime, offset: int = 0) -> str:
    """THE name of one occurrence (an item's keys + its due time + the offset), in every mode and every place: the
    due event's `occurrenceId`, the idempotency ledger's id, the eventbridge mode's schedule name, the SQS FIFO
    deduplication id and the Step Functions execution name. `identity` is the keys' canonical form
    (`stream.identity_of`), `keys` the same keys decoded (only the readable prefix comes from them). 1-64 characters
    of [0-9a-zA-Z-_.], so every one of those takes it as it is. The offset-0 name is the one a table without
    offsets has always used, so adding offsets keeps its schedules and ledger."""
    unique = f"{identity}\x1f{format_due(due)}" + (f"\x1f{offset}" if offset else "")
    return schedule_name(unique, readable_keys(keys))


def recurring_name(identity: str, keys: Mapping[str, Any]) -> str:
    """An item's one recurring schedule (whatever its rule), found again on every change of the item."""
    return schedule_name(f"{identity}\x1f{RECURRING}", readable_keys(keys))


def recurring_occurrence_id(identity: str, keys: Mapping[str, Any]) -> str:
    """A recurring item's firing's `occurrenceId`, as a template Scheduler completes: the schedule's name, `@`, and
    the firing's scheduled time (written in by Scheduler). Scheduler computes no hash, so the id is composed rather
    than hashed; it is stable per firing (a retried or twice-invoked firing has the same scheduled time) and at
    most 64 + 1 + 20 characters of printable ASCII, which SQS takes as a FIFO deduplication id."""
    return recurring_firing_id(recurring_name(identity, keys))


def recurring_firing_id(schedule: str, scheduled: str = SCHEDULED_TIME) -> str:
    """One firing of the recurring schedule `schedule`: its name, `@`, and the firing's scheduled time as Scheduler
    writes it (`2026-03-30T08:00:00Z`, `format_due`'s form), or the placeholder Scheduler completes. A firing the
    handler delivers itself (its schedule was made too late for it) gets the id Scheduler would have given it."""
    return f"{schedule}@{scheduled}"
