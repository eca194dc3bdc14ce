"""The local cloud's own TTL service and universal Scheduler targets, against ministack, through public APIs."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pulumi
import pytest

from localcloud.emulators import Emulators
from localcloud.provision import Provisioner, clients
from localcloud.server import Ministack, ses_outbox

REGION = "eu-west-1"
TTL_ONLY = json.dumps(
    {"eventName": ["REMOVE"], "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}}
)
RECORDER = """
import json, os
import boto3
sqs = boto3.client("sqs")
def handler(event, context):
    for record in event["Records"]:
        sqs.send_message(QueueUrl=os.environ["QUEUE_URL"], MessageBody=json.dumps(record))
    return {"batchItemFailures": []}
"""


def trust_policy(service: str) -> str:
    principal = {"Service": f"{service}.amazonaws.com"}
    statement = {"Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole"}
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def allow(*grants: tuple[str, str]) -> str:
    """A policy allowing each (action, resource)."""
    statements = [{"Effect": "Allow", "Action": action, "Resource": resource} for action, resource in grants]
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


@pytest.fixture(scope="module")
def provisioner(fresh_cloud: Ministack) -> Provisioner:
    return Provisioner(fresh_cloud.endpoint, REGION)


@pytest.fixture(scope="module")
def emulators(fresh_cloud: Ministack) -> Iterator[Emulators]:
    with Emulators(fresh_cloud.endpoint, REGION) as running:
        yield running


def drain(client: Callable[[str], Any], url: str, want: int, timeout: float = 30.0, settle: float = 3.0) -> list[Any]:
    """Receive until `want` messages arrived, then `settle` seconds more to catch extras."""
    found: list[Any] = []
    deadline = time.time() + timeout
    settle_until: float | None = None
    while time.time() < (settle_until or deadline):
        for message in (
            client("sqs")
            .receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
            .get("Messages", [])
        ):
            found.append(message)
            client("sqs").delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if len(found) >= want and settle_until is None:
            settle_until = time.time() + settle
        time.sleep(0.2)
    return found


@pytest.fixture(scope="module")
def ttl_table(provisioner: Provisioner) -> dict[str, str]:
    """A TTL-enabled table whose stream feeds a function that copies each record it receives to a queue."""
    p = provisioner
    _, queue = p.apply("aws:sqs/queue:Queue", "ttl-records", {})
    _, table = p.apply(
        "aws:dynamodb/table:Table",
        "ttl-items",
        {
            "attributes": [{"name": "PK", "type": "S"}],
            "hashKey": "PK",
            "billingMode": "PAY_PER_REQUEST",
            "streamEnabled": True,
            "streamViewType": "NEW_AND_OLD_IMAGES",
            "ttl": {"attributeName": "expiresAt", "enabled": True},
        },
    )
    # IAM is enforced: the recorder runs as its role, which may send to its queue and nothing else; its mapping reads
    # the stream with that role, as on AWS.
    _, role = p.apply("aws:iam/role:Role", "ttl-recorder-role", {"assumeRolePolicy": trust_policy("lambda")})
    reads = ("dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords", "dynamodb:ListStreams")
    p.apply(
        "aws:iam/rolePolicy:RolePolicy",
        "ttl-recorder-send",
        {
            "role": role["name"],
            "policy": allow(("sqs:SendMessage", queue["arn"]), *((action, table["streamArn"]) for action in reads)),
        },
    )
    _, function = p.apply(
        "aws:lambda/function:Function",
        "ttl-recorder",
        {
            "code": pulumi.AssetArchive({"recorder.py": pulumi.StringAsset(RECORDER)}),
            "handler": "recorder.handler",
            "runtime": "python3.12",
            "role": role["arn"],
            "environment": {"variables": {"QUEUE_URL": queue["url"]}},
        },
    )
    p.apply(
        "aws:lambda/eventSourceMapping:EventSourceMapping",
        "ttl-recorder-mapping",
        {
            "eventSourceArn": table["streamArn"],
            "functionName": function["arn"],
            "startingPosition": "LATEST",
            "filterCriteria": {"filters": [{"pattern": TTL_ONLY}]},
        },
    )
    return {"table": table["name"], "queue": queue["url"]}


def test_expired_items_reach_the_filtered_function_once_as_ttl_removes(
    provisioner: Provisioner, ttl_table: dict[str, str], emulators: Emulators
) -> None:
    # GIVEN three items that expire in two seconds, one deleted by a user first, one that expires in an hour
    ddb = provisioner.client("dynamodb")
    soon, later = str(int(time.time()) + 2), str(int(time.time()) + 3600)
    for key, expires in (("a", soon), ("b", soon), ("c", soon), ("user", soon), ("later", later)):
        ddb.put_item(TableName=ttl_table["table"], Item={"PK": {"S": key}, "expiresAt": {"N": expires}})
    ddb.delete_item(TableName=ttl_table["table"], Key={"PK": {"S": "user"}})
    # WHEN the local TTL service runs
    records = [json.loads(m["Body"]) for m in drain(provisioner.client, ttl_table["queue"], want=3)]
    # THEN exactly the three expired items arrive, each once, as service deletions with their old image
    assert sorted(r["dynamodb"]["Keys"]["PK"]["S"] for r in records) == ["a", "b", "c"]
    assert all(r["userIdentity"]["principalId"] == "dynamodb.amazonaws.com" for r in records)
    assert all(r["dynamodb"]["OldImage"]["expiresAt"]["N"] == soon for r in records)
    remaining = ddb.scan(TableName=ttl_table["table"])["Items"]
    assert [i["PK"]["S"] for i in remaining] == ["later"]


def _at(seconds_ahead: float) -> str:
    return "at(" + datetime.fromtimestamp(time.time() + seconds_ahead, UTC).strftime("%Y-%m-%dT%H:%M:%S") + ")"


def _email_schedule(
    client: Callable[[str], Any], name: str, sender: str, dlq_arn: str, ahead: float, role_arn: str
) -> None:
    request = {
        "FromEmailAddress": sender,
        "Destination": {"ToAddresses": [f"{name}@verified.example"]},
        "Content": {"Simple": {"Subject": {"Data": name}, "Body": {"Text": {"Data": "hello"}}}},
    }
    client("scheduler").create_schedule(
        GroupName="universal",
        Name=name,
        ScheduleExpression=_at(ahead),
        FlexibleTimeWindow={"Mode": "OFF"},
        ActionAfterCompletion="DELETE",
        Target={
            "Arn": "arn:aws:scheduler:::aws-sdk:sesv2:sendEmail",
            "RoleArn": role_arn,
            "Input": json.dumps(request),
            "DeadLetterConfig": {"Arn": dlq_arn},
        },
    )


def test_universal_targets_fire_once_dead_letter_failures_and_skip_deleted_schedules(
    provisioner: Provisioner, emulators: Emulators, fresh_cloud: Ministack
) -> None:
    client = clients(fresh_cloud.endpoint, REGION)
    client("sesv2").create_email_identity(EmailIdentity="verified.example")
    _, dlq = provisioner.apply("aws:sqs/queue:Queue", "universal-dlq", {})
    provisioner.apply("aws:scheduler/scheduleGroup:ScheduleGroup", "universal", {})
    # Scheduler calls SES and the DLQ as this role (IAM is enforced): it may send email and dead letters.
    _, role = provisioner.apply(
        "aws:iam/role:Role", "universal-scheduler", {"assumeRolePolicy": trust_policy("scheduler")}
    )
    provisioner.apply(
        "aws:iam/rolePolicy:RolePolicy",
        "universal-scheduler-send",
        {"role": role["name"], "policy": allow(("ses:SendEmail", "*"), ("sqs:SendMessage", dlq["arn"]))},
    )
    # GIVEN one good email schedule, one from an unverified sender, one deleted before it is due
    _email_schedule(client, "good", "sender@verified.example", dlq["arn"], ahead=2, role_arn=role["arn"])
    _email_schedule(client, "rejected", "nobody@unverified.example", dlq["arn"], ahead=2, role_arn=role["arn"])
    # (AWS runs an at() anywhere in its minute, so a cancellation is only safe before that minute: this one is three
    # minutes ahead.)
    _email_schedule(client, "cancelled", "sender@verified.example", dlq["arn"], ahead=180, role_arn=role["arn"])
    time.sleep(1)
    client("scheduler").delete_schedule(GroupName="universal", Name="cancelled")
    # WHEN they come due: anywhere in their minute, so within 60 s plus the 1 s sweep, and an allowance for a loaded
    # machine (a run beside `make bench` once needed more than 15 s; waiting longer costs nothing when all is well)
    failures = drain(client, dlq["url"], want=1, timeout=150, settle=1)
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and "good" not in [m["Subject"] for m in ses_outbox(fresh_cloud.endpoint)]:
        time.sleep(0.5)
    # THEN the good one was sent once, the rejected one is in the DLQ with its reason, the cancelled one never ran
    subjects = [m["Subject"] for m in ses_outbox(fresh_cloud.endpoint)]
    assert subjects.count("good") == 1 and "cancelled" not in subjects and "rejected" not in subjects
    assert len(failures) == 1
    assert json.loads(failures[0]["Body"])["FromEmailAddress"] == "nobody@unverified.example"
    assert failures[0]["MessageAttributes"]["ERROR_CODE"]["StringValue"] == "MessageRejected"
    assert client("scheduler").list_schedules(GroupName="universal")["Schedules"] == []


def test_the_local_cloud_refuses_what_aws_refuses(fresh_cloud: Ministack) -> None:
    """Limits ministack does not check on its own (localcloud/aws_behaviour.py)."""
    import io
    import zipfile

    import pytest
    from botocore.exceptions import ClientError

    client = clients(fresh_cloud.endpoint, REGION)
    scheduler, lam = client("scheduler"), client("lambda")
    scheduler.create_schedule_group(Name="limits")
    # A role that exists: with IAM enforced, CreateFunction refuses one that does not, as AWS does.
    role = client("iam").create_role(RoleName="r", AssumeRolePolicyDocument=trust_policy("lambda"))["Role"]["Arn"]
    target = {"Arn": "arn:aws:sqs:eu-west-1:000000000000:q", "RoleArn": role}
    common = {
        "GroupName": "limits",
        "ScheduleExpression": "at(2030-01-01T00:00:00)",
        "FlexibleTimeWindow": {"Mode": "OFF"},
    }
    with pytest.raises(ClientError) as long_name:
        scheduler.create_schedule(Name="n" * 65, Target=target, **common)
    with pytest.raises(ClientError) as big_input:
        scheduler.create_schedule(Name="big", Target={**target, "Input": "x" * 300_000}, **common)
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("h.py", "def handler(event, context):\n    return event\n")
    function = {"Runtime": "python3.12", "Role": target["RoleArn"], "Handler": "h.handler"}
    with pytest.raises(ClientError) as big_environment:
        lam.create_function(
            FunctionName="env",
            Code={"ZipFile": code.getvalue()},
            Environment={"Variables": {"X": "y" * 5000}},
            **function,
        )
    lam.create_function(FunctionName="ok", Code={"ZipFile": code.getvalue()}, **function)
    with pytest.raises(ClientError) as old_events:
        lam.put_function_event_invoke_config(FunctionName="ok", MaximumEventAgeInSeconds=86400)
    assert long_name.value.response["Error"]["Code"] == "ValidationException"
    assert big_input.value.response["Error"]["Code"] == "ValidationException"
    assert big_environment.value.response["Error"]["Code"] == "InvalidParameterValueException"
    assert old_events.value.response["Error"]["Code"] == "ValidationException"


def test_schedule_lists_come_in_pages_as_on_aws(fresh_cloud: Ministack) -> None:
    """A group of more than 100 schedules lists whole through NextToken (reconcile's sweep reads every page);
    ministack alone answers the first 100 and no token."""
    client = clients(fresh_cloud.endpoint, REGION)
    scheduler = client("scheduler")
    scheduler.create_schedule_group(Name="many")
    role = client("iam").create_role(RoleName="many", AssumeRolePolicyDocument=trust_policy("scheduler"))["Role"]
    target = {"Arn": "arn:aws:sqs:eu-west-1:000000000000:q", "RoleArn": role["Arn"]}
    for n in range(130):
        scheduler.create_schedule(
            Name=f"s{n:03}",
            GroupName="many",
            ScheduleExpression="at(2030-01-01T00:00:00)",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target=target,
        )
    first = scheduler.list_schedules(GroupName="many")
    assert len(first["Schedules"]) == 100 and first.get("NextToken")
    pages = list(
        scheduler.get_paginator("list_schedules").paginate(GroupName="many", PaginationConfig={"PageSize": 50})
    )
    assert [len(p["Schedules"]) for p in pages] == [50, 50, 30]
    assert sorted(s["Name"] for p in pages for s in p["Schedules"]) == [f"s{n:03}" for n in range(130)]
