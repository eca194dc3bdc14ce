"""What receives the due event. One small frozen class per kind; the kind string is the handlers' contract."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import pulumi

from .arns import email_address
from .packaging import runtime_module

# SQS: MaximumMessageSize is 1,024..1,048,576 bytes; a queue made without it takes 256 KiB (the provider's default).
SQS_MIN_MESSAGE_BYTES = 1024
SQS_MAX_MESSAGE_BYTES = 1048576
SQS_DEFAULT_MESSAGE_BYTES = 262144


# Per target kind: the ARN field, the service in the ARN, what the resource is called, the resource part's shape and
# an example. A plain-string ARN is checked when the target is made, an Output when it resolves (`checked_arn`).
_ARN_SHAPES: dict[str, tuple[str, str, str, str, str]] = {
    "sqs": ("queue_arn", "sqs", "queue", r"[A-Za-z0-9_-]{1,80}(\.fifo)?", "arn:aws:sqs:eu-west-1:123456789012:jobs"),
    "lambda": (
        "function_arn",
        "lambda",
        "function",
        r"function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]{1,128})?",
        "arn:aws:lambda:eu-west-1:123456789012:function:notify",
    ),
    "stepfunctions": (
        "state_machine_arn",
        "states",
        "state machine",
        r"stateMachine:[A-Za-z0-9_.-]{1,80}",
        "arn:aws:states:eu-west-1:123456789012:stateMachine:flow",
    ),
    "sns": ("topic_arn", "sns", "topic", r"[A-Za-z0-9_-]{1,256}(\.fifo)?", "arn:aws:sns:eu-west-1:123456789012:news"),
}
_ARN = re.compile(r"arn:(aws|aws-cn|aws-us-gov):([a-z0-9-]+):([a-z0-9-]*):(\d{12}):(.+)")


def arn_problem(kind: str, owner: str, arn: str) -> str | None:
    """Why `arn` cannot be the ARN of a `kind` target (None if it can): a URL, a name, another service's ARN or
    another resource type, each with the fix. `owner` is the class name, for the message."""
    field_name, service, what, resource, example = _ARN_SHAPES[kind]
    where = f"{owner}.{field_name}: {arn!r}"
    if arn.startswith(("https://", "http://")):
        hint = "this is a queue URL; pass the queue's `.arn`" if kind == "sqs" else f"pass the {what}'s `.arn`"
        return f"{where} is a URL, not an ARN; {hint}"
    found = _ARN.fullmatch(arn)
    if found is None:
        return f"{where} is not a full ARN (a name?); pass the {what}'s `.arn`, e.g. {example!r}"
    if found.group(2) != service:
        return f"{where} is an ARN of {found.group(2)!r}, not of a {what} ({service!r}); pass the {what}'s `.arn`"
    if not found.group(3) or not re.fullmatch(resource, found.group(5)):
        return f"{where} is not a {what} ARN; pass the {what}'s `.arn`, e.g. {example!r}"
    return None


def _check(target: QueueTarget | FunctionTarget | StateMachineTarget | TopicTarget) -> None:
    if isinstance(target.arn, str):
        problem = arn_problem(target.kind, type(target).__name__, target.arn)
        if problem:
            raise ValueError(problem)


def checked_arn(target: Target) -> pulumi.Input[str]:
    """The target's ARN; an Output is checked once it resolves, so a wrong one fails `pulumi up` with the same
    message a plain string gets at construction."""
    arn = target.arn
    if isinstance(arn, str) or isinstance(target, EmailTarget):
        return arn
    owner, kind = type(target).__name__, target.kind

    def check(value: str | None) -> str | None:
        problem = None if value is None else arn_problem(kind, owner, value)  # None: mocks that echo inputs
        if problem:
            raise ValueError(problem)
        return value

    return pulumi.Output.from_input(arn).apply(check)  # type: ignore[arg-type]


@dataclass(frozen=True)
class QueueTarget:
    """A standard SQS queue receives the due event as the message body.

    `max_message_bytes`: the largest message the queue accepts; set this to the queue's max_message_size if you
    raised it (up to 1 MiB). The handlers keep every due event they send to it within that size.

    `kms_key_arn` (on every target with an ARN): the customer-managed KMS key that encrypts the target, if any;
    whoever sends to it is then allowed kms:GenerateDataKey and kms:Decrypt on that key (the key's policy must
    let the account's IAM policies grant that, as the default key policy does).
    """

    queue_arn: pulumi.Input[str]
    max_message_bytes: int = SQS_DEFAULT_MESSAGE_BYTES
    kms_key_arn: pulumi.Input[str] | None = None
    kind: ClassVar[str] = "sqs"

    def __post_init__(self) -> None:
        _check(self)
        size = self.max_message_bytes
        if (
            isinstance(size, bool)
            or not isinstance(size, int)
            or not SQS_MIN_MESSAGE_BYTES <= size <= SQS_MAX_MESSAGE_BYTES
        ):
            raise ValueError(
                f"QueueTarget.max_message_bytes: {size!r} is out of range; use a whole number from "
                f"{SQS_MIN_MESSAGE_BYTES} to {SQS_MAX_MESSAGE_BYTES}, the queue's max_message_size"
            )

    @property
    def arn(self) -> pulumi.Input[str]:
        return self.queue_arn


@dataclass(frozen=True)
class FunctionTarget:
    """A Lambda function is invoked asynchronously with the due event.

    `kms_key_arn`: the customer-managed KMS key encrypting it, if any (see QueueTarget).
    """

    function_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str] | None = None
    kind: ClassVar[str] = "lambda"

    def __post_init__(self) -> None:
        _check(self)

    @property
    def arn(self) -> pulumi.Input[str]:
        return self.function_arn


@dataclass(frozen=True)
class StateMachineTarget:
    """A Step Functions state machine starts one execution with the due event as input.

    `kms_key_arn`: the customer-managed KMS key encrypting it, if any (see QueueTarget).
    """

    state_machine_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str] | None = None
    kind: ClassVar[str] = "stepfunctions"

    def __post_init__(self) -> None:
        _check(self)

    @property
    def arn(self) -> pulumi.Input[str]:
        return self.state_machine_arn


@dataclass(frozen=True)
class TopicTarget:
    """An SNS topic receives the due event as the message.

    `kms_key_arn`: the customer-managed KMS key encrypting it, if any (see QueueTarget).
    """

    topic_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str] | None = None
    kind: ClassVar[str] = "sns"

    def __post_init__(self) -> None:
        _check(self)

    @property
    def arn(self) -> pulumi.Input[str]:
        return self.topic_arn


@dataclass(frozen=True)
class EmailTarget:
    """SES (v2) sends a plain-text email; `subject` and `body` are `{attribute}` templates filled from the item.

    `sender`: a verified SES identity (the address or its domain), bare or with a display name
    (`Reminders <reminders@example.com>`); emails go out with it as written, and IAM allows sending only from that
    address.
    """

    sender: str
    recipient_attribute: str = "email"
    subject: str = "Reminder"
    body: str = "This is your reminder."
    kind: ClassVar[str] = "email"

    def __post_init__(self) -> None:
        local, _, domain = email_address(self.sender).partition("@")
        if not local or not domain or "@" in domain:
            raise ValueError(
                f"EmailTarget.sender: {self.sender!r} is not an email address; pass the verified SES identity to "
                "send from, e.g. 'reminders@example.com' or 'Reminders <reminders@example.com>'"
            )
        if not self.recipient_attribute:
            raise ValueError("EmailTarget.recipient_attribute: must name the item attribute holding the recipient")
        for field_name in ("subject", "body"):
            try:
                runtime_module("templates").template_fields(getattr(self, field_name))
            except ValueError as exc:
                raise ValueError(
                    f"EmailTarget.{field_name}: {exc}; write {{attribute}} to insert an item attribute"
                ) from exc

    @property
    def arn(self) -> str:
        # SES has no target ARN of its own: Scheduler calls it through the universal target.
        return "arn:aws:scheduler:::aws-sdk:sesv2:sendEmail"


Target = QueueTarget | FunctionTarget | StateMachineTarget | TopicTarget | EmailTarget
TARGET_TYPES: tuple[type, ...] = (QueueTarget, FunctionTarget, StateMachineTarget, TopicTarget, EmailTarget)
