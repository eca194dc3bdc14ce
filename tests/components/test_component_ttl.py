"""ScheduledTable in `ttl` mode, under Pulumi mocks: one behaviour per test."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from components.filters import filter_patterns
from components.modes.ttl import ttl_filters

from .conftest import Built

Build = Callable[..., Built]


def ttl(build: Build, **kwargs: Any) -> Built:
    return build(mode="ttl", **kwargs)


def test_creates_the_ttl_resources_and_no_scheduler_without_precise(build: Build) -> None:
    built = ttl(build, alarms=False, dashboard=False)
    names = sorted(n for n, r in built.mocks.by_name.items() if r.type != "pulumi:pulumi:Stack")
    assert names == sorted(
        [
            "rem",
            "rem-table",
            "rem-ledger",
            "rem-stream-dlq",
            "rem-poison",
            "rem-due",
            "rem-executor-logs",
            "rem-executor-role",
            "rem-executor-policy",
            "rem-executor",
            "rem-executor-mapping",
        ]
    )


def test_the_table_expires_items_on_the_time_attribute_and_streams_old_images(build: Build) -> None:
    table = ttl(build, time_attribute="expiresAt").one("rem-table").inputs
    assert table["ttl"] == {"attributeName": "expiresAt", "enabled": True}
    assert table["streamEnabled"] is True and table["streamViewType"] == "NEW_AND_OLD_IMAGES"


def test_the_eventbridge_table_has_no_ttl(build: Build) -> None:
    assert "ttl" not in build().one("rem-table").inputs


def test_the_mapping_lets_through_only_ttl_deletions(build: Build) -> None:
    mapping = ttl(build).one("rem-executor-mapping").inputs
    [pattern] = [json.loads(f["pattern"]) for f in mapping["filterCriteria"]["filters"]]
    assert pattern == {
        "eventName": ["REMOVE"],
        "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]},
    }
    assert mapping["functionResponseTypes"] == ["ReportBatchItemFailures"]


def test_precise_mapping_also_sees_changes_of_items_with_a_due_time(build: Build) -> None:
    mapping = ttl(build, precise=True).one("rem-executor-mapping").inputs
    assert [f["pattern"] for f in mapping["filterCriteria"]["filters"]] == filter_patterns(
        ttl_filters("dueAt", precise=True)
    )


def test_the_ledger_has_its_own_ttl_and_no_stream(build: Build) -> None:
    ledger = ttl(build).one("rem-ledger").inputs
    assert ledger["hashKey"] == "id" and ledger["ttl"] == {"attributeName": "expiresAt", "enabled": True}
    assert not ledger.get("streamEnabled")
    assert ledger["serverSideEncryption"]["enabled"] is True


def test_the_executor_may_use_the_ledger_and_write_back_to_its_own_table_only(build: Build) -> None:
    built = ttl(build)
    found = built.statements("rem-executor-policy")
    ledger_arn, table_arn = built.one("rem-ledger").outputs["arn"], built.one("rem-table").outputs["arn"]
    assert {
        "Effect": "Allow",
        "Action": sorted(["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]),
        "Resource": [ledger_arn],
    } in found
    assert {"Effect": "Allow", "Action": ["dynamodb:PutItem"], "Resource": [table_arn]} in found
    assert not any(s["Action"] == "*" or "*" in s["Action"] for s in found)


def test_handler_config_carries_the_ttl_section(build: Build) -> None:
    built = ttl(build, repeat_attribute="every", idempotency_window_seconds=90000, lambda_timeout_seconds=30)
    config = built.handler_config()
    assert config["mode"] == "ttl" and "scheduler" not in config
    assert config["ttl"] == {
        "ledgerTable": built.one("rem-ledger").outputs["name"],
        "leaseSeconds": 60,
        "windowSeconds": 90000,
        "repeatAttribute": "every",
        "repeatUntilAttribute": "repeatUntil",
        "occurrenceAttribute": "occurrence",
        "precise": False,
    }
    assert built.one("rem-executor").inputs["handler"] == "ttl.handler"


def test_precise_adds_a_schedule_group_whose_role_may_only_update_this_tables_items(build: Build) -> None:
    built = ttl(build, precise=True)
    table_arn = built.one("rem-table").outputs["arn"]
    fire = built.statements("rem-scheduler-exec-policy")
    assert fire[0] == {"Effect": "Allow", "Action": ["dynamodb:UpdateItem"], "Resource": [table_arn]}
    assert fire[1]["Action"] == ["sqs:SendMessage"]
    assert built.handler_config()["scheduler"]["group"] == built.one("rem-schedules").outputs["name"]
    assert built.handler_config()["ttl"]["precise"] is True


def test_a_table_key_is_usable_by_the_executor_and_by_scheduler_which_fires_items(build: Build) -> None:
    key = "arn:aws:kms:eu-west-1:123456789012:key/abc"
    built = ttl(build, precise=True, kms_key_arn=key)
    use_key = {
        "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
        "Resource": [key],
        "Condition": {"StringEquals": {"kms:ViaService": "dynamodb.eu-west-1.amazonaws.com"}},
    }
    assert use_key in built.statements("rem-executor-policy")
    assert built.statements("rem-scheduler-exec-policy")[:2] == [
        {"Effect": "Allow", "Action": ["dynamodb:UpdateItem"], "Resource": [built.one("rem-table").outputs["arn"]]},
        use_key,
    ]


def test_a_target_key_is_not_scheduler_s_business_in_precise_mode(build: Build) -> None:
    from components import QueueTarget

    target = QueueTarget("arn:aws:sqs:eu-west-1:123456789012:q", kms_key_arn="arn:aws:kms:eu-west-1:1:key/t")
    built = ttl(build, precise=True, target=target)
    use_key = {
        "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Resource": [target.kms_key_arn],
        "Condition": {"StringEquals": {"kms:ViaService": "sqs.eu-west-1.amazonaws.com"}},
    }
    assert use_key in built.statements("rem-executor-policy")  # the executor sends to the target
    assert use_key not in built.statements("rem-scheduler-exec-policy")  # Scheduler only fires items


def test_precise_executor_may_manage_its_schedules_fire_and_delete_due_items(build: Build) -> None:
    built = ttl(build, precise=True)
    found = built.statements("rem-executor-policy")
    table_arn = built.one("rem-table").outputs["arn"]
    # GetItem: the item's due time, read before its schedule is made or deleted (a replayed old record must not undo
    # a newer one's schedule).
    actions = ["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]
    assert {"Effect": "Allow", "Action": actions, "Resource": [table_arn]} in found
    assert any("scheduler:CreateSchedule" in s["Action"] for s in found)


def test_ttl_outputs_include_the_ledger(build: Build) -> None:
    built = ttl(build)
    assert built.outputs["ledger_table_name"] == built.one("rem-ledger").outputs["name"]
    assert "schedule_group_name" not in built.outputs


@pytest.mark.parametrize("target_kind", ["email"])
def test_an_email_target_is_rendered_by_the_executor(build: Build, target_kind: str) -> None:
    from components import EmailTarget

    built = ttl(build, target=EmailTarget(sender="offers@example.com", subject="Offer {PK} expired", body="Bye"))
    assert built.handler_config()["target"]["kind"] == target_kind
    assert any("ses:SendEmail" in s["Action"] for s in built.statements("rem-executor-policy"))
