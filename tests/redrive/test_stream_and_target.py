"""Redrive from the stream DLQ (a failed batch's range read again from the stream, aggregate's real handler) and
from the target DLQ (Scheduler's dead-letter events, polling's dead letters), against moto."""

from __future__ import annotations

import json
from typing import Any

import aggregate
import boto3
import pytest
from botocore.exceptions import ClientError
from polling import process
from polling_assign import handle_assign_batch
from st_core.dispatch import due_event, target_input
from st_core.timeparse import parse_due

from components.modes.aggregate import aggregate_filters
from components.modes.eventbridge import eventbridge_filters
from components.modes.polling import polling_filters
from components.targets import QueueTarget
from tests.conftest import REGION
from tests.handlers.conftest import Env, with_due_index
from tests.redrive.conftest import Function, aws, bodies, queue, run


def scores(env: Env) -> Function:
    env.configure(mode="aggregate")
    aggregate.RINGS.clear()
    _, dlq_arn = queue(env, f"stream-dlq-{env.table}")
    return Function(env, aggregate.handle_batch, aggregate_filters("PK", "SCORE", "ignore"), dlq_arn)


def total(env: Env, user: str) -> int:
    item = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": user}, "SK": {"S": "TOTAL"}}).get("Item", {})
    return int(item.get("totalScore", {}).get("N", "0"))


def on_failure(env: Env, records: list[dict[str, Any]], condition: str = "RetryAttemptsExhausted") -> str:
    """What Lambda sends the mapping's on-failure destination for a DynamoDB stream batch (the records are not in it):
    https://docs.aws.amazon.com/lambda/latest/dg/services-dynamodb-errors.html"""
    shard = env.stream.client.describe_stream(StreamArn=env.stream.arn)["StreamDescription"]["Shards"][0]["ShardId"]
    first, last = records[0]["dynamodb"], records[-1]["dynamodb"]
    return json.dumps(
        {
            "requestContext": {
                "requestId": "316aa6d0-8154-xmpl-9af7-85d5f4a6bc81",
                "functionArn": "arn:aws:lambda:eu-west-1:123456789012:function:items-consumer",
                "condition": condition,
                "approximateInvokeCount": 11,
            },
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
            "version": "1.0",
            "timestamp": "2026-11-21T10:00:00.000Z",
            "DDBStreamBatchInfo": {
                "shardId": shard,
                "startSequenceNumber": first["SequenceNumber"],
                "endSequenceNumber": last["SequenceNumber"],
                "approximateArrivalOfFirstRecord": "2026-11-21T09:59:00Z",
                "approximateArrivalOfLastRecord": "2026-11-21T09:59:01Z",
                "batchSize": len(records),
                "streamArn": env.stream.arn,
            },
        }
    )


def stream_dlq_url(env: Env) -> str:
    return str(env.sqs.get_queue_url(QueueName=f"stream-dlq-{env.table}")["QueueUrl"])


def test_a_failed_batch_that_had_in_fact_been_applied_is_not_counted_twice(env: Env) -> None:
    """Exactly once under redrive (aggregate): the batch was applied, then its invocation failed (a timeout after
    the write, say) until Lambda gave up and sent the range to the stream DLQ. Its records come back from the
    stream; their ids on the totals say they were applied; the totals stay."""
    function = scores(env)
    for n, (user, score) in enumerate([("USER#1", 5), ("USER#2", 7), ("USER#1", 11)]):
        env.put({"PK": f"SCORE#{n}", "SK": user, "Score": score})
    event = env.event()
    assert aggregate.handle_batch(event, env.config) == {"batchItemFailures": []}
    assert (total(env, "USER#1"), total(env, "USER#2")) == (16, 7)
    env.put({"PK": "SCORE#9", "SK": "USER#2", "Score": 100})  # after the range: not part of the failed batch
    env.sqs.send_message(QueueUrl=stream_dlq_url(env), MessageBody=on_failure(env, event["Records"]))

    status, lines = run("stream", function)

    assert status == 0, lines
    assert (total(env, "USER#1"), total(env, "USER#2")) == (16, 7)
    assert [len(records) for records in function.invoked] == [3]
    assert lines[0].startswith("replayed") and "3 of 3 records pass" in lines[0]
    assert bodies(env, stream_dlq_url(env)) == []


def test_a_failed_batch_never_applied_is_applied_once_and_records_the_filter_drops_stay_out(env: Env) -> None:
    function = scores(env)
    env.put({"PK": "SCORE#1", "SK": "USER#1", "Score": 5})
    env.put({"PK": "USER#1", "SK": "PROFILE", "name": "Ada"})  # not a score: the mapping's filter drops it
    env.put({"PK": "SCORE#2", "SK": "USER#1", "Score": 6})
    records = env.event()["Records"]
    env.sqs.send_message(QueueUrl=stream_dlq_url(env), MessageBody=on_failure(env, records))

    status, lines = run("stream", function)
    again, _ = run("stream", function)  # nothing left: the message went

    assert (status, again) == (0, 0), lines
    assert total(env, "USER#1") == 11
    assert [[r["dynamodb"]["Keys"]["PK"]["S"] for r in batch] for batch in function.invoked] == [["SCORE#1", "SCORE#2"]]
    assert "2 of 3 records pass" in lines[0]
    assert bodies(env, env.poison_url) == []
    # As Lambda delivers them: creation time in epoch seconds, the stream's ARN.
    record = function.invoked[0][0]
    assert isinstance(record["dynamodb"]["ApproximateCreationDateTime"], int)
    assert record["eventSourceARN"] == env.stream.arn


class Gone:
    """DynamoDB Streams' answer for a range it no longer holds: after 24 h the sequence numbers are behind the trim
    horizon (TrimmedDataAccessException); a shard or stream that is gone (the stream disabled, the table replaced)
    is not found (ResourceNotFoundException). moto holds records forever and asserts on an unknown shard."""

    def __init__(self, real: Any, code: str) -> None:
        self.real = real
        self.code = code

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def get_shard_iterator(self, **kwargs: Any) -> Any:
        error = {"Error": {"Code": self.code, "Message": "The data you are trying to access has been trimmed."}}
        raise ClientError(error, "GetShardIterator")


@pytest.mark.parametrize("code", ["TrimmedDataAccessException", "ResourceNotFoundException"])
def test_an_expired_range_is_said_so_and_its_message_kept(env: Env, code: str) -> None:
    function = scores(env)
    env.put({"PK": "SCORE#1", "SK": "USER#1", "Score": 5})
    env.sqs.send_message(QueueUrl=stream_dlq_url(env), MessageBody=on_failure(env, env.event()["Records"]))
    streams = Gone(boto3.client("dynamodbstreams", region_name=REGION), code)

    status, lines = run("stream", function, client=aws(function, dynamodbstreams=streams))

    assert status == 1 and function.invoked == []
    assert lines[0].startswith("expired") and "24 h" in lines[0] and code in lines[0]
    assert lines[-1] == "stream DLQ: 1 expired"
    assert len(bodies(env, stream_dlq_url(env))) == 1


def test_a_batch_still_failing_keeps_its_message_and_a_dry_run_changes_nothing(env: Env) -> None:
    function = scores(env)
    env.put({"PK": "SCORE#1", "SK": "USER#1", "Score": 5})
    records = env.event()["Records"]
    env.sqs.send_message(QueueUrl=stream_dlq_url(env), MessageBody=on_failure(env, records))

    status, lines = run("stream", function, "--dry-run")
    assert (status, function.invoked, total(env, "USER#1")) == (0, [], 0)
    assert lines[0].startswith("would replay") and "RetryAttemptsExhausted" in lines[0]

    function.answer = lambda batch: {"batchItemFailures": [{"itemIdentifier": batch[0]["dynamodb"]["SequenceNumber"]}]}
    status, lines = run("stream", function)
    assert status == 1 and lines[0].startswith("failed")
    assert len(bodies(env, stream_dlq_url(env))) == 1

    status, lines = run("stream", function, "--reason", "MaxRecordAgeExceeded")  # not this one's condition
    assert status == 0 and lines == ["stream DLQ: nothing to do"]


# -- target DLQ ---------------------------------------------------------------------------------------------------


# Scheduler's dead letter when KMS refused its role the target queue's key (the role not granted it).
KEY = "arn:aws:kms:eu-west-1:123456789012:key/2222bbbb-22bb-22bb-22bb-222222bbbbbb"
KMS_REFUSED = (
    "KMS.AccessDeniedException",
    "User: arn:aws:sts::123456789012:assumed-role/st-scheduler-exec-role/Scheduler is not authorized to perform: "
    f"kms:GenerateDataKey on resource: {KEY} because no identity-based policy allows the kms:GenerateDataKey action",
)


def scheduler_dead_letter(
    env: Env,
    body: str,
    schedule: str = "a-A-0123abcd",
    error: tuple[str, str] = ("AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist."),
) -> None:
    """A Scheduler dead-letter event: the target's Input as the body, the failure (`error`: code, message) as
    message attributes (https://docs.aws.amazon.com/scheduler/latest/UserGuide/configuring-schedule-dlq.html)."""
    attributes = {
        "ERROR_CODE": error[0],
        "ERROR_MESSAGE": error[1],
        "EXHAUSTED_RETRY_CONDITION": "MaximumRetryAttempts",
        "RETRY_ATTEMPTS": "185",
        "SCHEDULE_ARN": f"arn:aws:scheduler:{REGION}:123456789012:schedule/{env.group}/{schedule}",
        "TARGET_ARN": env.config["target"]["arn"],
    }
    url = env.sqs.get_queue_url(QueueName=env.target_dlq_arn.rsplit(":", 1)[1])["QueueUrl"]
    env.sqs.send_message(
        QueueUrl=url,
        MessageBody=body,
        MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
    )


def a_due_event(env: Env, due: str) -> Any:
    """The due event of item a/A due at `due`, as the handlers build it."""
    return due_event(
        mode="eventbridge",
        table=env.table,
        keys={"PK": "a", "SK": "A"},
        due=parse_due(due),
        item={"PK": "a", "SK": "A", "dueAt": due},
        occurrence="a-A-occ",
    )


def test_a_scheduler_dead_letter_is_sent_to_the_target_again_as_it_was(env: Env) -> None:
    function = Function(env, lambda event, config: None, eventbridge_filters("dueAt"))
    event = a_due_event(env, "2026-12-01T09:00:00Z")
    payload = target_input(env.config["target"], event, via_scheduler=True)
    scheduler_dead_letter(env, payload)
    dlq = env.sqs.get_queue_url(QueueName=env.target_dlq_arn.rsplit(":", 1)[1])["QueueUrl"]

    status, lines = run("target", function, "--dry-run")
    assert status == 0 and lines[0].startswith("would resend") and "NonExistentQueue" in lines[0]
    assert bodies(env, env.due_queue_url) == []

    status, lines = run("target", function)
    assert status == 0, lines
    assert bodies(env, env.due_queue_url) == [event]
    assert bodies(env, dlq) == []
    assert lines[0].startswith("resent") and "dueAt=2026-12-01T09:00:00Z" in lines[0]


def test_a_universal_target_dead_letter_calls_its_api_again(env: Env) -> None:
    """Precise ttl's delete schedules call DynamoDB DeleteItem (Scheduler's universal target) with the item's TTL
    value as the condition: the redrive makes the same call."""
    function = Function(env, lambda event, config: None, eventbridge_filters("expiresAt"))
    env.put({"PK": "a", "SK": "A", "expiresAt": 100})
    env.put({"PK": "b", "SK": "A", "expiresAt": 200})  # moved since: the condition fails, nothing to do
    for pk in ("a", "b"):
        request = {
            "TableName": env.table,
            "Key": {"PK": {"S": pk}, "SK": {"S": "A"}},
            "ConditionExpression": "#due = :due",
            "ExpressionAttributeNames": {"#due": "expiresAt"},
            "ExpressionAttributeValues": {":due": {"N": "100"}},
        }
        env.config["target"]["arn"] = "arn:aws:scheduler:::aws-sdk:dynamodb:deleteItem"
        scheduler_dead_letter(env, json.dumps(request), schedule=f"{pk}-delete")

    status, lines = run("target", function)

    assert status == 0, lines
    assert [i["PK"]["S"] for i in env.ddb.scan(TableName=env.table)["Items"]] == ["b"]
    assert sorted(line.split()[0] for line in lines[:-1]) == ["resent", "resent"]
    assert any("condition failed" in line for line in lines)


def test_a_polling_dead_letter_is_sent_again_as_the_due_event_the_processor_would_have_sent(env: Env) -> None:
    env = with_due_index(env)
    name = f"late-{env.table}"
    env.configure(target=QueueTarget(queue_arn=f"arn:aws:sqs:{REGION}:123456789012:{name}"))
    env.configure(max_attempts=1)
    function = Function(env, lambda event, config: None, polling_filters())
    env.put({"PK": "job", "SK": "T", "dueAt": "2020-01-01T00:00:00Z", "what": "x"})
    handle_assign_batch(env.event(), env.config)
    process(env.config)  # the target queue is missing: dead-lettered at once (it cannot succeed)
    dlq = env.config["polling"]["deadLetterUrl"]
    [dead] = bodies(env, dlq)
    assert dead["dueAt"] == "2020-01-01T00:00:00Z"
    target, _ = queue(env, name)  # the fix

    status, lines = run("target", function, "--reason", "NonExistent")

    assert status == 0, lines
    [event] = bodies(env, target)
    assert event == {
        "source": "scheduled-table",
        "occurrenceId": dead["occurrence"],  # the processor's id for it, so a consumer dedupes the redrive
        "mode": "polling",
        "table": env.table,
        "keys": {"PK": "job", "SK": "T"},
        "dueAt": "2020-01-01T00:00:00Z",
        "item": {"PK": "job", "SK": "T", "dueAt": "2020-01-01T00:00:00Z", "what": "x"},
    }
    assert bodies(env, dlq) == []


def test_a_polling_dead_letter_keeps_its_numbers_exact_when_sent_again(env: Env) -> None:
    """GIVEN a polling dead letter whose keys and item hold numbers of 38 and 19 significant digits
    WHEN redrive sends it again
    THEN the due event carries them exactly (a float would keep 15-17 digits: another key, another amount)."""
    from decimal import Decimal

    env = with_due_index(env)
    name = f"late-{env.table}"
    env.configure(target=QueueTarget(queue_arn=f"arn:aws:sqs:{REGION}:123456789012:{name}"))
    env.configure(max_attempts=1)
    function = Function(env, lambda event, config: None, polling_filters())
    amount = "1234567890123456789.0123456789012345678"
    env.put({"PK": "job", "SK": "T", "dueAt": "2020-01-01T00:00:00Z", "amount": Decimal(amount)})
    handle_assign_batch(env.event(), env.config)
    process(env.config)
    target, _ = queue(env, name)

    status, lines = run("target", function, "--reason", "NonExistent")

    assert status == 0, lines
    [message] = env.sqs.receive_message(QueueUrl=target)["Messages"]
    assert json.loads(message["Body"], parse_float=Decimal)["item"]["amount"] == Decimal(amount)


def test_a_target_still_refusing_keeps_the_dead_letter(env: Env) -> None:
    env.configure(target=QueueTarget(queue_arn=f"arn:aws:sqs:{REGION}:123456789012:missing"))
    function = Function(env, lambda event, config: None, eventbridge_filters("dueAt"))
    scheduler_dead_letter(env, json.dumps({"keys": {"PK": "a"}, "dueAt": "2026-12-01T09:00:00Z", "item": {}}))

    status, lines = run("target", function)

    assert status == 1 and lines[0].startswith("failed") and "NonExistentQueue" in lines[0]
    assert lines[-1] == "target DLQ: 1 failed"
    dlq = env.sqs.get_queue_url(QueueName=env.target_dlq_arn.rsplit(":", 1)[1])["QueueUrl"]
    assert len(bodies(env, dlq)) == 1


def test_a_dead_letter_kms_refused_names_kms_key_arn_and_the_key(env: Env) -> None:
    # GIVEN a Scheduler dead letter: KMS refused Scheduler's role the target queue's key
    function = Function(env, lambda event, config: None, eventbridge_filters("dueAt"))
    scheduler_dead_letter(env, json.dumps(a_due_event(env, "2026-12-01T09:00:00Z")), error=KMS_REFUSED)
    # WHEN the operator looks at what a redrive would do
    status, lines = run("target", function, "--dry-run")
    # THEN the reason names the option that grants the key, and the key from AWS's message
    assert status == 0 and lines[0].startswith("would resend"), lines
    assert f"set the target's kms_key_arn to '{KEY}': KMS refused this role that key" in lines[0], lines


@pytest.mark.slow  # starts interpreters of its own: `make test` runs it, `make unit` does not
@pytest.mark.parametrize("source", ["poison", "stream", "target"])
def test_without_boto3_the_command_says_what_to_install(source: str) -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['boto3'] = None\n"
        "from components.cli.command import main\n"
        f"main(['redrive', '{source}', '--function', 'f'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 1 and "needs boto3" in result.stderr and "pip install boto3" in result.stderr
