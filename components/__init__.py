"""scheduled-table: make things happen on AWS at the time named by data in DynamoDB, as one Pulumi component."""

from __future__ import annotations

from .args import Mode, ScheduledTableArgs
from .component import ScheduledTable
from .existing import ExistingTable
from .pending import pending_attributes
from .targets import (
    EmailTarget,
    EventBusTarget,
    FunctionTarget,
    QueueTarget,
    StateMachineTarget,
    Target,
    TopicTarget,
)

__all__ = [
    "EmailTarget",
    "EventBusTarget",
    "ExistingTable",
    "FunctionTarget",
    "Mode",
    "QueueTarget",
    "ScheduledTable",
    "ScheduledTableArgs",
    "StateMachineTarget",
    "Target",
    "TopicTarget",
    "pending_attributes",
]
