"""`up` and `down`: run the real `__main__.py` under Pulumi mocks whose backend creates each resource in the local
AWS, or replays it to delete what `up` created, newest first."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .component import ScheduledTableArgs
from .mocks import Registration
from .program import REPO, run_program, stack_region, stack_tables
from .provision import Provisioner

LOCAL_STACK = "local"


@dataclass(frozen=True)
class TableKeys:
    """A table the program expects to exist (an `ExistingTable` given by name in Python), named on the command line
    (`--existing-table NAME:PK[:SK]`) so `up` makes it first, with string keys, as `ensure_table` makes one."""

    name: str
    partition_key: str
    sort_key: str | None = None
    partition_key_type: str = "S"
    sort_key_type: str = "S"


@dataclass(frozen=True)
class Deployment:
    stack: str
    endpoint: str
    region: str
    resources: list[Registration]
    outputs: dict[str, Any]
    # Each table's name and settings as the stack configures them (what `up --stay` tells the user to write).
    tables: list[tuple[str, ScheduledTableArgs]] = field(default_factory=list)

    def of_type(self, suffix: str) -> list[Registration]:
        return [r for r in self.resources if r.type.endswith(suffix)]


def up(
    endpoint: str,
    stack: str = LOCAL_STACK,
    project_dir: Path = REPO,
    config_file: Path | None = None,
    existing: list[TableKeys] | None = None,
) -> Deployment:
    """Create or update every resource of the stack in the local AWS; returns them and the stack's exports. Tables
    the stack uses but does not own (from its stack file, or `existing`) are made first."""
    region = stack_region(stack, project_dir, config_file)
    tables = stack_tables(stack, project_dir, config_file)
    provisioner = Provisioner(endpoint, region)
    wanted: list[tuple[str, Any]] = [
        (n, next(a for _, a in tables if existing_name(a) == n)) for n in user_tables(tables)
    ]
    wanted += [(keys.name, keys) for keys in existing or []]
    for name, keys in wanted:
        if provisioner.ensure_table(name, keys):
            print(f"made table {name!r}, which the stack uses but does not own (in your AWS it would exist already)")
    mocks = run_program(
        stack, project_dir, backend=provisioner.apply, config_file=config_file, lookups=provisioner.lookups()
    )
    return Deployment(stack, endpoint, region, mocks.registrations(), mocks.stack_outputs, tables)


def existing_name(args: ScheduledTableArgs) -> str | None:
    """The name of an existing table given by name only (looked up when deploying), else None."""
    given = args.existing_table
    if given is None or given.stream_arn is not None or not isinstance(given.name, str):
        return None
    return given.name


def user_tables(tables: list[tuple[str, ScheduledTableArgs]]) -> list[str]:
    """Tables the stack acts on but does not own: the local cloud makes them first, as they would exist on AWS."""
    return sorted({n for _, args in tables if (n := existing_name(args)) is not None})


def down(
    endpoint: str, stack: str = LOCAL_STACK, project_dir: Path = REPO, config_file: Path | None = None
) -> list[str]:
    """Delete every resource the stack defines, dependents first; returns their names. Absent ones are skipped."""
    region = stack_region(stack, project_dir, config_file)
    provisioner = Provisioner(endpoint, region)
    planned = run_program(
        stack, project_dir, backend=provisioner.plan, config_file=config_file, lookups=provisioner.lookups()
    ).registrations()
    for registration in reversed(planned):
        provisioner.delete(registration.type, registration.name, registration.inputs)
    return [r.name for r in planned]
