"""`up` and `down`: run the real `__main__.py` under Pulumi mocks whose backend creates each resource in the local
AWS, or replays it to delete what `up` created, newest first."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .mocks import Registration
from .program import REPO, run_program, stack_region
from .provision import Provisioner

LOCAL_STACK = "local"


@dataclass(frozen=True)
class Deployment:
    stack: str
    endpoint: str
    region: str
    resources: list[Registration]
    outputs: dict[str, Any]

    def of_type(self, suffix: str) -> list[Registration]:
        return [r for r in self.resources if r.type.endswith(suffix)]


def up(endpoint: str, stack: str = LOCAL_STACK, project_dir: Path = REPO) -> Deployment:
    """Create or update every resource of the stack in the local AWS; returns them and the stack's exports."""
    region = stack_region(stack, project_dir)
    mocks = run_program(stack, project_dir, backend=Provisioner(endpoint, region).apply)
    return Deployment(stack, endpoint, region, mocks.registrations(), mocks.stack_outputs)


def down(endpoint: str, stack: str = LOCAL_STACK, project_dir: Path = REPO) -> list[str]:
    """Delete every resource the stack defines, dependents first; returns their names. Absent ones are skipped."""
    region = stack_region(stack, project_dir)
    provisioner = Provisioner(endpoint, region)
    planned = run_program(stack, project_dir, backend=provisioner.plan).registrations()
    for registration in reversed(planned):
        provisioner.delete(registration.type, registration.name, registration.inputs)
    return [r.name for r in planned]
