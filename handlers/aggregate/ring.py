"""aggregate's ids on a total: the recent records' ids a total keeps (`Ring`), and what this container last saw of
each total (`RINGS`): a hint that saves writes, never needed for correctness."""

from __future__ import annotations

import re
from collections import OrderedDict
from decimal import Decimal
from threading import Lock
from typing import Any

from st_core.idempotency import DIGEST_BYTES

from aggregate.records import Contribution

# No AWS calls here.
AWS_ACTIONS: tuple[str, ...] = ()

RING_PREFIX = "stIds"
LEDGER_UNTIL = "stLedgerUntil"
# Totals whose ids this container remembers (about 1 KB each when full): a hint, never needed for correctness.
CACHED_TOTALS = 10_000
BUCKET_NAME = rf"^{RING_PREFIX}(\d+)$"  # compiled on first use (re caches it), not on every cold start


def bucket_name(bucket: int) -> str:
    return f"{RING_PREFIX}{bucket}"


class Ring:
    """What this container last saw of a total: its ids by bucket (each bucket's digests joined in one bytes value,
    to keep a cached total near 1 KB), and the ledger guard. An id seen on the total is a record applied: ids are
    only written by a write that applies their record, and only removed once their record cannot come back."""

    def __init__(self, ids: dict[int, bytes] | None = None, ledger_until: int = 0) -> None:
        self.ids: dict[int, bytes] = {} if ids is None else ids
        self.ledger_until = ledger_until

    @classmethod
    def of(cls, item: dict[str, Any]) -> Ring:
        """From a total item as DynamoDB returns it (ReturnValues)."""
        ids = {}
        for name, value in item.items():
            found = re.match(BUCKET_NAME, name)
            if found and isinstance(value, dict) and "BS" in value:
                ids[int(found.group(1))] = b"".join(sorted(bytes(b) for b in value["BS"]))
        until = item.get(LEDGER_UNTIL, {}).get("N")
        return cls(ids, int(Decimal(until)) if until else 0)

    @property
    def buckets(self) -> dict[int, int]:
        """Bucket -> how many ids it holds."""
        return {b: len(joined) // DIGEST_BYTES for b, joined in self.ids.items()}

    def holds(self, c: Contribution) -> bool:
        joined = self.ids.get(c.bucket) if c.bucket is not None else None
        if not joined:
            return False
        return any(joined[i : i + DIGEST_BYTES] == c.digest for i in range(0, len(joined), DIGEST_BYTES))

    @staticmethod
    def size(buckets: dict[int, int]) -> int:
        """Bytes of these buckets (name and ids) on the item."""
        return sum(len(bucket_name(b)) + DIGEST_BYTES * n for b, n in buckets.items())


class RingCache:
    """Per container: the last known ring of each total (LRU). Only a hint: it saves a failed write in ledger mode
    and tells which expired buckets to remove; the write's conditions are what make each record count once."""

    def __init__(self, capacity: int = CACHED_TOTALS) -> None:
        self.capacity = capacity
        self._rings: OrderedDict[tuple[str, str], Ring] = OrderedDict()
        self._lock = Lock()

    def get(self, key: tuple[str, str]) -> Ring | None:
        with self._lock:
            ring = self._rings.get(key)
            if ring is not None:
                self._rings.move_to_end(key)
            return ring

    def put(self, key: tuple[str, str], ring: Ring) -> None:
        with self._lock:
            self._rings[key] = ring
            self._rings.move_to_end(key)
            while len(self._rings) > self.capacity:
                self._rings.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._rings.clear()


RINGS = RingCache()


def present(chunk: list[Contribution], item: dict[str, Any]) -> set[int]:
    """Indexes of the chunk's records whose ids the total holds: applied before."""
    ring = Ring.of(item)
    return {index for index, c in enumerate(chunk) if ring.holds(c)}
