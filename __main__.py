"""The scheduled-table Pulumi program: read the stack's config, build one ScheduledTable per table, export outputs."""

from __future__ import annotations

import pulumi

from components import ScheduledTable
from components.stack_config import StackConfig, tables_from_config

tables = [ScheduledTable(name, args) for name, args in tables_from_config(StackConfig())]

for table in tables:
    pulumi.export(table.name, table.outputs)
if len(tables) == 1:
    # A one-table stack also exports each output at the top level (`pulumi stack output table_name`).
    for key, value in tables[0].outputs.items():
        pulumi.export(key, value)
