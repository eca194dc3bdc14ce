"""The local cloud's Pulumi mocks are the public testing kit's (components/testing.py): they record every registration
and hand each resource to a backend, by default one that fabricates AWS-shaped identifiers, or the local cloud's
provisioner, which creates it for real."""

from __future__ import annotations

from collections.abc import Mapping

from .component import (
    ACCOUNT,
    STACK_TYPE,
    Backend,
    Invoke,
    RecordingMonitor,
    Registration,
    fabricate,
    set_mocks,
)
from .component import ScheduledTableMocks as RecordingMocks

__all__ = [
    "ACCOUNT",
    "STACK_TYPE",
    "Backend",
    "RecordingMocks",
    "RecordingMonitor",
    "Registration",
    "fabricate",
    "install",
]


def install(
    region: str = "eu-west-1",
    *,
    project: str = "scheduled-table",
    stack: str = "test",
    backend: Backend | None = None,
    lookups: Mapping[str, Invoke] | None = None,
) -> RecordingMocks:
    """Route every Pulumi resource registration in this process to recording mocks. Only the `lookups` given are
    answered (the component makes one only for an existing table given by name)."""
    return set_mocks(region, project=project, stack=stack, backend=backend, invokes=dict(lookups or {}))
