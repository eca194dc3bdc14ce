"""Baseline, seed 003: the score aggregator. For each INSERT record, in sequence, one UpdateItem that ADDs the
score to the user's total. No coalescing, no idempotency: a redelivered record is counted again."""

from __future__ import annotations

from typing import Any


def handler(event: dict[str, Any], *, clients: Any, table: str) -> None:
    ddb = clients.get("dynamodb")
    for record in event["Records"]:
        image = record["dynamodb"]["NewImage"]
        ddb.update_item(
            TableName=table,
            Key={"PK": image["SK"], "SK": {"S": "TOTAL"}},
            UpdateExpression="ADD totalScore :score",
            ExpressionAttributeValues={":score": image["Score"]},
            # Not in the seed; free, and how the benchmark reads the write units DynamoDB bills.
            ReturnConsumedCapacity="TOTAL",
        )
