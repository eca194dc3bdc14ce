"""`ttl` mode: TTL deletion -> filtered stream -> executor -> target (seeds 001, 004); `precise` adds a schedule
per item that fires it (an UpdateItem the executor acts on). The handler side is `handlers/ttl.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pulumi

from . import policies
from .filters import ttl_filters
from .parts import Consumer, flatten
from .runtime_config import Value

if TYPE_CHECKING:
    from .component import ScheduledTable


def build(component: ScheduledTable) -> Consumer:
    """TTL deletion -> filtered stream -> executor -> target (seeds 001, 004); `precise` adds a schedule per item
    that fires it on time (Scheduler may only UpdateItem this table), with TTL as the fallback."""
    a = component._args
    ledger = component._ledger()
    # Precise: the executor fires an item whose due time has passed (UpdateItem, as its schedule would), deletes a
    # fired item once acted on, and writes a repeating one back (PutItem).
    item_actions = ["PutItem", "DeleteItem", "UpdateItem"] if a.precise else ["PutItem"]
    statements: list[pulumi.Output[list[policies.Statement]]] = [
        component._target_statements(policies.direct_dispatch_statements),
        ledger.arn.apply(policies.ledger_statements),
        component.table.arn.apply(lambda arn: policies.table_item_statements(arn, item_actions)),
    ]
    values: dict[str, pulumi.Input[str]] = {Value.LEDGER_TABLE: ledger.name}
    if a.precise:
        delete_item = pulumi.Output.all(component.table.arn, a.kms_key_arn).apply(
            lambda v: policies.scheduled_delete_statements(v[0], v[1])
        )
        scheduling = component._scheduling(delete_item)
        statements.append(scheduling.consumer_statements)
        values.update(scheduling.values)
    return component._consumer(
        role="executor",
        handler="ttl.handler",
        filters=ttl_filters(a.time_attribute, a.precise),
        extra_statements=pulumi.Output.all(*statements).apply(flatten),
        config=component._config(values),
    )
