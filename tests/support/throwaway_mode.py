"""A mode declared in this one module and nowhere else (tests/components/test_mode_registry.py registers it):
`archive`, which sends each item a user deletes to the target, once. Its rules, its handler configuration section,
its stream filter, its roles and its build live here, through components/modes/base.py and the shared builders
alone: it shows a new mode needs no other module of the component changed."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import pulumi

from components import policies
from components.builders import build_ledger, build_stream_consumer, handler_config, target_statements
from components.checks import fail
from components.modes.base import ModeBase
from components.parts import ModeResult, flatten
from components.runtime_config import Value, ledger_section

if TYPE_CHECKING:
    from components.args import ScheduledTableArgs
    from components.parts import BuildContext

MAX_BATCH = 100


class Archive(ModeBase):
    name = "archive"
    roles = MappingProxyType({"archiver": "sends each item a user deletes to the target, once"})
    stream_roles = frozenset({"archiver"})

    def check(self, args: ScheduledTableArgs) -> None:
        if args.batch_size > MAX_BATCH:
            fail("batch_size", f"{args.batch_size} is too many for mode 'archive' (one send a record)", "use <= 100")

    def needed_values(self, args: ScheduledTableArgs) -> tuple[Value, ...]:
        return (Value.LEDGER_TABLE,)

    def section(self, args: ScheduledTableArgs, values: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        return {"archive": ledger_section(args, values)}

    def filters(self, args: ScheduledTableArgs) -> list[dict[str, Any]]:
        # Users' deletes only: TTL's deletions carry the service's identity, users' none.
        return [{"eventName": ["REMOVE"], "userIdentity": {"type": [{"exists": False}]}}]

    def build(self, ctx: BuildContext) -> ModeResult:
        ledger = build_ledger(ctx)
        statements = pulumi.Output.all(
            target_statements(ctx, policies.direct_dispatch_statements),
            ledger.arn.apply(policies.ledger_statements),
        ).apply(flatten)
        consumer = build_stream_consumer(
            ctx,
            role="archiver",
            handler="archive.handler",
            filters=self.filters(ctx.args),
            extra_statements=statements,
            config=handler_config(ctx, {Value.LEDGER_TABLE: ledger.name}),
        )
        return ModeResult(consumer=consumer, ledger_table_name=ledger.name)
