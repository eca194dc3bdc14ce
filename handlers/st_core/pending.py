"""The polling mode's sparse due index: which attributes put an item in it, and which shard it lands on.

Only items waiting to run carry `stShard` (the index's partition key, 0..shards-1) and `stDue` (its sort key, epoch
seconds), so the index holds exactly the work to do and a processor reads `stDue <= now` per shard. `stStatus`
records where the item is (PENDING, RETRY, DONE, FAILED); every write the mode makes sets it, which is how the
stream filter tells the mode's own writes from a user's. A backoff moves `stDue` to the next attempt and keeps the
occurrence's own due time in `stTaskDue`. `stTimed` marks an item indexed from its time attribute.
"""

from __future__ import annotations

import hashlib
import math
from datetime import datetime
from enum import StrEnum
from typing import Any

SHARD = "stShard"
DUE = "stDue"
STATUS = "stStatus"
ATTEMPTS = "stAttempts"
DONE_AT = "stDoneAt"
ERROR = "stError"
TASK_DUE = "stTaskDue"
# Set (true) by the assigner on an item it indexed from its time attribute: if that attribute is then removed, the
# item was cancelled (or is waiting for its delay), never due at the `stDue` it left behind. Absent on an item a
# writer indexed itself (`pending_attributes`) or that the assigner indexed from a delay: `stDue` is its time.
TIMED = "stTimed"
INDEX_NAME = "due"
INDEX_ATTRIBUTES = (SHARD, DUE, STATUS, ATTEMPTS, DONE_AT, ERROR, TASK_DUE, TIMED)


class Status(StrEnum):
    PENDING = "PENDING"
    RETRY = "RETRY"
    DONE = "DONE"
    FAILED = "FAILED"


def shard_of(key_identity: str, shards: int) -> int:
    """A stable shard for an item: the same keys always land on the same shard, and keys spread evenly."""
    return int.from_bytes(hashlib.sha256(key_identity.encode("utf-8")).digest()[:8], "big") % shards


def pending_attributes(key_identity: str, due: datetime, shards: int) -> dict[str, Any]:
    """The attributes that put an item in the due index (plain values; add them to the item you write). `stDue` is
    `due` rounded up to a whole second, never before it (12:00:00.2 is due at 12:00:01), as the processor reads it."""
    return {SHARD: shard_of(key_identity, shards), DUE: math.ceil(due.timestamp()), STATUS: Status.PENDING.value}


def without_index(item: dict[str, Any]) -> dict[str, Any]:
    """The item as its writer knows it: the index's bookkeeping removed."""
    return {k: v for k, v in item.items() if k not in INDEX_ATTRIBUTES}
