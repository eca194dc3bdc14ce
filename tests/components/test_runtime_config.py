"""The handler config document and the 4 KB environment check, without Pulumi (and one check under mocks)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pytest
from st_core.constants import CONFIG_VARIABLE, environment_bytes

from components import EmailTarget, QueueTarget, ScheduledTableArgs
from components.runtime_config import (
    PLACEHOLDER_CHARS,
    estimated_document,
    function_environment,
    handler_document,
    needed_values,
)
from tests.components.conftest import Built

QUEUE = "arn:aws:sqs:eu-west-1:123456789012:q"
PLACEHOLDER = "x" * PLACEHOLDER_CHARS


def test_lambda_counts_every_name_and_value_in_bytes() -> None:
    assert environment_bytes({"AB": "cd", "E": "é"}) == 2 + 2 + 1 + 2


@pytest.mark.parametrize(
    ("kwargs", "values"),
    [
        ({"mode": "eventbridge"}, {"scheduleGroup", "schedulerRoleArn", "targetDlqArn", "ledgerTable"}),
        ({"mode": "ttl"}, {"ledgerTable"}),
        ({"mode": "ttl", "precise": True}, {"ledgerTable", "scheduleGroup", "schedulerRoleArn", "targetDlqArn"}),
        ({"mode": "polling"}, {"targetDlqUrl", "ledgerTable"}),
        ({"mode": "aggregate"}, {"ledgerTable"}),
    ],
)
def test_each_mode_needs_the_shared_values_and_its_own(kwargs: dict[str, Any], values: set[str]) -> None:
    shared = {"table", "targetArn", "poisonQueueUrl"}
    assert set(needed_values(ScheduledTableArgs(**kwargs))) == shared | values


def test_the_estimate_puts_a_longest_placeholder_wherever_a_resource_will_tell() -> None:
    owned = json.loads(estimated_document(ScheduledTableArgs(mode="eventbridge")))
    assert owned["table"] == owned["poisonQueueUrl"] == owned["target"]["arn"] == PLACEHOLDER
    assert owned["scheduler"]["group"] == owned["scheduler"]["roleArn"] == PLACEHOLDER
    given = json.loads(estimated_document(ScheduledTableArgs(mode="polling", target=QueueTarget(QUEUE))))
    assert given["target"]["arn"] == QUEUE and given["polling"]["deadLetterUrl"] == PLACEHOLDER


def test_the_document_is_compact_and_sorted() -> None:
    args = ScheduledTableArgs(mode="aggregate")
    document = handler_document(args, {v: v.value for v in needed_values(args)})
    assert document == json.dumps(json.loads(document), sort_keys=True, separators=(",", ":"))
    assert json.loads(document)["target"] == {"kind": "none", "arn": "targetArn"}


def test_eventbridge_tells_backfill_whether_the_table_predates_the_stack() -> None:
    """GIVEN an eventbridge stack on an existing table, and one on a table it makes
    WHEN their config documents are built
    THEN only the first says `existingTable` (backfill's first run delivers old past-due items only there)."""
    from components import ExistingTable

    documents = [
        json.loads(handler_document(args, {v: v.value for v in needed_values(args)}))["eventbridge"]
        for args in (
            ScheduledTableArgs(mode="eventbridge", existing_table=ExistingTable("orders")),
            ScheduledTableArgs(mode="eventbridge"),
        )
    ]
    assert [document.get("existingTable") for document in documents] == [True, None]


def test_the_environment_holds_the_document_and_the_log_level() -> None:
    args = ScheduledTableArgs(mode="polling", log_level="DEBUG")
    assert function_environment(args, "{}") == {CONFIG_VARIABLE: "{}", "LOG_LEVEL": "DEBUG"}


def test_a_body_that_fits_is_accepted() -> None:
    target = EmailTarget("r@example.com", subject="Your appointment", body="x" * 1500)
    assert ScheduledTableArgs(mode="eventbridge", target=target).target == target


def test_an_output_target_arn_is_checked_when_it_resolves(build: Callable[..., Built]) -> None:
    # GIVEN a target ARN only known once resolved, and wrong: a queue name far over SQS's 80 characters
    arn = pulumi.Output.from_input("arn:aws:sqs:eu-west-1:123456789012:" + "q" * 4000)
    # WHEN the component is built, THEN the deployment fails with the message a plain string gets at construction
    with pytest.raises(ValueError) as caught:
        build(target=QueueTarget(arn))
    # (Pulumi wraps it in the resource and input it was resolving; the message is the last line.)
    assert (
        str(caught.value)
        .splitlines()[-1]
        .endswith("' is not a queue ARN; pass the queue's `.arn`, e.g. 'arn:aws:sqs:eu-west-1:123456789012:jobs'")
    )
    with pytest.raises(ValueError) as plain:
        QueueTarget("arn:aws:sqs:eu-west-1:123456789012:" + "q" * 4000)
    assert str(plain.value).endswith(str(caught.value).splitlines()[-1].split("QueueTarget.queue_arn: ", 1)[1])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "eventbridge", "target": EmailTarget("r@example.com")},
        {"mode": "eventbridge", "target": QueueTarget(QUEUE)},
        {"mode": "ttl", "precise": True},
        {"mode": "polling"},
        {"mode": "aggregate"},
    ],
    ids=["eventbridge-email", "eventbridge-queue", "ttl-precise", "polling", "aggregate"],
)
def test_the_document_has_exactly_the_keys_the_handlers_read(kwargs: dict[str, Any]) -> None:
    from st_core import config as handler_types  # the handlers' TypedDicts: the other side of the contract

    document = json.loads(estimated_document(ScheduledTableArgs(**kwargs)))

    def check(value: dict[str, Any], typed: Any) -> None:
        # (The handlers use postponed annotations, so NotRequired is read from the annotation text.)
        keys = {name: getattr(hint, "__forward_arg__", str(hint)) for name, hint in typed.__annotations__.items()}
        required = {name for name, annotation in keys.items() if not annotation.startswith("NotRequired[")}
        assert required <= set(value) <= set(keys), typed.__name__

    check(document, handler_types.HandlerConfig)
    check(document["target"], handler_types.TargetConfig)
    sections = {
        "scheduler": handler_types.SchedulerConfig,
        "eventbridge": handler_types.EventBridgeConfig,
        "ttl": handler_types.TtlConfig,
        "polling": handler_types.PollingConfig,
        "aggregate": handler_types.AggregateConfig,
    }
    for name in set(document) & set(sections):
        check(document[name], sections[name])
    if "email" in document["target"]:
        check(document["target"]["email"], handler_types.EmailConfig)
