"""Reading ministack's in-memory stores from threads of the local cloud's own (the TTL sweep, the recurring
schedules' tick) while ministack's request threads write them.

ministack keeps tables and schedules in plain dicts that its handlers change without a lock the readers could take.
`list(d.items())` walks the dict, and a key added or removed by another thread during that walk raises
`RuntimeError: dictionary changed size during iteration`: the sweep or tick then skipped its round (seen in a herd
soak: TTL deletions and recurring firings a round late). A walk takes microseconds and a collision is rare, so
trying it again is enough; a dict changed on every try for that long is left to the next round, as before."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")
ATTEMPTS = 50


def snapshot(mapping: Mapping[K, V]) -> list[tuple[K, V]]:
    """The mapping's items as a list, taken again when another thread changed its size during the walk."""
    for _ in range(ATTEMPTS - 1):
        try:
            return list(mapping.items())
        except RuntimeError:
            continue
    return list(mapping.items())
