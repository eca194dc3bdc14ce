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
    built = build(mode=mode, existing_table=GIVEN, alarms=False, dashboard=False)
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
    reminders = build(name="rem", mode="eventbridge", existing_table=GIVEN, alarms=False, dashboard=False)
    totals = build(name="tot", mode="aggregate", existing_table=GIVEN, alarms=False, dashboard=False)
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
        ("deletion_protection", False),
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
            "table 'appointments' streams KEYS_ONLY; ScheduledTable needs",
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
