"""What receives the due event. One small frozen class per kind; the kind string is the handlers' contract."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pulumi

from .arns import email_address
from .packaging import runtime_module

# SQS: MaximumMessageSize is 1,024..1,048,576 bytes; a queue made without it takes 256 KiB (the provider's default).
SQS_MIN_MESSAGE_BYTES = 1024
SQS_MAX_MESSAGE_BYTES = 1048576
SQS_DEFAULT_MESSAGE_BYTES = 262144


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
