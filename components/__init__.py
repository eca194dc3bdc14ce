"""scheduled-table: make things happen on AWS at the time named by data in DynamoDB, as one Pulumi component."""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .args import Mode, ScheduledTableArgs
    from .component import ScheduledTable
    from .due_event import DueEvent, due_event_schema
    from .existing import ExistingTable
    from .overrides import FunctionOverrides, VpcConfig
    from .pending import pending_attributes
    from .queues import ExistingQueue
    from .targets import (
        EmailTarget,
        EventBusTarget,
        FunctionTarget,
        QueueTarget,
        StateMachineTarget,
        Target,
        TopicTarget,
    )

# Each public name's module, imported on first use (PEP 562): a consumer that only parses due events
# (`scheduled_table.consumer`, `scheduled_table.due_event`) loads neither Pulumi nor the component, so a Lambda
# function can ship the package without its dependencies (`pip install --no-deps scheduled-table`).
_MODULES = {
    "Mode": "args",
    "ScheduledTableArgs": "args",
    "ScheduledTable": "component",
    "DueEvent": "due_event",
    "due_event_schema": "due_event",
    "ExistingQueue": "queues",
    "ExistingTable": "existing",
    "FunctionOverrides": "overrides",
    "VpcConfig": "overrides",
    "pending_attributes": "pending",
    "EmailTarget": "targets",
    "EventBusTarget": "targets",
    "FunctionTarget": "targets",
    "QueueTarget": "targets",
    "StateMachineTarget": "targets",
    "Target": "targets",
    "TopicTarget": "targets",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_MODULES[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULES})


try:
    # One source for the version: pyproject.toml, as installed (a source tree run without installing has none).
    __version__ = version("scheduled-table")
except PackageNotFoundError:  # pragma: no cover - only when imported from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "DueEvent",
    "EmailTarget",
    "EventBusTarget",
    "ExistingQueue",
    "ExistingTable",
    "FunctionOverrides",
    "FunctionTarget",
    "Mode",
    "QueueTarget",
    "ScheduledTable",
    "ScheduledTableArgs",
    "StateMachineTarget",
    "Target",
    "TopicTarget",
    "VpcConfig",
    "due_event_schema",
    "pending_attributes",
]
