"""The plugin's entry point: Pulumi runs `python <this folder> <engine address>` to serve ScheduledTable to programs
in every language (`pulumi package add` asks it for the schema; `pulumi up` for each table)."""

from pulumi.provider.experimental import component_provider_host
from scheduled_table.provider import ScheduledTable, package_version

if __name__ == "__main__":
    component_provider_host([ScheduledTable], name="scheduled-table", version=package_version())
