"""The checks check: what an event source mapping does with its function's role (reads the stream or the queue, and
sends what fails for good to the on-failure destination) is checked against the role the component renders
(`enforce.check_mapping`, run for every batch handed to an entry point), and taking any one of those grants out of
the role makes the check report the refusal, naming the action. Each mapping the component makes: the four stream
consumers and the releaser's queue.

Before: check_mapping said it checked the on-failure send and did not; removing that grant failed one unrelated
test only."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ministack.core.iam_evaluator import parse_policy_document

from tests.conftest import REGION
from tests.iam import enforce
from tests.iam.roles import ACCOUNT, Options, Role, rendered

# (the option set, the function whose mapping it is, what the mapping reads)
MAPPINGS = {
    "eventbridge": (Options(mode="eventbridge", kind="sqs"), "scheduler", "stream"),
    "precise-ttl": (Options(mode="ttl", kind="sqs", precise=True), "executor", "stream"),
    "polling": (Options(mode="polling", kind="sqs"), "assigner", "stream"),
    "aggregate": (Options(mode="aggregate", kind="none"), "aggregator", "stream"),
    "release": (Options(mode="eventbridge", kind="sqs", precision_second=True), "releaser", "queue"),
}


def source_arn(config: dict[str, Any], source: str) -> str:
    if source == "queue":
        return str(config["eventbridge"]["release"]["queueArn"])
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{config['table']}/stream/2026-11-27T09:00:00.000"


def without(role: Role, action: str) -> Role:
    """The role with `action` taken out of every statement."""
    document = copy.deepcopy(role.document)
    for statement in document["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        statement["Action"] = [a for a in actions if a != action]
    document["Statement"] = [s for s in document["Statement"] if s["Action"]]
    return Role(role.name, role.arn, role.session, document, tuple(parse_policy_document(document)))


def cases() -> list[tuple[str, str]]:
    found = []
    for name, (options, role, source) in MAPPINGS.items():
        config = rendered(options).config
        for request in enforce.mapping_requests(role, config, source, source_arn(config, source)):
            found.append((name, request.action))
    return found


def check(name: str, monkeypatch: pytest.MonkeyPatch, taken_out: str | None) -> list[str]:
    """The violations check_mapping reports for one batch of the mapping `name`, its role less `taken_out`."""
    options, role, source = MAPPINGS[name]
    config = rendered(options).config
    real = enforce.role_for
    monkeypatch.setattr(enforce, "STATE", enforce.Enforcement())
    if taken_out is not None:
        monkeypatch.setattr(enforce, "role_for", lambda *a, **k: without(real(*a, **k), taken_out))
    event = {"Records": [{"eventSourceARN": source_arn(config, source)}]}
    enforce.check_mapping(role, config, event, source)
    return enforce.STATE.violations


@pytest.mark.parametrize("name", sorted(MAPPINGS))
def test_each_mapping_reads_and_sends_with_what_its_role_is_granted(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert check(name, monkeypatch, None) == []


@pytest.mark.parametrize(("name", "action"), cases())
def test_each_mapping_grant_taken_out_is_reported_naming_the_action(
    name: str, action: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (violation,) = check(name, monkeypatch, action)
    assert "event source mapping would be refused" in violation and f"perform: {action} on resource" in violation


def test_the_stream_mappings_on_failure_send_is_among_the_checks() -> None:
    """The stream DLQ's send is checked for every stream consumer (the case the old check skipped)."""
    sends = {name for name, action in cases() if action == "sqs:SendMessage"}
    assert sends == {name for name, (_, _, source) in MAPPINGS.items() if source == "stream"}
