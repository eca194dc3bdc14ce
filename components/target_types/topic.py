"""TopicTarget: an SNS topic, standard or FIFO (handlers/st_core/target_types/sns.py publishes to it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pulumi

from ..suggest import keyword_hints
from ..target_base import TargetBase


@keyword_hints
@dataclass(frozen=True)
class TopicTarget(TargetBase):
    """An SNS topic receives the due event as the message.

    A FIFO topic (an ARN ending in `.fifo`): each message's group is its item's (from the item's keys) and its
    deduplication id the occurrence's, as for a FIFO queue. Only the `ttl` and `polling` modes deliver to one:
    `eventbridge` mode delivers through EventBridge Scheduler, whose SNS target sets no message group.

    `kms_key_arn`: the customer-managed KMS key encrypting it, if any (see QueueTarget).
    """

    topic_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str] | None = None
    kind: ClassVar[str] = "sns"
    stack_type: ClassVar[str] = "topic"
    arn_field: ClassVar[str | None] = "topic_arn"
    listed: ClassVar[int] = 4

    def scheduler_problem(self, arn: str) -> str | None:
        """A FIFO topic: Scheduler's SNS target (templated, no parameters) sets no message group, which a FIFO
        topic requires of every message."""
        if not arn.endswith(".fifo"):
            return None
        return (
            f"TopicTarget.topic_arn: {arn!r} is a FIFO topic, and eventbridge mode delivers through EventBridge "
            "Scheduler, whose SNS target sets no message group, so the topic would refuse every delivery; use "
            "mode 'ttl' or 'polling' (their functions publish with a message group and deduplication id), a "
            "standard topic, or a FIFO QueueTarget with content_based_deduplication=True"
        )
