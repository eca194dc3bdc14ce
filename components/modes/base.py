"""What every mode shares, and the defaults a mode overrides where it differs (components/modes/: one module per
mode). A mode is one object answering, for validated options, everything the rest of the component asks of it: its
rules, the function roles it makes, its part of the handler configuration, its stream filters, what it needs of a
table (made or given) and its build. A leaf beside the checks: the options, the build context and its result are
named here for types only, so the options can validate themselves through this package while they load."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from ..checks import between, fail, is_set

if TYPE_CHECKING:
    from ..args import ScheduledTableArgs
    from ..parts import BuildContext, ModeResult
    from ..runtime_config import Value

# Per-item schedules (eventbridge mode, precise ttl mode): Scheduler's retries of the target and the event's age.
SCHEDULER_OPTIONS = ("schedule_retry_attempts", "schedule_max_event_age_seconds")


@dataclass(frozen=True)
class Operated:
    """What the operator's commands (components/cli/) read and write on a deployed stack of a mode beyond what every
    mode has, as its handler configuration tells: each field a call some command makes in such a stack only."""

    ordered_by_item: bool = True  # a redrive reads the item to judge a record's order (not when nothing is kept)
    reads_due_time: bool = True  # its items carry a due time: inspect samples the table for unusable ones
    totals: bool = False  # totals kept in the table: backfill settles them, reconcile checks them
    sweeps_schedules: bool = False  # per-item schedules: reconcile sweeps the group for strays
    replay_reads_schedule: bool = False  # a replay reads the item's schedule to judge what is already scheduled
    backfill_marks_ledger: bool = False  # backfill --in-lambda: the operator's run marks the ledger
    due_index: bool = False  # a sharded due index (the console and inspect read it by due time)
    fires_items: bool = False  # a dead letter is Scheduler's UpdateItem of the item, called again by a redrive
    filters_by_due_type: bool = False  # its mapping passes records by the due attribute's type (inspect's check)
    sampled_by_scan: bool = False  # nothing but the table holds what is due: the console samples it
    redrives_to_target: bool = True  # a redrive of a dead letter sends it to the target itself


class ModeBase:
    """One mode. `options`: the options only it (and any other mode naming them too) takes, refused in every other
    mode; `refusal_fixes`: the fix a refusal names for one of them, when not just "remove it"; `text_options`: the
    text the user chose that goes into its section of the handler configuration (the 4 KB check names the largest);
    `roles`: the function roles it can make (`builders.build_function`'s `role`), each with what its function does
    (its description, read in the console), and `roles_doc` how the `function_overrides` docs name them (by default
    all, joined by "and"); `stream_roles` those fed by the table's stream (reserved concurrency 0 would stop reading
    it), `sqs_roles` those fed by an SQS mapping (whose pollers do not heed a reservation)."""

    name: ClassVar[str]
    listed: ClassVar[int] = 100  # the order modes are listed in (messages, docs)
    options: ClassVar[tuple[str, ...]] = ()
    refusal_fixes: ClassVar[Mapping[str, str]] = MappingProxyType({})
    text_options: ClassVar[tuple[str, ...]] = ()
    roles: ClassVar[Mapping[str, str]] = MappingProxyType({})
    roles_doc: ClassVar[str] = ""
    stream_roles: ClassVar[frozenset[str]] = frozenset()
    sqs_roles: ClassVar[frozenset[str]] = frozenset()
    # Whether it delivers to a target (aggregate writes totals to the table itself).
    has_target: ClassVar[bool] = True
    # Whether it keeps totals in the table (backfill settles them, reconcile checks them).
    keeps_totals: ClassVar[bool] = False

    def check(self, args: ScheduledTableArgs) -> None:
        """Its own rules, for options of this mode: ValueError naming the field and the fix."""

    def function_roles(self, args: ScheduledTableArgs) -> tuple[str, ...]:
        """The roles of the functions it makes for `args` (the backfill function's aside)."""
        return tuple(self.roles)

    def overrides_doc(self) -> str:
        """Its roles as the `function_overrides` docs name them."""
        return self.roles_doc or " and ".join(f"`{role}`" for role in self.roles)

    def scheduler_delivers(self, args: ScheduledTableArgs) -> bool:
        """Whether Scheduler itself delivers to the target (its schedules' target is the user's)."""
        return False

    def has_target_dlq(self, args: ScheduledTableArgs) -> bool:
        """Whether it makes (or takes, `existing_target_dlq`) a dead-letter queue for what the target refused."""
        return False

    def whole_dead_letters(self, args: ScheduledTableArgs) -> str | None:
        """Why its target DLQ must take 1 MiB messages (what reaches it whole), or None."""
        return None

    def needed_values(self, args: ScheduledTableArgs) -> tuple[Value, ...]:
        """The values of its section that exist only once a resource does (`runtime_config.Value`), beyond the
        shared ones (table, target, poison queue)."""
        return ()

    def section(self, args: ScheduledTableArgs, values: Mapping[str, str]) -> dict[str, dict[str, Any]]:
        """Its parts of the handler configuration, by key (`runtime_config.handler_document`)."""
        return {}

    def filters(self, args: ScheduledTableArgs) -> list[dict[str, Any]]:
        """The filters of its stream consumer's mapping (what every mode's share: components/filters.py)."""
        return []

    def table_problems(self, found: Mapping[str, Any], *, time_attribute: str) -> list[str]:
        """What an existing table (getTable's result, snake_case) lacks for it beyond a stream and the keys, each
        with the fix."""
        return []

    def table_parts(self, args: ScheduledTableArgs) -> dict[str, Any]:
        """What it adds to a table it makes: `aws.dynamodb.Table` arguments (`attributes` are appended to the keys')."""
        return {}

    def operated(self, config: Mapping[str, Any]) -> Operated:
        """What the operator's commands do on a stack of this mode, from its handler configuration."""
        return Operated()

    def lateness_bound(self, config: Mapping[str, Any]) -> tuple[float | None, str]:
        """Its documented lateness bound (docs/guarantees.md) in seconds (None: none to compare with) and its words,
        for a deployed stack's handler configuration (the console compares deliveries with it)."""
        return None, "the stream's lag"

    def build(self, ctx: BuildContext) -> ModeResult:
        """Its resources, from the shared ones in `ctx`."""
        raise NotImplementedError(f"mode {self.name!r} has no build")


def check_scheduler_options(args: ScheduledTableArgs) -> None:
    """The ranges of the schedule options, for the modes that make per-item schedules."""
    between(args, "schedule_retry_attempts", 0, 185)
    between(args, "schedule_max_event_age_seconds", 60, 86400)


def refuse_foreign(args: ScheduledTableArgs, mode: ModeBase, every: tuple[ModeBase, ...]) -> None:
    """Refuse the options of other modes set on `mode` (their defaults are what "not set" looks like)."""
    seen: set[str] = set()
    for other in every:
        for name in other.options:
            if name in seen or name in mode.options:
                continue
            seen.add(name)
            if not is_set(args, name):
                continue
            takers = [m for m in every if name in m.options]
            where = " or ".join(f"mode={m.name!r}" for m in takers)
            fix = next((m.refusal_fixes[name] for m in takers if name in m.refusal_fixes), f"remove {name}")
            fail(name, f"only applies to {where} (mode is {mode.name!r})", fix)
