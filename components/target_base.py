"""What every target class shares: the checks of its ARN (from its kind's declaration in the handlers' runtime,
handlers/st_core/target_types/, the one place each kind's ARN shape is written) and of its KMS key, and the
defaults a class overrides where its kind differs. A leaf for the target classes (components/target_types/)."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import pulumi

from .arns import kms_key_problem
from .packaging import runtime_module

if TYPE_CHECKING:
    from st_core.target_types import TargetType

_ARN = re.compile(r"arn:(aws|aws-cn|aws-us-gov):([a-z0-9-]+):([a-z0-9-]*):(\d{12}):(.+)")


def declaration(kind: str) -> TargetType:
    """The handlers' declaration of target kind `kind` (its ARN shape, actions, request)."""
    found: TargetType = runtime_module("target_types").of(kind)
    return found


def arn_problem(kind: str, field_name: str, arn: str) -> str | None:
    """Why `arn` cannot be the ARN of a `kind` target (None if it can): a URL, a name, another service's ARN or
    another resource type, each with the fix. `field_name` names the option, for the message
    (`QueueTarget.queue_arn`)."""
    wire = declaration(kind)
    what, example = wire.NOUN, wire.ARN_EXAMPLE
    where = f"{field_name}: {arn!r}"
    if arn.startswith(("https://", "http://")):
        hint = "this is a queue URL; pass the queue's `.arn`" if kind == "sqs" else f"pass the {what}'s `.arn`"
        return f"{where} is a URL, not an ARN; {hint}"
    found = _ARN.fullmatch(arn)
    if found is None:
        return f"{where} is not a full ARN (a name?); pass the {what}'s `.arn`, e.g. {example!r}"
    if found.group(2) != wire.SERVICE:
        return f"{where} is an ARN of {found.group(2)!r}, not of a {what} ({wire.SERVICE!r}); pass the {what}'s `.arn`"
    if not found.group(3) or not re.fullmatch(wire.ARN_RESOURCE, found.group(5)):
        return f"{where} is not a {what} ARN; pass the {what}'s `.arn`, e.g. {example!r}"
    return None


def resource_problem(field_name: str, value: object, attribute: str = "arn") -> str | None:
    """Why `value` cannot be the text option `field_name` at all (None if it can: a string, or an Output or other
    awaitable that resolves to one): a Pulumi resource given where one of its outputs belongs (`QueueTarget(queue)`
    for `QueueTarget(queue.arn)`, which would otherwise fail deep inside Pulumi as `'Queue' object has no attribute
    'startswith'`), or a value of another type."""
    if value is None or isinstance(value, str | pulumi.Output) or inspect.isawaitable(value):
        return None
    if isinstance(value, pulumi.Resource):
        kind = type(value).__name__
        owner, _, option = field_name.rpartition(".")
        example = f"{option}={kind.lower()}.{attribute}"
        return (
            f"{field_name}: got the {kind} resource itself, not its {attribute}; pass its `.{attribute}` output: "
            + (f"{owner}({example}, ...)" if owner else example)
        )
    return f"{field_name}: {value!r} is not text; pass the {attribute} as a string or an Output"


def region_of(arn: str | None) -> str:
    """The region an ARN names ('' for none: a global resource, or not an ARN)."""
    found = _ARN.fullmatch(arn or "")
    return found.group(3) if found else ""


class TargetBase:
    """The defaults of a target class (each is a frozen dataclass deriving from this). Its class attributes are its
    kind's facts the handlers do not need: its name in a stack file and the provider (`stack_type`), the field its
    ARN is given in (`arn_field`, None for a kind without one), where it is listed (`listed`), and the description
    of each of its own fields for the configuration reference and the provider schema (`docs`)."""

    if TYPE_CHECKING:  # every subclass is a dataclass
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    kind: ClassVar[str]
    stack_type: ClassVar[str]
    arn_field: ClassVar[str | None]
    docs: ClassVar[Mapping[str, str]] = {}
    # Where the kind is listed (docs, schema, messages): the order users met them in; a new kind goes last.
    listed: ClassVar[int] = 100

    @property
    def arn(self) -> pulumi.Input[str]:
        """The target's ARN (a kind without one: the universal target Scheduler calls)."""
        if self.arn_field is None:
            return declaration(self.kind).SCHEDULER_ARN
        value: pulumi.Input[str] = getattr(self, self.arn_field)
        return value

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """The checks every target gets at construction: its KMS key's ARN and its own ARN, when they are plain
        strings (an Output is checked when it resolves: `targets.checked_arn`, `component.checked_outputs`)."""
        owner = type(self).__name__
        if self.arn_field is not None:
            given = resource_problem(f"{owner}.{self.arn_field}", self.arn) or resource_problem(
                f"{owner}.kms_key_arn", getattr(self, "kms_key_arn", None)
            )
            if given:
                raise ValueError(given)
        key = getattr(self, "kms_key_arn", None)
        if isinstance(key, str):
            problem = kms_key_problem(f"{type(self).__name__}.kms_key_arn", key)
            if problem:
                raise ValueError(problem)
        if self.arn_field is not None and isinstance(self.arn, str):
            problem = self.arn_problem(self.arn)
            if problem:
                raise ValueError(problem)

    def arn_problem(self, arn: str) -> str | None:
        """Why `arn` cannot be this target's ARN, with these options (None if it can)."""
        problem = arn_problem(self.kind, f"{type(self).__name__}.{self.arn_field}", arn)
        return problem or self.options_problem(arn)

    def options_problem(self, arn: str) -> str | None:
        """Why the target's options do not fit the resource `arn` names (None if they do)."""
        return None

    def scheduler_problem(self, arn: str) -> str | None:
        """Why EventBridge Scheduler cannot deliver to the resource `arn` names with these options (None if it can)."""
        return None

    def handler_options(self) -> dict[str, Any]:
        """What the handlers' configuration document holds of the target besides its kind and ARN: only what is set
        (the document must fit Lambda's 4 KB)."""
        return {}

    def with_arn(self, arn: str) -> Any:
        """The same target with its ARN resolved (to check its options against it)."""
        return dataclasses.replace(self, **{self.arn_field: arn}) if self.arn_field else self
