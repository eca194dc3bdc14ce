"""`eventbridge` mode: stream -> scheduling Lambda -> one Scheduler `at()` schedule per occurrence -> target (seed
000); with `precision="second"` a release queue and function deliver each due event at its second. Its resources
are made by components/eventbridge.py; the handler side is handlers/eventbridge/."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..checks import defaults, fail
from ..filters import MAX_FILTERS, TIME_TYPES, unusable_due_filters
from ..runtime_config import (
    RELEASE_MIN_TIMEOUT_SECONDS,
    Value,
    lease_seconds,
    ledger_section,
    scheduler_section,
    scheduling_values,
)
from .base import SCHEDULER_OPTIONS, ModeBase, Operated, check_scheduler_options

if TYPE_CHECKING:
    from ..args import ScheduledTableArgs
    from ..parts import BuildContext, ModeResult

MAX_OFFSETS = 10
MAX_OFFSET_SECONDS = 366 * 86400
RECURRENCE_OPTIONS = ("time_zone_attribute", "recurrence_start_attribute", "recurrence_end_attribute")
PRECISIONS = ("minute", "second")


class Eventbridge(ModeBase):
    name = "eventbridge"
    listed = 0
    options = (*SCHEDULER_OPTIONS, "offsets", *RECURRENCE_OPTIONS, "precision")
    text_options = RECURRENCE_OPTIONS
    roles = MappingProxyType(
        {
            "scheduler": "turns the table's stream into one EventBridge Scheduler schedule per due time",
            "releaser": "holds each due event in the release queue until its second, then sends it to the target once",
        }
    )
    roles_doc = "`scheduler`, and `releaser` with `precision` `second`"
    stream_roles = frozenset({"scheduler"})
    sqs_roles = frozenset({"releaser"})

    def check(self, args: ScheduledTableArgs) -> None:
        check_scheduler_options(args)
        _offsets(args)
        _recurrence(args)
        _precision(args)

    def function_roles(self, args: ScheduledTableArgs) -> tuple[str, ...]:
        return tuple(self.roles) if args.precision == "second" else ("scheduler",)

    def scheduler_delivers(self, args: ScheduledTableArgs) -> bool:
        return True

    def has_target_dlq(self, args: ScheduledTableArgs) -> bool:
        return True

    def whole_dead_letters(self, args: ScheduledTableArgs) -> str | None:
        if args.precision == "second":
            return "release messages of up to 1 MiB are parked or redriven there at precision 'second'"
        return None

    def needed_values(self, args: ScheduledTableArgs) -> tuple[Value, ...]:
        release = (Value.RELEASE_QUEUE_ARN, Value.RELEASE_QUEUE_URL, Value.TARGET_DLQ_URL)
        return (*scheduling_values(args), Value.LEDGER_TABLE, *(release if args.precision == "second" else ()))

    def section(self, args: ScheduledTableArgs, values: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        eventbridge = ledger_section(args, values)
        if args.existing_table is not None:
            # Its items may predate the stack: backfill's first run delivers their past occurrences (in a table the
            # component made, every past occurrence went through the live function, or is delivered when asked).
            eventbridge["existingTable"] = True
        if args.offsets != [0]:
            eventbridge["offsets"] = list(args.offsets)
        if args.time_zone_attribute is not None:
            eventbridge["timeZoneAttribute"] = args.time_zone_attribute
        eventbridge["startAttribute"] = args.recurrence_start_attribute
        eventbridge["endAttribute"] = args.recurrence_end_attribute
        if args.precision == "second":
            eventbridge["release"] = {
                "queueArn": values[Value.RELEASE_QUEUE_ARN],
                "queueUrl": values[Value.RELEASE_QUEUE_URL],
                "deadLetterUrl": values[Value.TARGET_DLQ_URL],
            }
        return {"scheduler": scheduler_section(args, values), "eventbridge": eventbridge}

    def filters(self, args: ScheduledTableArgs) -> list[dict[str, Any]]:
        return eventbridge_filters(args.time_attribute)

    def operated(self, config: Mapping[str, Any]) -> Operated:
        return Operated(
            sweeps_schedules=True, replay_reads_schedule=True, backfill_marks_ledger=True, filters_by_due_type=True
        )

    def lateness_bound(self, config: Mapping[str, Any]) -> tuple[float | None, str]:
        if (config.get("eventbridge") or {}).get("release"):
            return 2.0, "under 2 s (precision second) + Scheduler's delay"
        return 180.0, "120 s (180 s if processed within 10 s of the minute) + Scheduler's delay"

    def build(self, ctx: BuildContext) -> ModeResult:
        from ..eventbridge import build

        return build(ctx)


def _offsets(args: ScheduledTableArgs) -> None:
    values = args.offsets
    if not isinstance(values, list) or not values or any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        fail("offsets", f"expected a non-empty list of whole seconds, got {values!r}", "e.g. offsets=[-3600, 0]")
    if len(set(values)) != len(values):
        fail("offsets", f"{values!r} names an offset twice", "list each offset once")
    if len(values) > MAX_OFFSETS:
        fail("offsets", f"{len(values)} offsets", f"use at most {MAX_OFFSETS} (each is a schedule per item)")
    if any(abs(v) > MAX_OFFSET_SECONDS for v in values):
        fail("offsets", f"{values!r} has an offset beyond a year", f"keep each within +-{MAX_OFFSET_SECONDS} seconds")


def _recurrence(args: ScheduledTableArgs) -> None:
    taken = {args.partition_key: "partition_key", args.sort_key: "sort_key", args.time_attribute: "time_attribute"}
    for name in RECURRENCE_OPTIONS:
        value = getattr(args, name)
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            example = defaults(type(args))[name] or "timeZone"
            fail(name, f"expected an attribute name, got {value!r}", f"name an item attribute, e.g. {example!r}")
        if value in taken:
            fail(name, f"{value!r} is already {taken[value]}", "name an attribute of its own")
        taken[value] = name


def _precision(args: ScheduledTableArgs) -> None:
    if args.precision not in PRECISIONS:
        fail("precision", f"{args.precision!r} is not a precision", "use 'minute' (the default) or 'second'")
    timeout = args.lambda_timeout_seconds
    if args.precision == "second" and timeout < RELEASE_MIN_TIMEOUT_SECONDS:
        fail(
            "lambda_timeout_seconds",
            f"{timeout} s is too short for precision='second' (the release function holds each due event up to 1 s "
            f"before its calls; a run that times out delivers its batch {lease_seconds(args)} s late)",
            f"use at least {RELEASE_MIN_TIMEOUT_SECONDS} (the default is 60), or precision='minute'",
        )


def eventbridge_filters(time_attribute: str) -> list[dict[str, Any]]:
    """INSERT/MODIFY of items that carry a time (S or N), MODIFY/REMOVE of items that carried one (nothing was
    scheduled for another type); the fifth filter passes a null due attribute, to be parked with its reason."""
    patterns: list[dict[str, Any]] = []
    for image, events in (("NewImage", ["INSERT", "MODIFY"]), ("OldImage", ["MODIFY", "REMOVE"])):
        for tag in TIME_TYPES:
            patterns.append({"eventName": events, "dynamodb": {image: {time_attribute: {tag: [{"exists": True}]}}}})
    return [*patterns, *unusable_due_filters(time_attribute, MAX_FILTERS - len(patterns))]
