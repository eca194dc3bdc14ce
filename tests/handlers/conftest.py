"""moto-backed fixtures: a real table with a stream, a schedule group and queues; stream records read back from
moto's own stream output, in the shape Lambda delivers them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws
from st_core.clients import CLIENTS
from st_core.config import HandlerConfig

from tests.conftest import REGION
from tests.moto_locks import serialize_moto_transactions

ACCOUNT = "123456789012"


@dataclass
class Stream:
    """Reads the records a table's stream has gained since the last read."""

    arn: str
    client: Any
    _iterator: str | None = None

    def read(self) -> list[dict[str, Any]]:
        if self._iterator is None:
            shard = self.client.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"][0]["ShardId"]
            self._iterator = self.client.get_shard_iterator(
                StreamArn=self.arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
        response = self.client.get_records(ShardIterator=self._iterator)
        self._iterator = response["NextShardIterator"]
        return [as_lambda_record(record, self.arn) for record in response["Records"]]


def as_lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """boto3's record (datetimes) -> Lambda's record (epoch numbers, eventSourceARN)."""
    data = dict(record["dynamodb"])
    created = data.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        data["ApproximateCreationDateTime"] = created.timestamp()
    return {**json.loads(json.dumps({**record, "dynamodb": data})), "eventSourceARN": stream_arn, "awsRegion": REGION}


@dataclass
class Env:
    table: str
    stream: Stream
    group: str
    due_queue_url: str
    due_queue_arn: str
    poison_url: str
    target_dlq_arn: str
    config: HandlerConfig
    ddb: Any = field(repr=False)
    sqs: Any = field(repr=False)
    scheduler: Any = field(repr=False)

    def put(self, item: dict[str, Any]) -> None:
        self.ddb.put_item(TableName=self.table, Item=_typed(item))

    def delete(self, pk: str, sk: str) -> None:
        self.ddb.delete_item(TableName=self.table, Key={"PK": {"S": pk}, "SK": {"S": sk}})

    def event(self) -> Any:
        return {"Records": self.stream.read()}

    def ledger(self) -> str:
        """An idempotency ledger table beside this env's table (ttl and aggregate modes); its name."""
        name = f"ledger-{self.table}"
        self.ddb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        return name

    def schedules(self) -> list[dict[str, Any]]:
        names = [
            s["Name"]
            for page in self.scheduler.get_paginator("list_schedules").paginate(GroupName=self.group)
            for s in page["Schedules"]
        ]
        return [self.scheduler.get_schedule(Name=name, GroupName=self.group) for name in names]

    def messages(self, url: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        while True:
            batch = self.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                return found
            found.extend(json.loads(m["Body"]) for m in batch)
            for m in batch:
                self.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def _typed(item: dict[str, Any]) -> dict[str, Any]:
    from boto3.dynamodb.types import TypeSerializer

    serializer = TypeSerializer()
    return {k: serializer.serialize(v) for k, v in item.items()}


@pytest.fixture
def env() -> Iterator[Env]:
    serialize_moto_transactions()
    suffix = uuid.uuid4().hex[:8]
    with mock_aws():
        CLIENTS.reset()
        ddb = boto3.client("dynamodb", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        scheduler = boto3.client("scheduler", region_name=REGION)
        table = f"items-{suffix}"
        created = ddb.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "PK", "AttributeType": "S"},
                {"AttributeName": "SK", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        stream_arn = created["TableDescription"]["LatestStreamArn"]
        group = f"group-{suffix}"
        scheduler.create_schedule_group(Name=group)
        urls = {role: sqs.create_queue(QueueName=f"{role}-{suffix}")["QueueUrl"] for role in ("due", "poison", "tdlq")}
        arns = {role: f"arn:aws:sqs:{REGION}:{ACCOUNT}:{role}-{suffix}" for role in urls}
        config: HandlerConfig = {
            "mode": "eventbridge",
            "table": table,
            "partitionKey": "PK",
            "sortKey": "SK",
            "timeAttribute": "dueAt",
            "target": {"kind": "sqs", "arn": arns["due"]},
            "poisonQueueUrl": urls["poison"],
            "maxWorkers": 8,
            "scheduler": {
                "group": group,
                "roleArn": f"arn:aws:iam::{ACCOUNT}:role/scheduler-{suffix}",
                "deadLetterArn": arns["tdlq"],
                "maxEventAgeSeconds": 3600,
                "maxRetryAttempts": 5,
                "dispatchNowWithinSeconds": 60,
            },
        }
        yield Env(
            table=table,
            stream=Stream(stream_arn, boto3.client("dynamodbstreams", region_name=REGION)),
            group=group,
            due_queue_url=urls["due"],
            due_queue_arn=arns["due"],
            poison_url=urls["poison"],
            target_dlq_arn=arns["tdlq"],
            config=config,
            ddb=ddb,
            sqs=sqs,
            scheduler=scheduler,
        )
        CLIENTS.reset()
