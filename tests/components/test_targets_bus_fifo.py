"""EventBusTarget and FIFO queues in QueueTarget: options, conflicts and their exact messages, IAM scoped to the one
bus or queue, the handlers' configuration, and the stack configuration keys."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from components import EventBusTarget, QueueTarget, ScheduledTableArgs, TopicTarget
from components.runtime_config import estimated_document
from components.stack_config import target_from_config
from tests.components.conftest import Built

BUS = "arn:aws:events:eu-west-1:123456789012:event-bus/orders"
FIFO = "arn:aws:sqs:eu-west-1:123456789012:jobs.fifo"
STANDARD = "arn:aws:sqs:eu-west-1:123456789012:jobs"
Build = Callable[..., Built]


def allow(actions: list[str], resources: list[str]) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions, "Resource": resources}


def refused(make: Callable[[], Any]) -> str:
    with pytest.raises(ValueError) as caught:
        make()
    return str(caught.value)


# -- EventBusTarget ---------------------------------------------------------------------------------------------


def test_an_event_bus_target_defaults_to_the_projects_detail_type_and_source() -> None:
    target = EventBusTarget(BUS)
    assert (target.arn, target.kind, target.detail_type, target.source) == (
        BUS,
        "events",
        "scheduled-table.due",
        "scheduled-table",
    )


@pytest.mark.parametrize(
    "arn",
    [
        BUS,
        "arn:aws:events:eu-west-1:123456789012:event-bus/default",
        "arn:aws-cn:events:cn-north-1:123456789012:event-bus/a.b_c-d/e",
    ],
)
def test_event_bus_arns_are_accepted(arn: str) -> None:
    assert EventBusTarget(arn).bus_arn == arn


@pytest.mark.parametrize(
    ("arn", "message"),
    [
        (
            "orders",
            "EventBusTarget.bus_arn: 'orders' is not a full ARN (a name?); pass the event bus's `.arn`, e.g. "
            "'arn:aws:events:eu-west-1:123456789012:event-bus/orders'",
        ),
        (
            "https://events.eu-west-1.amazonaws.com/orders",
            "EventBusTarget.bus_arn: 'https://events.eu-west-1.amazonaws.com/orders' is a URL, not an ARN; pass the "
            "event bus's `.arn`",
        ),
        (
            "arn:aws:sqs:eu-west-1:123456789012:orders",
            "EventBusTarget.bus_arn: 'arn:aws:sqs:eu-west-1:123456789012:orders' is an ARN of 'sqs', not of a event "
            "bus ('events'); pass the event bus's `.arn`",
        ),
        (
            "arn:aws:events:eu-west-1:123456789012:rule/orders",
            "EventBusTarget.bus_arn: 'arn:aws:events:eu-west-1:123456789012:rule/orders' is not a event bus ARN; pass "
            "the event bus's `.arn`, e.g. 'arn:aws:events:eu-west-1:123456789012:event-bus/orders'",
        ),
    ],
)
def test_a_wrong_bus_arn_is_refused_with_the_fix(arn: str, message: str) -> None:
    assert refused(lambda: EventBusTarget(arn)) == message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"detail_type": ""},
            "EventBusTarget.detail_type: '' is not a detail type; use 1-128 characters, e.g. 'scheduled-table.due'",
        ),
        (
            {"detail_type": "d" * 129},
            f"EventBusTarget.detail_type: {'d' * 129!r} is not a detail type; use 1-128 characters, e.g. "
            "'scheduled-table.due'",
        ),
        (
            {"source": "aws.reminders"},
            "EventBusTarget.source: 'aws.reminders' starts with 'aws.', which AWS reserves for its own services; use "
            "your own, e.g. 'com.example.reminders'",
        ),
        (
            {"source": "$.detail"},
            "EventBusTarget.source: '$.detail' is not an event source; use 1-256 characters starting with a letter, "
            "digit or one of / . _ -, e.g. 'com.example.reminders'",
        ),
        (
            {"source": "s" * 257},
            f"EventBusTarget.source: {'s' * 257!r} is not an event source; use 1-256 characters starting with a "
            "letter, digit or one of / . _ -, e.g. 'com.example.reminders'",
        ),
    ],
)
def test_detail_type_and_source_are_checked_as_putevents_and_scheduler_check_them(
    kwargs: dict[str, Any], message: str
) -> None:
    assert refused(lambda: EventBusTarget(BUS, **kwargs)) == message


def test_the_longest_detail_type_and_source_are_accepted() -> None:
    target = EventBusTarget(BUS, detail_type="d" * 128, source="com.example." + "s" * 244)
    assert len(target.source) == 256


# -- FIFO queues ------------------------------------------------------------------------------------------------


def test_a_fifo_queue_is_a_target_with_a_group_per_item_by_default() -> None:
    target = QueueTarget(FIFO)
    assert (target.message_group_attribute, target.message_group_id, target.content_based_deduplication) == (
        None,
        None,
        False,
    )
    for mode in ("ttl", "polling"):  # the handlers send these themselves, with a deduplication id of their own
        assert ScheduledTableArgs(mode=mode, target=target).target == target
    assert ScheduledTableArgs(mode="ttl", precise=True, target=target).target == target  # Scheduler deletes the item


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"message_group_attribute": "customerId", "message_group_id": "all"},
            "QueueTarget.message_group_id: set either message_group_id (one group for every message) or "
            "message_group_attribute (a group per value of that item attribute), not both",
        ),
        (
            {"message_group_attribute": ""},
            "QueueTarget.message_group_attribute: '' is not an attribute name; name the item attribute whose value "
            "is the message group, e.g. 'customerId'",
        ),
        (
            {"message_group_id": "two words"},
            "QueueTarget.message_group_id: 'two words' is not a message group id; use 1-128 letters, digits or "
            "punctuation (no spaces), e.g. 'reminders'",
        ),
        (
            {"message_group_id": "g" * 129},
            f"QueueTarget.message_group_id: {'g' * 129!r} is not a message group id; use 1-128 letters, digits or "
            "punctuation (no spaces), e.g. 'reminders'",
        ),
        (
            {"content_based_deduplication": "yes"},
            "QueueTarget.content_based_deduplication: 'yes' is not a boolean; use True or False",
        ),
    ],
)
def test_bad_fifo_options_are_refused_naming_the_field_and_the_fix(kwargs: dict[str, Any], message: str) -> None:
    assert refused(lambda: QueueTarget(FIFO, **kwargs)) == message


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"message_group_attribute": "customerId"}, "message_group_attribute"),
        ({"message_group_id": "all"}, "message_group_id"),
        ({"content_based_deduplication": True}, "content_based_deduplication"),
    ],
)
def test_fifo_options_on_a_standard_queue_are_refused(kwargs: dict[str, Any], name: str) -> None:
    assert refused(lambda: QueueTarget(STANDARD, **kwargs)) == (
        f"QueueTarget.{name}: only applies to a FIFO queue, and {STANDARD!r} is a standard queue (a FIFO queue's "
        f"name ends in .fifo); remove {name}, or pass the FIFO queue's ARN"
    )


SCHEDULER_NEEDS_CONTENT_DEDUPLICATION = (
    "QueueTarget.content_based_deduplication: eventbridge mode delivers through EventBridge Scheduler, which sets "
    "no deduplication id, so the FIFO queue must deduplicate by content or it refuses every delivery; enable it on "
    "the queue (content_based_deduplication=True on aws.sqs.Queue) and set content_based_deduplication=True here"
)


def test_eventbridge_mode_needs_a_fifo_queue_that_deduplicates_by_content() -> None:
    # Scheduler's SQS target takes a MessageGroupId but no MessageDeduplicationId (AWS: "the queue must have
    # content-based deduplication enabled").
    assert refused(lambda: ScheduledTableArgs(mode="eventbridge", target=QueueTarget(FIFO))) == (
        SCHEDULER_NEEDS_CONTENT_DEDUPLICATION
    )
    target = QueueTarget(FIFO, content_based_deduplication=True, message_group_attribute="customerId")
    assert ScheduledTableArgs(mode="eventbridge", target=target).target == target


def test_an_output_fifo_arn_is_checked_for_eventbridge_mode_when_it_resolves(build: Build) -> None:
    arn = pulumi.Output.from_input(FIFO)
    with pytest.raises(ValueError) as caught:
        build(target=QueueTarget(arn))
    assert str(caught.value).splitlines()[-1].endswith(SCHEDULER_NEEDS_CONTENT_DEDUPLICATION)
    build(mode="polling", target=QueueTarget(pulumi.Output.from_input(FIFO)))  # the processor sets its own id


FIFO_TOPIC = "arn:aws:sns:eu-west-1:123456789012:news.fifo"
SCHEDULER_CANNOT_GROUP_A_TOPIC = (
    f"TopicTarget.topic_arn: {FIFO_TOPIC!r} is a FIFO topic, and eventbridge mode delivers through EventBridge "
    "Scheduler, whose SNS target sets no message group, so the topic would refuse every delivery; use mode 'ttl' or "
    "'polling' (their functions publish with a message group and deduplication id), a standard topic, or a FIFO "
    "QueueTarget with content_based_deduplication=True"
)


def test_a_fifo_topic_is_refused_where_scheduler_delivers_and_taken_where_the_functions_do(build: Build) -> None:
    """Scheduler's SNS target has no parameters (no MessageGroupId), and a FIFO topic refuses every message
    without one: eventbridge mode cannot deliver to it. ttl and polling publish themselves, with a group and a
    deduplication id (tests/handlers/test_targets_bus_fifo.py)."""
    assert refused(lambda: ScheduledTableArgs(mode="eventbridge", target=TopicTarget(FIFO_TOPIC))) == (
        SCHEDULER_CANNOT_GROUP_A_TOPIC
    )
    with pytest.raises(ValueError) as caught:
        build(target=TopicTarget(pulumi.Output.from_input(FIFO_TOPIC)))
    assert str(caught.value).splitlines()[-1].endswith(SCHEDULER_CANNOT_GROUP_A_TOPIC)
    for mode in ("ttl", "polling"):
        built = build(mode=mode, target=TopicTarget(FIFO_TOPIC))
        assert built.handler_config()["target"] == {"kind": "sns", "arn": FIFO_TOPIC}


def test_fifo_options_on_an_output_standard_queue_fail_when_it_resolves(build: Build) -> None:
    with pytest.raises(ValueError) as caught:
        build(mode="polling", target=QueueTarget(pulumi.Output.from_input(STANDARD), message_group_id="all"))
    assert (
        str(caught.value)
        .splitlines()[-1]
        .endswith(
            f"QueueTarget.message_group_id: only applies to a FIFO queue, and {STANDARD!r} is a standard queue (a FIFO "
            "queue's name ends in .fifo); remove message_group_id, or pass the FIFO queue's ARN"
        )
    )


# -- IAM --------------------------------------------------------------------------------------------------------


def test_eventbridge_mode_may_put_events_on_that_bus_only(build: Build) -> None:
    built = build(target=EventBusTarget(BUS))
    put = allow(["events:PutEvents"], [BUS])
    target_dlq = built.one("rem-target-dlq").outputs["arn"]
    assert built.statements("rem-scheduler-exec-policy") == [put, allow(["sqs:SendMessage"], [target_dlq])]
    handler = built.statements("rem-scheduler-policy")
    assert [s for s in handler if any(a.startswith(("events:", "kms:")) for a in s["Action"])] == [put]


@pytest.mark.parametrize(
    ("kwargs", "sender", "other"),
    [
        ({"mode": "ttl"}, "rem-executor-policy", None),
        ({"mode": "ttl", "precise": True}, "rem-executor-policy", "rem-scheduler-exec-policy"),
        ({"mode": "polling"}, "rem-processor-policy", "rem-assigner-policy"),
    ],
    ids=["ttl", "ttl-precise", "polling"],
)
def test_the_function_that_delivers_may_put_events_on_that_bus_and_nothing_else_may(
    build: Build, kwargs: dict[str, Any], sender: str, other: str | None
) -> None:
    built = build(target=EventBusTarget(BUS), **kwargs)
    statements = built.statements(sender)
    assert [s for s in statements if any(a.startswith("events:") for a in s["Action"])] == [
        allow(["events:PutEvents"], [BUS])
    ]
    if other is not None:  # precise ttl's Scheduler deletes items; polling's assigner only indexes them
        assert "events:" not in json.dumps(built.policy(other))


def test_a_fifo_queue_is_sent_to_with_send_message_on_that_queue_only(build: Build) -> None:
    built = build(target=QueueTarget(FIFO, content_based_deduplication=True))
    target_dlq = built.one("rem-target-dlq").outputs["arn"]
    assert built.statements("rem-scheduler-exec-policy") == [
        allow(["sqs:SendMessage"], [FIFO]),
        allow(["sqs:SendMessage"], [target_dlq]),
    ]
    handler = built.statements("rem-scheduler-policy")
    assert allow(["sqs:SendMessage"], [FIFO]) in handler and allow(["sqs:GetQueueUrl"], [FIFO]) in handler


# -- the handlers' configuration ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (
            EventBusTarget(BUS, detail_type="Reminder due", source="com.example.reminders"),
            {"kind": "events", "arn": BUS, "detailType": "Reminder due", "source": "com.example.reminders"},
        ),
        (QueueTarget(FIFO), {"kind": "sqs", "arn": FIFO, "maxMessageBytes": 262144}),
        (
            QueueTarget(FIFO, message_group_attribute="customerId"),
            {"kind": "sqs", "arn": FIFO, "maxMessageBytes": 262144, "messageGroupAttribute": "customerId"},
        ),
        (
            QueueTarget(FIFO, message_group_id="all"),
            {"kind": "sqs", "arn": FIFO, "maxMessageBytes": 262144, "messageGroupId": "all"},
        ),
    ],
    ids=["bus", "fifo", "fifo-attribute", "fifo-one-group"],
)
def test_the_handlers_get_what_they_send_with_and_nothing_more(target: Any, expected: dict[str, Any]) -> None:
    from st_core.config import TargetConfig  # the handlers' side of the contract

    for mode in ("ttl", "polling"):
        document = json.loads(estimated_document(ScheduledTableArgs(mode=mode, target=target)))
        assert document["target"] == expected
    assert set(expected) <= set(TargetConfig.__annotations__)


def test_the_bus_reaches_the_deployed_functions(build: Build) -> None:
    config = build(mode="polling", target=EventBusTarget(BUS)).handler_config()
    assert config["target"] == {
        "kind": "events",
        "arn": BUS,
        "detailType": "scheduled-table.due",
        "source": "scheduled-table",
    }


def test_a_group_attribute_that_would_overflow_lambdas_4_kb_is_named() -> None:
    target = QueueTarget(FIFO, message_group_attribute="a" * 4000)
    assert refused(lambda: ScheduledTableArgs(mode="polling", target=target)).startswith(
        "target.message_group_attribute: the function environment would be about "
    )


# -- stack configuration ----------------------------------------------------------------------------------------


def test_stack_config_reads_an_event_bus_and_fifo_options() -> None:
    assert target_from_config({"type": "eventBus", "arn": BUS}) == EventBusTarget(BUS)
    assert target_from_config(
        {"type": "eventBus", "arn": BUS, "detailType": "Reminder due", "source": "com.example"}
    ) == EventBusTarget(BUS, detail_type="Reminder due", source="com.example")
    fifo = {"type": "queue", "arn": FIFO, "messageGroupAttribute": "customerId", "contentBasedDeduplication": True}
    assert target_from_config(fifo) == QueueTarget(
        FIFO, message_group_attribute="customerId", content_based_deduplication=True
    )
    assert target_from_config({"type": "queue", "arn": FIFO, "messageGroupId": "all"}) == QueueTarget(
        FIFO, message_group_id="all"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"type": "eventBus"}, "target.arn: a eventBus target needs the ARN of the event bus"),
        (
            {"type": "eventBus", "arn": BUS, "detailtype": "x"},
            "target.detailtype: unknown key; did you mean detailType?",
        ),
        ({"type": "eventBus", "arn": BUS, "kmsKeyArn": "k"}, "target.kmsKeyArn: unknown key; valid keys: arn,"),
        ({"type": "queue", "arn": FIFO, "messageGroup": "x"}, "target.messageGroup: unknown key; did you mean"),
        (
            {"type": "queue", "arn": STANDARD, "messageGroupId": "all"},
            "QueueTarget.message_group_id: only applies to a FIFO queue",
        ),
        ({"type": "bus", "arn": BUS}, "target.type: 'bus' is not a target type; use one of ['queue', 'function', "),
    ],
)
def test_bad_bus_and_fifo_config_is_explained(value: dict[str, Any], message: str) -> None:
    assert refused(lambda: target_from_config(value)).startswith(message)


def test_a_bus_and_a_fifo_queue_made_in_the_same_program_are_wired_with_their_real_arns() -> None:
    # The README's example, under the testing kit: Output ARNs shaped as AWS gives them, checked when they resolve.
    import pulumi_aws as aws

    from components import ScheduledTable
    from components.testing import run_with_mocks

    def program() -> dict[str, Any]:
        bus = aws.cloudwatch.EventBus("orders")
        jobs = aws.sqs.Queue("jobs", fifo_queue=True, content_based_deduplication=True)
        target = QueueTarget(jobs.arn, message_group_attribute="customerId", content_based_deduplication=True)
        ScheduledTable("reminders", ScheduledTableArgs(mode="eventbridge", target=EventBusTarget(bus.arn)))
        ScheduledTable("work", ScheduledTableArgs(mode="eventbridge", target=target))
        return {"bus": bus.arn, "jobs": jobs.arn}

    stack = run_with_mocks(program)
    bus, jobs = stack.result["bus"], stack.result["jobs"]
    assert bus.startswith("arn:aws:events:") and ":event-bus/orders-" in bus and jobs.endswith(".fifo")
    assert json.loads(stack.one("reminders-scheduler-exec-policy").inputs["policy"])["Statement"][0] == allow(
        ["events:PutEvents"], [bus]
    )
    assert json.loads(stack.one("work-scheduler-exec-policy").inputs["policy"])["Statement"][0] == allow(
        ["sqs:SendMessage"], [jobs]
    )
