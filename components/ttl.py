"""`ttl` mode: TTL deletion -> filtered stream -> executor -> target (seeds 001, 004); `precise` adds a schedule
per item that fires it (an UpdateItem the executor acts on). The handler side is `handlers/ttl.py`."""

from __future__ import annotations

import pulumi

from . import modes, policies
from .builders import (
    build_ledger,
    build_scheduling,
    build_stream_consumer,
    handler_config,
    target_statements,
)
from .parts import BuildContext, ModeResult, flatten
from .runtime_config import Value


def build(ctx: BuildContext) -> ModeResult:
    """TTL deletion -> filtered stream -> executor -> target (seeds 001, 004); `precise` adds a schedule per item
    that fires it on time (Scheduler may only UpdateItem this table), with TTL as the fallback."""
    a = ctx.args
    ledger = build_ledger(ctx)
    # Precise: the executor fires an item whose due time has passed (UpdateItem, as its schedule would), deletes a
    # fired item once acted on, writes a repeating one back (PutItem), and reads an item's due time before making or
    # deleting its schedule (GetItem: a replayed old record must not undo a newer one's schedule).
    item_actions = ["PutItem", "DeleteItem", "UpdateItem", "GetItem"] if a.precise else ["PutItem"]
    statements: list[pulumi.Output[list[policies.Statement]]] = [
        target_statements(ctx, policies.direct_dispatch_statements),
        ledger.arn.apply(policies.ledger_statements),
        ctx.table.arn.apply(lambda arn: policies.table_item_statements(arn, item_actions)),
    ]
    values: dict[str, pulumi.Input[str]] = {Value.LEDGER_TABLE: ledger.name}
    group_name = target_dlq_url = None
    if a.precise:
        delete_item = pulumi.Output.all(ctx.table.arn, a.kms_key_arn).apply(
            lambda v: policies.scheduled_delete_statements(v[0], v[1])
        )
        scheduling = build_scheduling(ctx, delete_item)
        group_name, target_dlq_url = scheduling.group.name, scheduling.target_dlq.url
        statements.append(scheduling.consumer_statements)
        values.update(scheduling.values)
    consumer = build_stream_consumer(
        ctx,
        role="executor",
        handler="ttl.handler",
        filters=modes.of(a).filters(a),
        extra_statements=pulumi.Output.all(*statements).apply(flatten),
        config=handler_config(ctx, values),
    )
    return ModeResult(
        consumer=consumer,
        schedule_group_name=group_name,
        target_dlq_url=target_dlq_url,
        ledger_table_name=ledger.name,
    )
