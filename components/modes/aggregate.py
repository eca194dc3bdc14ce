"""`aggregate` mode: filtered stream -> running totals in the same table, exactly once (seed 003); no target. Its
resources are made by components/aggregate.py; the handler side is handlers/aggregate/."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..checks import fail
from ..runtime_config import Value
from .base import ModeBase, Operated

if TYPE_CHECKING:
    from ..args import ScheduledTableArgs
    from ..parts import BuildContext, ModeResult

AGGREGATE_ONLY = (
    "source_prefix",
    "value_attribute",
    "group_from",
    "total_sort_key",
    "total_attribute",
    "aggregation",
    "on_change",
)
# Beyond the record age and the timeout: clock differences between DynamoDB and Lambda, a write still in flight when
# its invocation timed out, and ApproximateCreationDateTime being approximate.
HORIZON_MARGIN_SECONDS = 300


class Aggregate(ModeBase):
    name = "aggregate"
    listed = 3
    options = AGGREGATE_ONLY
    text_options = ("source_prefix", "value_attribute", "group_from", "total_sort_key", "total_attribute")
    roles = MappingProxyType(
        {"aggregator": "keeps running totals of the table's score items, each record counted once"}
    )
    stream_roles = frozenset({"aggregator"})
    has_target = False
    keeps_totals = True

    def check(self, args: ScheduledTableArgs) -> None:
        if args.target is not None:
            fail("target", "aggregate mode writes totals to the table and has no target", "remove target")
        if args.sort_key is None or args.partition_key_type != "S" or args.sort_key_type != "S":
            fail(
                "sort_key", "aggregate mode keeps totals at PK=<group>, SK=total_sort_key", "use string PK and SK keys"
            )
        for name in ("source_prefix", "value_attribute", "group_from", "total_sort_key", "total_attribute"):
            if not getattr(args, name):
                fail(name, "must not be empty", "use the default or name your own")
        if args.total_attribute in (args.partition_key, args.sort_key, args.value_attribute):
            fail("total_attribute", f"{args.total_attribute!r} is a key or the value attribute", "use its own name")
        if args.value_attribute in (args.partition_key, args.sort_key):
            fail(
                "value_attribute",
                f"{args.value_attribute!r} is a key attribute",
                "name the attribute holding the value",
            )
        if args.total_attribute.startswith("stIds") or args.total_attribute == "stLedgerUntil":
            fail(
                "total_attribute",
                f"{args.total_attribute!r} is reserved: the total item keeps its recent record ids in stIds<n> and "
                "stLedgerUntil",
                "use another name",
            )
        if args.aggregation not in ("sum", "count"):
            fail("aggregation", f"{args.aggregation!r} is not supported", "use 'sum' or 'count'")
        if args.on_change not in ("ignore", "adjust"):
            fail(
                "on_change", f"{args.on_change!r} is not valid", "use 'ignore' (inserts only, as seed 003) or 'adjust'"
            )
        # The mapping's filter passes records whose *partition key* starts with source_prefix, and a total lives at
        # partition key = the group: a group taken from the partition key itself always starts with the prefix, so
        # every score would be parked (a group value that starts with it is parked at run time, with the reason).
        if args.group_from == args.partition_key:
            fail(
                "group_from",
                f"{args.group_from!r} is the partition key, whose values all start with source_prefix "
                f"{args.source_prefix!r}: each total would look like a score and every score would be parked",
                "group by the sort key (the default, 'SK') or another attribute",
            )

    def needed_values(self, args: ScheduledTableArgs) -> tuple[Value, ...]:
        return (Value.LEDGER_TABLE,)

    def section(self, args: ScheduledTableArgs, values: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        aggregate = {
            "sourcePrefix": args.source_prefix,
            "valueAttribute": args.value_attribute,
            "groupFrom": args.group_from,
            "totalSortKey": args.total_sort_key,
            "totalAttribute": args.total_attribute,
            "aggregation": args.aggregation,
            "onChange": args.on_change,
            "ledgerTable": values[Value.LEDGER_TABLE],
            "windowSeconds": args.idempotency_window_seconds,
            "horizonSeconds": aggregate_horizon_seconds(args),
        }
        return {"aggregate": aggregate}

    def filters(self, args: ScheduledTableArgs) -> list[dict[str, Any]]:
        return aggregate_filters(args.partition_key, args.source_prefix, args.on_change)

    def operated(self, config: Mapping[str, Any]) -> Operated:
        return Operated(ordered_by_item=False, reads_due_time=False, totals=self.keeps_totals, redrives_to_target=False)

    def lateness_bound(self, config: Mapping[str, Any]) -> tuple[float | None, str]:
        return None, "the stream's lag (aggregate: no deliveries)"

    def build(self, ctx: BuildContext) -> ModeResult:
        from ..aggregate import build

        return build(ctx)


def aggregate_horizon_seconds(args: ScheduledTableArgs) -> int:
    """How long after a change its stream record can still reach the aggregator: the event source mapping discards
    records older than `maximum_record_age_seconds`, and a delivery that starts just before that age may run for the
    function's timeout. The aggregator keeps each record's id on the total at least this long."""
    return args.maximum_record_age_seconds + args.lambda_timeout_seconds + HORIZON_MARGIN_SECONDS


def aggregate_filters(partition_key: str, prefix: str, on_change: str) -> list[dict[str, Any]]:
    """Source items only, by their key's prefix (seed 003's filter): inserts, and with `adjust` also updates and
    deletes. Totals and ledger markers never have that prefix, so the mode's own writes cannot invoke it."""
    events = ["INSERT", "MODIFY", "REMOVE"] if on_change == "adjust" else ["INSERT"]
    return [{"eventName": events, "dynamodb": {"Keys": {partition_key: {"S": [{"prefix": prefix}]}}}}]
