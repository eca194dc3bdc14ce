"""Baselines for the polling tick.

- Seed 002's task processor: query a GSI whose key is the task's date-time for *the exact time bucket of the tick*
  (the minute it runs at), then execute what it finds. A task whose time is not on that minute is never found.
- A cron-style full scan (what seed 001 rejects): scan the whole table for items due by now.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

BUCKET_INDEX = "bucket"


def bucket_of(epoch: float) -> str:
    """The GSI key seed 002 writes: the task's date-time to the minute."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M")


def exact_bucket(clients: Any, table: str, now: float) -> tuple[list[dict[str, Any]], int]:
    """Returns (items found, items read)."""
    ddb = clients.get("dynamodb")
    found: list[dict[str, Any]] = []
    read = 0
    query: dict[str, Any] = {
        "TableName": table,
        "IndexName": BUCKET_INDEX,
        "KeyConditionExpression": "taskDateTime = :bucket",
        "ExpressionAttributeValues": {":bucket": {"S": bucket_of(now)}},
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
