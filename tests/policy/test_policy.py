"""Every mode, built under mocks, against every written rule; and every rule shown to fail on a broken resource."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from components import EmailTarget
from localcloud.mocks import Registration
from tests.components.conftest import Built

from .rules import RULES, Rule, evaluate

MODES: dict[str, dict[str, Any]] = {
    "eventbridge": {"mode": "eventbridge"},
    # Schedules in the minute before, into a release queue consumed by a second function (its failure path: the
    # queue's redrive policy to the target DLQ).
    "eventbridge-second": {"mode": "eventbridge", "precision": "second"},
    "ttl": {"mode": "ttl"},
    "ttl-precise": {"mode": "ttl", "precise": True},
    "polling": {"mode": "polling"},
    "aggregate": {"mode": "aggregate"},
    # An email target (display-name sender), a customer-managed key on the table, an alarm topic with its key.
    "email-kms": {
        "mode": "eventbridge",
        "target": EmailTarget("Reminders <reminders@example.com>"),
        "kms_key_arn": "arn:aws:kms:eu-west-1:123456789012:key/table",
        "create_alarm_topic": True,
    },
}
KEY_RULE = "KMS key: rotated; kms:* only for the account root; services for this account only"


def _absent_by_design(rule: str, mode: str) -> bool:
    """Rules about resources a mode does not create: Scheduler has no part in aggregate mode, and only a created
    alarm topic has a key."""
    return ("Scheduler" in rule and mode == "aggregate") or (
        rule == KEY_RULE and "create_alarm_topic" not in MODES[mode]
    )


@pytest.mark.parametrize("mode", list(MODES))
def test_every_resource_of_every_mode_passes_every_rule(
    build: Callable[..., Built], mode: str, report: dict[str, Any]
) -> None:
    built = build(**MODES[mode])
    results = evaluate(built.mocks.registrations())
    report[mode] = results
    problems = [p for _, found in results.values() for p in found]
    assert problems == []
    # Every kind of resource a rule is about exists in the mode, so no rule passes vacuously.
    assert all(passed > 0 for name, (passed, _) in results.items() if not _absent_by_design(name, mode))


def _set(path: list[str], value: Any) -> Callable[[Registration], None]:
    def change(r: Registration) -> None:
        node = r.inputs
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return change


def _policy(edit: Callable[[dict[str, Any]], None]) -> Callable[[Registration], None]:
    def change(r: Registration) -> None:
        document = json.loads(r.inputs["policy"])
        edit(document)
        r.inputs["policy"] = json.dumps(document)

    return change


def _add_statement(statement: dict[str, Any]) -> Callable[[Registration], None]:
    return _policy(lambda d: d["Statement"].append(statement))


BREAKAGES: dict[str, tuple[str, Callable[[Registration], None]]] = {
    "table: encrypted at rest": ("rem-table", _set(["serverSideEncryption", "enabled"], False)),
    "table: point-in-time recovery": ("rem-table", _set(["pointInTimeRecovery", "enabled"], False)),
    "queue: encrypted at rest": ("rem-poison", _set(["sqsManagedSseEnabled"], False)),
    "dead-letter queue: 14-day retention, no DLQ of its own": ("rem-poison", _set(["messageRetentionSeconds"], 60)),
    "function: own log group with retention": ("rem-scheduler", _set(["loggingConfig", "logGroup"], "elsewhere")),
    "function: finite timeout": ("rem-scheduler", _set(["timeout"], 0)),
    "function: a dead-letter or on-failure path": (
        "rem-scheduler-mapping",
        _set(["destinationConfig", "onFailure", "destinationArn"], None),
    ),
    "mapping: on-failure, finite retries and age, bisect, partial batches": (
        "rem-scheduler-mapping",
        _set(["maximumRetryAttempts"], -1),
    ),
    "function: a description": ("rem-scheduler", _set(["description"], "")),
    "IAM: role has a description": ("rem-scheduler-exec-role", _set(["description"], None)),
    "IAM: no '*' action": (
        "rem-scheduler-policy",
        _add_statement({"Effect": "Allow", "Action": "s3:*", "Resource": "x"}),
    ),
    "IAM: '*' resource only where AWS has nothing narrower": (
        "rem-scheduler-policy",
        _add_statement({"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": "*"}),
    ),
    "IAM: Scheduler trust limited by aws:SourceAccount": (
        "rem-scheduler-exec-role",
        lambda r: r.inputs.update(
            assumeRolePolicy=json.dumps(
                {"Statement": [{"Effect": "Allow", "Principal": {"Service": "scheduler.amazonaws.com"}}]}
            )
        ),
    ),
    "IAM: iam:PassRole only the Scheduler role, only to Scheduler": (
        "rem-scheduler-policy",
        _add_statement({"Effect": "Allow", "Action": ["iam:PassRole"], "Resource": ["arn:aws:iam::1:role/admin"]}),
    ),
    KEY_RULE: ("rem-alarms-key", _policy(lambda d: d["Statement"][1].update(Action="kms:*"))),
    "IAM: ses:SendEmail only from the sender's address": (
        "rem-scheduler-exec-policy",
        _add_statement({"Effect": "Allow", "Action": ["ses:SendEmail"], "Resource": ["arn:aws:ses:r:1:identity/x.y"]}),
    ),
}


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_each_rule_fails_a_deliberately_broken_resource(build: Callable[..., Built], rule: Rule) -> None:
    name, change = BREAKAGES[rule.name]
    built = build(create_alarm_topic=True)  # (so that there is a key to break)
    registrations = copy.deepcopy(built.mocks.registrations())
    change(next(r for r in registrations if r.name == name))
    _, problems = evaluate(registrations)[rule.name]
    assert problems, f"{rule.name} did not notice {name} being broken"
