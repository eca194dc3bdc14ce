"""A misspelt keyword of the Python API is refused naming the closest one (issue 26.8), with the hint the stack file
gives for the same misspelling: one matcher (components/suggest.py) serves both."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from components import (
    EmailTarget,
    EventBusTarget,
    ExistingTable,
    FunctionTarget,
    QueueTarget,
    ScheduledTableArgs,
    StateMachineTarget,
    TopicTarget,
)
from components.stack_config import tables_from_config

from .test_stack_config import ListingConfig

BUS = "arn:aws:events:eu-west-1:123456789012:event-bus/orders"


def kw(**given: Any) -> dict[str, Any]:
    """Keywords passed through a dict: a type checker refuses the typos themselves (as it should, for users too)."""
    return given


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: ScheduledTableArgs(**kw(time_atribute="x")),
            "ScheduledTableArgs: time_atribute: unknown keyword; did you mean time_attribute?",
        ),
        (
            lambda: ScheduledTableArgs(mode="ttl", **kw(Precise=True)),
            "ScheduledTableArgs: Precise: unknown keyword; did you mean precise?",
        ),
        (lambda: QueueTarget(**kw(queue_ar="q")), "QueueTarget: queue_ar: unknown keyword; did you mean queue_arn?"),
        (
            lambda: QueueTarget("arn:aws:sqs:eu-west-1:123456789012:q", **kw(max_message_byte=2048)),
            "did you mean max_message_bytes?",
        ),
        (
            lambda: FunctionTarget(**kw(function_ar="f")),
            "FunctionTarget: function_ar: unknown keyword; did you mean function_arn?",
        ),
        (lambda: StateMachineTarget(**kw(state_machine="s")), "did you mean state_machine_arn?"),
        (lambda: TopicTarget(**kw(topic="t")), "TopicTarget: topic: unknown keyword; did you mean topic_arn?"),
        (
            lambda: EventBusTarget(BUS, **kw(detail_typ="d")),
            "EventBusTarget: detail_typ: unknown keyword; did you mean detail_type?",
        ),
        (lambda: EmailTarget(**kw(sendr="a@b.c")), "EmailTarget: sendr: unknown keyword; did you mean sender?"),
        (lambda: ExistingTable(**kw(nam="orders")), "ExistingTable: nam: unknown keyword; did you mean name?"),
        (
            lambda: ExistingTable("orders", **kw(streamArn="s")),
            "ExistingTable: streamArn: unknown keyword; did you mean stream_arn?",
        ),
        (
            lambda: ScheduledTableArgs(**kw(zzz=1)),
            "ScheduledTableArgs: zzz: unknown keyword; valid keys: aggregation, ",
        ),
    ],
)
def test_a_misspelt_keyword_names_the_closest_one(make: Callable[[], Any], message: str) -> None:
    with pytest.raises(TypeError) as caught:
        make()
    assert message in str(caught.value), str(caught.value)


def test_the_python_api_and_the_stack_file_give_the_same_hint() -> None:
    with pytest.raises(TypeError) as python:
        ScheduledTableArgs(mode="ttl", **kw(batchsize=7))
    with pytest.raises(ValueError) as stack:
        tables_from_config(ListingConfig({"mode": "ttl", "batchsize": 7}))
    assert str(python.value).endswith("did you mean batch_size?")
    assert str(stack.value).endswith("did you mean batchSize?")


def test_valid_keywords_and_positional_arguments_still_work_and_the_signature_is_the_dataclasses() -> None:
    assert ScheduledTableArgs(mode="ttl", time_attribute="at").time_attribute == "at"
    assert QueueTarget("arn:aws:sqs:eu-west-1:123456789012:q", max_message_bytes=2048).max_message_bytes == 2048
    assert ExistingTable("orders").name == "orders"
    assert "time_attribute" in inspect.signature(ScheduledTableArgs).parameters
    assert next(iter(inspect.signature(QueueTarget).parameters)) == "queue_arn"
