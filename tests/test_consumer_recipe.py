"""The consumer recipe of docs/consumers.md (docs/examples/consumer.py, run as it is written) against moto: an SQS
queue holding a due event delivered twice and a DynamoDB idempotency table. The occurrence is acted on once; a
different occurrence is acted on too; a failed action is reported for that message alone and acted on when the
message comes back."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws
from st_core.dispatch import due_event, target_input
from st_core.naming import item_keys, occurrence_id

from tests.conftest import REGION

RECIPE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "consumer.py"
DUE = datetime(2030, 3, 30, 8, tzinfo=UTC)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str, ModuleType]]:
    """moto with the queue and the idempotency table; the recipe loaded fresh (it reads its table at import)."""
    with mock_aws():
        sqs = boto3.client("sqs", region_name=REGION)
        url = sqs.create_queue(QueueName="reminders")["QueueUrl"]
        boto3.client("dynamodb", region_name=REGION).create_table(
            TableName="idempotency",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        monkeypatch.setenv("IDEMPOTENCY_TABLE", "idempotency")
        spec = importlib.util.spec_from_file_location("consumer_recipe", RECIPE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, "consumer_recipe", module)
        spec.loader.exec_module(module)
        yield sqs, url, module


def send(sqs: Any, url: str, pk: str, table: str = "t") -> None:
    """The due event of item `pk` of `table` as the handlers make it (its text as the target receives it)."""
    named = item_keys({"SK": {"S": "appt"}, "PK": {"S": pk}}, {"partitionKey": "PK", "sortKey": "SK"})
    keys, occurrence = named.plain, occurrence_id(named, DUE)
    event = due_event(
        mode="eventbridge", table=table, keys=keys, due=DUE, item={**keys, "name": "Ada"}, occurrence=occurrence
    )
    sqs.send_message(QueueUrl=url, MessageBody=target_input({"kind": "sqs", "arn": "arn:aws:sqs:::q"}, event))


def batch(sqs: Any, url: str) -> dict[str, Any]:
    """Everything in the queue as one Lambda SQS event (each message received, as the event source mapping does)."""
    records = []
    receive = {"QueueUrl": url, "MaxNumberOfMessages": 10, "MessageSystemAttributeNames": ["All"]}
    while messages := sqs.receive_message(**receive).get("Messages", []):
        for m in messages:
            records.append(
                {
                    "messageId": m["MessageId"],
                    "receiptHandle": m["ReceiptHandle"],
                    "body": m["Body"],
                    "attributes": m["Attributes"],  # SenderId, SentTimestamp, ... as Lambda passes them on
                    "messageAttributes": {},
                    "md5OfBody": m["MD5OfBody"],
                    "eventSource": "aws:sqs",
                    "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:reminders",
                    "awsRegion": REGION,
                }
            )
    return {"Records": records}


def context() -> Any:
    return SimpleNamespace(
        function_name="consumer",
        memory_limit_in_mb=128,
        invoked_function_arn=f"arn:aws:lambda:{REGION}:123456789012:function:consumer",
        aws_request_id="r-1",
        get_remaining_time_in_millis=lambda: 30_000,
    )


def counting(module: ModuleType, monkeypatch: pytest.MonkeyPatch, failing: str = "") -> list[str]:
    """Replace the recipe's action with one that records each occurrence acted on; item `failing` fails once."""
    acted: list[str] = []
    original = module.remind

    def remind(event: Any) -> dict[str, Any]:
        if event.keys["PK"] == failing and "failed" not in acted:
            acted.append("failed")
            raise RuntimeError("the reminder service is down")
        acted.append(event.occurrence_id)
        return dict(original(event))

    monkeypatch.setattr(module, "remind", remind)
    return acted


def test_a_due_event_delivered_twice_is_acted_on_once(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sqs, url, module = aws
    acted = counting(module, monkeypatch)
    send(sqs, url, "user#1")
    send(sqs, url, "user#1")  # the same occurrence again (a redelivery)
    send(sqs, url, "user#2")
    event = batch(sqs, url)
    assert len(event["Records"]) == 3
    assert module.handler(event, context()) == {"batchItemFailures": []}
    assert sorted(acted) == sorted({json.loads(r["body"])["occurrenceId"] for r in event["Records"]})
    # Later, in another invocation: the same occurrence once more.
    send(sqs, url, "user#1")
    assert module.handler(batch(sqs, url), context()) == {"batchItemFailures": []}
    assert len(acted) == 2


def test_two_tables_occurrences_with_the_same_keys_and_due_time_are_each_acted_on(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The id is unique within a table: two tables' items with the same keys and due time share it, and the recipe
    tells them apart by the event's table (its idempotency key is the table and the id)."""
    sqs, url, module = aws
    acted = counting(module, monkeypatch)
    send(sqs, url, "user#1", table="appointments")
    send(sqs, url, "user#1", table="reminders")
    send(sqs, url, "user#1", table="reminders")  # a redelivery
    event = batch(sqs, url)
    assert len({json.loads(r["body"])["occurrenceId"] for r in event["Records"]}) == 1
    assert module.handler(event, context()) == {"batchItemFailures": []}
    assert len(acted) == 2


def test_a_failed_action_is_reported_for_its_message_and_acted_on_when_it_comes_back(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqs, url, module = aws
    acted = counting(module, monkeypatch, failing="user#1")
    send(sqs, url, "user#1")
    send(sqs, url, "user#2")
    event = batch(sqs, url)
    first = next(r for r in event["Records"] if json.loads(r["body"])["keys"]["PK"] == "user#1")
    assert module.handler(event, context()) == {"batchItemFailures": [{"itemIdentifier": first["messageId"]}]}
    # SQS delivers the failed message again (and, say, the other one too): each occurrence acted on once in all.
    assert module.handler(event, context()) == {"batchItemFailures": []}
    ids = [json.loads(r["body"])["occurrenceId"] for r in event["Records"]]
    assert acted.count("failed") == 1 and sorted(a for a in acted if a != "failed") == sorted(ids)


def test_a_message_that_is_no_due_event_fails_alone(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser (scheduled-table's DueEventModel) refuses a body that is not a due event: that message is reported
    for retry (and ends in the queue's DLQ), the others are acted on."""
    sqs, url, module = aws
    acted = counting(module, monkeypatch)
    send(sqs, url, "user#1")
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"source": "scheduled-table", "keys": {}}))
    event = batch(sqs, url)
    bad = next(r for r in event["Records"] if "occurrenceId" not in json.loads(r["body"]))
    assert module.handler(event, context()) == {"batchItemFailures": [{"itemIdentifier": bad["messageId"]}]}
    assert len(acted) == 1
