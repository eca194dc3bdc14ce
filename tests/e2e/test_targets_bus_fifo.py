"""The event bus and FIFO queue targets in the local cloud: the ttl executor, run here with real clients against
ministack, delivers a TTL deletion's due event onto a bus (read back through a rule into a queue) and into a FIFO
queue (group per item; a redelivered occurrence kept once by SQS's deduplication)."""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from st_core.clients import Clients
from st_core.config import HandlerConfig, TargetConfig
from ttl import handle_batch

from components import ScheduledTableArgs
from components.runtime_config import Value
from localcloud.provision import clients
from localcloud.server import Ministack
from tests.support.handler_config import handler_config

REGION = "eu-west-1"
DEADLINE_SECONDS = 30.0  # a rule's delivery on a loaded machine; the tests poll, they never wait a fixed time
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
# Every deletion is of an item due a second before the module loaded: a record delivered again is the same occurrence.
DUE = int(datetime.now(UTC).timestamp()) - 1


class Local:
    """The local cloud's clients, a ledger and a poison queue for the executor, and the handler's own clients."""

    def __init__(self, endpoint: str) -> None:
        self.client = clients(endpoint, REGION)
        self.suffix = uuid.uuid4().hex[:8]
        self.handler_clients = Clients()
        for service in ("dynamodb", "sqs", "events"):
            self.handler_clients.override(service, self.client(service))
        ddb = self.client("dynamodb")
        self.ledger = f"ledger-{self.suffix}"
        ddb.create_table(
            TableName=self.ledger,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        self.poison = self.queue(f"poison-{self.suffix}")[0]

    def queue(self, name: str, **attributes: str) -> tuple[str, str]:
        sqs = self.client("sqs")
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        return url, sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    def config(self, target: TargetConfig) -> HandlerConfig:
        """Plain ttl's document as the component writes it (a table keyed by PK alone, 4 workers), with `target`
        as its target section."""
        args = ScheduledTableArgs(mode="ttl", sort_key=None, max_workers=4)
        names = {
            Value.TABLE: f"items-{self.suffix}",
            Value.POISON_QUEUE_URL: self.poison,
            Value.LEDGER_TABLE: self.ledger,
        }
        return {**handler_config(args, names, unnamed=""), "target": target}

    def run(self, config: HandlerConfig, *pks: str, **extra: Any) -> dict[str, Any]:
        """The executor on one batch of TTL deletions, as Lambda hands them over."""
        records = [removal(config["table"], pk, DUE, index, **extra) for index, pk in enumerate(pks)]
        return dict(handle_batch({"Records": records}, config, clients=self.handler_clients))

    def receive(self, url: str, want: int) -> list[dict[str, Any]]:
        """Every message the queue gets: polled until `want` arrived (or the deadline), then until it is empty."""
        sqs, found = self.client("sqs"), []
        deadline = time.monotonic() + DEADLINE_SECONDS
        while True:
            batch = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, MessageSystemAttributeNames=["All"]
            ).get("Messages", [])
            for message in batch:
                found.append(message)
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            if not batch and (len(found) >= want or time.monotonic() > deadline):
                return found


def removal(table: str, pk: str, due: int, index: int, **extra: Any) -> dict[str, Any]:
    """A TTL deletion's stream record, in the shape Lambda delivers it."""
    image = {"PK": {"S": pk}, "dueAt": {"N": str(due)}, **{k: {"S": v} for k, v in extra.items()}}
    return {
        "eventID": f"{pk}-{due}",
        "eventName": "REMOVE",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "eventSourceARN": f"arn:aws:dynamodb:{REGION}:000000000000:table/{table}/stream/2026-01-01T00:00:00.000",
        "userIdentity": TTL_IDENTITY,
        "dynamodb": {
            "ApproximateCreationDateTime": due + 1,
            "Keys": {"PK": {"S": pk}},
            "OldImage": image,
            "SequenceNumber": str(1000 + index),
            "SizeBytes": 64,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }


@pytest.fixture(scope="module")
def local(fresh_cloud: Ministack) -> Local:
    return Local(fresh_cloud.endpoint)


def test_the_executor_puts_due_events_on_a_bus_that_routes_them(local: Local) -> None:
    # GIVEN a bus whose rule sends the project's events to a queue
    events = local.client("events")
    bus = events.create_event_bus(Name=f"orders-{local.suffix}")["EventBusArn"]
    seen, seen_arn = local.queue(f"seen-{local.suffix}")
    events.put_rule(
        Name="due", EventBusName=bus.rsplit("/", 1)[1], EventPattern=json.dumps({"source": ["com.example.reminders"]})
    )
    events.put_targets(Rule="due", EventBusName=bus.rsplit("/", 1)[1], Targets=[{"Id": "seen", "Arn": seen_arn}])
    target: TargetConfig = {
        "kind": "events",
        "arn": bus,
        "detailType": "Reminder due",
        "source": "com.example.reminders",
    }
    # WHEN two items expire
    assert local.run(local.config(target), "offer#1", "offer#2") == {"batchItemFailures": []}
    # THEN the bus routed one event each, the due event as the detail
    found = [json.loads(m["Body"]) for m in local.receive(seen, want=2)]
    assert sorted(e["detail"]["keys"]["PK"] for e in found) == ["offer#1", "offer#2"]
    assert {(e["source"], e["detail-type"], e["detail"]["mode"]) for e in found} == {
        ("com.example.reminders", "Reminder due", "ttl")
    }


def test_a_fifo_queue_gets_a_group_per_item_and_a_redelivered_occurrence_once(local: Local) -> None:
    url, arn = local.queue(f"jobs-{local.suffix}.fifo", FifoQueue="true")
    config = local.config({"kind": "sqs", "arn": arn, "messageGroupAttribute": "customer"})
    assert local.run(config, "o#1", "o#2", customer="c-7") == {"batchItemFailures": []}
    assert local.run(config, "o#3") == {"batchItemFailures": []}  # no customer: a group of its own
    # WHEN the ledger loses what it knew (as if the completion never landed and the lease ran out) and Lambda
    # delivers o#1 again: the executor sends the same occurrence a second time
    ddb = local.client("dynamodb")
    for item in ddb.scan(TableName=local.ledger)["Items"]:
        ddb.delete_item(TableName=local.ledger, Key={"id": item["id"]})
    assert local.run(config, "o#1", customer="c-7") == {"batchItemFailures": []}
    # THEN the queue holds each occurrence once, grouped as configured
    found = [
        (json.loads(m["Body"])["keys"]["PK"], m["Attributes"]["MessageGroupId"]) for m in local.receive(url, want=3)
    ]
    assert sorted(found) == [("o#1", "c-7"), ("o#2", "c-7"), ("o#3", '{"PK":"o#3"}')]
