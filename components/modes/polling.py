"""`polling` mode: a rule ticks -> the processor takes due items from the sharded due index; the assigner indexes
what users write (seed 002). Its resources are made by components/polling.py; the handler side is
handlers/polling/ (and polling_assign.py)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..checks import between, fail
from ..packaging import runtime_module
from ..runtime_config import Value, lease_seconds
from .base import ModeBase, Operated

if TYPE_CHECKING:
    from ..args import ScheduledTableArgs
    from ..parts import BuildContext, ModeResult

POLLING_ONLY = (
    "shards",
    "shard_groups",
    "poll_interval_minutes",
    "on_done",
    "delay_attribute",
    "default_delay_seconds",
    "max_attempts",
    "retry_backoff_seconds",
)


class Polling(ModeBase):
    name = "polling"
    listed = 2
    options = POLLING_ONLY
    text_options = ("delay_attribute",)
    roles = MappingProxyType(
        {
            "assigner": "indexes items users write into the table's sharded due index",
            "processor": "takes due items from the table's due index on each tick and sends them to the target",
        }
    )
    stream_roles = frozenset({"assigner"})

    def check(self, args: ScheduledTableArgs) -> None:
        between(args, "shards", 1, 100, " (one index partition each; 8 by default)")
        between(
            args,
            "shard_groups",
            1,
            args.shards,
            " (one processor invocation per group of shards; raise shards for more)",
        )
        between(args, "poll_interval_minutes", 1, 1440)
        if args.on_done not in ("mark", "delete"):
            fail("on_done", f"{args.on_done!r} is not valid", "use 'mark' (keep the item, marked done) or 'delete'")
        if not args.delay_attribute or args.delay_attribute in (args.partition_key, args.sort_key, args.time_attribute):
            fail("delay_attribute", f"{args.delay_attribute!r} cannot be used", "name an attribute of its own")
        if args.default_delay_seconds is not None:
            between(args, "default_delay_seconds", 0, 31536000)
        between(args, "max_attempts", 1, 100)
        between(args, "retry_backoff_seconds", 1, 86400)
        reserved: tuple[str, ...] = runtime_module("pending").INDEX_ATTRIBUTES
        for name in ("partition_key", "sort_key", "time_attribute", "delay_attribute"):
            if getattr(args, name) in reserved:
                fail(name, f"{getattr(args, name)!r} is reserved for the due index", f"use a name not in {reserved}")

    def has_target_dlq(self, args: ScheduledTableArgs) -> bool:
        return True

    def whole_dead_letters(self, args: ScheduledTableArgs) -> str | None:
        return "the polling processor parks whole items there (up to DynamoDB's 400 KB each, larger as JSON)"

    def needed_values(self, args: ScheduledTableArgs) -> tuple[Value, ...]:
        return (Value.TARGET_DLQ_URL, Value.LEDGER_TABLE)

    def section(self, args: ScheduledTableArgs, values: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        polling = {
            "shards": args.shards,
            "shardGroups": args.shard_groups,
            "leaseSeconds": lease_seconds(args),
            "maxAttempts": args.max_attempts,
            "backoffSeconds": args.retry_backoff_seconds,
            "onDone": args.on_done,
            "deadLetterUrl": values[Value.TARGET_DLQ_URL],
            "delayAttribute": args.delay_attribute,
            "defaultDelaySeconds": args.default_delay_seconds,
            # Stop taking new items this long before the Lambda's timeout (10 s, or a third of short ones).
            "budgetMarginSeconds": min(10, max(1, args.lambda_timeout_seconds // 3)),
            "ledgerTable": values[Value.LEDGER_TABLE],
            "windowSeconds": args.idempotency_window_seconds,
        }
        return {"polling": polling}

    def filters(self, args: ScheduledTableArgs) -> list[dict[str, Any]]:
        return polling_filters()

    def table_problems(self, found: Mapping[str, Any], *, time_attribute: str) -> list[str]:
        pending = runtime_module("pending")
        index, shard, due = pending.INDEX_NAME, pending.SHARD, pending.DUE
        have = {i.get("name"): i for i in found.get("global_secondary_indexes") or []}
        given = have.get(index) or {}
        # The processor builds each due event from the index's copy of the item: it must hold the whole item.
        if (given.get("hash_key"), given.get("range_key"), given.get("projection_type") or "ALL") == (
            shard,
            due,
            "ALL",
        ):
            return []
        return [
            f"table {found.get('name')!r} has no due index; add global secondary index {index!r} with partition key "
            f"{shard!r} (N) and sort key {due!r} (N), projection ALL"
        ]

    def table_parts(self, args: ScheduledTableArgs) -> dict[str, Any]:
        import pulumi_aws as aws

        # The sparse due index: only items waiting to run carry its keys (shard, due epoch seconds).
        pending = runtime_module("pending")
        attributes = [
            aws.dynamodb.TableAttributeArgs(name=pending.SHARD, type="N"),
            aws.dynamodb.TableAttributeArgs(name=pending.DUE, type="N"),
        ]
        index = aws.dynamodb.TableGlobalSecondaryIndexArgs(
            name=pending.INDEX_NAME,
            key_schemas=[
                aws.dynamodb.TableGlobalSecondaryIndexKeySchemaArgs(attribute_name=pending.SHARD, key_type="HASH"),
                aws.dynamodb.TableGlobalSecondaryIndexKeySchemaArgs(attribute_name=pending.DUE, key_type="RANGE"),
            ],
            projection_type="ALL",
            read_capacity=args.read_capacity,
            write_capacity=args.write_capacity,
        )
        return {"attributes": attributes, "global_secondary_indexes": [index]}

    def operated(self, config: Mapping[str, Any]) -> Operated:
        return Operated(due_index=True)

    def lateness_bound(self, config: Mapping[str, Any]) -> tuple[float | None, str]:
        return None, "the poll interval + the tick's processing"

    def build(self, ctx: BuildContext) -> ModeResult:
        from ..polling import build

        return build(ctx)


def polling_filters() -> list[dict[str, Any]]:
    """Writes of users, never of the mode itself: items without `stStatus` (new, or replaced by a PutItem), and
    updates of items waiting in the index (PENDING before and after, to pick up a changed due time). The processor's
    writes that keep a waiting item PENDING (indexing it again at its time, taking it out of the index) and the
    assigner's own pass the second filter, but keep the time attribute, which is all the assigner acts on: it
    writes nothing for them, so nothing loops."""
    pending = runtime_module("pending")
    status, waiting = pending.STATUS, pending.Status.PENDING.value
    return [
        {"eventName": ["INSERT", "MODIFY"], "dynamodb": {"NewImage": {status: {"S": [{"exists": False}]}}}},
        {
            "eventName": ["MODIFY"],
            "dynamodb": {"NewImage": {status: {"S": [waiting]}}, "OldImage": {status: {"S": [waiting]}}},
        },
    ]
