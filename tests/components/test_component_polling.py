"""ScheduledTable in `polling` mode, under Pulumi mocks: one behaviour per test."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from components.filters import filter_patterns
from components.modes.polling import polling_filters
from components.polling import processor_event_age_seconds

from .conftest import Built

Build = Callable[..., Built]


def polling(build: Build, **kwargs: Any) -> Built:
    return build(mode="polling", **kwargs)


def test_creates_the_polling_resources(build: Build) -> None:
    built = polling(build, alarms=False, dashboard=False)
    names = sorted(n for n, r in built.mocks.by_name.items() if r.type != "pulumi:pulumi:Stack")
    assert names == sorted(
        ["rem", "rem-table", "rem-ledger", "rem-stream-dlq", "rem-poison", "rem-due", "rem-target-dlq"]
        + [f"rem-{role}{part}" for role in ("processor", "assigner") for part in ("", "-logs", "-role", "-policy")]
        + ["rem-assigner-mapping", "rem-tick", "rem-tick-permission", "rem-tick-target"]
        + ["rem-processor-invoke-config"]
    )


def test_the_table_has_the_sparse_sharded_due_index(build: Build) -> None:
    table = polling(build).one("rem-table").inputs
    [index] = table["globalSecondaryIndexes"]
    assert index["name"] == "due" and index["projectionType"] == "ALL"
    assert index["keySchemas"] == [
        {"attributeName": "stShard", "keyType": "HASH"},
        {"attributeName": "stDue", "keyType": "RANGE"},
    ]
    assert {"name": "stShard", "type": "N"} in table["attributes"] and {"name": "stDue", "type": "N"} in table[
        "attributes"
    ]
    assert "ttl" not in table


def test_other_modes_have_no_index(build: Build) -> None:
    assert "globalSecondaryIndexes" not in build().one("rem-table").inputs


@pytest.mark.parametrize(("minutes", "expression"), [(1, "rate(1 minute)"), (5, "rate(5 minutes)")])
def test_a_rule_ticks_every_interval(build: Build, minutes: int, expression: str) -> None:
    assert polling(build, poll_interval_minutes=minutes).one("rem-tick").inputs["scheduleExpression"] == expression


@pytest.mark.parametrize(("minutes", "seconds"), [(1, 60), (360, 21600), (361, 21600), (1440, 21600)])
def test_a_tick_waits_at_most_one_interval_and_never_over_lambdas_six_hours(minutes: int, seconds: int) -> None:
    assert processor_event_age_seconds(minutes) == seconds


@pytest.mark.parametrize("minutes", [1, 1440])
def test_the_processor_invoke_config_uses_that_age(build: Build, minutes: int) -> None:
    config = polling(build, poll_interval_minutes=minutes).one("rem-processor-invoke-config").inputs
    assert config["maximumEventAgeInSeconds"] == processor_event_age_seconds(minutes)
    assert config["maximumRetryAttempts"] == 0


def test_the_rule_targets_the_processor_which_lets_only_that_rule_invoke_it(build: Build) -> None:
    built = polling(build)
    processor_arn, rule = built.one("rem-processor").outputs["arn"], built.one("rem-tick").outputs
    assert built.one("rem-tick-target").inputs["arn"] == processor_arn
    assert built.one("rem-tick-target").inputs["rule"] == rule["name"]
    permission = built.one("rem-tick-permission").inputs
    assert (permission["principal"], permission["sourceArn"], permission["action"]) == (
        "events.amazonaws.com",
        rule["arn"],
        "lambda:InvokeFunction",
    )


def test_the_processor_has_no_stream_mapping_and_the_assigner_does(build: Build) -> None:
    built = polling(build)
    [mapping] = built.of_type(":EventSourceMapping")
    assert mapping.inputs["functionName"] == built.one("rem-assigner").outputs["arn"]
    assert built.one("rem-processor").inputs["handler"] == "polling.handler"
    assert built.one("rem-assigner").inputs["handler"] == "polling_assign.handler"


def test_the_assigner_sees_only_users_writes(build: Build) -> None:
    mapping = polling(build).one("rem-assigner-mapping").inputs
    patterns = [f["pattern"] for f in mapping["filterCriteria"]["filters"]]
    assert patterns == filter_patterns(polling_filters())
    assert json.loads(patterns[0])["dynamodb"]["NewImage"]["stStatus"] == {"S": [{"exists": False}]}


def test_the_processor_may_query_the_due_index_use_this_table_and_hold_shards_in_its_ledger(build: Build) -> None:
    built = polling(build)
    table_arn = built.one("rem-table").outputs["arn"]
    found = built.statements("rem-processor-policy")
    assert {"Effect": "Allow", "Action": ["dynamodb:Query"], "Resource": [f"{table_arn}/index/due"]} in found
    # a page's items read again (consistent BatchGetItem), each completed or backed off
    assert {
        "Effect": "Allow",
        "Action": ["dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
        "Resource": [table_arn],
    } in found
    # a shard held with a lease item in the ledger, put and deleted: nothing else there
    ledger_arn = built.one("rem-ledger").outputs["arn"]
    assert [s for s in found if s["Resource"] == [ledger_arn]] == [
        {
            "Effect": "Allow",
            "Action": ["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem"],
            "Resource": [ledger_arn],
        }
    ]
    assert not any(a.startswith("dynamodb:GetRecords") for s in found for a in s["Action"])
    # dead letters to the target DLQ, an item it cannot handle to the poison queue
    assert {
        "Effect": "Allow",
        "Action": ["sqs:SendMessage"],
        "Resource": sorted([built.one("rem-target-dlq").outputs["arn"], built.one("rem-poison").outputs["arn"]]),
    } in found


def test_keys_of_the_table_and_of_the_target_reach_the_roles_that_use_them(build: Build) -> None:
    from components import TopicTarget

    table_key, target_key = "arn:aws:kms:eu-west-1:1:key/table", "arn:aws:kms:eu-west-1:1:key/target"
    built = polling(
        build, kms_key_arn=table_key, target=TopicTarget("arn:aws:sns:eu-west-1:123456789012:t", target_key)
    )
    use_table_key = {
        "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
        "Resource": [table_key],
        "Condition": {"StringEquals": {"kms:ViaService": "dynamodb.eu-west-1.amazonaws.com"}},
    }
    use_target_key = {
        "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Resource": [target_key],
        "Condition": {"StringEquals": {"kms:ViaService": "sns.eu-west-1.amazonaws.com"}},
    }
    processor, assigner = built.statements("rem-processor-policy"), built.statements("rem-assigner-policy")
    assert use_table_key in processor and use_target_key in processor
    assert use_table_key in assigner and use_target_key not in assigner  # the assigner never sends to the target


def test_on_done_delete_adds_delete_item(build: Build) -> None:
    built = polling(build, on_done="delete")
    table_arn = built.one("rem-table").outputs["arn"]
    found = built.statements("rem-processor-policy")
    assert {
        "Effect": "Allow",
        "Action": ["dynamodb:BatchGetItem", "dynamodb:DeleteItem", "dynamodb:UpdateItem"],
        "Resource": [table_arn],
    } in found


def test_the_assigner_may_only_update_items_mark_records_and_read_the_stream(build: Build) -> None:
    built = polling(build)
    table_arn, ledger_arn = built.one("rem-table").outputs["arn"], built.one("rem-ledger").outputs["arn"]
    found = built.statements("rem-assigner-policy")
    item_actions = [s for s in found if s["Resource"] in ([table_arn], [ledger_arn])]
    assert item_actions == [
        {"Effect": "Allow", "Action": ["dynamodb:UpdateItem"], "Resource": [table_arn]},
        {"Effect": "Allow", "Action": ["dynamodb:PutItem"], "Resource": [ledger_arn]},
    ]
    assert any(s["Resource"] == [f"{table_arn}/stream/*"] for s in found)
    assert not any("dynamodb:Query" in s["Action"] for s in found)


def test_handler_config_carries_the_polling_section(build: Build) -> None:
    built = polling(build, shards=16, default_delay_seconds=30, max_attempts=4, retry_backoff_seconds=10)
    config = built.handler_config()
    assert config["polling"] == {
        "shards": 16,
        "shardGroups": 1,
        "leaseSeconds": 90,
        "maxAttempts": 4,
        "backoffSeconds": 10,
        "onDone": "mark",
        "deadLetterUrl": built.one("rem-target-dlq").outputs["url"],
        "delayAttribute": "delaySeconds",
        "defaultDelaySeconds": 30,
        "budgetMarginSeconds": 10,
        "ledgerTable": built.one("rem-ledger").outputs["name"],
        "windowSeconds": 172800,
    }
    processor_config = json.loads(
        built.one("rem-processor").inputs["environment"]["variables"]["SCHEDULED_TABLE_CONFIG"]
    )
    assert processor_config == config


def test_only_a_fanned_out_processor_may_invoke_itself(build: Build) -> None:
    """shard_groups > 1: the processor invokes itself, once per group; its role may invoke that function only, by
    a policy of its own (in the main one the function's ARN would be a cycle)."""
    assert "rem-processor-policy-fanout" not in polling(build).mocks.by_name
    built = polling(build, shards=16, shard_groups=4)
    assert built.handler_config()["polling"]["shardGroups"] == 4
    assert built.statements("rem-processor-policy-fanout") == [
        {
            "Effect": "Allow",
            "Action": ["lambda:InvokeFunction"],
            "Resource": [built.one("rem-processor").outputs["arn"]],
        }
    ]
    assert not any("lambda:InvokeFunction" in s["Action"] for s in built.statements("rem-processor-policy"))


def test_polling_outputs_name_the_processor_and_rule(build: Build) -> None:
    built = polling(build)
    assert built.outputs["processor_function_name"] == built.one("rem-processor").outputs["name"]
    assert built.outputs["tick_rule_name"] == built.one("rem-tick").outputs["name"]


def test_the_dashboard_shows_every_metric_the_processor_emits(build: Build) -> None:
    """Read from the processor's own `log.metrics` call, so a metric added there and left off the dashboard fails
    here (the `Unsettled` count of items whose completion failed was such a one)."""
    import ast
    from pathlib import Path

    package = Path(__file__).parents[2] / "handlers" / "polling"
    [call] = [
        node
        for path in sorted(package.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "metrics"
    ]
    emitted = {keyword.arg for keyword in call.keywords if keyword.arg and keyword.arg[0].isupper()}
    assert {"Dispatched", "Unsettled", "Backlog"} <= emitted
    body = json.loads(polling(build).one("rem-dashboard").inputs["dashboardBody"])
    shown = {metric[1] for widget in body["widgets"] for metric in widget["properties"]["metrics"]}
    assert emitted <= shown
