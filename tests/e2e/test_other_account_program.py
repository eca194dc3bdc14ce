"""A user's program on tables of another account, deployed into the local cloud with IAM enforced
(localcloud/accounts.py, localcloud/iam.py): account B owns a table per mode, each with a stream (and TTL, or the
due index, as its mode needs), and gives, as docs/existing-tables.md tells the owner to, a resource-based policy on
each table (the item actions, its indexes too) and on each stream (`DescribeStream`, `GetShardIterator`,
`GetRecords`) to the deploying account A. A deploys every mode on them (`ExistingTable` with B's stream ARNs): its
mappings read B's streams as its functions' roles, its functions read and write B's tables by ARN, Scheduler assumes
A's role (trust condition `aws:SourceAccount` = A) and sends to A's queue. Items written in B arrive in A's queue,
scores written in B are totalled in B's table. Without the stream policy's statement the mapping's reads are refused
and nothing is lost: the batch goes through once it is back; without the stream's policy the mapping cannot be
created; without the table's policy, or without the role's own grant, the role's calls on B's table are refused.
The scores table is encrypted with B's customer-managed key, which A's component is given (`kms_key_arn`): without
the key policy's statement for A, its stream reads and writes are refused until it is back. A DynamoDB transaction
whose items are in both accounts is refused, as AWS refuses it: polling's assigner and aggregate's ledger path
deliver without one."""

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

from localcloud.component import runtime_module
from localcloud.deploy import up
from localcloud.emulators import Emulators, fire_rule
from localcloud.iam import SERVICE_SESSION_PATH
from localcloud.provision import clients
from localcloud.server import Ministack

from .conftest import wait_until as _wait

PENDING = runtime_module("pending")
INDEX_NAME, SHARD, DUE = PENDING.INDEX_NAME, PENDING.SHARD, PENDING.DUE
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
    mode="aggregate", existing_table=ExistingTable(name="scores", stream_arn="{scores}"), kms_key_arn="{key}",
    **common))
sessions = ScheduledTable("sessions", ScheduledTableArgs(
    mode="ttl", time_attribute="expiresAt", target=QueueTarget(inbox.arn),
    existing_table=ExistingTable(name="sessions", stream_arn="{sessions}"), **common))
jobs = ScheduledTable("jobs", ScheduledTableArgs(
    mode="polling", time_attribute="runAt", target=QueueTarget(inbox.arn),
    existing_table=ExistingTable(name="jobs", stream_arn="{jobs}"), **common))
pulumi.export("inbox_url", inbox.url)
pulumi.export("jobs_tick", jobs.tick_rule_name)
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
KEY_USES = ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"]
STREAM_ACTIONS = ["dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"]
# Scheduler runs an at() anywhere in its minute: a due event may come a minute and a half after it is written.
SCHEDULER_WAIT_SECONDS = 120.0
FIRE_EVERY_SECONDS = 5.0
MODES = ("orders", "scores", "sessions", "jobs")  # eventbridge, aggregate, ttl, polling


def _owner(endpoint: str) -> Callable[[str], Any]:
    session = boto3.session.Session(region_name=REGION, aws_access_key_id=OWNER, aws_secret_access_key="test")
    config = Config(retries={"max_attempts": 2, "mode": "standard"})
    return lambda service: session.client(service, endpoint_url=endpoint, config=config)


def _policy(arns: list[str], account: str, actions: list[str]) -> str:
    statement = {
        "Sid": "DeployingAccount",
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:aws:iam::{account}:root"},
        "Action": actions,
        "Resource": arns,
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


def _key_policy(deployer: str) -> str:
    """B's key policy: B administers its key, account A's callers may use it for DynamoDB (their own policy must allow
    it too)."""
    statements = [
        {"Sid": "Owner", "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{OWNER}:root"}, "Action": "kms:*",
         "Resource": "*"},
        {"Sid": "DeployingAccount", "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{deployer}:root"},
         "Action": KEY_USES, "Resource": "*"},
    ]  # fmt: skip
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


def _make_table(owner: Callable[[str], Any], name: str, deployer: str, key: str) -> dict[str, str]:
    """B's table with its stream (and what its mode needs: TTL for `sessions`, the due index for `jobs`; `scores`
    encrypted with B's `key`), and both resource-based policies allowing account `deployer` (the table's covering
    its indexes)."""
    keys = [("PK", "S"), ("SK", "S")] + ([(SHARD, "N"), (DUE, "N")] if name == "jobs" else [])
    index = {
        "IndexName": INDEX_NAME,
        "KeySchema": [{"AttributeName": SHARD, "KeyType": "HASH"}, {"AttributeName": DUE, "KeyType": "RANGE"}],
        "Projection": {"ProjectionType": "ALL"},
    }
    table = owner("dynamodb").create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": k, "AttributeType": t} for k, t in keys],
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        **({"GlobalSecondaryIndexes": [index]} if name == "jobs" else {}),
        **(
            {"SSESpecification": {"Enabled": True, "SSEType": "KMS", "KMSMasterKeyId": key}} if name == "scores" else {}
        ),
    )["TableDescription"]
    if name == "sessions":
        owner("dynamodb").update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiresAt"}
        )
    arns = {"table": table["TableArn"], "stream": table["LatestStreamArn"]}
    owner("dynamodb").put_resource_policy(
        ResourceArn=arns["table"], Policy=_policy([arns["table"], f"{arns['table']}/index/*"], deployer, ITEM_ACTIONS)
    )
    owner("dynamodb").put_resource_policy(
        ResourceArn=arns["stream"], Policy=_policy([arns["stream"]], deployer, STREAM_ACTIONS)
    )
    return arns


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory, fresh_cloud: Ministack) -> Iterator[dict[str, Any]]:
    deployer = clients(fresh_cloud.endpoint, REGION)("sts").get_caller_identity()["Account"]
    owner = _owner(fresh_cloud.endpoint)
    key = owner("kms").create_key(Description="B's key for its scores table", Policy=_key_policy(deployer))
    key_arn = key["KeyMetadata"]["Arn"]
    tables = {name: _make_table(owner, name, deployer, key_arn) for name in MODES}
    folder: Path = tmp_path_factory.mktemp("shop")
    (folder / "Pulumi.yaml").write_text(PROJECT)
    program = PROGRAM.replace("{key}", key_arn)
    for name in MODES:
        program = program.replace(f"{{{name}}}", tables[name]["stream"])
    (folder / "__main__.py").write_text(program)
    deployment = up(fresh_cloud.endpoint, project_dir=folder)
    # the TTL process (B's expired sessions deleted 5 s after their time) and the universal targets
    with Emulators(deployment.endpoint, deployment.region):
        yield {**deployment.outputs, "tables": tables, "deployer": deployer, "key": key_arn}


def _due(pk: str, attribute: str, at: int) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": "DUE"}, attribute: {"N": str(at)}}


def _total(owner: Callable[[str], Any], user: str) -> dict[str, Any] | None:
    key = {"PK": {"S": f"USER#{user}"}, "SK": {"S": "TOTAL"}}
    found: dict[str, Any] | None = owner("dynamodb").get_item(TableName="scores", Key=key).get("Item")
    return found


def _held_back_until(owner: Callable[[str], Any], user: str, restore: Callable[[], Any]) -> None:
    """A score of 3 written for `user` while a refusal is in place gives no total within 8 s; once `restore` has run,
    its total arrives (the batch the mapping kept retrying)."""
    try:
        item = {"PK": {"S": f"SCORE#{user}"}, "SK": {"S": f"USER#{user}"}, "Score": {"N": "3"}}
        owner("dynamodb").put_item(TableName="scores", Item=item)
        time.sleep(8)
        assert _total(owner, user) is None
    finally:
        restore()
    found = _wait(lambda: _total(owner, user))
    assert found is not None and found["totalScore"] == {"N": "3"}


def test_the_deployers_mappings_read_the_owners_streams(deployed: dict[str, Any], fresh_cloud: Ministack) -> None:
    mappings = clients(fresh_cloud.endpoint, REGION)("lambda").list_event_source_mappings()["EventSourceMappings"]
    sources = {m["EventSourceArn"] for m in mappings}
    assert {deployed["tables"][name]["stream"] for name in MODES} <= sources
    assert all(f":{OWNER}:" in arn for arn in sources if ":dynamodb:" in arn), sources


def test_every_mode_delivers_from_the_owners_tables(deployed: dict[str, Any], fresh_cloud: Ministack) -> None:
    owner = _owner(fresh_cloud.endpoint)
    client = clients(fresh_cloud.endpoint, REGION)
    now = int(time.time())
    # WHEN B writes, into its own tables, an order due now, two scores, a session expiring now and a job due now
    owner("dynamodb").put_item(TableName="orders", Item=_due("ORDER#1", "shipAt", now))
    for number, score in ((1, "5"), (2, "7")):
        item = {"PK": {"S": f"SCORE#{number}"}, "SK": {"S": "USER#ada"}, "Score": {"N": score}}
        owner("dynamodb").put_item(TableName="scores", Item=item)
    owner("dynamodb").put_item(TableName="sessions", Item=_due("SESSION#1", "expiresAt", now))
    owner("dynamodb").put_item(TableName="jobs", Item=_due("JOB#1", "runAt", now))
    # THEN the total appears in B's table (the aggregator's mapping read B's stream, its writes went to B's table)
    total = _wait(lambda: (found := _total(owner, "ada")) and found.get("totalScore") == {"N": "12"} and found)
    assert total, _total(owner, "ada")
    # AND each due event reaches A's queue: the order's sent by Scheduler as A's role (assumed in A's account), the
    # session's by the ttl executor once B's TTL deleted it, the job's by polling's processor (its tick fired now)
    found: list[dict[str, Any]] = []
    fired = [0.0]

    def missing() -> list[str]:
        for message in (
            client("sqs")
            .receive_message(QueueUrl=deployed["inbox_url"], MaxNumberOfMessages=10, WaitTimeSeconds=1)
            .get("Messages", [])
        ):
            found.append(json.loads(message["Body"]))
            client("sqs").delete_message(QueueUrl=deployed["inbox_url"], ReceiptHandle=message["ReceiptHandle"])
        keys = [m.get("keys") for m in found]
        late = [pk for pk in ("ORDER#1", "SESSION#1", "JOB#1") if {"PK": pk, "SK": "DUE"} not in keys]
        if "JOB#1" in late and time.time() - fired[0] > FIRE_EVERY_SECONDS:
            fire_rule(client, deployed["jobs_tick"], REGION)
            fired[0] = time.time()
        return late

    assert _wait(lambda: not missing(), SCHEDULER_WAIT_SECONDS), f"no due event within the wait for {missing()}"


def test_without_the_stream_policys_statement_the_mappings_reads_are_refused_until_it_is_back(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    # GIVEN B's stream policy of the scores table without its statement for A (a statement for someone else kept)
    owner = _owner(fresh_cloud.endpoint)
    stream = deployed["tables"]["scores"]["stream"]
    original = owner("dynamodb").get_resource_policy(ResourceArn=stream)["Policy"]
    owner("dynamodb").put_resource_policy(ResourceArn=stream, Policy=_policy([stream], "333333333333", STREAM_ACTIONS))
    # WHEN B writes a score THEN no total appears: the mapping may not read B's stream as the aggregator's role
    # AND with the statement back, the batch the mapping kept retrying goes through: nothing was lost
    _held_back_until(owner, "bob", lambda: owner("dynamodb").put_resource_policy(ResourceArn=stream, Policy=original))


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


def test_without_the_owners_key_policy_statement_the_encrypted_tables_stream_and_writes_are_refused(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    # GIVEN B's key for the scores table without its statement for A (B's own kept)
    owner = _owner(fresh_cloud.endpoint)
    document = json.loads(_key_policy(deployed["deployer"]))
    document["Statement"] = [s for s in document["Statement"] if s["Sid"] != "DeployingAccount"]
    owner("kms").put_key_policy(KeyId=deployed["key"], PolicyName="default", Policy=json.dumps(document))
    # WHEN B writes a score THEN no total appears: the aggregator's role may not use B's key (its own policy names
    # the key, B's key policy does not name A): neither the stream read nor the write goes through
    # AND with the statement back, the batch goes through: nothing was lost
    restored = _key_policy(deployed["deployer"])
    _held_back_until(
        owner, "cy", lambda: owner("kms").put_key_policy(KeyId=deployed["key"], PolicyName="default", Policy=restored)
    )


def test_a_transaction_across_both_accounts_is_refused_and_one_in_the_owners_table_is_not(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    # GIVEN A's own ledger (the polling stack's) and B's jobs table, which A's policies and B's table policy allow
    client = clients(fresh_cloud.endpoint, REGION)("dynamodb")
    ledger = next(name for name in client.list_tables()["TableNames"] if "jobs" in name and "ledger" in name)
    jobs = deployed["tables"]["jobs"]["table"]
    key = {"PK": {"S": "PROBE"}, "SK": {"S": "DUE"}}
    check = {"TableName": jobs, "Key": key, "ConditionExpression": "attribute_not_exists(PK)"}
    marker = {"TableName": ledger, "Item": {"id": {"S": "probe#cross-account"}}}
    gets = [{"Get": {"TableName": jobs, "Key": key}}, {"Get": {"TableName": ledger, "Key": marker["Item"]}}]
    # WHEN A writes, or reads, one transaction over both THEN it is refused, and nothing of it is written
    for request in (
        lambda: client.transact_write_items(TransactItems=[{"ConditionCheck": check}, {"Put": marker}]),
        lambda: client.transact_get_items(TransactItems=gets),
    ):
        with pytest.raises(ClientError) as refused:
            request()
        assert refused.value.response["Error"]["Code"] == "ValidationException"
        assert "different AWS accounts or Regions" in refused.value.response["Error"]["Message"]
    assert "Item" not in client.get_item(TableName=ledger, Key=marker["Item"], ConsistentRead=True)
    # AND a transaction wholly in B's table goes through
    client.transact_write_items(TransactItems=[{"ConditionCheck": check}])


def test_a_user_with_more_scores_than_the_totals_ids_hold_is_totalled_through_the_ledger_once(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    # GIVEN more scores for one user within the record-age horizon than the ids on a total hold (about 130): the
    # aggregator's ledger path, which on B's table cannot be one transaction with A's ledger
    owner = _owner(fresh_cloud.endpoint)
    scores = 150
    for number in range(scores):
        item = {"PK": {"S": f"SCORE#many-{number}"}, "SK": {"S": "USER#many"}, "Score": {"N": "2"}}
        owner("dynamodb").put_item(TableName="scores", Item=item)
    # THEN every score is counted once in B's table, and the ledger holds markers for some (the path was taken)
    found = _wait(lambda: (total := _total(owner, "many")) and total["totalScore"] == {"N": str(2 * scores)} and total)
    assert found, _total(owner, "many")
    client = clients(fresh_cloud.endpoint, REGION)("dynamodb")
    ledger = next(name for name in client.list_tables()["TableNames"] if "scores" in name and "ledger" in name)
    assert client.scan(TableName=ledger, Select="COUNT")["Count"] > 0
    # AND nothing counts twice later, and no journal is left on the total (each write removes its own)
    time.sleep(5)
    later = _total(owner, "many") or {}
    assert later.get("totalScore") == {"N": str(2 * scores)} and "stJournal" not in later, later
