"""What receives the due event: the target classes (one module each in components/target_types/, with its kind's
declaration in the handlers' runtime), the `Target` type, and the checks made of a target as a whole."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import pulumi

from . import target_types
from .target_base import TargetBase, arn_problem
from .target_types.email import EmailTarget
from .target_types.event_bus import EventBusTarget
from .target_types.function import FunctionTarget
from .target_types.queue import QueueTarget
from .target_types.state_machine import StateMachineTarget
from .target_types.topic import TopicTarget

__all__ = [
    "TARGET_TYPES",
    "EmailTarget",
    "EventBusTarget",
    "FunctionTarget",
    "QueueTarget",
    "StateMachineTarget",
    "Target",
    "TopicTarget",
    "checked_arn",
    "scheduler_problem",
    "topic_arn_problem",
]

# The type of `ScheduledTableArgs.target`, for the type checker and the provider schema; the registry
# (components/target_types/) is what the code enumerates, and a test fails if the two differ.
Target = QueueTarget | FunctionTarget | StateMachineTarget | TopicTarget | EventBusTarget | EmailTarget
TARGET_TYPES: tuple[type, ...] = get_args(Target)

SNS_TOPIC_EXAMPLE = "arn:aws:sns:eu-west-1:123456789012:ops"


def topic_arn_problem(field_name: str, value: str) -> str | None:
    """Why `value` cannot be the SNS topic ARN option `field_name` (None if it can): the same message for a plain
    string at construction and for an Output once it resolves."""
    if arn_problem("sns", field_name, value) is None:
        return None
    return (
        f"{field_name}: {value!r} is not an SNS topic ARN; pass the topic's `.arn` "
        f"(arn:aws:sns:<region>:<account>:<topic>), e.g. {SNS_TOPIC_EXAMPLE!r}"
    )


def is_target(value: object) -> bool:
    """Whether `value` is an instance of a registered target class."""
    return isinstance(value, target_types.classes())


def scheduler_problem(target: TargetBase | None, *, scheduler_delivers: bool) -> str | None:
    """Why Scheduler cannot deliver to the target (None if it can): its kind's own reason (a FIFO queue without
    content-based deduplication, a FIFO topic). Only eventbridge mode's schedules deliver to the target; precise
    ttl's delete the item. An ARN not known yet is checked when it resolves (`checked_arn`)."""
    if not scheduler_delivers or target is None or not isinstance(target.arn, str) or target.arn_field is None:
        return None
    return target.scheduler_problem(target.arn)


def checked_arn(
    target: TargetBase, *, scheduler_delivers: bool = False, rename: Callable[[str], str] = str
) -> pulumi.Input[str]:
    """The target's ARN; an Output is checked once it resolves, so a wrong one fails `pulumi up` with the same
    message a plain string gets at construction. `scheduler_delivers`: Scheduler delivers to it (eventbridge mode).
    `rename`: how the message names the fields (the provider's camelCase inputs for a program in another language)."""
    arn = target.arn
    if isinstance(arn, str) or target.arn_field is None:
        return arn

    def check(value: str | None) -> str | None:
        problem = None
        if value is not None:  # None: mocks that echo inputs
            problem = target.arn_problem(value)
            problem = problem or scheduler_problem(target.with_arn(value), scheduler_delivers=scheduler_delivers)
        if problem:
            raise ValueError(rename(problem))
        return value

    return pulumi.Output.from_input(arn).apply(check)  # type: ignore[arg-type]
