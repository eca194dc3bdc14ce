"""Bring your own table: the component makes only what acts on it, scoped to that table and its stream."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from components import ExistingTable, ScheduledTableArgs
from components.existing import table_arn_of, table_problems
from components.stack_config import DictConfig, args_from_config
from tests.components.conftest import Built
from tests.components.test_stack_config import FakeConfig

Build = Callable[..., Built]
TABLE = "appointments"
TABLE_ARN = f"arn:aws:dynamodb:eu-west-1:123456789012:table/{TABLE}"
STREAM = f"{TABLE_ARN}/stream/2026-11-01T00:00:00.000"
GIVEN = ExistingTable(name=TABLE, stream_arn=STREAM)


def test_table_arn_comes_from_the_stream_arn() -> None:
    assert table_arn_of(STREAM) == TABLE_ARN
    assert table_arn_of("arn:aws-cn:dynamodb:cn-north-1:123456789012:table/t.x-1/stream/label") == (
        "arn:aws-cn:dynamodb:cn-north-1:123456789012:table/t.x-1"
    )


@pytest.mark.parametrize("mode", ["eventbridge", "ttl", "polling", "aggregate"])
def test_no_table_is_created_and_everything_points_at_the_given_one(build: Build, mode: str) -> None:
    built = build(mode=mode, existing_table=GIVEN, alarms=False, dashboard=False, invokes=given(mode))
    tables = [r.name for r in built.of_type("dynamodb/table:Table")]
    assert "rem-table" not in tables and all(t.endswith("-ledger") for t in tables)
    for mapping in built.of_type("lambda/eventSourceMapping:EventSourceMapping"):
        assert mapping.inputs["eventSourceArn"] == STREAM
    assert built.outputs["table_name"] == TABLE and built.outputs["table_arn"] == TABLE_ARN
    assert built.handler_config()["table"] == TABLE
    # Every grant on a table or stream is on the given table, its stream, its index, or the component's ledger.
    for policy in built.of_type("iam/rolePolicy:RolePolicy"):
        for statement in json.loads(policy.inputs["policy"])["Statement"]:
            resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            for resource in resources:
                if ":dynamodb:" in resource:
                    assert resource.startswith(TABLE_ARN) or "-ledger" in resource, (policy.name, resource)


def test_two_components_share_one_table_each_with_its_own_filter(build: Build) -> None:
    reminders = build(
        name="rem", mode="eventbridge", existing_table=GIVEN, alarms=False, dashboard=False, invokes=given()
    )
    totals = build(name="tot", mode="aggregate", existing_table=GIVEN, alarms=False, dashboard=False, invokes=given())
    (first,) = reminders.of_type("EventSourceMapping")
    (second,) = totals.of_type("EventSourceMapping")
    assert first.inputs["eventSourceArn"] == second.inputs["eventSourceArn"] == STREAM
    assert first.inputs["filterCriteria"] != second.inputs["filterCriteria"]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("billing_mode", "PROVISIONED"),
        ("read_capacity", 5),
        ("point_in_time_recovery", False),
        ("server_side_encryption", False),
        ("partition_key_type", "N"),
        ("sort_key_type", "B"),
    ],
)
def test_table_shaping_options_are_refused_beside_an_existing_table(option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"^{option}: only shapes a table the component creates, and existing_table"):
        ScheduledTableArgs(mode="eventbridge", existing_table=GIVEN, **{option: value})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (ExistingTable(name=TABLE, stream_arn=TABLE_ARN), "existing_table.stream_arn: .* is not a DynamoDB stream ARN"),
        (
            ExistingTable(name="other", stream_arn=STREAM),
            "existing_table: the stream ARN belongs to table 'appointments'",
        ),
        (ExistingTable(name="", stream_arn=STREAM), "existing_table.name: must not be empty"),
        ({"name": TABLE}, "existing_table: dict is not an ExistingTable"),
    ],
)
def test_a_wrong_existing_table_is_refused_with_the_fix(given: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScheduledTableArgs(mode="eventbridge", existing_table=given)


def test_stack_config_reads_an_existing_table_and_refuses_unknown_keys() -> None:
    config = DictConfig({"mode": "eventbridge", "existingTable": {"name": TABLE, "streamArn": STREAM}}, FakeConfig({}))
    assert args_from_config(config).existing_table == GIVEN
    wrong = DictConfig({"mode": "eventbridge", "existingTable": {"name": TABLE, "streamARN": STREAM}}, FakeConfig({}))
    with pytest.raises(ValueError, match=r"existingTable\.streamARN: unknown key; did you mean streamArn"):
        args_from_config(wrong)


GET_TABLE = "aws:dynamodb/getTable:getTable"


def described(**changes: Any) -> dict[str, Any]:
    """getTable's answer for TABLE (the provider's camelCase wire shape), with `changes`."""
    table = {
        "name": TABLE,
        "arn": TABLE_ARN,
        "hashKey": "PK",
        "rangeKey": "SK",
        "streamEnabled": True,
        "streamViewType": "NEW_AND_OLD_IMAGES",
        "streamArn": STREAM,
        "ttl": {"enabled": False, "attributeName": ""},
        "globalSecondaryIndexes": [],
    }
    return {**table, **changes}


def lookups(seen: list[str], **changes: Any) -> dict[str, Any]:
    def get_table(args: dict[str, Any]) -> dict[str, Any]:
        seen.append(args["name"])
        return described(**changes)

    return {GET_TABLE: get_table}


def test_a_table_given_by_name_is_looked_up_for_its_stream_and_used_as_given(build: Build) -> None:
    seen: list[str] = []
    built = build(mode="eventbridge", existing_table=ExistingTable(TABLE), invokes=lookups(seen), alarms=False)
    assert seen == [TABLE]
    (mapping,) = built.of_type("EventSourceMapping")
    assert mapping.inputs["eventSourceArn"] == STREAM
    assert built.outputs["table_arn"] == TABLE_ARN and built.outputs["stream_arn"] == STREAM
    assert "rem-table" not in [r.name for r in built.of_type("dynamodb/table:Table")]


@pytest.mark.parametrize(
    ("mode", "changes", "message"),
    [
        ("eventbridge", {"streamEnabled": False, "streamArn": ""}, "table 'appointments' has no stream; enable one"),
        (
            "eventbridge",
            {"streamViewType": "KEYS_ONLY"},
            "table 'appointments' has StreamViewType KEYS_ONLY; ScheduledTable needs NEW_AND_OLD_IMAGES",
        ),
        ("eventbridge", {"hashKey": "id"}, "has partition key 'id', not 'PK'; pass partition_key='id'"),
        ("eventbridge", {"rangeKey": ""}, "has sort key None, not 'SK'; pass sort_key=None"),
        ("ttl", {}, "does not expire items by 'dueAt'; enable TTL on 'dueAt'"),
        ("polling", {}, "has no due index; add global secondary index 'due' with partition key 'stShard' (N)"),
    ],
)
def test_a_looked_up_table_missing_what_the_mode_needs_fails_the_deploy_naming_it(
    build: Build, mode: str, changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(Exception, match=r"existing_table: .*" + message.replace("(", r"\(").replace(")", r"\)")):
        build(mode=mode, existing_table=ExistingTable(TABLE), invokes=lookups([], **changes), alarms=False)


def test_what_each_mode_needs_of_a_looked_up_table() -> None:
    index = {"name": "due", "hash_key": "stShard", "range_key": "stDue"}
    table: dict[str, Any] = {
        "name": TABLE,
        "stream_enabled": True,
        "stream_arn": STREAM,
        "stream_view_type": "NEW_AND_OLD_IMAGES",
        "hash_key": "PK",
        "range_key": "SK",
        "ttl": {"enabled": True, "attribute_name": "expiresAt"},
        "global_secondary_indexes": [index],
    }
    keys = {"partition_key": "PK", "sort_key": "SK"}
    for mode in ("eventbridge", "polling", "aggregate"):
        assert table_problems(table, mode=mode, time_attribute="dueAt", **keys) == []
    assert table_problems(table, mode="ttl", time_attribute="expiresAt", **keys) == []
    assert len(table_problems(table, mode="ttl", time_attribute="dueAt", **keys)) == 1
    keys_only = {**table, "global_secondary_indexes": [{**index, "projection_type": "KEYS_ONLY"}]}
    assert "projection ALL" in table_problems(keys_only, mode="polling", time_attribute="dueAt", **keys)[0]


# -- issue 24.3: a table given by stream ARN is looked up too, so a stream without both images fails the deploy --

IDENTITY = "aws:index/getCallerIdentity:getCallerIdentity"
ACCOUNT = "123456789012"


def identity(account: str = ACCOUNT) -> dict[str, Any]:
    """getCallerIdentity's answer: who deploys (the lookup is made only for a table in that account)."""
    return {"accountId": account, "arn": f"arn:aws:iam::{account}:user/ci", "id": account, "userId": "AIDA" + "0" * 17}


def given(mode: str = "eventbridge", seen: list[dict[str, Any]] | None = None, **changes: Any) -> dict[str, Any]:
    """The lookups a table given by stream ARN in the deployer's account makes, answered for TABLE as `mode` needs
    it (TTL on dueAt, the due index), with `changes`."""
    needs: dict[str, Any] = {}
    if mode == "ttl":
        needs["ttl"] = {"enabled": True, "attributeName": "dueAt"}
    if mode == "polling":
        needs["globalSecondaryIndexes"] = [
            {"name": "due", "hashKey": "stShard", "rangeKey": "stDue", "projectionType": "ALL"}
        ]

    def get_table(args: dict[str, Any]) -> dict[str, Any]:
        (seen if seen is not None else []).append(args)
        return described(**{**needs, **changes})

    return {IDENTITY: identity(), GET_TABLE: get_table}


VIEW_TYPE_FIX = (
    "ScheduledTable needs NEW_AND_OLD_IMAGES (a stream's view type cannot change: disable the stream, then enable it "
    "with NEW_AND_OLD_IMAGES)"
)


@pytest.mark.parametrize(
    ("mode", "view"),
    [
        ("eventbridge", "KEYS_ONLY"),
        ("eventbridge", "NEW_IMAGE"),
        ("eventbridge", "OLD_IMAGE"),
        ("ttl", "KEYS_ONLY"),
        ("polling", "NEW_IMAGE"),
        ("aggregate", "KEYS_ONLY"),
    ],
)
def test_a_table_given_by_stream_arn_without_both_images_fails_the_deploy_naming_the_setting(
    build: Build, mode: str, view: str
) -> None:
    # Its records lack the images the mapping's filters match on: none would reach the function, none be parked.
    with pytest.raises(ValueError) as caught:
        build(mode=mode, existing_table=GIVEN, invokes=given(mode, streamViewType=view), alarms=False)
    last = str(caught.value).splitlines()[-1]
    assert last.endswith(f"existing_table: table 'appointments' has StreamViewType {view}; {VIEW_TYPE_FIX}"), last


def test_the_table_a_stream_arn_names_is_looked_up_in_its_region_and_used_as_given(build: Build) -> None:
    seen: list[dict[str, Any]] = []
    built = build(mode="eventbridge", existing_table=GIVEN, invokes=given(seen=seen), alarms=False)
    assert seen == [{"name": TABLE, "region": "eu-west-1"}]
    (mapping,) = built.of_type("EventSourceMapping")
    assert mapping.inputs["eventSourceArn"] == STREAM
    assert built.outputs["table_arn"] == TABLE_ARN and built.outputs["table_name"] == TABLE


def test_a_stream_arn_that_is_not_the_tables_latest_fails_the_deploy(build: Build) -> None:
    # A disabled stream's records stay readable 24 hours; after that a mapping on it receives nothing.
    latest = f"{TABLE_ARN}/stream/2026-11-20T00:00:00.000"
    with pytest.raises(ValueError) as caught:
        build(mode="eventbridge", existing_table=GIVEN, invokes=given(streamArn=latest), alarms=False)
    assert (
        str(caught.value)
        .splitlines()[-1]
        .endswith(
            f"existing_table.stream_arn: {STREAM!r} is not the latest stream of table 'appointments' ({latest!r}): its "
            "records stop when it is disabled; pass the table's LatestStreamArn"
        )
    )


OTHER_ACCOUNT_STREAM = f"arn:aws:dynamodb:eu-west-1:210987654321:table/{TABLE}/stream/2026-11-01T00:00:00.000"


def keys_only_record() -> dict[str, Any]:
    """A real KEYS_ONLY stream record (moto), as Lambda's filters see it."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="eu-west-1")
        stream = ddb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "PK", "AttributeType": "S"},
                {"AttributeName": "SK", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
        )["TableDescription"]["LatestStreamArn"]
        ddb.put_item(TableName=TABLE, Item={"PK": {"S": "a"}, "SK": {"S": "b"}, "dueAt": {"S": "2030-01-01T00:00:00Z"}})
        streams = boto3.client("dynamodbstreams", region_name="eu-west-1")
        shard = streams.describe_stream(StreamArn=stream)["StreamDescription"]["Shards"][0]["ShardId"]
        iterator = streams.get_shard_iterator(StreamArn=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
        (record,) = streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
    plain: dict[str, Any] = json.loads(json.dumps(record, default=str))
    return plain


@pytest.mark.parametrize("mode", ["eventbridge", "ttl", "polling", "aggregate"])
def test_a_table_in_another_account_is_not_looked_up_and_its_keys_only_records_are_parked(
    build: Build, mode: str
) -> None:
    # The deployer cannot describe another account's table, so nothing is looked up (getTable is not answered here);
    # instead the mapping also passes every record of a stream without both images, which the handler parks.
    from st_core.stream import record_problem

    from tests.support.patterns import passes

    other = ExistingTable(name=TABLE, stream_arn=OTHER_ACCOUNT_STREAM)
    built = build(mode=mode, existing_table=other, invokes={IDENTITY: identity()}, alarms=False, dashboard=False)
    (mapping,) = [m for m in built.of_type("EventSourceMapping") if m.inputs["eventSourceArn"] == OTHER_ACCOUNT_STREAM]
    patterns = [f["pattern"] for f in mapping.inputs["filterCriteria"]["filters"]]
    record = keys_only_record()
    assert passes(patterns, record)
    assert record_problem(record).startswith("the table's stream view type is KEYS_ONLY; ScheduledTable needs")
    # AND the functions name the table by its ARN: DynamoDB looks a plain name up in the caller's own account
    assert built.handler_config()["table"] == OTHER_ACCOUNT_STREAM.split("/stream/")[0]
    own = build(mode=mode, existing_table=ExistingTable(name=TABLE, stream_arn=STREAM), invokes=given(mode))
    assert own.handler_config()["table"] == TABLE


# -- issue 24.4: a name and a stream ARN of two tables are refused when they are Outputs too -------------------------


@pytest.mark.parametrize(
    ("name", "stream_arn"),
    [
        ("other", STREAM),
        (TABLE, "arn:aws:dynamodb:eu-west-1:123456789012:table/other/stream/2026-11-01T00:00:00.000"),
        ("", STREAM),
        (TABLE, TABLE_ARN),
    ],
)
@pytest.mark.parametrize("outputs", ["both", "name", "stream_arn"])
def test_a_name_and_stream_arn_given_as_outputs_are_checked_as_plain_strings_are(
    build: Build, name: str, stream_arn: str, outputs: str
) -> None:
    import pulumi

    with pytest.raises(ValueError) as plain:
        ScheduledTableArgs(mode="eventbridge", existing_table=ExistingTable(name, stream_arn))
    given_name = pulumi.Output.from_input(name) if outputs in ("both", "name") else name
    given_stream = pulumi.Output.from_input(stream_arn) if outputs in ("both", "stream_arn") else stream_arn
    with pytest.raises(ValueError) as resolved:
        build(existing_table=ExistingTable(given_name, given_stream), invokes=given(), alarms=False)
    assert str(resolved.value).splitlines()[-1].endswith(str(plain.value)), str(resolved.value)


# -- issue 37.3: another account's table; what is the deploying account's comes from it --------------------------


def test_with_another_accounts_table_the_deploying_accounts_identities_are_the_deployers(build: Build) -> None:
    # GIVEN a stack deploying in account 123456789012 onto a table of account 210987654321, in precise ttl mode (a
    # Scheduler role, and a function sending email), with a created alarm topic
    from components import EmailTarget

    other = ExistingTable(name=TABLE, stream_arn=OTHER_ACCOUNT_STREAM)
    built = build(
        mode="ttl",
        precise=True,
        time_attribute="expiresAt",
        existing_table=other,
        invokes={IDENTITY: identity()},
        target=EmailTarget(sender="reminders@example.com"),
        create_alarm_topic=True,
    )
    documents = {r.name: json.loads(r.inputs["policy"]) for r in built.of_type(":RolePolicy")}
    # THEN Scheduler may assume its role on behalf of the deploying account (the schedules are that account's)
    trust = json.loads(built.one("rem-scheduler-exec-role").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT}}
    # AND SES is allowed on the deploying account's identities
    for role in ("rem-executor-policy",):
        (send,) = [s for s in documents[role]["Statement"] if s["Action"] == ["ses:SendEmail"]]
        assert send["Resource"] == [
            f"arn:aws:ses:eu-west-1:{ACCOUNT}:identity/reminders@example.com",
            f"arn:aws:ses:eu-west-1:{ACCOUNT}:identity/example.com",
        ]
    # AND the alarm key is administered by, and used by CloudWatch for, the deploying account
    (key,) = built.of_type(":Key")
    admin, cloudwatch = json.loads(key.inputs["policy"])["Statement"]
    assert admin["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}
    assert cloudwatch["Condition"] == {"StringEquals": {"aws:SourceAccount": ACCOUNT}}
    # AND the table and its stream stay the other account's
    assert built.outputs["table_arn"] == f"arn:aws:dynamodb:eu-west-1:210987654321:table/{TABLE}"
    reads = [s for s in documents["rem-executor-policy"]["Statement"] if "dynamodb:GetRecords" in s["Action"]]
    assert reads[0]["Resource"] == [f"arn:aws:dynamodb:eu-west-1:210987654321:table/{TABLE}/stream/*"]


# -- issue 37.9: destroy with an existing table ---------------------------------------------------------------------


@pytest.mark.parametrize("protection", [True, False])
def test_with_an_existing_table_the_ledger_follows_deletion_protection_and_the_table_is_not_the_stacks(
    build: Build, protection: bool
) -> None:
    # GIVEN an existing table of the deploying account, and deletion_protection set either way
    built = build(
        mode="eventbridge", existing_table=ExistingTable(TABLE), invokes=lookups([]), deletion_protection=protection,
        alarms=False,
    )  # fmt: skip
    # THEN the one table the stack owns is the ledger, protected as asked: with False, `pulumi destroy` removes it
    (ledger,) = built.of_type("aws:dynamodb/table:Table")
    assert ledger.name == "rem-ledger"
    assert ledger.inputs["deletionProtectionEnabled"] is protection


# -- issue 37.2: a looked-up table's customer-managed key is the kms_key_arn given -----------------------------------

TABLE_KEY = "arn:aws:kms:eu-west-1:123456789012:key/1111aaaa-11aa-11aa-11aa-111111aaaaaa"
GET_KEY = "aws:kms/getKey:getKey"


def keyed_lookups(manager: str) -> dict[str, Any]:
    """A table encrypted with TABLE_KEY, which KMS says `manager` ("CUSTOMER" or "AWS") manages."""
    encryption = {"serverSideEncryption": {"enabled": True, "kmsKeyArn": TABLE_KEY}}
    key = {"arn": TABLE_KEY, "id": TABLE_KEY, "keyId": TABLE_KEY.rsplit("/", 1)[-1], "keyManager": manager}
    return {**lookups([], **encryption), GET_KEY: key}


@pytest.mark.parametrize("given", ["by name", "by stream ARN"])
def test_a_looked_up_table_with_a_customer_key_not_given_fails_the_deploy_naming_kms_key_arn(
    build: Build, given: str
) -> None:
    table = ExistingTable(TABLE) if given == "by name" else GIVEN
    invokes = {**keyed_lookups("CUSTOMER"), IDENTITY: identity()}
    with pytest.raises(ValueError) as caught:
        build(mode="eventbridge", existing_table=table, invokes=invokes, alarms=False)
    assert (
        str(caught.value)
        .splitlines()[-1]
        .endswith(
            f"existing_table: table 'appointments' is encrypted with the customer-managed KMS key {TABLE_KEY!r}, which "
            f"every role that reads or writes it must be granted; pass kms_key_arn={TABLE_KEY!r}"
        )
    )


def test_a_looked_up_table_with_a_customer_key_and_another_kms_key_arn_fails_naming_its_key(build: Build) -> None:
    other = TABLE_KEY.replace("1111aaaa", "3333cccc")
    with pytest.raises(ValueError) as caught:
        build(
            mode="eventbridge", existing_table=ExistingTable(TABLE), invokes=keyed_lookups("CUSTOMER"),
            kms_key_arn=other, alarms=False,
        )  # fmt: skip
    assert (
        str(caught.value)
        .splitlines()[-1]
        .endswith(
            f"kms_key_arn: {other!r} is not the key of table 'appointments', {TABLE_KEY!r}; "
            f"pass kms_key_arn={TABLE_KEY!r}"
        )
    )


def test_a_looked_up_table_with_its_key_given_grants_the_roles_that_key(build: Build) -> None:
    built = build(
        mode="eventbridge", existing_table=ExistingTable(TABLE), invokes=keyed_lookups("CUSTOMER"),
        kms_key_arn=TABLE_KEY, alarms=False,
    )  # fmt: skip
    document = json.loads(built.one("rem-scheduler-policy").inputs["policy"])
    assert any(s["Resource"] == [TABLE_KEY] and "kms:Decrypt" in s["Action"] for s in document["Statement"])


def test_a_looked_up_table_with_the_aws_managed_key_needs_no_kms_key_arn(build: Build) -> None:
    # The aws/dynamodb key's own policy lets the account's DynamoDB callers use it: no grant, no option
    built = build(mode="eventbridge", existing_table=ExistingTable(TABLE), invokes=keyed_lookups("AWS"), alarms=False)
    document = json.loads(built.one("rem-scheduler-policy").inputs["policy"])
    assert not any(a.startswith("kms:") for s in document["Statement"] for a in s["Action"])


def test_fabricated_tables_with_a_key_are_checked_as_customer_keys() -> None:
    from components import ScheduledTable
    from components.testing import fabricated_table, run_with_mocks

    table = fabricated_table("orders", partition_key="PK", sort_key="SK", kms_key_arn=TABLE_KEY)
    args = ScheduledTableArgs(mode="eventbridge", existing_table=ExistingTable("orders"), alarms=False)
    with pytest.raises(ValueError, match="pass kms_key_arn="):
        run_with_mocks(lambda: ScheduledTable("o", args), invokes={GET_TABLE: table})
