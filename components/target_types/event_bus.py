"""EventBusTarget: an EventBridge event bus (handlers/st_core/target_types/events.py puts events on it)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi

from ..suggest import keyword_hints
from ..target_base import TargetBase

# EventBridge PutEvents: DetailType is 1-128 characters; Source 1-256, not starting `aws.` (AWS's own). Scheduler's
# templated target asks Source's first character to be one of these.
DETAIL_TYPE_CHARS = 128
SOURCE_CHARS = 256
_SOURCE_START = re.compile(r"[/._A-Za-z0-9-]")


@keyword_hints
@dataclass(frozen=True)
class EventBusTarget(TargetBase):
    """An EventBridge event bus receives one event per due event, the due event as its `detail`, with this
    `detail_type` and `source` (defaults: "scheduled-table.due" and "scheduled-table"), for your rules to route
    (other buses and accounts, API destinations, any rule target).

    A bus encrypted with a customer-managed key needs nothing from the sender: EventBridge uses the key itself, so
    the key's policy must allow `events.amazonaws.com` (there is no `kms_key_arn` here, and no KMS grant).
    """

    bus_arn: pulumi.Input[str]
    detail_type: str = "scheduled-table.due"
    source: str = "scheduled-table"
    kind: ClassVar[str] = "events"
    stack_type: ClassVar[str] = "eventBus"
    arn_field: ClassVar[str | None] = "bus_arn"
    listed: ClassVar[int] = 5
    docs: ClassVar[Mapping[str, str]] = {
        "detail_type": "the events' `detail-type`, for your rules to match",
        "source": "the events' `source` (not starting `aws.`), for your rules to match",
    }

    def __post_init__(self) -> None:
        detail_type, source = self.detail_type, self.source
        if not isinstance(detail_type, str) or not 1 <= len(detail_type) <= DETAIL_TYPE_CHARS:
            raise ValueError(
                f"EventBusTarget.detail_type: {detail_type!r} is not a detail type; use 1-{DETAIL_TYPE_CHARS} "
                "characters, e.g. 'scheduled-table.due'"
            )
        if not isinstance(source, str) or not 1 <= len(source) <= SOURCE_CHARS or not _SOURCE_START.match(source):
            raise ValueError(
                f"EventBusTarget.source: {source!r} is not an event source; use 1-{SOURCE_CHARS} characters starting "
                "with a letter, digit or one of / . _ -, e.g. 'com.example.reminders'"
            )
        if source.startswith("aws."):
            raise ValueError(
                f"EventBusTarget.source: {source!r} starts with 'aws.', which AWS reserves for its own services; "
                "use your own, e.g. 'com.example.reminders'"
            )
        self.check()

    def handler_options(self) -> dict[str, Any]:
        return {"detailType": self.detail_type, "source": self.source}
