"""A user's program on tables of another account, deployed into the local cloud with IAM enforced
(localcloud/accounts.py, localcloud/iam.py): account B owns two tables with streams and gives, as
docs/existing-tables.md tells the owner to, a resource-based policy on each table (the item actions) and on each
stream (`DescribeStream`, `GetShardIterator`, `GetRecords`) to the deploying account A. A deploys `eventbridge` and
`aggregate` on them (`ExistingTable` with B's stream ARNs): its mappings read B's streams as its functions' roles,
its functions read and write B's tables by ARN, Scheduler assumes A's role (trust condition `aws:SourceAccount` = A)
and sends to A's queue. An order written in B arrives in A's queue; scores written in B are totalled in B's table.
Without the stream policy's statement, the mapping's reads are refused and nothing is lost: the batch goes through
once it is back. Without the policies, the mapping cannot be created at all."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from localcloud.deploy import up
from localcloud.iam import SERVICE_SESSION_PATH
from localcloud.provision import clients
from localcloud.server import Ministack

from .conftest import wait_until as _wait

OWNER = "222222222222"  # account B: a 12-digit access key is that account's root in ministack
REGION = "eu-west-1"
PROJECT = "name: shop\nruntime: python\ndescription: a user's project on another account's tables\n"
PROGRAM = """\
import pulumi
import pulumi_aws as aws
from scheduled_table import ExistingTable, QueueTarget, ScheduledTable, ScheduledTableArgs

inbox = aws.sqs.Queue("inbox")
common = dict(deletion_protection=False, alarms=False, dashboard=False)
orders = ScheduledTable("orders", ScheduledTableArgs(
    mode="eventbridge", time_attribute="shipAt", target=QueueTarget(inbox.arn),
    existing_table=ExistingTable(name="orders", stream_arn="{orders}"), **common))
scores = ScheduledTable("scores", ScheduledTableArgs(
    mode="aggregate", existing_table=ExistingTable(name="scores", stream_arn="{scores}"), **common))
pulumi.export("inbox_url", inbox.url)
"""
ITEM_ACTIONS = [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
]
STREAM_ACTIONS = ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"]
# Scheduler runs an at() anywhere in its minute: a due event may come a minute and a half after it is written.
SCHEDULER_WAIT_SECONDS = 120.0


def _owner(endpoint: str) -> Callable[[str], Any]:
    session = boto3.session.Session(region_name=REGION, aws_access_key_id=OWNER, aws_secret_access_key="test")
    config = Config(retries={"max_attempts": 2, "mode": "standard"})
    return lambda service: session.client(service, endpoint_url=endpoint, config=config)


def _policy(arn: str, account: str, actions: list[str]) -> str:
    statement = {
        "Sid": "DeployingAccount",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:aws:iam::{account}:root"},
        "Action": actions,
        "Resource": arn,
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def _make_table(owner: Callable[[str], Any], name: str, deployer: str) -> dict[str, str]:
    """B's table with its stream, and both resource-based policies allowing account `deployer`."""
    table = owner("dynamodb").create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in ("PK", "SK")],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]
    arns = {"table": table["TableArn"], "stream": table["LatestStreamArn"]}
    owner("dynamodb").put_resource_policy(
        ResourceArn=arns["table"], Policy=_policy(arns["table"], deployer, ITEM_ACTIONS)
    )
    owner("dynamodb").put_resource_policy(
        ResourceArn=arns["stream"], Policy=_policy(arns["stream"], deployer, STREAM_ACTIONS)
    )
    return arns


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory, fresh_cloud: Ministack) -> Iterator[dict[str, Any]]:
    deployer = clients(fresh_cloud.endpoint, REGION)("sts").get_caller_identity()["Account"]
    owner = _owner(fresh_cloud.endpoint)
    tables = {name: _make_table(owner, name, deployer) for name in ("orders", "scores")}
    folder: Path = tmp_path_factory.mktemp("shop")
    (folder / "Pulumi.yaml").write_text(PROJECT)
    (folder / "__main__.py").write_text(
        PROGRAM.replace("{orders}", tables["orders"]["stream"]).replace("{scores}", tables["scores"]["stream"])
    )
    deployment = up(fresh_cloud.endpoint, project_dir=folder)
    yield {**deployment.outputs, "tables": tables, "deployer": deployer}


def _total(owner: Callable[[str], Any], user: str) -> dict[str, Any] | None:
    key = {"PK": {"S": f"USER#{user}"}, "SK": {"S": "TOTAL"}}
    found: dict[str, Any] | None = owner("dynamodb").get_item(TableName="scores", Key=key).get("Item")
    return found


def test_the_deployers_mappings_read_the_owners_streams(deployed: dict[str, Any], fresh_cloud: Ministack) -> None:
    mappings = clients(fresh_cloud.endpoint, REGION)("lambda").list_event_source_mappings()["EventSourceMappings"]
    sources = {m["EventSourceArn"] for m in mappings}
    assert {deployed["tables"][name]["stream"] for name in ("orders", "scores")} <= sources
    assert all(f":{OWNER}:" in arn for arn in sources if ":dynamodb:" in arn), sources


def test_an_order_written_in_the_owners_table_arrives_and_scores_are_totalled_there(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    owner = _owner(fresh_cloud.endpoint)
    client = clients(fresh_cloud.endpoint, REGION)
    # WHEN B writes an order due now and two scores into its own tables
    order = {"PK": {"S": "ORDER#1"}, "SK": {"S": "DUE"}, "shipAt": {"N": str(int(time.time()))}}
    owner("dynamodb").put_item(TableName="orders", Item=order)
    for number, score in ((1, "5"), (2, "7")):
        item = {"PK": {"S": f"SCORE#{number}"}, "SK": {"S": "USER#ada"}, "Score": {"N": score}}
        owner("dynamodb").put_item(TableName="scores", Item=item)
    # THEN the total appears in B's table (the aggregator's mapping read B's stream, its writes went to B's table)
    total = _wait(lambda: (found := _total(owner, "ada")) and found.get("totalScore") == {"N": "12"} and found)
    assert total, _total(owner, "ada")
    # AND the order's due event reaches A's queue: Scheduler assumed A's role, in A's account, to send it

    def arrived() -> dict[str, Any] | None:
        for message in (
            client("sqs").receive_message(QueueUrl=deployed["inbox_url"], WaitTimeSeconds=1).get("Messages", [])
        ):
            body: dict[str, Any] = json.loads(message["Body"])
            if body.get("keys") == {"PK": "ORDER#1", "SK": "DUE"}:
                return body
        return None

    assert _wait(arrived, SCHEDULER_WAIT_SECONDS), "no due event for the order within the wait"


def test_without_the_stream_policys_statement_the_mappings_reads_are_refused_until_it_is_back(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    # GIVEN B's stream policy of the scores table without its statement for A (a statement for someone else kept)
    owner = _owner(fresh_cloud.endpoint)
    stream = deployed["tables"]["scores"]["stream"]
    original = owner("dynamodb").get_resource_policy(ResourceArn=stream)["Policy"]
    owner("dynamodb").put_resource_policy(ResourceArn=stream, Policy=_policy(stream, "333333333333", STREAM_ACTIONS))
    try:
        # WHEN B writes a score
        item = {"PK": {"S": "SCORE#3"}, "SK": {"S": "USER#bob"}, "Score": {"N": "4"}}
        owner("dynamodb").put_item(TableName="scores", Item=item)
        # THEN no total appears: the mapping may not read B's stream as the aggregator's role
        time.sleep(8)
        assert _total(owner, "bob") is None
    finally:
        owner("dynamodb").put_resource_policy(ResourceArn=stream, Policy=original)
    # AND with the statement back, the batch the mapping kept retrying goes through: nothing was lost
    found = _wait(lambda: _total(owner, "bob"))
    assert found is not None and found["totalScore"] == {"N": "4"}


def test_a_mapping_on_the_owners_stream_without_its_policy_is_refused(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    # GIVEN another table of B's with a stream and no resource-based policy
    owner = _owner(fresh_cloud.endpoint)
    table = owner("dynamodb").create_table(
        TableName="private",
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]
    lam = clients(fresh_cloud.endpoint, REGION)("lambda")
    function = next(f["FunctionName"] for f in lam.list_functions()["Functions"] if "aggregator" in f["FunctionName"])
    # WHEN A maps its aggregator onto that stream THEN Lambda refuses, naming the stream read it cannot make
    with pytest.raises(lam.exceptions.InvalidParameterValueException, match="dynamodb:DescribeStream"):
        lam.create_event_source_mapping(
            FunctionName=function, EventSourceArn=table["LatestStreamArn"], StartingPosition="LATEST"
        )


def _as_role(endpoint: str, role_arn: str) -> Any:
    """A DynamoDB client with the role's session, as Lambda assumes the role for its function."""
    query = urllib.parse.urlencode({"role": role_arn, "service": "lambda.amazonaws.com"})
    with urllib.request.urlopen(f"{endpoint}{SERVICE_SESSION_PATH}?{query}", timeout=10) as answer:
        session = json.loads(answer.read())["Credentials"]
    return boto3.client(
        "dynamodb",
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id=session["AccessKeyId"],
        aws_secret_access_key=session["SecretAccessKey"],
        aws_session_token=session["SessionToken"],
    )


def _role(endpoint: str, suffix: str) -> str:
    roles = clients(endpoint, REGION)("iam").list_roles()["Roles"]
    return str(next(r["Arn"] for r in roles if r["RoleName"].endswith(suffix)))


def test_the_owners_table_is_read_by_arn_only_when_both_policies_allow(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    endpoint = fresh_cloud.endpoint
    owner = _owner(endpoint)
    orders, scores = (deployed["tables"][name]["table"] for name in ("orders", "scores"))
    key = {"PK": {"S": "ORDER#1"}, "SK": {"S": "DUE"}}
    scheduler = _as_role(endpoint, _role(endpoint, "orders-scheduler-role"))
    # GIVEN the orders function's role, whose policy grants it GetItem on the orders table, and the table's policy
    # allowing account A: THEN it reads B's table by ARN (the item is B's: the order written there)
    assert scheduler.get_item(TableName=orders, Key=key, ConsistentRead=True)["Item"]["PK"] == {"S": "ORDER#1"}
    # AND on the scores table, whose policy allows account A too but the role's own policy does not name, it is refused
    with pytest.raises(ClientError, match="AccessDenied"):
        scheduler.get_item(TableName=scores, Key=key)
    # WHEN B removes the orders table's policy THEN the role is refused there too: across accounts, both must allow
    policy = owner("dynamodb").get_resource_policy(ResourceArn=orders)["Policy"]
    owner("dynamodb").delete_resource_policy(ResourceArn=orders)
    try:
        with pytest.raises(ClientError, match="AccessDenied"):
            scheduler.get_item(TableName=orders, Key=key)
    finally:
        owner("dynamodb").put_resource_policy(ResourceArn=orders, Policy=policy)
