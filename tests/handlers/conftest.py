"""moto-backed fixtures: a real table with a stream, a schedule group and queues; stream records read back from
moto's own stream output and turned into exactly the shape Lambda delivers (see `as_lambda_record`); a Scheduler
that fires schedules the way AWS may, anywhere in their minute (see `SchedulerClock`); and `due_events`, which checks
every due event any handler test makes against the JSON Schema the package ships."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast
from zoneinfo import ZoneInfo

import boto3
import pytest
from moto import mock_aws
from st_core.clients import CLIENTS
from st_core.config import HandlerConfig

from components.runtime_config import Value
from components.targets import QueueTarget
from tests.aws_rules import AwsRules
from tests.conftest import REGION
from tests.iam import enforce
from tests.iam.roles import role_for
from tests.moto_locks import serialize_moto_transactions
from tests.support.handler_config import config_of, switched

ACCOUNT = "123456789012"
SCHEMA = Path(__file__).resolve().parents[2] / "components" / "schemas" / "due_event.schema.json"
# A firing's scheduled time, written where Scheduler would write it, so a recurring template is checked as delivered.
FIRING = "2030-03-30T08:00:00Z"


@pytest.fixture(autouse=True)
def due_events(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Every due event the handlers make in a test (the text `dispatch.target_input` gives each mode, for a direct
        send, a schedule's Input or a release), recurring templates completed as Scheduler completes them. Each is
        checked against the shipped schema; a mismatch fails the test at teardown (raising inside the handler would
        only park the record, which a test may expect). The consumers' pydantic model (components/consumer.py) must
    read each and write it back unchanged."""
    import eventbridge
    import jsonschema
    import ttl
    from polling import sending as polling_sending
    from st_core import dispatch
    from st_core.naming import SCHEDULED_TIME

    from components.consumer import DueEventModel

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    made: list[dict[str, Any]] = []
    wrong: list[str] = []
    original = dispatch.target_input

    def checked(target: Any, event: Any, *, via_scheduler: bool = False) -> str:
        text = original(target, event, via_scheduler=via_scheduler)
        if target.get("kind") != "email":  # an email target receives the email, not the event
            document = json.loads(text.replace(SCHEDULED_TIME, FIRING))
            made.append(document)
            errors = validator.iter_errors(document)
            wrong.extend(f"{e.message} at {list(e.absolute_path)}: {text[:300]}" for e in errors)
            # The consumers' pydantic model reads it too, and writes it back as it came.
            parsed = DueEventModel.model_validate(document).model_dump(mode="json", by_alias=True, exclude_none=True)
            wrong.extend([] if parsed == document else [f"DueEventModel wrote back {parsed} for {document}"])
        return text

    # Where each handler calls it (a package's modules that make due events).
    for module in (eventbridge.context, eventbridge.one_time, eventbridge.recurring, ttl, polling_sending):
        monkeypatch.setattr(module, "target_input", checked)
    yield made
    assert not wrong, wrong


@dataclass
class Stream:
    """Reads the records a table's stream has gained since the last read.

    Each read starts from a new iterator after the last record read: moto rolls a cancelled transaction back by
    putting a copy of the table in its place, stream shard included, so an iterator kept open would go on reading
    the discarded shard (which even holds a record of the cancelled write) and never see a later one. DynamoDB
    writes nothing for a cancelled transaction."""

    arn: str
    client: Any
    _all: list[dict[str, Any]] = field(default_factory=list)

    def read(self, *, at: datetime | None = None) -> list[dict[str, Any]]:
        """New records since the last read; `at` stamps them as changes made at that instant (a test's clock)."""
        records = self._read()
        if at is not None:
            for record in records:
                record["dynamodb"]["ApproximateCreationDateTime"] = int(at.timestamp())
        self._all.extend(records)
        return records

    def since(self, count: int) -> list[dict[str, Any]]:
        """Every record read so far from the `count`-th on: what Lambda re-sends when it retries from there."""
        return [json.loads(json.dumps(r)) for r in self._all[count:]]

    def _read(self) -> list[dict[str, Any]]:
        shard = self.client.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"][0]["ShardId"]
        where: dict[str, Any] = {"ShardIteratorType": "TRIM_HORIZON"}
        if self._all:
            where = {
                "ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
                "SequenceNumber": self._all[-1]["dynamodb"]["SequenceNumber"],
            }
        iterator = self.client.get_shard_iterator(StreamArn=self.arn, ShardId=shard, **where)["ShardIterator"]
        records: list[dict[str, Any]] = []
        while iterator:
            response = self.client.get_records(ShardIterator=iterator)
            if not response["Records"]:
                break
            records += [as_lambda_record(record, self.arn) for record in response["Records"]]
            iterator = response.get("NextShardIterator")
        return records


def as_lambda_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """boto3's record -> the record Lambda delivers: `B`/`BS` as base64 text, `N` as decimal strings (boto3 has them
    so already), `ApproximateCreationDateTime` in whole epoch seconds, `eventSourceARN`, `userIdentity` only where
    DynamoDB put one (TTL deletions), and the keys sort key first."""
    data = dict(record["dynamodb"])
    # moto encodes binary key values in `Keys` twice (its images are right): take the key values from an image.
    # AWS's records may list the sort key first (its own example records do); moto lists the partition key first:
    # every handler test gets AWS's order, so no name depends on it.
    image = data.get("NewImage") or data.get("OldImage") or {}
    data["Keys"] = {name: image.get(name, value) for name, value in reversed(data["Keys"].items())}
    created = data.get("ApproximateCreationDateTime")
    if isinstance(created, datetime):
        data["ApproximateCreationDateTime"] = int(created.timestamp())
    shaped = {**record, "dynamodb": data, "eventSourceARN": stream_arn, "awsRegion": REGION}
    return json.loads(json.dumps(shaped, default=_lambda_json))


def _lambda_json(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return int(value.timestamp())
    raise TypeError(f"{type(value).__name__} is not in a Lambda stream event")


def _from_wire(value: Any) -> Any:
    """A DynamoDB JSON document as an SDK receives it on the wire (binary base64) -> boto3's request form."""
    if isinstance(value, dict):
        if set(value) == {"B"} and isinstance(value["B"], str):
            return {"B": base64.b64decode(value["B"])}
        if set(value) == {"BS"}:
            return {"BS": [base64.b64decode(b) for b in value["BS"]]}
        return {k: _from_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_wire(v) for v in value]
    return value


# Scheduler's universal targets for DynamoDB that schedules use (precise ttl fires items with UpdateItem), as the
# boto3 method each one calls.
UNIVERSAL_DYNAMODB = {
    "arn:aws:scheduler:::aws-sdk:dynamodb:deleteItem": "delete_item",
    "arn:aws:scheduler:::aws-sdk:dynamodb:updateItem": "update_item",
}
SEED = int(os.environ.get("SCHEDULER_SEED", random.SystemRandom().randrange(1_000_000)))


class SchedulerClock:
    """Fires schedules as EventBridge Scheduler does: an `at()` schedule runs at an instant chosen at random within
    its minute (seconds ignored, so `at(12:00:45)` may run at 12:00:03), and is deleted after it runs. Seeded
    (`SCHEDULER_SEED`, printed on failure) so a failing firing order can be replayed."""

    def __init__(self, env: Env, seed: int = SEED) -> None:
        self.env = env
        self.seed = seed
        self.random = random.Random(seed)
        self.fired: list[tuple[datetime, dict[str, Any]]] = []
        self._instants: dict[tuple[str, str], datetime] = {}

    def instant(self, schedule: dict[str, Any]) -> datetime:
        """When this schedule runs: drawn once per schedule and time, anywhere in the minute its `at()` names."""
        key = (schedule["Name"], schedule["ScheduleExpression"])
        if key not in self._instants:
            self._instants[key] = self._draw(schedule)
        return self._instants[key]

    def _draw(self, schedule: dict[str, Any]) -> datetime:
        match = re.fullmatch(r"at\((.+)\)", schedule["ScheduleExpression"])
        assert match, schedule["ScheduleExpression"]
        named = datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC)
        return named.replace(second=0) + timedelta(seconds=self.random.uniform(0, 59.999))

    def fire_due(self, until: datetime) -> list[tuple[datetime, dict[str, Any]]]:
        """Run every schedule whose chosen instant is at or before `until`; returns (instant, schedule) pairs."""
        ran = []
        for schedule in sorted(self.env.schedules(), key=lambda s: s["ScheduleExpression"]):
            moment = self.instant(schedule)
            if moment <= until:
                self.run(schedule)
                ran.append((moment, schedule))
        self.fired += ran
        return ran

    def run(self, schedule: dict[str, Any]) -> None:
        """Fire one schedule as Scheduler does: with the schedule's execution role (the component's
        `{name}-scheduler-exec-policy`), which must allow the target's action and the dead-letter send."""
        target = schedule["Target"]
        arn = target["Arn"]
        try:
            role = role_for(self.env.config, "scheduler-exec", enforce.STATE.told)
            enforce.check_firing(role, schedule, enforce.STATE.encryption(self.env.config))
        except enforce.Denied as denied:
            raise AssertionError(f"Scheduler could not fire {schedule['Name']}: {denied}") from None
        if arn.startswith("arn:aws:sqs:"):
            url = self.env.sqs.get_queue_url(QueueName=arn.split(":")[-1])["QueueUrl"]
            self.env.sqs.send_message(QueueUrl=url, MessageBody=target["Input"])
        elif arn in UNIVERSAL_DYNAMODB:
            request = _from_wire(json.loads(target["Input"]))
            with contextlib.suppress(self.env.ddb.exceptions.ConditionalCheckFailedException):
                getattr(self.env.ddb, UNIVERSAL_DYNAMODB[arn])(**request)
        else:
            raise AssertionError(f"no emulation for target {arn}")
        if schedule.get("ActionAfterCompletion") == "DELETE":
            self.env.scheduler.delete_schedule(Name=schedule["Name"], GroupName=schedule["GroupName"])


def firings(schedule: dict[str, Any], since: datetime, until: datetime, limit: int | None = None) -> list[datetime]:
    """A recurring schedule's firings in (since, until], by the rule it holds, within its start and end (what
    Scheduler runs of it: nothing before its StartDate); only the first `limit` of them, if given."""
    from st_core import recurrence  # imported where used, as the handlers import it

    parsed = recurrence.parse(schedule["ScheduleExpression"])
    start, end = schedule.get("StartDate"), schedule.get("EndDate")
    found: list[datetime] = []
    moment = since if start is None else max(since, start - timedelta(microseconds=1))
    while True:
        if isinstance(parsed, recurrence.Rate):
            assert start is not None  # the handler always gives a rate its grid
            moment = parsed.next_after(moment, start)
        else:
            following = parsed.next_after(moment, ZoneInfo(schedule.get("ScheduleExpressionTimezone") or "UTC"))
            if following is None:
                return found
            moment = following
        if moment > until or (end is not None and moment > end) or len(found) == limit:
            return found
        found.append(moment)


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
    rules: AwsRules = field(repr=False, default_factory=AwsRules)
    # What `config` is made of: the component's options (ScheduledTableArgs keywords) and the physical names of
    # this env's resources by `runtime_config.Value` (see `configure`).
    options: dict[str, Any] = field(default_factory=dict)
    names: dict[Value, str] = field(default_factory=dict)

    def configure(self, **changes: Any) -> Env:
        """`config` as the component writes it for the env's options with `changes` (a change of mode starts the
        new mode from its defaults: tests/support/handler_config.py `switched`), on this env's resources."""
        self.options = switched(self.options, changes)
        self.names[Value.TABLE] = self.table
        self.names.setdefault(Value.LEDGER_TABLE, self.ledger())
        self.config = config_of(self.options, self.names)
        return self

    def second_precision(self, arn: str, url: str) -> Env:
        """`configure(precision="second")` with the release queue at `arn`, `url` (its dead letters go to the
        target DLQ, as the component deploys it)."""
        self.names |= {Value.RELEASE_QUEUE_ARN: arn, Value.RELEASE_QUEUE_URL: url}
        return self.configure(precision="second")

    def put(self, item: dict[str, Any]) -> None:
        self.ddb.put_item(TableName=self.table, Item=_typed(item))

    def delete(self, pk: str, sk: str) -> None:
        self.ddb.delete_item(TableName=self.table, Key={"PK": {"S": pk}, "SK": {"S": sk}})

    def event(self, *, at: datetime | None = None) -> Any:
        return {"Records": self.stream.read(at=at)}

    def ledger(self) -> str:
        """The idempotency ledger table beside this env's table (made on first use); its name."""
        name = f"ledger-{self.table}"
        if name in self.ddb.list_tables()["TableNames"]:
            return name
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


@pytest.fixture(autouse=True)
def _iam() -> Iterator[enforce.Enforcement]:
    """Every handler call in these tests is made as its function's role and refused as AWS refuses it
    (tests/iam/enforce.py)."""
    with enforce.enforced() as state:
        yield state


@pytest.fixture
def env() -> Iterator[Env]:
    with mock_aws():
        yield build_env()
        CLIENTS.reset()


def build_env() -> Env:
    """A table with a stream, a schedule group, queues, a ledger and an eventbridge config, inside a running moto
    (the `env` fixture's body, also used by the model checks, which start moto per example)."""
    serialize_moto_transactions()
    suffix = uuid.uuid4().hex[:8]
    rules = AwsRules()
    rules.install()
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
    # The component's own queues take 1 MiB messages; "due" stands for a user's queue at SQS's default size.
    owned = {"MaximumMessageSize": str(1024 * 1024)}
    urls = {
        role: sqs.create_queue(QueueName=f"{role}-{suffix}", Attributes={} if role == "due" else owned)["QueueUrl"]
        for role in ("due", "poison", "tdlq")
    }
    arns = {role: f"arn:aws:sqs:{REGION}:{ACCOUNT}:{role}-{suffix}" for role in urls}
    # The component's options these tests mean: the user's own queue as target, schedules that retry 5 times within
    # an hour, 8 workers a batch.
    options = {
        "mode": "eventbridge",
        "target": QueueTarget(queue_arn=arns["due"]),
        "max_workers": 8,
        "schedule_max_event_age_seconds": 3600,
        "schedule_retry_attempts": 5,
    }
    names = {
        Value.POISON_QUEUE_URL: urls["poison"],
        Value.SCHEDULE_GROUP: group,
        Value.SCHEDULER_ROLE_ARN: f"arn:aws:iam::{ACCOUNT}:role/scheduler-{suffix}",
        Value.TARGET_DLQ_ARN: arns["tdlq"],
        Value.TARGET_DLQ_URL: urls["tdlq"],
    }
    built = Env(
        table=table,
        stream=Stream(stream_arn, boto3.client("dynamodbstreams", region_name=REGION)),
        group=group,
        due_queue_url=urls["due"],
        due_queue_arn=arns["due"],
        poison_url=urls["poison"],
        target_dlq_arn=arns["tdlq"],
        config=cast(HandlerConfig, {}),  # made by `configure`, below
        ddb=ddb,
        sqs=sqs,
        scheduler=scheduler,
        rules=rules,
        names=names,
    )
    return built.configure(**options)


def with_due_index(env: Env) -> Env:
    """The env moved onto a table of its own that has the polling due index, with a polling config (the
    `polling_env` fixture's body, also used by the polling model check): 8 shards, a target DLQ (its URL in
    `target_dlq_arn`, for the tests) and the assigner's ledger."""
    from st_core.pending import DUE, INDEX_NAME, SHARD

    table = f"polling-{env.table}"
    created = env.ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": n, "AttributeType": t} for n, t in (("PK", "S"), ("SK", "S"), (SHARD, "N"), (DUE, "N"))
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": INDEX_NAME,
                "KeySchema": [{"AttributeName": SHARD, "KeyType": "HASH"}, {"AttributeName": DUE, "KeyType": "RANGE"}],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    owned = {"MaximumMessageSize": str(1024 * 1024)}  # the component's own queues take 1 MiB
    dlq = env.sqs.create_queue(QueueName=f"dlq-{table}", Attributes=owned)["QueueUrl"]
    env.table = table
    env.names[Value.TARGET_DLQ_URL] = dlq
    env.configure(mode="polling", shards=8, max_attempts=3)
    env.stream = Stream(created["TableDescription"]["LatestStreamArn"], boto3.client("dynamodbstreams", REGION))
    env.target_dlq_arn = dlq
    use_shards(env, 8)
    return env


def use_shards(env: Env, shards: int) -> None:
    """A polling stack made with `shards` and past its first tick: its config, and the ledger's record of the shard
    count in use (a stack's first tick probes every shard a configuration may have for entries a higher count left
    behind; tests/handlers/test_polling_shards.py runs that probe and a change of `shards`)."""
    env.configure(shards=shards)
    env.ddb.put_item(
        TableName=env.config["polling"]["ledgerTable"],
        Item={
            "id": {"S": "shards#highest"},
            "shards": {"N": str(shards)},
            "config": {"N": str(shards)},
            "since": {"N": "0"},
        },
    )
