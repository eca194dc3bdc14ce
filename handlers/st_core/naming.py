"""Deterministic, API-safe names derived from an item's keys (one schedule per item, found again on every change)."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

from .timeparse import format_due

# Scheduler names: 1-64 characters of [0-9a-zA-Z-_.]. 24 hex digits (96 bits) of SHA-256 make collisions between
# distinct keys practically impossible; the readable prefix only helps people find a schedule in the console.
# A pattern, compiled on first use (`re` caches it) rather than at import: polling imports this module for
# `dedupe_name` alone and never needs it.
_UNSAFE = r"[^0-9A-Za-z_.-]+"
_HASH_CHARS = 24
_PREFIX_CHARS = 64 - _HASH_CHARS - 1


def schedule_name(key_identity: str, readable: str = "") -> str:
    """`<readable prefix>-<hash of the canonical keys>`, always 1-64 chars of [0-9a-zA-Z-_.]."""
    digest = hashlib.sha256(key_identity.encode("utf-8")).hexdigest()[:_HASH_CHARS]
    prefix = re.sub(_UNSAFE, "-", readable).strip("-.")[:_PREFIX_CHARS].rstrip("-.")
    return f"{prefix}-{digest}" if prefix else digest


def dedupe_name(*parts: str, length: int = 80) -> str:
    """A stable name for one occurrence (keys + due time), used where a target accepts an idempotency name."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:length]


def occurrence(name: str, due: datetime) -> str:
    """Names one firing of an item's schedule (its schedule name and due time), for targets that dedupe by name."""
    return dedupe_name(name, format_due(due))
