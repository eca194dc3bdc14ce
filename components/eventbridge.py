"""`eventbridge` mode: stream -> scheduling Lambda -> one Scheduler `at()` schedule per occurrence -> target (seed
000). The handler side is `handlers/eventbridge.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi

from . import policies
from .filters import eventbridge_filters
from .parts import Consumer, flatten
from .runtime_config import Value

if TYPE_CHECKING:
    from .component import ScheduledTable


def build(component: ScheduledTable) -> Consumer:
    """Stream -> scheduling Lambda -> one Scheduler `at()` schedule per item -> target (seed 000)."""
    a = component._args
    ledger = component._ledger()
    scheduling = component._scheduling(component._target_statements(policies.target_statements))
    statements = pulumi.Output.all(
        scheduling.consumer_statements,
        component._target_statements(policies.direct_dispatch_statements),
        # Deliveries are claimed once per occurrence in the ledger; the item is read back before acting.
        ledger.arn.apply(policies.ledger_statements),
        component.table.arn.apply(lambda arn: policies.table_item_statements(arn, ["GetItem"])),
    )
    return component._consumer(
        role="scheduler",
        handler="eventbridge.handler",
        filters=eventbridge_filters(a.time_attribute),
        extra_statements=statements.apply(flatten),
        config=component._config({**scheduling.values, Value.LEDGER_TABLE: ledger.name}),
    )
