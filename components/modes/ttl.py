"""`ttl` mode: TTL deletion -> filtered stream -> executor -> target (seeds 001, 004); `precise` adds a schedule per
item that fires it on time. Its resources are made by components/ttl.py; the handler side is handlers/ttl.py."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..checks import fail, is_set
from ..filters import MAX_FILTERS, TIME_TYPES, unusable_due_filters
from ..runtime_config import Value, ledger_section, scheduler_section, scheduling_values
from .base import SCHEDULER_OPTIONS, ModeBase, Operated, check_scheduler_options

if TYPE_CHECKING:
    from ..args import ScheduledTableArgs
    from ..parts import BuildContext, ModeResult

TTL_ONLY = ("repeat_attribute", "repeat_until_attribute", "occurrence_attribute")


class Ttl(ModeBase):
    name = "ttl"
    listed = 1
    options = (*SCHEDULER_OPTIONS, "precise", *TTL_ONLY)
    refusal_fixes = MappingProxyType({"precise": "remove precise or set mode='ttl'"})
    text_options = TTL_ONLY
    roles = MappingProxyType(
        {"executor": "acts on items the table's TTL (or their precise delete schedule) removed as due"}
    )
    stream_roles = frozenset({"executor"})

    def check(self, args: ScheduledTableArgs) -> None:
        if not args.precise:
            for name in SCHEDULER_OPTIONS:
                if is_set(args, name):
                    fail(
                        name,
                        "only applies to schedules: mode='eventbridge', or mode='ttl' with precise=True",
                        f"remove {name} or set precise=True",
                    )
        check_scheduler_options(args)
        taken = {args.partition_key, args.sort_key, args.time_attribute}
        for name in TTL_ONLY:
            value = getattr(args, name)
            if not value:
                fail(name, "must not be empty", "name an attribute, e.g. the default")
            if value in taken:
                fail(name, f"{value!r} is already used by another option (keys, time, repeat)", "give it its own name")
            taken.add(value)

    def has_target_dlq(self, args: ScheduledTableArgs) -> bool:
        return args.precise

    def needed_values(self, args: ScheduledTableArgs) -> tuple[Value, ...]:
        return (Value.LEDGER_TABLE, *(scheduling_values(args) if args.precise else ()))

    def section(self, args: ScheduledTableArgs, values: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        ttl = {
            **ledger_section(args, values),
            "repeatAttribute": args.repeat_attribute,
            "repeatUntilAttribute": args.repeat_until_attribute,
            "occurrenceAttribute": args.occurrence_attribute,
            "precise": args.precise,
        }
        return {"ttl": ttl, **({"scheduler": scheduler_section(args, values)} if args.precise else {})}

    def filters(self, args: ScheduledTableArgs) -> list[dict[str, Any]]:
        return ttl_filters(args.time_attribute, args.precise)

    def table_problems(self, found: Mapping[str, Any], *, time_attribute: str) -> list[str]:
        ttl = found.get("ttl") or {}
        if ttl.get("enabled") and ttl.get("attribute_name") == time_attribute:
            return []
        return [
            f"table {found.get('name')!r} does not expire items by {time_attribute!r}; enable TTL on "
            f"{time_attribute!r} (ttl mode acts when TTL deletes an item)"
        ]

    def table_parts(self, args: ScheduledTableArgs) -> dict[str, Any]:
        import pulumi_aws as aws

        # DynamoDB deletes each item once its time attribute (epoch seconds) has passed.
        return {"ttl": aws.dynamodb.TableTtlArgs(attribute_name=args.time_attribute, enabled=True)}

    def operated(self, config: Mapping[str, Any]) -> Operated:
        # Precise: each item has a schedule whose fire is an UpdateItem; plain: TTL's deletion is all there is.
        precise = bool((config.get("ttl") or {}).get("precise"))
        return Operated(
            ordered_by_item=precise,
            sweeps_schedules=precise,
            fires_items=precise,
            filters_by_due_type=precise,
            sampled_by_scan=not precise,
            redrives_to_target=not precise,
        )

    def lateness_bound(self, config: Mapping[str, Any]) -> tuple[float | None, str]:
        if (config.get("ttl") or {}).get("precise"):
            return 180.0, "120 s (precise) + Scheduler's delay"
        return None, "DynamoDB TTL's: minutes to days"

    def build(self, ctx: BuildContext) -> ModeResult:
        from ..ttl import build

        return build(ctx)


TTL_SERVICE = {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}


def ttl_filters(time_attribute: str, precise: bool) -> list[dict[str, Any]]:
    """Only TTL deletions (REMOVE by the DynamoDB service): inserts, updates and users' deletes never invoke the
    executor.

    Precise mode must also see: inserts and updates of items with a due time (to keep their schedule; a string
    due time too, to park it with the reason, since TTL ignores it); and updates and removes of items that held a
    numeric due time, which covers users' deletes (a cancel, or due), TTL's deletions, a due time removed, and the
    schedule's fire (`SET stFiredAt = <due> REMOVE <due attribute>`, see handlers/ttl.py). Not passed: the
    executor's own delete of a fired item (it holds no due time), and removes or updates of items whose due time was
    a string (never scheduled, nothing to undo). Inserts and updates whose due attribute is null or a boolean pass
    too, in the two filters left of Lambda's five, to be parked with their reason."""
    if precise:
        patterns: list[dict[str, Any]] = [
            {"eventName": ["INSERT", "MODIFY"], "dynamodb": {"NewImage": {time_attribute: {tag: [{"exists": True}]}}}}
            for tag in TIME_TYPES
        ]
        patterns.append(
            {"eventName": ["MODIFY", "REMOVE"], "dynamodb": {"OldImage": {time_attribute: {"N": [{"exists": True}]}}}}
        )
        return [*patterns, *unusable_due_filters(time_attribute, MAX_FILTERS - len(patterns))]
    return [{"eventName": ["REMOVE"], "userIdentity": TTL_SERVICE}]
