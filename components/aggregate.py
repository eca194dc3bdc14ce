"""`aggregate` mode: filtered stream -> running totals in the same table, exactly once (seed 003). The handler side
is `handlers/aggregate.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi

from . import policies
from .filters import aggregate_filters
from .parts import Consumer, flatten
from .runtime_config import Value

if TYPE_CHECKING:
    from .component import ScheduledTable


def build(component: ScheduledTable) -> Consumer:
    """Filtered stream -> running totals in the same table, one conditional write per group per batch (seed 003);
    a transaction with ledger markers only for a total with more recent records than its ids can hold."""
    a = component._args
    ledger = component._ledger()
    statements = pulumi.Output.all(
        component.table.arn.apply(lambda arn: policies.table_item_statements(arn, ["UpdateItem"])),
        ledger.arn.apply(lambda arn: policies.table_item_statements(arn, ["PutItem"])),
    ).apply(flatten)
    return component._consumer(
        role="aggregator",
        handler="aggregate.handler",
        filters=aggregate_filters(a.partition_key, a.source_prefix, a.on_change),
        extra_statements=statements,
        config=component._config({Value.LEDGER_TABLE: ledger.name}),
    )
