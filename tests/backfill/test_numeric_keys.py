"""Reconcile reads an item's keys back from its schedule's due event: a number key must come back as exactly the
number DynamoDB holds (38 digits), never a float's 15-17, or the item reads as gone and its live schedule is deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import eventbridge
import pytest

from tests.backfill.conftest import command, consumer
from tests.backfill.test_eventbridge import iso
from tests.handlers.conftest import Env

NOW = datetime.now(UTC).replace(microsecond=0)
SK = "1764240000.123456789"  # more significant digits than a float holds


def test_reconcile_keeps_the_schedule_of_an_item_with_a_precise_numeric_sort_key(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIVEN a live schedule of an item whose sort key is a number with 19 significant digits
    WHEN reconcile's sweep checks the schedule against its item itself (as a slice of --in-lambda or reconcile_every
    does when the item pass ran in another invocation)
    THEN it finds the item and keeps the schedule."""
    import backfill.sweep

    original = backfill.sweep.Sweep.all

    def all_unconfirmed(self: backfill.sweep.Sweep) -> None:
        self.run.confirmed.clear()  # the item pass's confirmations are another invocation's
        original(self)

    monkeypatch.setattr(backfill.sweep.Sweep, "all", all_unconfirmed)
    table = env.table + "-n"
    env.ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "S"},
            {"AttributeName": "SK", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    env.config["table"] = table
    image = {"PK": {"S": "p"}, "SK": {"N": SK}, "dueAt": {"S": iso(NOW + timedelta(days=1))}}
    env.ddb.put_item(TableName=table, Item=image)
    record = {
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "Keys": {"SK": {"N": SK}, "PK": {"S": "p"}},
            "NewImage": image,
            "SequenceNumber": "1",
            "StreamViewType": "NEW_AND_OLD_IMAGES",
            "ApproximateCreationDateTime": int(NOW.timestamp()),
        },
    }
    assert eventbridge.handle_batch({"Records": [record]}, env.config, now=lambda: NOW) == {"batchItemFailures": []}
    assert len(env.schedules()) == 1
    status, lines = command(consumer(env), "reconcile")
    assert status == 0, lines
    assert len(env.schedules()) == 1, lines
