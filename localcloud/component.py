"""The component as the local cloud uses it, under the name it has where the local cloud runs.

The local cloud ships inside the package (`scheduled_table.localcloud`, the `[local]` extra), so a user runs it on
their own program with `scheduled-table local`; there the component is `scheduled_table`. In a checkout of this
repo the same files are the top-level `localcloud` and the component is installed editable as `scheduled_table`
too; only a checkout without that install falls back to the source folder's name, `components`. Every other module
of the local cloud imports the component from here, so that choice is made once. Type checkers read the source
folder (they cannot follow the editable install)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from components.args import ScheduledTableArgs
    from components.arns import email_address
    from components.cli import backfill as scan_commands
    from components.cli.aws import REGION_HINT, REGION_RULE, endpoint_url, profile_problem, rule_region
    from components.cli.console import launch as launch_console
    from components.cli.redrive.discovery import discover
    from components.cli.time_hints import find as time_hint
    from components.component import TYPE
    from components.packaging import constants, error_code, runtime_module
    from components.stack_config import tables_from_config
    from components.targets import EmailTarget
    from components.testing import (
        ACCOUNT,
        STACK_TYPE,
        Backend,
        Invoke,
        RecordingMonitor,
        Registration,
        ScheduledTableMocks,
        config_string,
        fabricate,
        fabricated_table,
        first_cause,
        set_mocks,
    )
    from components.types import Mode
else:
    try:
        from scheduled_table.args import ScheduledTableArgs
    except ModuleNotFoundError as error:
        if error.name != "scheduled_table":
            raise
        from components.args import ScheduledTableArgs
        from components.arns import email_address
        from components.cli import backfill as scan_commands
        from components.cli.aws import REGION_HINT, REGION_RULE, endpoint_url, profile_problem, rule_region
        from components.cli.console import launch as launch_console
        from components.cli.redrive.discovery import discover
        from components.cli.time_hints import find as time_hint
        from components.component import TYPE
        from components.packaging import constants, error_code, runtime_module
        from components.stack_config import tables_from_config
        from components.targets import EmailTarget
        from components.testing import (
            ACCOUNT,
            STACK_TYPE,
            Backend,
            Invoke,
            RecordingMonitor,
            Registration,
            ScheduledTableMocks,
            config_string,
            fabricate,
            fabricated_table,
            first_cause,
            set_mocks,
        )
        from components.types import Mode
    else:
        from scheduled_table.arns import email_address
        from scheduled_table.cli import backfill as scan_commands
        from scheduled_table.cli.aws import REGION_HINT, REGION_RULE, endpoint_url, profile_problem, rule_region
        from scheduled_table.cli.console import launch as launch_console
        from scheduled_table.cli.redrive.discovery import discover
        from scheduled_table.cli.time_hints import find as time_hint
        from scheduled_table.component import TYPE
        from scheduled_table.packaging import constants, error_code, runtime_module
        from scheduled_table.stack_config import tables_from_config
        from scheduled_table.targets import EmailTarget
        from scheduled_table.testing import (
            ACCOUNT,
            STACK_TYPE,
            Backend,
            Invoke,
            RecordingMonitor,
            Registration,
            ScheduledTableMocks,
            config_string,
            fabricate,
            fabricated_table,
            first_cause,
            set_mocks,
        )
        from scheduled_table.types import Mode

__all__ = [
    "ACCOUNT",
    "REGION_HINT",
    "REGION_RULE",
    "STACK_TYPE",
    "TYPE",
    "Backend",
    "EmailTarget",
    "Invoke",
    "Mode",
    "RecordingMonitor",
    "Registration",
    "ScheduledTableArgs",
    "ScheduledTableMocks",
    "config_string",
    "constants",
    "discover",
    "email_address",
    "endpoint_url",
    "error_code",
    "fabricate",
    "fabricated_table",
    "first_cause",
    "launch_console",
    "profile_problem",
    "rule_region",
    "runtime_module",
    "scan_commands",
    "set_mocks",
    "tables_from_config",
    "time_hint",
]
