"""QueueTarget: an SQS queue, standard or FIFO (handlers/st_core/target_types/sqs.py sends to it)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi

from ..packaging import constants
from ..suggest import keyword_hints
from ..target_base import TargetBase

# SQS FIFO: a MessageGroupId is 1-128 alphanumeric or punctuation characters (printable ASCII but space).
_FIFO_ID = re.compile(r"[!-~]{1,128}")
_FIFO_OPTIONS = ("message_group_attribute", "message_group_id", "content_based_deduplication")


@keyword_hints
@dataclass(frozen=True)
class QueueTarget(TargetBase):
    """An SQS queue, standard or FIFO, receives the due event as the message body.

    `max_message_bytes`: the largest message the queue accepts; set this to the queue's max_message_size if you
    raised it (up to 1 MiB). The handlers keep every due event they send to it within that size.

    `kms_key_arn` (on the queue, state machine and topic targets): the customer-managed KMS key that encrypts the
    target, if any; whoever sends to it is then allowed kms:GenerateDataKey and kms:Decrypt on that key (the key's
    policy must let the account's IAM policies grant that, as the default key policy does).

    FIFO queues only (an ARN ending in `.fifo`): each message's group is, by default, its item's (from the item's
    keys: an item's occurrences arrive in order, different items never wait for each other);
    `message_group_attribute` groups by an item attribute instead (an item without it keeps its own group), and
    `message_group_id` puts every message in that one group. The deduplication id comes from the occurrence, so SQS
    drops a redelivered occurrence within its 5-minute deduplication interval. `content_based_deduplication=True`
    says the queue has content-based deduplication on, which eventbridge mode requires: Scheduler sets no
    deduplication id.
    """

    queue_arn: pulumi.Input[str]
    max_message_bytes: int = constants.SQS_DEFAULT_MESSAGE_BYTES
    kms_key_arn: pulumi.Input[str] | None = None
    message_group_attribute: str | None = None
    message_group_id: str | None = None
    content_based_deduplication: bool = False
    kind: ClassVar[str] = "sqs"
    stack_type: ClassVar[str] = "queue"
    arn_field: ClassVar[str | None] = "queue_arn"
    listed: ClassVar[int] = 1
    docs: ClassVar[Mapping[str, str]] = {
        "max_message_bytes": (
            "the largest message the queue accepts, 1024-1048576 (its `maxMessageSize`); due events larger than this "
            "are sent without the item (`itemTrimmed`)"
        ),
        "message_group_attribute": (
            "FIFO queues: the item attribute whose value is the message group (an item without it keeps its own "
            "group); not set: one group per item"
        ),
        "message_group_id": "FIFO queues: put every message in this one group (not with `messageGroupAttribute`)",
        "content_based_deduplication": (
            "FIFO queues: the queue has content-based deduplication on, which `eventbridge` mode requires (Scheduler "
            "sets no deduplication id)"
        ),
    }

    def __post_init__(self) -> None:
        self._check_fifo_options()
        self.check()
        size = self.max_message_bytes
        if (
            isinstance(size, bool)
            or not isinstance(size, int)
            or not constants.SQS_MIN_MESSAGE_BYTES <= size <= constants.SQS_MAX_MESSAGE_BYTES
        ):
            raise ValueError(
                f"QueueTarget.max_message_bytes: {size!r} is out of range; use a whole number from "
                f"{constants.SQS_MIN_MESSAGE_BYTES} to {constants.SQS_MAX_MESSAGE_BYTES}, the queue's max_message_size"
            )

    def _check_fifo_options(self) -> None:
        attribute, group = self.message_group_attribute, self.message_group_id
        if attribute is not None and group is not None:
            raise ValueError(
                "QueueTarget.message_group_id: set either message_group_id (one group for every message) or "
                "message_group_attribute (a group per value of that item attribute), not both"
            )
        if attribute is not None and (not isinstance(attribute, str) or not attribute):
            raise ValueError(
                f"QueueTarget.message_group_attribute: {attribute!r} is not an attribute name; name the item "
                "attribute whose value is the message group, e.g. 'customerId'"
            )
        if group is not None and (not isinstance(group, str) or not _FIFO_ID.fullmatch(group)):
            raise ValueError(
                f"QueueTarget.message_group_id: {group!r} is not a message group id; use 1-128 letters, digits or "
                "punctuation (no spaces), e.g. 'reminders'"
            )
        if not isinstance(self.content_based_deduplication, bool):
            raise ValueError(
                f"QueueTarget.content_based_deduplication: {self.content_based_deduplication!r} is not a boolean; "
                "use True or False"
            )

    def options_problem(self, arn: str) -> str | None:
        """FIFO options on a standard queue."""
        if arn.endswith(".fifo"):
            return None
        for name in _FIFO_OPTIONS:
            if getattr(self, name):
                return (
                    f"QueueTarget.{name}: only applies to a FIFO queue, and {arn!r} is a standard queue (a FIFO "
                    f"queue's name ends in .fifo); remove {name}, or pass the FIFO queue's ARN"
                )
        return None

    def scheduler_problem(self, arn: str) -> str | None:
        """A FIFO queue whose content-based deduplication is not declared. Scheduler's SQS target sets a message
        group but no deduplication id, and a FIFO queue refuses a message with neither that nor content-based
        deduplication (AWS: "If you specify an Amazon SQS FIFO queue as a target, the queue must have content-based
        deduplication enabled")."""
        if self.content_based_deduplication or not arn.endswith(".fifo"):
            return None
        return (
            "QueueTarget.content_based_deduplication: eventbridge mode delivers through EventBridge Scheduler, which "
            "sets no deduplication id, so the FIFO queue must deduplicate by content or it refuses every delivery; "
            "enable it on the queue (content_based_deduplication=True on aws.sqs.Queue) and set "
            "content_based_deduplication=True here"
        )

    def handler_options(self) -> dict[str, Any]:
        options = {"messageGroupAttribute": self.message_group_attribute, "messageGroupId": self.message_group_id}
        return {key: value for key, value in options.items() if value is not None}
