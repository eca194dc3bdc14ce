"""`aggregate` mode: filtered stream -> running totals in the same table, exactly once (seed 003). The handler side
is `handlers/aggregate/`."""

from __future__ import annotations

import pulumi

from . import modes, policies
from .builders import (
    build_ledger,
    build_stream_consumer,
    handler_config,
    other_accounts_table,
)
from .parts import BuildContext, ModeResult, flatten
from .runtime_config import Value


def build(ctx: BuildContext) -> ModeResult:
    """Filtered stream -> running totals in the same table, one conditional write per group per batch (seed 003);
    a transaction with ledger markers only for a total with more recent records than its ids can hold (on another
    account's table, the markers read and put in batches beside the total's update)."""
    a = ctx.args
    ledger = build_ledger(ctx)
    statements = pulumi.Output.all(
        ctx.table.arn.apply(lambda arn: policies.table_item_statements(arn, ["UpdateItem"])),
        pulumi.Output.all(ledger.arn, other_accounts_table(ctx)).apply(
            # on another account's table the markers are read and put in batches (no transaction holds both)
            lambda v: policies.table_item_statements(
                v[0], ["BatchGetItem", "BatchWriteItem", "PutItem"] if v[1] else ["PutItem"]
            )
        ),
    ).apply(flatten)
    consumer = build_stream_consumer(
        ctx,
        role="aggregator",
        handler="aggregate.handler",
        filters=modes.of(a).filters(a),
        extra_statements=statements,
        config=handler_config(ctx, {Value.LEDGER_TABLE: ledger.name}),
    )
    return ModeResult(consumer=consumer, ledger_table_name=ledger.name)
