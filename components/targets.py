"""What receives the due event: the target classes (one module each in components/target_types/, with its kind's
declaration in the handlers' runtime), the `Target` type, and the checks made of a target as a whole."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import pulumi

from . import target_types
from .target_base import TargetBase, arn_problem, declaration, region_of, resource_problem
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
    "region_problem",
    "resource_problem",
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


def region_problem(target: TargetBase, arn: str, stack_region: str) -> str | None:
    """Why the target cannot be reached from the stack (None if it can): it is in another region. EventBridge
    Scheduler calls a templated target in the schedule's own region, and the handlers' AWS clients are in their
    function's region (a queue of another region is not found there, a function or state machine ARN of another
    region is refused), so every due event would be dead-lettered. `stack_region` is read from a resource the
    component creates, so the check needs no lookup."""
    region = region_of(arn)
    if target.arn_field is None or not region or region == stack_region:
        return None
    what = declaration(target.kind).NOUN
    return (
        f"{type(target).__name__}.{target.arn_field}: {arn!r} is in {region}, and this stack deploys to "
        f"{stack_region}: Scheduler and the handlers deliver only within the stack's region, so every due event "
        f"would fail; use a {what} in {stack_region}, or deploy the ScheduledTable in {region} (to reach {region} "
        f"from {stack_region}: an EventBusTarget on a bus in {stack_region} whose rule targets a bus in {region})"
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
    target: TargetBase,
    *,
    scheduler_delivers: bool = False,
    rename: Callable[[str], str] = str,
    stack_region_of: pulumi.Input[str] | None = None,
) -> pulumi.Input[str]:
    """The target's ARN; an Output is checked once it resolves, so a wrong one fails `pulumi up` with the same
    message a plain string gets at construction. `scheduler_delivers`: Scheduler delivers to it (eventbridge mode).
    `rename`: how the message names the fields (the provider's camelCase inputs for a program in another language).
    `stack_region_of`: the ARN of a resource the stack creates, whose region the target's must be (`region_problem`);
    known only once it resolves, so a plain-string ARN is checked then too."""
    arn = target.arn
    if target.arn_field is None or (isinstance(arn, str) and stack_region_of is None):
        return arn

    def check(values: list[str | None]) -> str | None:
        value, ours = values
        problem = None
        if value is not None:  # None: mocks that echo inputs
            problem = target.arn_problem(value)
            problem = problem or scheduler_problem(target.with_arn(value), scheduler_delivers=scheduler_delivers)
            region = region_of(ours)
            problem = problem or (region_problem(target, value, region) if region else None)
        if problem:
            raise ValueError(rename(problem))
        return value

    return pulumi.Output.all(arn, stack_region_of).apply(check)  # type: ignore[arg-type]
