"""A user's program with a customer-managed KMS key on every encryptable resource it gives the component (its table,
the ledger, the target queue), deployed into the local cloud with IAM and KMS enforced (localcloud/iam.py): every
call the functions and Scheduler make, and each mapping's stream reads, needs the key from the role's policy and the
key's policy. The due event arrives in the encrypted queue and the totals are written to the encrypted table; with
one KMS grant taken from the aggregating function's role, its next total is not written.

Second precision brings the due event within seconds; `aggregate` writes as soon as its stream batch is read."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from localcloud.deploy import up
from localcloud.provision import clients
from localcloud.server import Ministack

PROJECT = "name: vault\nruntime: python\ndescription: a user's project, encrypted\n"
PROGRAM = """\
import pulumi
import pulumi_aws as aws
from scheduled_table import QueueTarget, ScheduledTable, ScheduledTableArgs

key = aws.kms.Key("vault-key", description="the user's own key")
inbox = aws.sqs.Queue("inbox", kms_master_key_id=key.arn)
orders = ScheduledTable(
    "orders",
    ScheduledTableArgs(
        mode="eventbridge",
        precision="second",
        time_attribute="shipAt",
        kms_key_arn=key.arn,
        target=QueueTarget(inbox.arn, kms_key_arn=key.arn),
        deletion_protection=False,
        alarms=False,
        dashboard=False,
    ),
)
scores = ScheduledTable(
    "scores",
    ScheduledTableArgs(mode="aggregate", kms_key_arn=key.arn, deletion_protection=False, alarms=False, dashboard=False),
)
pulumi.export("inbox_url", inbox.url)
pulumi.export("key_arn", key.arn)
pulumi.export("orders_table", orders.table_name)
pulumi.export("scores_table", scores.table_name)
"""
REGION = "eu-west-1"


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory, fresh_cloud: Ministack) -> dict[str, Any]:
    folder: Path = tmp_path_factory.mktemp("vault")
    (folder / "Pulumi.yaml").write_text(PROJECT)
    (folder / "__main__.py").write_text(PROGRAM)
    deployment = up(fresh_cloud.endpoint, project_dir=folder)
    policies = {r.name: r for r in deployment.resources if r.type.endswith(":RolePolicy")}
    aggregator = policies["scores-aggregator-policy"]
    return {
        **deployment.outputs,
        "aggregator": (aggregator.outputs["role"], aggregator.name, aggregator.inputs["policy"]),
    }


def _wait(condition: Any, seconds: float = 45.0) -> Any:
    deadline = time.time() + seconds
    while time.time() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(1.0)
    return None


def test_every_resource_is_encrypted_with_the_users_key(deployed: dict[str, Any], fresh_cloud: Ministack) -> None:
    client = clients(fresh_cloud.endpoint, REGION)
    key = deployed["key_arn"]
    for table in (deployed["orders_table"], deployed["scores_table"]):
        described = client("dynamodb").describe_table(TableName=table)["Table"]
        assert described["SSEDescription"]["KMSMasterKeyArn"] == key, described.get("SSEDescription")
    attributes = client("sqs").get_queue_attributes(QueueUrl=deployed["inbox_url"], AttributeNames=["All"])
    assert attributes["Attributes"]["KmsMasterKeyId"] == key


def test_the_due_event_arrives_in_the_encrypted_queue_and_the_totals_in_the_encrypted_table(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    client = clients(fresh_cloud.endpoint, REGION)
    due = int(time.time()) + 5
    client("dynamodb").put_item(
        TableName=deployed["orders_table"],
        Item={"PK": {"S": "ORDER#1"}, "SK": {"S": "SHIP"}, "shipAt": {"N": str(due)}},
    )
    client("dynamodb").put_item(
        TableName=deployed["scores_table"], Item={"PK": {"S": "SCORE#1"}, "SK": {"S": "USER#ada"}, "Score": {"N": "5"}}
    )

    def arrived() -> Any:
        messages = client("sqs").receive_message(QueueUrl=deployed["inbox_url"], WaitTimeSeconds=2).get("Messages")
        return json.loads(messages[0]["Body"]) if messages else None

    body = _wait(arrived)
    assert body is not None and body["keys"] == {"PK": "ORDER#1", "SK": "SHIP"}, "no due event within 45 s"

    def total() -> Any:
        key = {"PK": {"S": "USER#ada"}, "SK": {"S": "TOTAL"}}
        return client("dynamodb").get_item(TableName=deployed["scores_table"], Key=key).get("Item")

    found = _wait(total)
    assert found is not None and found["totalScore"] == {"N": "5"}, "no total within 45 s"


def test_without_the_aggregators_kms_decrypt_its_next_total_is_not_written(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    # GIVEN the aggregating function's role without kms:Decrypt on the table's key (everything else as deployed)
    client = clients(fresh_cloud.endpoint, REGION)
    role, name, text = deployed["aggregator"]
    document = json.loads(text)
    for statement in document["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        statement["Action"] = [a for a in actions if a != "kms:Decrypt"] or ["kms:DescribeKey"]
    client("iam").put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(document))
    # WHEN another score is written
    client("dynamodb").put_item(
        TableName=deployed["scores_table"], Item={"PK": {"S": "SCORE#2"}, "SK": {"S": "USER#bob"}, "Score": {"N": "7"}}
    )
    # THEN its total never appears: the mapping cannot read the stream, nor the function write, without the key
    key = {"PK": {"S": "USER#bob"}, "SK": {"S": "TOTAL"}}
    time.sleep(15)
    assert "Item" not in client("dynamodb").get_item(TableName=deployed["scores_table"], Key=key)
    # AND with the grant back, the batch Lambda kept retrying goes through: nothing was lost
    client("iam").put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=text)
    found = _wait(lambda: client("dynamodb").get_item(TableName=deployed["scores_table"], Key=key).get("Item"), 60)
    assert found is not None and found["totalScore"] == {"N": "7"}
