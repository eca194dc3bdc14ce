"""scheduled-table: make things happen on AWS at the time named by data in DynamoDB, as one Pulumi component."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from .args import Mode, ScheduledTableArgs
from .component import ScheduledTable
from .due_event import DueEvent, due_event_schema
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

try:
    # One source for the version: pyproject.toml, as installed (a source tree run without installing has none).
    __version__ = version("scheduled-table")
except PackageNotFoundError:  # pragma: no cover - only when imported from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "DueEvent",
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
    "due_event_schema",
    "pending_attributes",
]
