"""Baselines for the polling tick.

- Seed 002, ported as its article requires: a task's `taskDateTime` is set ON the rule's grid (the writer, or the
  "task scheduler" Lambda, rounds the task's time up to the rule's next tick: never before the task's time), and
  the "task processor" Lambda queries the GSI keyed on `taskDateTime` for the exact grid time of the tick it runs
  in, then executes what it finds. A task is found by the one tick whose time it carries: if that tick does not
  run (a failed or throttled invocation, a deployment), nothing ever looks at that time again.
- A cron-style full scan (what seed 001 rejects): scan the whole table for items due by now.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

BUCKET_INDEX = "bucket"
BUCKET_ATTRIBUTE = "taskDateTime"


def grid_time(epoch: float, interval_seconds: int = 60) -> int:
    """The rule's first tick at or after `epoch` (the grid starts at the epoch, as `rate(n minutes)` rules tick on
    whole minutes here): the time seed 002's writer gives a task due at `epoch`."""
    return math.ceil(epoch / interval_seconds) * interval_seconds


def bucket_of(epoch: float, interval_seconds: int = 60) -> str:
    """The GSI key seed 002 writes for a task due at `epoch`: its grid time, to the minute."""
    return datetime.fromtimestamp(grid_time(epoch, interval_seconds), UTC).strftime("%Y-%m-%dT%H:%M")


def tick_bucket(tick: float) -> str:
    """What the processor asks for at a tick: the tick's own time, to the minute (a tick on the grid)."""
    return datetime.fromtimestamp(tick, UTC).strftime("%Y-%m-%dT%H:%M")


def exact_bucket(clients: Any, table: str, tick: float) -> tuple[list[dict[str, Any]], int]:
    """Seed 002's task processor at `tick`: the tasks whose `taskDateTime` is this tick's. Returns (items found,
    items read)."""
    ddb = clients.get("dynamodb")
    found: list[dict[str, Any]] = []
    read = 0
    query: dict[str, Any] = {
        "TableName": table,
        "IndexName": BUCKET_INDEX,
        "KeyConditionExpression": "#bucket = :bucket",
        "ExpressionAttributeNames": {"#bucket": BUCKET_ATTRIBUTE},
        "ExpressionAttributeValues": {":bucket": {"S": tick_bucket(tick)}},
    }
    while True:
        page = ddb.query(**query)
        found += page["Items"]
        read += page["ScannedCount"]
        if "LastEvaluatedKey" not in page:
            return found, read
        query["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def full_scan(clients: Any, table: str, now: float, attribute: str = "dueEpoch") -> tuple[list[dict[str, Any]], int]:
    """Returns (items found, items read): every item of the table is read to find the due ones."""
    ddb = clients.get("dynamodb")
    found: list[dict[str, Any]] = []
    read = 0
    scan: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "#due <= :now",
        "ExpressionAttributeNames": {"#due": attribute},
        "ExpressionAttributeValues": {":now": {"N": str(int(now))}},
    }
    while True:
        page = ddb.scan(**scan)
        found += page["Items"]
        read += page["ScannedCount"]
        if "LastEvaluatedKey" not in page:
            return found, read
        scan["ExclusiveStartKey"] = page["LastEvaluatedKey"]
