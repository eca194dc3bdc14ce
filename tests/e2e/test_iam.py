"""IAM is enforced in the local cloud as on AWS, and can fail: a function runs as its role, Scheduler fires each
schedule as the schedule's role (the templated targets in ministack, the universal ones in the emulators), and a
schedule is created in its own group only by a caller allowed to manage that group and to pass the role. Each test
shows the allowed call's effect and the denied call's `AccessDeniedException`, with no effect."""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError

from localcloud.emulators import Emulators, RoleSessions
from localcloud.iam import LAMBDA_PRINCIPAL, SCHEDULER_PRINCIPAL
from localcloud.provision import clients
from localcloud.server import Ministack

REGION = "eu-west-1"
WAIT_SECONDS = 60.0

Client = Callable[[str], Any]


def document(*grants: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", **g} for g in grants]})


def trust(service: str) -> str:
    statement = {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def role(admin: Client, name: str, service: str, *grants: dict[str, Any]) -> str:
    """A role `service` may assume, allowed exactly `grants`."""
    arn: str = admin("iam").create_role(RoleName=name, AssumeRolePolicyDocument=trust(service))["Role"]["Arn"]
    if grants:
        admin("iam").put_role_policy(RoleName=name, PolicyName="grants", PolicyDocument=document(*grants))
    return arn


def queue(admin: Client, name: str) -> tuple[str, str]:
    url: str = admin("sqs").create_queue(QueueName=name)["QueueUrl"]
    arn: str = admin("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def received(admin: Client, url: str, want: int, timeout: float = WAIT_SECONDS, settle: float = 2.0) -> list[Any]:
    """Messages in the queue once `want` have arrived (and `settle` s more for extras), or at the timeout."""
    found: list[Any] = []
    deadline, settled = time.monotonic() + timeout, None
    while time.monotonic() < (settled or deadline):
        batch = admin("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
        for message in batch.get("Messages", []):
            found.append(message)
            admin("sqs").delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
        if len(found) >= want and settled is None:
            settled = time.monotonic() + settle
        time.sleep(0.2)
    return found


def a_minute_ago() -> str:
    """An at() whose minute has passed: Scheduler (and the local cloud) runs it at once."""
    return "at(" + datetime.fromtimestamp(time.time() - 60, UTC).strftime("%Y-%m-%dT%H:%M:%S") + ")"


@pytest.fixture(scope="module")
def admin(fresh_cloud: Ministack) -> Client:
    return clients(fresh_cloud.endpoint, REGION)


@pytest.fixture(scope="module")
def roles(fresh_cloud: Ministack) -> RoleSessions:
    return RoleSessions(fresh_cloud.endpoint, REGION)


@pytest.fixture(scope="module")
def account(admin: Client) -> str:
    return str(admin("sts").get_caller_identity()["Account"])


@pytest.fixture(scope="module")
def emulators(fresh_cloud: Ministack) -> Iterator[Emulators]:
    with Emulators(fresh_cloud.endpoint, REGION) as running:
        yield running


WRITER = """
import os
import boto3
from botocore.exceptions import ClientError
def handler(event, context):
    ddb = boto3.client("dynamodb")
    item = {"PK": {"S": event["key"]}}
    try:
        if event["call"] == "put":
            ddb.put_item(TableName=os.environ["TABLE"], Item=item)
        else:
            ddb.batch_write_item(RequestItems={os.environ["TABLE"]: [{"PutRequest": {"Item": item}}]})
    except ClientError as error:
        return error.response["Error"]["Code"]
    return "ok"
"""


def test_a_function_calls_as_its_role_and_batch_write_is_not_put_item(admin: Client) -> None:
    # GIVEN a function whose role may PutItem on its table, and nothing else
    table = admin("dynamodb").create_table(
        TableName="iam-items",
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )["TableDescription"]
    arn = role(admin, "iam-writer", LAMBDA_PRINCIPAL, {"Action": "dynamodb:PutItem", "Resource": table["TableArn"]})
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("writer.py", WRITER)
    admin("lambda").create_function(
        FunctionName="iam-writer",
        Runtime="python3.12",
        Role=arn,
        Handler="writer.handler",
        Code={"ZipFile": code.getvalue()},
        Environment={"Variables": {"TABLE": "iam-items"}},
    )

    def invoke(call: str, key: str) -> str:
        payload = json.dumps({"call": call, "key": key}).encode()
        response = admin("lambda").invoke(FunctionName="iam-writer", Payload=payload)
        return str(json.loads(response["Payload"].read()))

    # WHEN it writes one item with PutItem and one with BatchWriteItem
    # THEN the first is written; the second is refused as AWS refuses it, and not written
    assert invoke("put", "put") == "ok"
    assert invoke("batch", "batch") == "AccessDeniedException"
    assert [i["PK"]["S"] for i in admin("dynamodb").scan(TableName="iam-items")["Items"]] == ["put"]


def test_schedules_are_managed_in_the_callers_own_group_only_and_need_the_role_passed(
    admin: Client, roles: RoleSessions, account: str
) -> None:
    # GIVEN two groups, a Scheduler role, and a function role allowed to manage schedules in `mine` only and to pass
    # that role to Scheduler (the component's scheduling statements), and one that may not pass it
    for group in ("mine", "theirs"):
        admin("scheduler").create_schedule_group(Name=group)
    scheduler_role = role(admin, "iam-scheduler", SCHEDULER_PRINCIPAL)
    manage = {
        "Action": ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"],
        "Resource": f"arn:aws:scheduler:{REGION}:{account}:schedule/mine/*",
    }
    pass_role = {
        "Action": "iam:PassRole",
        "Resource": scheduler_role,
        "Condition": {"StringEquals": {"iam:PassedToService": SCHEDULER_PRINCIPAL}},
    }
    handler = roles.client(
        role(admin, "iam-handler", LAMBDA_PRINCIPAL, manage, pass_role), "scheduler", LAMBDA_PRINCIPAL
    )
    no_pass = roles.client(role(admin, "iam-no-pass", LAMBDA_PRINCIPAL, manage), "scheduler", LAMBDA_PRINCIPAL)
    target = {"Arn": f"arn:aws:sqs:{REGION}:{account}:nowhere", "RoleArn": scheduler_role}
    schedule = {"ScheduleExpression": "at(2030-01-01T00:00:00)", "FlexibleTimeWindow": {"Mode": "OFF"}}

    # WHEN the handler role creates, updates and deletes in its group, then tries the other group
    handler.create_schedule(GroupName="mine", Name="s", Target=target, **schedule)
    handler.update_schedule(GroupName="mine", Name="s", Target=target, **{**schedule, "Description": "changed"})
    handler.delete_schedule(GroupName="mine", Name="s")
    with pytest.raises(ClientError) as other_group:
        handler.create_schedule(GroupName="theirs", Name="s", Target=target, **schedule)
    with pytest.raises(ClientError) as not_passed:
        no_pass.create_schedule(GroupName="mine", Name="p", Target=target, **schedule)

    # THEN its own group works (ministack alone named every schedule schedule/default/NAME, denying all three),
    # the other group and a role it may not pass are refused, and nothing was created
    assert other_group.value.response["Error"]["Code"] == "AccessDeniedException"
    assert not_passed.value.response["Error"]["Code"] == "AccessDeniedException"
    assert "iam:PassRole" in str(not_passed.value)
    for group in ("mine", "theirs"):
        assert admin("scheduler").list_schedules(GroupName=group)["Schedules"] == []


def test_scheduler_fires_a_templated_target_as_the_schedules_role_and_dead_letters_a_denial(
    admin: Client, account: str
) -> None:
    # GIVEN a target queue and a DLQ; one role may send to both, one to the DLQ only, one to neither
    target_url, target_arn = queue(admin, "iam-target")
    dlq_url, dlq_arn = queue(admin, "iam-dlq")
    send = {"Action": "sqs:SendMessage", "Resource": [target_arn, dlq_arn]}
    dead_letters_only = {"Action": "sqs:SendMessage", "Resource": dlq_arn}
    admin("scheduler").create_schedule_group(Name="fired")
    for name, grants in (("allowed", [send]), ("denied", [dead_letters_only]), ("lost", [])):
        arn = role(admin, f"iam-fire-{name}", SCHEDULER_PRINCIPAL, *grants)
        # WHEN each role's schedule comes due
        admin("scheduler").create_schedule(
            GroupName="fired",
            Name=name,
            ScheduleExpression=a_minute_ago(),
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": target_arn, "RoleArn": arn, "Input": name, "DeadLetterConfig": {"Arn": dlq_arn}},
        )
    # THEN only the allowed one reaches the target; the denied one is dead-lettered with the denial, sent as its role;
    # the one whose role may not send dead letters either is lost (as on AWS)
    delivered = received(admin, target_url, want=1)
    dead = received(admin, dlq_url, want=1, timeout=10)
    assert [m["Body"] for m in delivered] == ["allowed"]
    assert [m["Body"] for m in dead] == ["denied"]
    attributes = {k: v["StringValue"] for k, v in dead[0]["MessageAttributes"].items()}
    assert attributes["ERROR_CODE"] == "AccessDeniedException"
    assert "sqs:SendMessage" in attributes["ERROR_MESSAGE"] and "iam-fire-denied" in attributes["ERROR_MESSAGE"]
    assert attributes["SCHEDULE_ARN"].endswith(":schedule/fired/denied") and attributes["TARGET_ARN"] == target_arn


def test_a_universal_target_is_called_as_the_schedules_role(admin: Client, emulators: Emulators, account: str) -> None:
    # GIVEN two items, and a role that may not DeleteItem (the precise ttl delete) but may send dead letters
    admin("dynamodb").create_table(
        TableName="iam-offers",
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    table_arn = f"arn:aws:dynamodb:{REGION}:{account}:table/iam-offers"
    dlq_url, dlq_arn = queue(admin, "iam-universal-dlq")
    may = role(
        admin,
        "iam-delete",
        SCHEDULER_PRINCIPAL,
        {"Action": "dynamodb:DeleteItem", "Resource": table_arn},
        {"Action": "sqs:SendMessage", "Resource": dlq_arn},
    )
    may_not = role(admin, "iam-no-delete", SCHEDULER_PRINCIPAL, {"Action": "sqs:SendMessage", "Resource": dlq_arn})
    admin("scheduler").create_schedule_group(Name="deletes")
    for key, arn in (("kept", may_not), ("deleted", may)):
        admin("dynamodb").put_item(TableName="iam-offers", Item={"PK": {"S": key}})
        # WHEN each item's delete schedule comes due
        admin("scheduler").create_schedule(
            GroupName="deletes",
            Name=key,
            ScheduleExpression=a_minute_ago(),
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={
                "Arn": "arn:aws:scheduler:::aws-sdk:dynamodb:deleteItem",
                "RoleArn": arn,
                "Input": json.dumps({"TableName": "iam-offers", "Key": {"PK": {"S": key}}}),
                "DeadLetterConfig": {"Arn": dlq_arn},
            },
        )
    # THEN the allowed role's item is gone; the other's stays, its call dead-lettered with the denial
    dead = received(admin, dlq_url, want=1, timeout=WAIT_SECONDS)
    deadline = time.monotonic() + WAIT_SECONDS
    while emulators.universal.fired < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [i["PK"]["S"] for i in admin("dynamodb").scan(TableName="iam-offers")["Items"]] == ["kept"]
    assert [json.loads(m["Body"])["Key"]["PK"]["S"] for m in dead] == ["kept"]
    assert dead[0]["MessageAttributes"]["ERROR_CODE"]["StringValue"] == "AccessDeniedException"


# -- issue 37.1: KMS as AWS enforces it on encrypted queues, topics and tables --------------------------------------


def test_a_call_on_an_encrypted_resource_needs_its_key_from_the_role_and_the_key_policy(
    admin: Client, roles: RoleSessions, account: str
) -> None:
    # GIVEN a queue, a topic and a table encrypted with one customer-managed key (AWS's default key policy: the
    # account's IAM policies decide), and two roles allowed the calls: one also allowed the key, one not
    key = admin("kms").create_key(Description="kms-test")["KeyMetadata"]["Arn"]
    url, queue_arn = queue(admin, "kms-queue")
    admin("sqs").set_queue_attributes(QueueUrl=url, Attributes={"KmsMasterKeyId": key})
    topic = admin("sns").create_topic(Name="kms-topic", Attributes={"KmsMasterKeyId": key})["TopicArn"]
    table = admin("dynamodb").create_table(
        TableName="kms-items",
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
        SSESpecification={"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": key},
    )["TableDescription"]["TableArn"]
    calls = [
        {"Action": ["sqs:SendMessage", "sqs:ReceiveMessage"], "Resource": queue_arn},
        {"Action": "sns:Publish", "Resource": topic},
        {"Action": ["dynamodb:PutItem", "dynamodb:GetItem"], "Resource": table},
    ]
    uses = {"Action": ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"], "Resource": key}
    granted = role(admin, "kms-granted", LAMBDA_PRINCIPAL, *calls, uses)
    refused = role(admin, "kms-refused", LAMBDA_PRINCIPAL, *calls)

    def as_role(arn: str, service: str) -> Any:
        return roles.client(arn, service, LAMBDA_PRINCIPAL)

    def refusal(call: Callable[[], Any]) -> tuple[str, str]:
        with pytest.raises(ClientError) as raised:
            call()
        return raised.value.response["Error"]["Code"], raised.value.response["Error"]["Message"]

    # THEN the role allowed the key sends, publishes, writes and reads
    as_role(granted, "sqs").send_message(QueueUrl=url, MessageBody="x")
    as_role(granted, "sns").publish(TopicArn=topic, Message="x")
    as_role(granted, "dynamodb").put_item(TableName="kms-items", Item={"PK": {"S": "a"}})
    assert as_role(granted, "dynamodb").get_item(TableName="kms-items", Key={"PK": {"S": "a"}})["Item"]
    # AND the other is refused each as its service refuses a key (naming the kms: action and the key), with no effect
    code, message = refusal(lambda: as_role(refused, "sqs").send_message(QueueUrl=url, MessageBody="y"))
    assert code == "KMS.AccessDeniedException" and f"kms:GenerateDataKey on resource: {key}" in message
    code, message = refusal(lambda: as_role(refused, "sns").publish(TopicArn=topic, Message="y"))
    assert code == "KMSAccessDenied" and "kms:GenerateDataKey" in message
    code, message = refusal(
        lambda: as_role(refused, "dynamodb").put_item(TableName="kms-items", Item={"PK": {"S": "b"}})
    )
    assert code == "AccessDeniedException" and f"kms:Decrypt on resource: {key}" in message
    code, _ = refusal(lambda: as_role(refused, "sqs").receive_message(QueueUrl=url))
    assert code == "KMS.AccessDeniedException"
    assert [m["Body"] for m in received(admin, url, 1, timeout=5, settle=0.5)] == ["x"]
    assert [i["PK"]["S"] for i in admin("dynamodb").scan(TableName="kms-items")["Items"]] == ["a"]
    # AND a key policy without the account's statement refuses even the role its IAM policy allows
    admin("kms").put_key_policy(
        KeyId=key,
        PolicyName="default",
        Policy=json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{account}:root"}, "Action": "kms:PutKeyPolicy",
             "Resource": "*"}
        ]}),
    )  # fmt: skip
    code, _ = refusal(lambda: as_role(granted, "sqs").send_message(QueueUrl=url, MessageBody="z"))
    assert code == "KMS.AccessDeniedException"


# -- issue 37.8: the mapping reads as the function's role; Scheduler's event bus target is put as AWS puts it --------

COUNTER = """
import os
import boto3
def handler(event, context):
    boto3.client("sqs").send_message(QueueUrl=os.environ["SEEN"], MessageBody=str(len(event.get("Records", []))))
    return {"batchItemFailures": []}
"""


def test_a_streams_mapping_reads_with_the_functions_role(admin: Client) -> None:
    # GIVEN two tables with streams, each read by a function that reports each batch it gets to a queue; one role
    # may read its stream, the other may not (no dynamodb:GetRecords)
    seen_url, seen_arn = queue(admin, "iam-seen")
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("counter.py", COUNTER)
    for name, reads in (("reads", ["dynamodb:GetRecords"]), ("cannot", [])):
        stream = admin("dynamodb").create_table(
            TableName=f"iam-stream-{name}",
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )["TableDescription"]["LatestStreamArn"]
        actions = ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:ListStreams", *reads]
        arn = role(
            admin,
            f"iam-stream-{name}",
            LAMBDA_PRINCIPAL,
            {"Action": actions, "Resource": stream},
            {"Action": "sqs:SendMessage", "Resource": seen_arn},
        )
        admin("lambda").create_function(
            FunctionName=f"iam-stream-{name}",
            Runtime="python3.12",
            Role=arn,
            Handler="counter.handler",
            Code={"ZipFile": code.getvalue()},
            Environment={"Variables": {"SEEN": seen_url}},
        )
        admin("lambda").create_event_source_mapping(
            FunctionName=f"iam-stream-{name}", EventSourceArn=stream, StartingPosition="TRIM_HORIZON"
        )
        # WHEN an item is written to each table
        admin("dynamodb").put_item(TableName=f"iam-stream-{name}", Item={"PK": {"S": name}})
    # THEN only the function whose role may read its stream is handed the batch
    assert [m["Body"] for m in received(admin, seen_url, want=1, settle=5.0)] == ["1"]


def test_scheduler_puts_an_event_bus_targets_source_and_detail_type_as_its_role(admin: Client) -> None:
    # GIVEN a bus whose rule copies events of source `scheduled-table` to a queue, and a schedule for that bus whose
    # role may put events on it
    admin("events").create_event_bus(Name="iam-bus")
    bus = admin("events").describe_event_bus(Name="iam-bus")["Arn"]
    url, arn = queue(admin, "iam-bus-seen")
    admin("sqs").set_queue_attributes(
        QueueUrl=url,
        Attributes={"Policy": json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, "Action": "sqs:SendMessage",
            "Resource": arn}]})},
    )  # fmt: skip
    pattern = {"source": ["scheduled-table"], "detail-type": ["scheduled-table.due"]}
    admin("events").put_rule(Name="copy", EventBusName="iam-bus", EventPattern=json.dumps(pattern))
    admin("events").put_targets(Rule="copy", EventBusName="iam-bus", Targets=[{"Id": "seen", "Arn": arn}])
    putter = role(admin, "iam-bus-put", SCHEDULER_PRINCIPAL, {"Action": "events:PutEvents", "Resource": bus})
    admin("scheduler").create_schedule_group(Name="bus")
    # WHEN the schedule fires
    admin("scheduler").create_schedule(
        GroupName="bus",
        Name="due",
        ScheduleExpression=a_minute_ago(),
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={
            "Arn": bus,
            "RoleArn": putter,
            "Input": json.dumps({"keys": {"PK": "a"}}),
            "EventBridgeParameters": {"Source": "scheduled-table", "DetailType": "scheduled-table.due"},
        },
    )
    # THEN the bus's rule sees the target's source and detail type, with the Input as the detail
    (message,) = received(admin, url, want=1)
    event = json.loads(message["Body"])
    assert (event["source"], event["detail-type"]) == ("scheduled-table", "scheduled-table.due")
    assert event["detail"] == {"keys": {"PK": "a"}}
