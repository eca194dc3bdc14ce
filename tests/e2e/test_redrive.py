"""Redrive in the local cloud, end to end: a one-table stack (eventbridge mode, a user's SQS queue as target) is
deployed into ministack with its target broken (the queue does not exist), due work is parked in the poison queue
by the deployed consumer, the target is fixed, and `scheduled-table redrive` gets the work delivered, once.

The stream DLQ path reads ministack's real stream and invokes the deployed consumer; its failure record is written
here, in the shape ministack's event source mapping writes (`DDBStreamBatchInfo`), because ministack sends one only
after `MaximumRecordAgeInSeconds` (60 s at least) and this test stays short. The target DLQ path (Scheduler's
dead-letter events, polling's dead letters) is tested against moto in tests/redrive: ministack's Scheduler
dead-letters only a firing its role may not make (localcloud/iam.py), and an at() schedule takes a minute to fire.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.cli.command import main
from localcloud.deploy import Deployment
from localcloud.provision import clients
from localcloud.server import Ministack
from tests.e2e.conftest import deploy

REGION = "eu-west-1"
TARGET = "redrive-target"
# Generous: the stream, a Lambda worker's cold start and a loaded 2-core machine; a wait ends as soon as it holds.
DEADLINE_SECONDS = 90.0

CONFIG = f"""
config:
  aws:region: {REGION}
  scheduled-table:deletionProtection: "false"
  scheduled-table:logRetentionDays: "1"
  scheduled-table:tables:
    - name: redrive
      mode: eventbridge
      target:
        type: queue
        arn: arn:aws:sqs:{REGION}:ACCOUNT:{TARGET}
"""


def wait_for(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_SECONDS:.0f} s: {what}")
        time.sleep(0.5)


def visible(aws: Callable[[str], Any], url: str) -> int:
    attributes = aws("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def drain(aws: Callable[[str], Any], url: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while batch := aws("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for message in batch:
            found.append(json.loads(message["Body"]))
            aws("sqs").delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return found


def redrive(deployment: Deployment, *args: str) -> tuple[int, list[str]]:
    lines: list[str] = []
    function = deployment.outputs["function_name"]
    argv = ["redrive", *args, "--function", function, "--endpoint-url", deployment.endpoint, "--region", REGION]
    return main(argv, emit=lines.append), lines


pytestmark = pytest.mark.usefixtures("operator_credentials")


@pytest.fixture(scope="module")
def deployment(fresh_cloud: Ministack, tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    return deploy(fresh_cloud, tmp_path_factory.mktemp("redrive"), "redrive", CONFIG)


def test_parked_work_is_delivered_once_after_the_target_is_fixed(deployment: Deployment) -> None:
    aws = clients(deployment.endpoint, REGION)
    outputs = deployment.outputs
    poison = outputs["poison_queue_url"]
    past = "2020-01-01T00:00:00Z"  # already due: the consumer delivers at once, into a queue that does not exist
    for pk in ("a", "b"):
        aws("dynamodb").put_item(
            TableName=outputs["table_name"], Item={"PK": {"S": pk}, "SK": {"S": "1"}, "dueAt": {"S": past}}
        )
    wait_for("both records parked in the poison queue", lambda: visible(aws, poison) >= 2)

    # The operator looks first (the installed module, as a separate process): nothing changes.
    listed = subprocess.run(
        [sys.executable, "-m", "scheduled_table", "redrive", "poison", "--dry-run", "--function",
         outputs["function_name"], "--endpoint-url", deployment.endpoint, "--region", REGION],
        capture_output=True, text=True, check=False, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[:2] for line in listed.stdout.splitlines()[:-1]] == [["would", "replay"]] * 2
    assert listed.stdout.splitlines()[-1] == "dry run, nothing changed. poison queue: 2 would replay"
    assert visible(aws, poison) == 2

    target = aws("sqs").create_queue(QueueName=TARGET)["QueueUrl"]  # the fix
    status, lines = redrive(deployment, "poison", "--reason", "NonExistentQueue")
    assert status == 0, lines
    assert lines[-1] == "poison queue: 2 replayed"
    delivered = drain(aws, target)
    assert sorted(e["keys"]["PK"] for e in delivered) == ["a", "b"]
    assert all(e["dueAt"] == past and e["mode"] == "eventbridge" for e in delivered)
    assert visible(aws, poison) == 0


def test_a_redriven_record_already_delivered_is_not_delivered_again(deployment: Deployment) -> None:
    """The same records once more, from the poison queue and as a failed batch in the stream DLQ: the deployed
    consumer's ledger knows both occurrences were delivered."""
    aws = clients(deployment.endpoint, REGION)
    outputs = deployment.outputs
    table = outputs["table_name"]
    stream_arn = aws("dynamodb").describe_table(TableName=table)["Table"]["LatestStreamArn"]
    streams = aws("dynamodbstreams")
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    records = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    assert [r["dynamodb"]["Keys"]["PK"]["S"] for r in records] == ["a", "b"]
    first, last = records[0]["dynamodb"], records[-1]["dynamodb"]
    failure = {  # as ministack's mapping writes it (services/lambda_svc.py, _send_ddb_stream_failure_record)
        "requestContext": {"requestId": "r-1", "functionArn": "", "condition": "RetryAttemptsExhausted",
                           "approximateInvokeCount": 1},
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "version": "1.0",
        "timestamp": "2026-11-21T10:00:00Z",
        "DDBStreamBatchInfo": {"shardId": shard, "startSequenceNumber": first["SequenceNumber"],
                               "endSequenceNumber": last["SequenceNumber"], "batchSize": 2,
                               "approximateArrivalOfFirstRecord": "2026-11-21T09:59:00Z",
                               "approximateArrivalOfLastRecord": "2026-11-21T09:59:00Z", "streamArn": stream_arn},
    }  # fmt: skip
    aws("sqs").send_message(QueueUrl=outputs["stream_dlq_url"], MessageBody=json.dumps(failure))
    record = {**records[0], "eventSourceARN": stream_arn}
    record["dynamodb"] = {**record["dynamodb"], "ApproximateCreationDateTime": int(time.time())}
    parked = {"reason": "Throttling", "error": "E", "mode": "eventbridge", "table": table, "record": record}
    aws("sqs").send_message(QueueUrl=outputs["poison_queue_url"], MessageBody=json.dumps(parked))

    status, lines = redrive(deployment, "stream")
    assert status == 0, lines
    assert lines[0].startswith("replayed") and "2 of 2 records pass" in lines[0]
    status, lines = redrive(deployment, "poison")
    assert status == 0 and lines[-1] == "poison queue: 1 replayed", lines

    target = aws("sqs").get_queue_url(QueueName=TARGET)["QueueUrl"]
    assert drain(aws, target) == []  # nothing delivered a second time
    assert visible(aws, outputs["stream_dlq_url"]) == 0 and visible(aws, outputs["poison_queue_url"]) == 0


def test_a_parked_delete_cancels_the_schedule_of_the_time_it_left_though_the_item_is_back(
    deployment: Deployment,
) -> None:
    """Ordering under redrive, in the local cloud: the item `c` held T1, its delete was parked (DeleteSchedule kept
    failing, so T1's schedule stayed), and `c` was written again with T2 (applied by the deployed consumer). The
    parked delete is not "superseded": the deployed consumer is handed what it says of T1 (a cancel), so T1's
    schedule goes and T2's stays."""
    from datetime import UTC, datetime, timedelta

    from st_core.naming import item_keys, occurrence_id

    from components.cli.redrive.discovery import discover

    aws = clients(deployment.endpoint, REGION)
    outputs = deployment.outputs
    table, function = outputs["table_name"], outputs["function_name"]
    config = discover(aws, function).config
    group = config["scheduler"]["group"]
    scheduler = aws("scheduler")
    t1, t2 = (datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(days=d) for d in (1, 2))
    due = {t: t.strftime("%Y-%m-%dT%H:%M:%SZ") for t in (t1, t2)}
    keys = {"PK": {"S": "c"}, "SK": {"S": "1"}}

    def names() -> list[str]:
        return sorted(s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"])

    before = set(names())
    aws("dynamodb").put_item(TableName=table, Item={**keys, "dueAt": {"S": due[t2]}})
    wait_for("T2's schedule made by the deployed consumer", lambda: len(set(names()) - before) == 1)
    [t2_name] = set(names()) - before
    removed: Any = {
        "eventID": "c-remove",
        "eventName": "REMOVE",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": {
            "Keys": keys,
            "OldImage": {**keys, "dueAt": {"S": due[t1]}},
            "SequenceNumber": "100",
            "ApproximateCreationDateTime": int(time.time()) - 60,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }
    t1_name = occurrence_id(item_keys(keys, config), t1)  # the handler's name
    leftover = scheduler.get_schedule(Name=t2_name, GroupName=group)
    scheduler.create_schedule(  # what the failed delete left: T1's schedule, as the consumer made it
        Name=t1_name,
        GroupName=group,
        ScheduleExpression=f"at({t1:%Y-%m-%dT%H:%M:%S})",
        ScheduleExpressionTimezone="UTC",
        FlexibleTimeWindow={"Mode": "OFF"},
        ActionAfterCompletion="DELETE",
        Target=leftover["Target"],
    )
    parked = {"reason": "ThrottlingException", "error": "E", "mode": "eventbridge", "table": table, "record": removed}
    aws("sqs").send_message(QueueUrl=outputs["poison_queue_url"], MessageBody=json.dumps(parked))

    status, lines = redrive(deployment, "poison")

    assert status == 0, lines
    assert lines[0].startswith("replayed") and "(its cancel)" in lines[0], lines
    assert t1_name not in names() and t2_name in names()
    assert visible(aws, outputs["poison_queue_url"]) == 0
