"""An event bus encrypted with a customer-managed key, in-process: EventBridge uses the key as itself, so the key
policy decides (`events.amazonaws.com`, kms:GenerateDataKey and kms:Decrypt, conditions on the bus), never the
sender's policy. The end-to-end run is tests/e2e/test_kms_program.py."""

from __future__ import annotations

import json
from typing import Any

from localcloud.iam import bus_key_refusal

REGION, ACCOUNT = "eu-west-1", "123456789012"
BUS = f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/jobs"
KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
ROOT = {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "kms:*", "Resource": "*"}


def events_statement(actions: list[str], condition: dict[str, Any] | None = None) -> dict[str, Any]:
    statement: dict[str, Any] = {
        "Effect": "Allow",
        "Principal": {"Service": "events.amazonaws.com"},
        "Action": actions,
        "Resource": "*",
    }
    return {**statement, "Condition": condition} if condition else statement


def policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def test_a_key_policy_allowing_eventbridge_for_this_bus_lets_it_use_the_key() -> None:
    allowed = events_statement(
        ["kms:GenerateDataKey", "kms:Decrypt"],
        {"StringEquals": {"aws:SourceArn": BUS, "kms:EncryptionContext:aws:events:event-bus:arn": BUS}},
    )
    assert bus_key_refusal(BUS, KEY, policy(ROOT, allowed), REGION) == ""
    assert bus_key_refusal(BUS, KEY, policy(ROOT, events_statement(["kms:*"])), REGION) == ""


def test_the_accounts_own_default_policy_does_not_name_eventbridge_and_is_refused() -> None:
    refusal = bus_key_refusal(BUS, KEY, policy(ROOT), REGION)
    assert refusal.startswith(f"the key policy of {KEY} does not allow events.amazonaws.com to perform kms:")
    assert BUS in refusal


def test_each_use_is_needed_and_a_condition_on_another_bus_refuses() -> None:
    only_generate = policy(ROOT, events_statement(["kms:GenerateDataKey"]))
    assert "kms:Decrypt" in bus_key_refusal(BUS, KEY, only_generate, REGION)
    other_bus = events_statement(["kms:GenerateDataKey", "kms:Decrypt"], {"StringEquals": {"aws:SourceArn": BUS + "x"}})
    assert "kms:GenerateDataKey" in bus_key_refusal(BUS, KEY, policy(ROOT, other_bus), REGION)
    other_account = events_statement(
        ["kms:GenerateDataKey", "kms:Decrypt"], {"StringEquals": {"aws:SourceAccount": "210987654321"}}
    )
    assert bus_key_refusal(BUS, KEY, policy(ROOT, other_account), REGION) != ""


def test_a_deny_for_eventbridge_wins() -> None:
    deny = {**events_statement(["kms:Decrypt"]), "Effect": "Deny"}
    assert "kms:Decrypt" in bus_key_refusal(BUS, KEY, policy(ROOT, events_statement(["kms:*"]), deny), REGION)
