"""eventbridge's plan (pure, no AWS calls): what one stream record means for its item's occurrences (`plan`), and
one item's records of a batch reduced to their net effect (`coalesce`). `Scheduling` carries the steps out."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from st_core.errors import PermanentError
from st_core.naming import RECURRING, ItemKeys, item_keys, occurrence_id, recurring_name
from st_core.stream import DynamoDBStreamRecord, decode_image, due_type_problem, sequence_number
from st_core.timeparse import format_due, parse_due, zone

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import HandlerConfig

# No AWS calls here.
AWS_ACTIONS: tuple[str, ...] = ()

MODE = "eventbridge"
Clock = Callable[[], datetime]
Sleep = Callable[[float], None]


class Action(StrEnum):
    SCHEDULE = "schedule"  # the item holds this due time: a schedule delivers it, or it is delivered now if past
    SETTLE = "settle"  # the item left this due time after it came: it was due, make sure it was delivered
    CANCEL = "cancel"  # the item left this due time before it came: it must never fire


# A recurring occurrence's `due` without a start of its own, and a recurring due event's `due` (its `dueAt` is the
# firing's); a rate without a start counts from here.
EPOCH = datetime.fromtimestamp(0, UTC)


# Immutable records are NamedTuples rather than frozen dataclasses: a frozen dataclass generates and compiles its
# methods when the module is imported (about 0.9 ms each, on every cold start), a NamedTuple costs a fifth of that.
class Recurrence(NamedTuple):
    """What a recurring item asks of Scheduler (compared between images: equal means nothing to change)."""

    expression: str
    zone: str  # IANA name; "UTC" when the item names none
    start: datetime | None = None
    end: datetime | None = None


class Occurrence(NamedTuple):
    name: str  # its schedule's name, and its id in the ledger
    due: datetime  # when it acts: the item's due time plus the offset (a recurring one: its start, or the epoch)
    keys: dict[str, Any]
    item: dict[str, Any]
    offset: int = 0  # seconds from the item's due time (`offsets`: a reminder a day before is -86400)
    recurrence: Recurrence | None = None  # set on an item's recurring occurrence

    @property
    def item_due(self) -> datetime:
        return self.due - timedelta(seconds=self.offset)


class Step(NamedTuple):
    action: Action
    occurrence: Occurrence
    fresh: bool = True  # SCHEDULE: a due time the item did not hold before, so its schedule is probably new
    # SCHEDULE of a recurring occurrence whose rule the item did not hold before: when the item took the rule (the
    # record's change time). Its firings from then until the schedule exists are delivered by the handler.
    # SCHEDULE of a one-time due time the item did not hold before: when it took it; a SETTLE of it later in the same
    # batch carries it over (`coalesce`), and the ledger's memory of the occurrence counts from it (`Settling.settle`).
    since: datetime | None = None
    version: str = ""  # with `since`: the record that gave the item the rule (its sequence number), the ledger's key
    before: Recurrence | None = None  # the rule the item's schedule had until this step (it fired what it covers)


class Plan(NamedTuple):
    steps: tuple[Step, ...]
    poison_reason: str | None = None


def offsets_of(config: HandlerConfig) -> list[int]:
    return list(config.get("eventbridge", {}).get("offsets") or [0])


def is_recurrence(value: object) -> bool:
    return isinstance(value, str) and value.strip().startswith(("rate(", "cron("))


def item_zone(image: dict[str, Any], config: HandlerConfig) -> tuple[str, Any]:
    """The item's IANA zone name and tzinfo (UTC without the option or the attribute); PermanentError if unknown."""
    attribute = config.get("eventbridge", {}).get("timeZoneAttribute")
    name = image.get(attribute) if attribute else None
    if name is None or name == "":
        return "UTC", UTC
    if not isinstance(name, str):
        raise PermanentError(f"time zone attribute {attribute!r} must be a string such as 'Europe/London'")
    return name, zone(name)


def recurring_occurrence(image: dict[str, Any], keys: ItemKeys, config: HandlerConfig) -> Occurrence:
    """An item's one recurring occurrence, checked as Scheduler would check it (PermanentError with the reason)."""
    section: dict[str, Any] = dict(config.get("eventbridge", {}))
    from st_core import recurrence  # only recurring items compile the expression parser

    expression = str(image[config["timeAttribute"]]).strip()
    recurrence.parse(expression)
    zone_name, zone = item_zone(image, config)
    bounds: list[datetime | None] = []
    for option in ("startAttribute", "endAttribute"):
        attribute = section.get(option)
        value = image.get(attribute) if attribute else None
        try:
            bounds.append(None if value is None else parse_due(value, zone))
        except PermanentError as exc:
            raise PermanentError(f"{attribute}: {exc}") from exc
    start, end = bounds
    if start is not None and end is not None and end <= start:
        raise PermanentError(f"recurrence ends ({format_due(end)}) before it starts ({format_due(start)})")
    spec = Recurrence(expression, zone_name, start, end)
    return Occurrence(recurring_name(keys), start or EPOCH, keys.plain, image, recurrence=spec)


def occurrences_of(image: dict[str, Any] | None, keys: ItemKeys, config: HandlerConfig) -> dict[int | str, Occurrence]:
    """The item's occurrences, by offset (or RECURRING): none when the image carries no due time; PermanentError
    when it carries one that cannot be used. Each named by `naming.occurrence_id`: one schedule per (item, due
    time, offset), whose name is the occurrence's id."""
    if image is None or image.get(config["timeAttribute"]) is None:
        return {}
    if is_recurrence(image[config["timeAttribute"]]):
        return {RECURRING: recurring_occurrence(image, keys, config)}
    due = parse_due(image[config["timeAttribute"]], item_zone(image, config)[1])
    found: dict[int | str, Occurrence] = {}
    for offset in offsets_of(config):
        name = occurrence_id(keys, due, offset)
        found[offset] = Occurrence(name, due + timedelta(seconds=offset), keys.plain, image, offset)
    return found


def plan(record: DynamoDBStreamRecord, config: HandlerConfig, changed: datetime, keys: ItemKeys | None = None) -> Plan:
    """What one record means for the item's occurrences, given when its change happened (no AWS calls); `keys`: the
    record's `item_keys`, where the caller has them already."""
    data = record["dynamodb"]
    keys = item_keys(data["Keys"], config) if keys is None else keys
    name = record["eventName"]
    try:
        olds = occurrences_of(decode_image(data.get("OldImage")), keys, config)
    except PermanentError:
        olds = {}  # it never had a usable time, so nothing was scheduled for it
    poison: str | None = None
    news: dict[int | str, Occurrence] = {}
    if name != "REMOVE":
        try:
            problem = due_type_problem(data.get("NewImage"), config["timeAttribute"])
            if problem:  # binary, boolean, null, a set, a map, a list: no time (null is not "no due time" either)
                raise PermanentError(problem)
            news = occurrences_of(decode_image(data.get("NewImage")), keys, config)
        except PermanentError as exc:
            poison = str(exc)
    steps: list[Step] = []
    old, new = olds.get(RECURRING), news.get(RECURRING)
    if old is not None and new is None:
        steps.append(Step(Action.CANCEL, old))  # a recurring schedule delivers itself: nothing is left to settle
    if new is not None and not (old is not None and old.recurrence == new.recurrence and old.item == new.item):
        before = None if old is None else old.recurrence
        since = None if before == new.recurrence else changed  # the same rule: its schedule is there already
        version = "" if since is None else sequence_number(record) or format_due(changed)
        steps.append(Step(Action.SCHEDULE, new, fresh=old is None, since=since, before=before, version=version))
    for offset in offsets_of(config):
        old, new = olds.get(offset), news.get(offset)
        if old is not None and (new is None or new.due != old.due):
            steps.append(Step(Action.SETTLE if old.due <= changed else Action.CANCEL, old))
        if new is not None:
            kept = old is not None and old.due == new.due
            # A write that keeps a due time that had already come is not a new occurrence: the write that set the
            # time delivers it. (A kept time still ahead may carry a new payload: the schedule is refreshed.)
            if not (kept and (new.due <= changed or new.item == old.item)):  # type: ignore[union-attr]
                steps.append(Step(Action.SCHEDULE, new, fresh=not kept, since=None if kept else changed))
    return Plan(tuple(steps), poison)


class Planned(NamedTuple):
    """A step and the record it came from (where a failure of the step is parked)."""

    step: Step
    record: DynamoDBStreamRecord


def coalesce(planned: list[tuple[DynamoDBStreamRecord, Plan]]) -> list[Planned]:
    """One item's plans of a batch, in stream order, reduced to their net effect on each occurrence (pure).

    A delivery (SETTLE) always stays: that due time came while the item held it; when the batch also holds the write
    that gave the item that time (a SCHEDULE of it before), the SETTLE carries when that was (`since`). Otherwise
    only an occurrence's last step counts: a schedule later cancelled or refreshed in the same batch is never made,
    a cancel followed by a new schedule of the same occurrence is just the schedule. What cannot go is a cancel
    whose occurrence was scheduled earlier in the batch: Lambda may have run part of this batch before (a timeout, a
    retry from a sequence number with more records after it, a bisected batch) and made that schedule, so the
    delete is the one call that keeps a cancelled occurrence from firing; it finds nothing on a first delivery
    (ResourceNotFound is success)."""
    settled: list[Planned] = []
    last: dict[str, Planned] = {}
    for record, record_plan in planned:
        for step in record_plan.steps:
            name = step.occurrence.name
            if step.action is Action.SETTLE:
                scheduled = last.pop(name, None)
                if scheduled is not None and scheduled.step.action is Action.SCHEDULE:
                    step = Step(step.action, step.occurrence, fresh=step.fresh, since=scheduled.step.since)
                settled.append(Planned(step, record))
            else:
                before = last.pop(name, None)  # re-inserted, so it keeps the order of its latest step
                if before is not None and before.step.action is step.action is Action.SCHEDULE:
                    # A schedule refreshed within the batch is still as new as its first version was, and (when the
                    # rule stayed) missed the firings since that version came, beside the schedule the batch began with.
                    first = before.step
                    newer = step if step.since is not None else first
                    step = Step(
                        step.action,
                        step.occurrence,
                        fresh=first.fresh,
                        since=newer.since,
                        before=first.before,
                        version=newer.version,
                    )
                last[name] = Planned(step, record)
    return settled + list(last.values())
