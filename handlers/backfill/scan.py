"""Scan and pacing: one page of one segment of a parallel scan at a time, resumable from its LastEvaluatedKey,
under ceilings on read capacity and Scheduler calls per second (shared with the live function, so a backfill never
starves it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from st_core.clients import Clients
from st_core.config import HandlerConfig

from backfill.records import Record, wire
from backfill.resources import TABLE, flat

# The AWS actions this module's own calls need, by resource (handlers/backfill/resources.py; checked by tests/iam):
# scan the table.
AWS_ACTIONS_ON = {TABLE: ("dynamodb:Scan",)}
AWS_ACTIONS = flat(AWS_ACTIONS_ON)

Clock = Callable[[], float]
Sleep = Callable[[float], None]

# Items per scan page: a page is fed as one batch (the consumer's batch size is at most 100 in a RequestResponse
# redrive too), then read back with BatchGetItem (100 keys per call).
PAGE_ITEMS = 100
# Default ceilings: well below DynamoDB's on-demand table limits and Scheduler's default 5,000 CreateSchedule/s per
# account and Region, which the live function shares.
READ_UNITS_PER_SECOND = 500.0
SCHEDULER_CALLS_PER_SECOND = 200.0
# The Lambda entry point stops taking pages this long before its deadline.
MARGIN_SECONDS = 30.0


class Throttle:
    """A token bucket: `take(n)` returns once n units fit under `rate` per second (a burst of one second's worth).
    Taking more than is available leaves a debt that the caller sleeps off, so the average never exceeds the rate.
    `rate` None: no ceiling. Clock and sleep are injectable (tests prove the ceiling with a fake clock)."""

    def __init__(self, rate: float | None, clock: Clock = time.monotonic, sleep: Sleep = time.sleep) -> None:
        if rate is not None and rate <= 0:
            raise ValueError(f"a rate ceiling must be positive, got {rate}")
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self.tokens = rate or 0.0
        self.stamp = clock()
        self.taken = 0.0
        self._lock = threading.Lock()

    def take(self, units: float) -> None:
        if self.rate is None or units == 0:
            self.taken += units
            return
        with self._lock:
            now = self.clock()
            self.tokens = min(self.rate, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            self.tokens -= units
            self.taken += units
            wait = -self.tokens / self.rate if self.tokens < 0 else 0.0
        if wait > 0:
            self.sleep(wait)


def rate(value: object) -> float | None:
    """A ceiling as an event carries it: a positive number, else none."""
    return float(value) if isinstance(value, int | float) and value > 0 else None


def scan_page(
    config: HandlerConfig,
    clients: Clients,
    reads: Throttle,
    segment: int,
    segments: int,
    start: Record | None,
    limit: int,
) -> tuple[list[Record], Record | None]:
    """One page of one segment (paced, Lambda-shaped items) and the key to go on from, None when the segment is
    done."""
    from st_core.stream import to_request

    request: dict[str, Any] = {
        "TableName": config["table"],
        "Segment": segment,
        "TotalSegments": segments,
        "Limit": limit,
        "ReturnConsumedCapacity": "TOTAL",
    }
    if start:
        request["ExclusiveStartKey"] = to_request(start)
    estimate = limit * 0.5  # eventually consistent: half a unit per item of up to 4 KB
    reads.take(estimate)
    page = clients.get("dynamodb").scan(**request)
    used = float((page.get("ConsumedCapacity") or {}).get("CapacityUnits") or estimate)
    reads.take(used - estimate)
    following = page.get("LastEvaluatedKey")
    return [wire(item) for item in page.get("Items", [])], (wire(following) if following else None)


class Pages(Protocol):
    """What a slice drives: a page read and acted on, the key to go on from."""

    def scan_page(
        self, segment: int, segments: int, start: Record | None, limit: int = PAGE_ITEMS
    ) -> Record | None: ...


def run_slice(
    engine: Pages,
    segment: int,
    segments: int,
    start: Record | None,
    *,
    keep_going: Callable[[], bool] = lambda: True,
    saved: Callable[[Record | None, bool], None] = lambda key, done: None,
    limit: int = PAGE_ITEMS,
) -> tuple[Record | None, bool]:
    """Pages of one segment from `start` while `keep_going()`: after each page `saved(key, done)` (the checkpoint:
    a page is only passed once every item of it was acted on). Returns where it stopped and whether it is done."""
    key = start
    while True:
        key = engine.scan_page(segment, segments, key, limit)
        saved(key, key is None)
        if key is None:
            return None, True
        if not keep_going():
            return key, False
