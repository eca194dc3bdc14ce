"""`eventbridge` mode: one EventBridge Scheduler `at()` schedule per occurrence (item keys + due time).

Thin entry point: `plan` reads one stream record into steps (pure), `Scheduling` carries them out.

Once per occurrence, under AWS's real behaviour:
- Scheduler fires anywhere in the minute of its `at()` time, so schedules are set on the first whole minute at or
  after the due time (never early; at most about 60 s late, 120 s when made less than 10 s before that minute).
- Stream batches are delivered at least once, whole, possibly much later. A record is judged by when its change
  happened (`ApproximateCreationDateTime`), not by when it is processed: a due time the item held when it came is
  due (delivered once), one the item left before it came is cancelled (never delivered, if the cancel is handled
  before its schedule's minute; from then on the schedule may be running and is left to run, so an item that
  comes back to that time is delivered once whatever the timing). A write that keeps the due time never delivers
  again: a consumer that writes back on delivery cannot loop.
- A record acts only for what its item still holds, read back once per batch (one consistent BatchGetItem per
  100 items, `Scheduling.prepare`): a replayed INSERT never schedules or delivers a time the item has left, and a
  schedule's payload is written only by the item's latest record (an old batch handled again never puts older
  data back into a schedule).
- The idempotency ledger records which occurrences a schedule owns and which were delivered directly, so a
  redelivered batch neither re-creates a fired schedule nor delivers a past occurrence twice.

Recurring items: the time attribute may hold a Scheduler `rate(...)` or `cron(...)` expression instead of a time
(in the item's time zone attribute, with optional start and end attributes). The item then has one recurring
schedule (ActionAfterCompletion NONE), made, updated in place and deleted with the item; Scheduler delivers every
firing itself, with its scheduled time in the due event's `dueAt`. The firings this function delivers: one that
came after the item took its rule and before the schedule existed (a late batch): Scheduler only fires from then
on, so it is delivered at once, under the `occurrenceId` Scheduler gives it, once through the ledger (unless the
rule the schedule held until then fired at that instant too: that firing, of the same id, was Scheduler's); and one
of the seconds before an update of the schedule, which the update takes from Scheduler (`_taken_over`), the same
way. A redelivered batch otherwise only repeats idempotent create/update/delete calls,
made only for the rule the item still holds (a consistent read), so an old batch handled after a newer one brings
no deleted schedule back. The expression shares the time attribute (rather than an attribute of its own) so the
mapping's filters stay within Lambda's five per event source mapping.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from functools import partial
from threading import Lock
from typing import TYPE_CHECKING, Any, NamedTuple

from st_core import log, schedules
from st_core.batch import Parked, handle_stream_batch, permanent_outcome
from st_core.clients import CLIENTS, Clients
from st_core.config import load_config
from st_core.dispatch import due_event, scheduler_target, send_now, target_input
from st_core.errors import PermanentError, error_code, is_transient, persist
from st_core.idempotency import BATCH_WRITE_LIMIT, SHORTEST_WINDOW_SECONDS, Ledger, remembered
from st_core.naming import (
    RECURRING,
    SCHEDULED_TIME,
    ItemKeys,
    item_keys,
    occurrence_id,
    recurring_firing_id,
    recurring_name,
)
from st_core.reads import Found, read_items
from st_core.schedules import CLOCK_SKEW, MIN_LEAD
from st_core.stream import (
    BatchResponse,
    DynamoDBStreamEvent,
    DynamoDBStreamRecord,
    changed_at,
    decode_image,
    due_type_problem,
    key_identity,
    sequence_number,
    to_request,
)
from st_core.timeparse import format_due, minute_start, parse_due, zone

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import HandlerConfig
    from st_core.recurrence import Expression

# The AWS actions this module's own calls need (checked by tests/iam); the rest go through st_core (the batch's
# items are read back with st_core.reads' BatchGetItem). An item the batch read could not settle is read on its own.
AWS_ACTIONS: tuple[str, ...] = ("dynamodb:GetItem",)

MODE = "eventbridge"
Clock = Callable[[], datetime]
Sleep = Callable[[float], None]


class Action(StrEnum):
    SCHEDULE = "schedule"  # the item holds this due time: a schedule delivers it, or it is delivered now if past
    SETTLE = "settle"  # the item left this due time after it came: it was due, make sure it was delivered
    CANCEL = "cancel"  # the item left this due time before it came: it must never fire


# The key of an item's recurring occurrence among its occurrences (one-time ones are keyed by their offset).
# Scheduler refuses a StartDate more than five minutes in the past.
START_DATE_PAST_LIMIT = timedelta(minutes=5)
_EPOCH = datetime.fromtimestamp(0, UTC)
MINUTE = timedelta(minutes=1)
# A record handled again looks in the ledger for at most this many firings after its write that an earlier handling
# may owe (one read each, only for firings whose time has passed); it walks back at most FIRST_AFTER_LOOKS firings.
OWED_LOOKS = 3
FIRST_AFTER_LOOKS = 2000


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
    # batch carries it over (`coalesce`), and the ledger's memory of the occurrence counts from it (`_settle`).
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
    return Occurrence(recurring_name(keys), start or _EPOCH, keys.plain, image, recurrence=spec)


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


class Scheduling:
    """Carries out plans: Scheduler calls, direct delivery of past occurrences, the ledger."""

    def __init__(self, config: HandlerConfig, clients: Clients, now: Clock, sleep: Sleep = time.sleep) -> None:
        self.config = config
        self.clients = clients
        self.now = now
        self.sleep = sleep
        self.ledger = Ledger.of(config["eventbridge"], clients)
        self.group = config["scheduler"]["group"]
        # precision="second": schedules release into the release queue (the test `release.enabled` makes; the release
        # module itself is compiled only by tables that use it)
        self.second = "release" in config.get("eventbridge", {})
        self.actions = {Action.SCHEDULE: self._schedule, Action.SETTLE: self._settle, Action.CANCEL: self._cancel}
        # Ledger markers of schedules made in this batch, written together at its end (`finish`).
        self._markers: list[tuple[str, float, str]] = []
        # Each record's plan, made once (`prepare` plans the batch to know which items to read), by record object.
        self._plans: dict[int, Plan] = {}
        # Each record's item's key identity, worked out once (`prepare` and `_current` both ask), by record object.
        self._identities: dict[int, str] = {}
        # The batch's items as they are now, by key identity (`prepare`); an item missing here is read on its own.
        self._items: Found = {}
        self._counts: Counter[str] = Counter()
        self._lock = Lock()

    def __call__(self, record: DynamoDBStreamRecord) -> None:
        """One record on its own (the fallback when an item's merged records fail in a way no record explains)."""
        step_plan = self._plan(record)
        for step in step_plan.steps:
            self.actions[step.action](record, step)
        if step_plan.poison_reason:
            raise PermanentError(step_plan.poison_reason)

    def item(self, records: list[DynamoDBStreamRecord]) -> list[Parked]:
        """All of one item's records of the batch, acted on by their net effect: k changes of an item make one
        schedule call for its final due time (plus a delete per due time it left, see `coalesce`), not k."""
        parked: list[Parked] = []
        planned = []
        for record in records:
            step_plan = self._plan(record)
            planned.append((record, step_plan))
            if step_plan.poison_reason:
                parked.append((record, step_plan.poison_reason, "PermanentError"))
        for entry in coalesce(planned):
            try:
                self.actions[entry.step.action](entry.record, entry.step)
            except Exception as exc:
                outcome = permanent_outcome(exc, sequence_number(entry.record))
                if outcome is None:
                    raise
                parked.append((entry.record, *outcome))
        return parked

    def prepare(self, records: list[DynamoDBStreamRecord]) -> None:
        """Plan every record and read back, in one consistent BatchGetItem per 100 keys, each item a step will
        check against what the item holds now (`_current`): the item of any record that schedules, and of any that
        cancels a recurring schedule. Read after the batch's records were written, each item is at least as new as
        the batch's last record of it. A record this batch cannot plan is planned again, and fails, per item."""
        keys: dict[str, Any] = {}
        for record in records:
            try:
                step_plan = self._plan(record)
            except Exception:
                continue
            if any(
                s.action is Action.SCHEDULE or (s.action is Action.CANCEL and s.occurrence.recurrence is not None)
                for s in step_plan.steps
            ):
                keys[self.identity(record)] = record["dynamodb"]["Keys"]
        if keys:
            found = read_items(
                self.clients, self.config["table"], keys, workers=self.config["maxWorkers"], sleep=self.sleep
            )
            with self._lock:
                self._items.update(found)

    def finish(self) -> list[str]:
        """Write the batch's remaining schedule markers. Sequence numbers to retry from for those that could not be
        written: the records are safe to run again, and a schedule is only remembered once its marker is written."""
        with self._lock:
            markers, self._markers = self._markers, []
        try:
            persist(lambda: self.ledger.scheduled_many([(name, fire) for name, fire, _ in markers]))
        except Exception as exc:
            if permanent_outcome(exc, "ledger") is not None:
                raise
            return sorted({seq for _, _, seq in markers})
        return []

    def _write(self, chunk: list[tuple[str, float, str]]) -> None:
        """A full BatchWriteItem of markers, written by the worker that filled it (overlapping the other workers'
        calls); if it fails, the markers go back to the batch's list and `finish` tries again or reports them."""
        try:
            persist(lambda: self.ledger.scheduled_many([(name, fire) for name, fire, _ in chunk]))
        except Exception as exc:
            log.debug("markers-deferred", markers=len(chunk), error=error_code(exc))
            with self._lock:
                self._markers.extend(chunk)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def _count(self, action: str) -> None:
        with self._lock:
            self._counts[action] += 1

    def identity(self, record: DynamoDBStreamRecord) -> str:
        """`stream.key_identity(record)`, worked out once per record (planning the batch works it out first)."""
        found = self._identities.get(id(record))
        if found is None:
            found = self._identities[id(record)] = key_identity(record)
        return found

    def _plan(self, record: DynamoDBStreamRecord) -> Plan:
        known = self._plans.get(id(record))
        if known is not None:
            return known
        moment = changed_at(record)
        changed = datetime.fromtimestamp(moment, UTC) if moment is not None else self.now()
        keys = item_keys(record["dynamodb"]["Keys"], self.config)
        self._identities[id(record)] = keys.identity  # `key_identity(record)`, worked out once
        made = plan(record, self.config, changed, keys)
        self._plans[id(record)] = made
        return made

    def _schedule(self, record: DynamoDBStreamRecord, step: Step) -> None:
        occurrence = step.occurrence
        now = self.now()
        if occurrence.recurrence is not None:
            self._recur(record, step, occurrence.recurrence, now)
            return
        past = occurrence.due <= now
        current = self._current(record)
        if current != occurrence.item and (not past or not self._holds(current, record, occurrence)):
            # This record is not the item's latest. If the item has left this due time (or is gone), a later record
            # of the stream cancels or settles it, so nothing is made or sent here. A replay is the case: Lambda
            # replays from a sequence number with every record after it, but a bisected or cut-short retry may hand
            # the INSERT over alone and the REMOVE that cancelled it only in the next batch, once the minute began
            # (too late to delete: see `_cancel`), so a schedule made here would deliver a cancelled item. If the
            # item still holds this time, still ahead, it has changed since: a later record (handled already, when
            # an old batch comes again, or still to come, in stream order) made or will make the schedule with the
            # item as it is; this record's older image would put stale data back into the due event. A past time
            # the item still holds is delivered below: a later write may have come after the time, when no
            # schedule is made for it. The item is read once per batch (`prepare`), after every record of it.
            self._count("stale")
            if log.debugging():
                log.debug("schedule-stale", schedule=occurrence.name, dueAt=format_due(occurrence.due))
            return
        if past:
            # Scheduler cannot fire in the past: delivered now, unless a schedule or an earlier run owns it.
            self._deliver(occurrence)
            return
        firing = self._may_be_firing(occurrence.due, now)
        if firing and self.ledger.taken(occurrence.name):
            log.debug("firing-left-alone", schedule=occurrence.name)
            return
        payload = target_input(self.config["target"], self._event(occurrence), via_scheduler=True)
        if self.second:
            fire = self._release(record, step, payload, now, firing)
        else:
            fire = schedules.fire_time(occurrence.due, now)
            request = schedules.schedule_request(
                group=self.group,
                name=occurrence.name,
                fire=fire,
                target=scheduler_target(self.config["target"], self.config["scheduler"], payload),
                description=f"scheduled-table {MODE} {self.config['table']}",
                key=schedules.payload_key(self.config["scheduler"]),
            )
            schedules.upsert(self.clients, request, create_first=step.fresh)
        # After the schedule exists (written at the end of the batch): a crash in between can only cost a duplicate,
        # never the occurrence.
        chunk: list[tuple[str, float, str]] = []
        with self._lock:
            self._markers.append((occurrence.name, fire.timestamp(), sequence_number(record)))
            self._counts["scheduled"] += 1
            if len(self._markers) >= BATCH_WRITE_LIMIT:
                chunk, self._markers = self._markers[:BATCH_WRITE_LIMIT], self._markers[BATCH_WRITE_LIMIT:]
        if chunk:
            self._write(chunk)
        if log.debugging():
            log.debug("scheduled", schedule=occurrence.name, dueAt=format_due(occurrence.due), fireAt=format_due(fire))

    def _may_be_firing(self, due: datetime, now: datetime) -> bool:
        if self.second:
            from st_core import release

            return release.may_be_firing(due, now)
        return schedules.may_be_firing(due, now)

    def _may_have_started(self, due: datetime, now: datetime) -> bool:
        if self.second:
            from st_core import release

            return release.may_have_started(due, now)
        return schedules.may_have_started(due, now)

    def _release(self, record: DynamoDBStreamRecord, step: Step, payload: str, now: datetime, firing: bool) -> datetime:
        """`precision="second"`: a schedule in the minute before the due time's minute, into the release queue; or,
        when that minute is too close, straight into the queue, held back until the due second (st_core/release.py).
        Returns when the occurrence leaves Scheduler (the marker's expiry counts from it)."""
        from st_core import release

        occurrence = step.occurrence
        text = release.envelope(
            release.Release(
                name=occurrence.name,
                due=occurrence.due,
                item_due=occurrence.item_due,
                keys=record["dynamodb"]["Keys"],
                payload=payload,
            )
        )
        if firing:
            release.enqueue(self.clients, self.config, text, release.delay_seconds(occurrence.due, now))
            return now
        fire = release.release_fire_time(occurrence.due)
        request = schedules.schedule_request(
            group=self.group,
            name=occurrence.name,
            fire=fire,
            target=release.scheduler_release_target(self.config, text),
            description=f"scheduled-table {MODE} {self.config['table']} release",
            key=schedules.payload_key(self.config["scheduler"]),
        )
        schedules.upsert(self.clients, request, create_first=step.fresh)
        return fire

    def _recur(self, record: DynamoDBStreamRecord, step: Step, spec: Recurrence, now: datetime) -> None:
        """Make or update the item's recurring schedule; delete it once its end has passed (Scheduler refuses an
        EndDate in the past).

        StartDate: Scheduler refuses one more than five minutes ago, and starts a rate without one at once, from
        each create or update. So a rate always gets a start on its own grid (the item's start, or the epoch when it
        has none: `rate(1 hour)` runs on the hour), moved to its next firing: an update for any other change of the
        item (a consumer writing back after each firing) neither fires it again nor shifts it. A cron expression is
        its own grid: a past start is dropped.

        Made only for the rule the item still holds, read consistently (`_as_held`), with the item as it is now:
        records of one item come in order, but an old batch may be handled again after a newer one (a redrive).
        The item comes from the batch's one read (`prepare`); for a new rule one ledger write (`_catch_up`)."""
        from st_core import recurrence

        occurrence = self._as_held(record, step.occurrence)
        if occurrence is None or occurrence.recurrence is None:
            # The item no longer holds this rule (deleted, given another rule or a time): this record is older than
            # the item's latest change, which makes or deletes the schedule itself. Making it here would bring back
            # a schedule that change deleted, firing for ever (an old batch handled after a newer one).
            self._count("stale")
            log.debug("recurring-stale", schedule=step.occurrence.name, expression=spec.expression)
            return
        spec = occurrence.recurrence
        parsed = recurrence.parse(spec.expression)
        marker = None if step.since is None else _rule_marker(occurrence, step.version)
        known = None if marker is None else self.ledger.first_scheduled_at(marker)
        lived = self.ledger.rule_marker_seconds
        if known is None and step.since is not None and not remembered(step.since, now, lived):
            # The rule's first-scheduled entry may have expired (a record redriven longer after its change than the
            # entry lives): a schedule may have existed since long ago, running the firings a catch-up would send
            # again, and when it was made (what it missed) is unknown. The schedule is made or updated; no catch-up.
            self._count("forgotten")
            log.debug("recurring-catch-up-forgotten", schedule=occurrence.name, expression=spec.expression)
            step = Step(step.action, step.occurrence, fresh=step.fresh, before=step.before, version=step.version)
        if known is not None:
            # This version of the rule had its schedule made before: its record is handled again (Lambda delivering
            # the batch again, a redrive), and the records after it, handled since, made the schedule what the item
            # holds. Updating it again changes nothing but could disturb a firing under way (whether Scheduler still
            # runs a firing whose schedule is updated in its minute is not documented). Only a firing missed before
            # the schedule existed is looked at. One ledger read per new rule's record.
            self._count("unchanged")
            self._catch_up(step, occurrence, spec, parsed, datetime.fromtimestamp(known, UTC), recorded=True)
            return
        window = recurring_window(spec, parsed, now)
        reach = now + MIN_LEAD  # the handler sends a new rule's firing up to here (`_catch_up`), Scheduler after it
        start = None if window is None else window[0]
        written = _written(record)
        held = _taken_over(step, spec, parsed, reach, now, sent=now, written=written)
        if window is not None and start is None and (held or self._missed(step, spec, parsed, reach) is not None):
            # A cron schedule made without a start would run that firing too (Scheduler runs one made before it, or
            # inside its minute): it starts on the next whole second instead (a rate starts past `reach` already).
            start = _next_second(reach)
            if spec.end is not None and start > spec.end:
                window = None  # no firing is left between them for Scheduler
        if window is None:
            self._cancel_recurring(occurrence)  # nothing is left to fire
            self._owned(
                occurrence,
                parsed,
                _taken_over(step, spec, parsed, reach, self.now(), sent=now, written=written),
                written,
            )
            self._catch_up(step, occurrence, spec, parsed, self.now())
            return
        payload = target_input(self.config["target"], self._event(occurrence), via_scheduler=True)
        request = schedules.recurring_request(
            group=self.group,
            name=occurrence.name,
            expression=spec.expression,
            zone=spec.zone,
            start=start,
            end=spec.end,
            target=scheduler_target(self.config["target"], self.config["scheduler"], payload),
            description=f"scheduled-table {MODE} {self.config['table']} recurring",
            key=schedules.payload_key(self.config["scheduler"]),
        )
        try:
            schedules.upsert(self.clients, request, create_first=step.fresh)
        except Exception as exc:
            if not is_transient(exc):
                # Scheduler refused the item's new rule for good (the record is parked with its reason): the old
                # rule no longer says what the item wants, so it must not go on firing.
                self._cancel_recurring(occurrence)
            raise
        self._count("scheduled")
        log.debug("recurring", schedule=occurrence.name, expression=spec.expression, zone=spec.zone)
        made = self.now()
        # Scheduler answered before `reach`: the schedule's start divides the firings (up to `reach` the handler's,
        # after it Scheduler's). A create slower than that: every firing up to MIN_LEAD after it answered.
        self._owned(
            occurrence, parsed, _taken_over(step, spec, parsed, reach, made, sent=now, written=written), written
        )
        self._catch_up(step, occurrence, spec, parsed, now if made <= reach else made)

    def _owned(
        self,
        occurrence: Occurrence,
        parsed: Expression,
        taken: list[datetime],
        written: datetime | None,
    ) -> None:
        """Send what the schedule's update took from Scheduler (`taken`: `_taken_over`), and what an earlier
        handling of the record took and owes."""
        self._take_over(occurrence, taken)
        if written is not None:
            spec = occurrence.recurrence
            assert spec is not None
            self._settle_owed(occurrence, _first_after(spec, parsed, written, self.now()), taken)

    def _take_over(self, occurrence: Occurrence, firings: list[datetime]) -> None:
        """Send the firings an update took from the item's schedule (`_taken_over`), each at its time (never
        early: the wait is at most `MIN_LEAD`), once through the ledger under the id Scheduler gives it: a write
        every few seconds takes the same firing again, and finds it claimed."""
        for fired in firings:
            early = (fired - self.now()).total_seconds()
            if early > 0:
                self.sleep(min(early, MIN_LEAD.total_seconds()))
            self._count("takenOver")
            log.debug("firing-taken-over", schedule=occurrence.name, dueAt=format_due(fired))
            self._deliver(occurrence, fired=fired, owe=True)

    def _settle_owed(self, occurrence: Occurrence, candidates: list[datetime], sent: list[datetime]) -> None:
        """Send the firings an earlier handling of this record took from Scheduler and could not send (the target
        refused them: the ledger says OWED, and the record failed and came back). Whether a firing is the handler's
        is judged by the clock when the record is first handled; a retry after that moment would judge otherwise,
        and the firing would be nobody's. `candidates`: the firings such a handling could have taken (the first
        ones after the write); one ledger read each, only for those whose time has passed and that this handling
        did not send itself."""
        wanted = [fired for fired in candidates if fired not in sent and fired <= self.now()]
        if not wanted:
            return
        names = {recurring_firing_id(occurrence.name, format_due(fired)): fired for fired in wanted}
        owed = self.ledger.owed(list(names))
        self._take_over(occurrence, sorted(names[name] for name in owed))

    def _catch_up(
        self,
        step: Step,
        occurrence: Occurrence,
        spec: Recurrence,
        parsed: Expression,
        made: datetime,
        *,
        recorded: bool = False,
    ) -> None:
        """Deliver the firing a new rule missed: Scheduler fires a recurring schedule only from when it exists, so a
        firing that came between the item's write (`step.since`) and the schedule (`made`) would otherwise wait for
        the next one (a week, for a weekly rule). Only the latest such firing (missed ones are not fired in a
        burst), with the `occurrenceId` and `dueAt` Scheduler would have given it, through a ledger claim: once from
        the handler however often the batch comes back.

        A firing less than `MIN_LEAD` after the schedule was made counts too, as it does for `at()` schedules: one
        made that close to its time may not fire it. The handler waits for its time (at most `MIN_LEAD`), never
        sending it early, and the schedule starts after it (`_recur`: a rate on its next firing, a cron on the
        second after `MIN_LEAD`), so Scheduler does not run it as well. `made` is then the clock before the create
        (the one the schedule's start was worked out from); after a create slower than `MIN_LEAD`, the clock once
        Scheduler answered.

        A redelivered batch must not deliver the firings the schedule ran since it was first made: the first time a
        schedule existed for this version of the rule is kept in the ledger (one conditional write per new rule),
        and only firings up to it count (`recorded`: `made` is that time, read from the ledger)."""
        if step.since is None:
            return
        marker = _rule_marker(occurrence, step.version)
        existed = made
        if not recorded:
            first = persist(lambda: self.ledger.first_scheduled(marker, made.timestamp()))
            existed = datetime.fromtimestamp(first, UTC)
        fired = self._missed(step, spec, parsed, existed + MIN_LEAD)
        if fired is None:
            return
        early = (fired - self.now()).total_seconds()
        if early > 0:
            self.sleep(min(early, MIN_LEAD.total_seconds()))
        self._deliver(occurrence, fired=fired)

    @staticmethod
    def _missed(step: Step, spec: Recurrence, parsed: Expression, until: datetime) -> datetime | None:
        """The firing of a new rule the handler sends: the latest after the item took the rule (`step.since`) and
        no later than `until`, within its start and end. None for a rule the item held before (`step.since` None),
        and for a firing the item's previous rule fired at too (`_covered`: only its start or end changed, or
        another rule firing at that instant), which was Scheduler's under the schedule as it was (a late batch
        updates the schedule after it ran the firing), or the handler's if the update took it from Scheduler
        (`_taken_over`)."""
        if step.since is None:
            return None
        from st_core import recurrence

        fired = recurrence.latest_firing(
            parsed, zone(spec.zone), after=step.since, until=until, start=spec.start, end=spec.end
        )
        return None if fired is None or _covered(step.before, spec, fired) else fired

    def _as_held(self, record: DynamoDBStreamRecord, occurrence: Occurrence) -> Occurrence | None:
        """The item's recurring occurrence as the item holds it now (`_current`), if that is the same rule
        as `occurrence`'s; None when the item is gone or holds another rule, a time, or nothing usable."""
        current = self._held(record, occurrence)
        if current is None or current.recurrence != occurrence.recurrence:
            return None
        return current

    def _held(self, record: DynamoDBStreamRecord, occurrence: Occurrence) -> Occurrence | None:
        """The item's occurrence in `occurrence`'s place (its offset, or its recurring one) as the item holds it
        now, whatever its time or rule; None when the item is gone or holds nothing usable there."""
        return self._held_in(self._current(record), record, occurrence)

    def _held_in(
        self, current: dict[str, Any] | None, record: DynamoDBStreamRecord, occurrence: Occurrence
    ) -> Occurrence | None:
        try:
            keys = item_keys(record["dynamodb"]["Keys"], self.config)
            held = occurrences_of(current, keys, self.config)
        except PermanentError:
            return None
        return held.get(RECURRING if occurrence.recurrence is not None else occurrence.offset)

    def _holds(self, current: dict[str, Any] | None, record: DynamoDBStreamRecord, occurrence: Occurrence) -> bool:
        """The item as read (`current`) still holds this one-time occurrence's due time (any format of the instant)."""
        held = self._held_in(current, record, occurrence)
        return held is not None and held.due == occurrence.due

    def _current(self, record: DynamoDBStreamRecord) -> dict[str, Any] | None:
        """The record's item as it is now: from the batch read (`prepare`), or, for an item that read did not
        settle, one consistent GetItem of its own."""
        identity = self.identity(record)
        with self._lock:
            if identity in self._items:
                return self._items[identity]
        found = self.clients.get("dynamodb").get_item(
            TableName=self.config["table"], Key=to_request(record["dynamodb"]["Keys"]), ConsistentRead=True
        )
        return decode_image(found.get("Item"))

    def _cancel_recurring(self, occurrence: Occurrence) -> None:
        # No ledger: each firing is Scheduler's own, none was ever recorded here.
        schedules.delete(self.clients, self.group, occurrence.name)
        self._count("cancelled")
        log.debug("cancelled", schedule=occurrence.name)

    def _settle(self, record: DynamoDBStreamRecord, step: Step) -> None:
        # With precision="second" the release consumer drops an occurrence whose item has left its due time (it
        # cannot tell when the item left it): this record says it left after the time came, so it is delivered here,
        # through the same claim, which the schedule's marker does not stop.
        occurrence = step.occurrence
        now = self.now()
        # The ledger's memory counts from the due time, or from when the item took that time if later and known (the
        # batch holds that write: `coalesce`). Delivering a past due time is that write's own effect (`_schedule`
        # delivers it however old the time), so an item written long past due and removed before the handler saw the
        # write is delivered once, through the claim, as its write alone would have been.
        since = occurrence.due if step.since is None else max(occurrence.due, step.since)
        window = float(self.ledger.window_seconds)
        if remembered(since, now, window) and not remembered(since, now, SHORTEST_WINDOW_SECONDS):
            # Its entry may have been written under a narrower window than today's (the window was raised since):
            # one read of the narrowest the table ran with, only for an occurrence that old.
            window = self.ledger.narrowest_window()
        if not remembered(since, now, window):
            # The ledger may have forgotten this occurrence's delivery (its schedule ran, or a claim delivered it,
            # longer ago than the window): a claim would let it through a second time. An item lives on for months
            # after its occurrences (deleted, moved, removed by a cleanup TTL days later), so it is not delivered
            # again, as reconcile does not deliver it. Judged now, when the claim would be made: never earlier than
            # the change (a record handled a day late, or redriven, is judged then).
            self._count("forgotten")
            log.debug("settle-forgotten", schedule=occurrence.name, dueAt=format_due(occurrence.due))
            return
        self._deliver(occurrence, take_over=self.second)

    def _cancel(self, record: DynamoDBStreamRecord, step: Step) -> None:
        occurrence = step.occurrence
        if occurrence.recurrence is not None:
            if self._held(record, occurrence) is not None:
                # The item holds a rule again (re-created, or given one back): a later record made its schedule,
                # which has the same name (one per item). This record is an old one handled again (its batch
                # delivered again after a newer one's, a redrive): deleting would silence the item until its next
                # write. The item comes from the batch's one read (`prepare`).
                self._count("stale")
                log.debug("recurring-cancel-stale", schedule=occurrence.name)
                return
            self._cancel_recurring(occurrence)
            return
        if self._may_have_started(occurrence.due, self.now()):
            # Its schedule may be running or have run, and a delete now could not tell which: Scheduler removes a
            # schedule some time after invoking its target (and keeps it while retrying the target). So it is left
            # to run, with its ledger marker: the occurrence is delivered once, by it, also if the item comes back to
            # this time (a delete that won the race would have kept the marker and lost that return). The limit
            # the README states: a cancel handled once the schedule's minute began does not take it back.
            # (Second precision: the releaser still drops it at its second if the item left the time.)
            self._count("tooLateToCancel")
            log.debug("cancel-too-late", schedule=occurrence.name, dueAt=format_due(occurrence.due))
            return
        schedules.delete(self.clients, self.group, occurrence.name)
        # Deleted, or found gone, before its minute began: no schedule of this occurrence has run or will, so none
        # owns it and its marker is forgotten (a return to this due time is then scheduled or delivered afresh).
        # Judged by the clock once the delete has answered: one that answered later may have raced a firing, and
        # keeps the marker.
        if not self._may_have_started(occurrence.due, self.now()):
            persist(partial(self.ledger.unschedule, occurrence.name))
        self._count("cancelled")
        log.debug("cancelled", schedule=occurrence.name, dueAt=format_due(occurrence.due))

    def _deliver(
        self, occurrence: Occurrence, take_over: bool = False, fired: datetime | None = None, *, owe: bool = False
    ) -> None:
        """Deliver a come-due occurrence now, once: unless a schedule (`take_over`: unless a delivery) owns it.
        `fired`: one firing of a recurring occurrence, under the id Scheduler gives that firing; `owe`: a firing
        taken from Scheduler, left OWED in the ledger if the send fails (`_settle_owed`)."""
        due = occurrence.due if fired is None else fired
        name = occurrence.name if fired is None else recurring_firing_id(occurrence.name, format_due(fired))
        if not self.ledger.claim(name, self.now().timestamp(), take_over_scheduled=take_over):
            self._count("duplicates")
            log.debug("duplicate", schedule=name, dueAt=format_due(due))
            return
        try:
            payload = target_input(self.config["target"], self._event(occurrence, fired))
            send_now(self.config["target"], payload, occurrence=name, clients=self.clients)
        except Exception:
            persist(lambda: self.ledger.owe(name) if owe else self.ledger.release(name))
            raise
        persist(lambda: self.ledger.complete(name))
        late = (self.now() - due).total_seconds()
        self._count("delivered")
        log.debug("dispatched-now", schedule=name, dueAt=format_due(due), lateSeconds=late)

    def _event(self, occurrence: Occurrence, fired: datetime | None = None) -> Any:
        """The due event; a recurring occurrence's is the template Scheduler completes with each firing's scheduled
        time, or, for a firing the handler delivers itself (`fired`), completed here the same way."""
        if occurrence.recurrence is not None:
            scheduled = SCHEDULED_TIME if fired is None else format_due(fired)
            event = due_event(
                mode=MODE,
                table=self.config["table"],
                keys=occurrence.keys,
                due=_EPOCH,
                item=occurrence.item,
                occurrence=recurring_firing_id(occurrence.name, scheduled),
            )
            event["dueAt"] = scheduled
            event["recurrence"] = occurrence.recurrence.expression
            event["timeZone"] = occurrence.recurrence.zone
            return event
        return due_event(
            mode=MODE,
            table=self.config["table"],
            keys=occurrence.keys,
            due=occurrence.item_due,
            item=occurrence.item,
            occurrence=occurrence.name,
            offset=occurrence.offset if offsets_of(self.config) != [0] else None,
        )


def recurring_window(
    spec: Recurrence, parsed: Expression, now: datetime
) -> tuple[datetime | None, datetime | None] | None:
    """The StartDate and EndDate of the item's recurring schedule as made at `now` (see `Scheduling._recur`): a rate
    starts on its own grid (the item's start, or the epoch), at its next firing; a cron expression drops a past start.
    None when nothing is left to fire (the end has passed, or comes before the start)."""
    from st_core import recurrence

    start = spec.start
    if isinstance(parsed, recurrence.Rate):
        if start is None or start <= now + MIN_LEAD:
            start = parsed.next_after(now + MIN_LEAD, start or _EPOCH)
    elif start is not None and start <= now + MIN_LEAD:
        start = None
    if spec.end is not None and (spec.end <= now + MIN_LEAD or (start is not None and start > spec.end)):
        return None
    return start, spec.end


def _next_second(moment: datetime) -> datetime:
    """The first whole second after `moment`: a schedule starting there runs no firing at or before `moment`
    (firings fall on whole seconds), whatever precision Scheduler keeps of its StartDate."""
    return moment.replace(microsecond=0) + timedelta(seconds=1)


def _rule_marker(occurrence: Occurrence, version: str) -> str:
    """The ledger id under which the first time a schedule existed for one version of an item's rule (the rule one
    stream record, `version`, gave the item) is kept."""
    return recurring_firing_id(occurrence.name, f"rule-{version}")


def _taken_over(
    step: Step,
    spec: Recurrence,
    parsed: Expression,
    until: datetime,
    landed: datetime,
    *,
    sent: datetime,
    written: datetime | None,
) -> list[datetime]:
    """The firings the item's schedule held that its update takes from Scheduler, oldest first: the updated
    schedule starts after `until` (a rate on its next firing past it, a cron on the second after it), so it runs
    none up to there. Without this, a write in the seconds before a firing (a status, a counter, a consumer's
    write-back) would lose it, and writes every few seconds would stop the item for good. Each is the handler's,
    sent once through the ledger (`_take_over`). Only firings the schedule as it was held (`_covered`). Two kinds:

    - its minute had not begun when the update `landed` (Scheduler fires anywhere in a firing's minute, never
      before it; less the clocks' skew): Scheduler has not run it, and now never will;
    - the item was `written` before its minute began, and the update was `sent` before the minute was over: the
      update may have landed before Scheduler ran it (a record handled late: Lambda's lag, a batch redelivered, a
      busy invocation). Scheduler may also have run it first, so the target may get it twice, with the same
      `occurrenceId`; sending nothing would lose it whenever the update came first.

    A firing whose minute had begun before the write is left to Scheduler: it may have run already (a consumer
    writes back right after a firing, in its minute), and sending it again would double every firing of such an
    item. Its limit: a write made inside a firing's minute, before Scheduler runs it, loses that firing
    (Scheduler's instant in the minute cannot be known)."""
    from st_core import recurrence

    found: list[datetime] = []
    floor = min(landed - MIN_LEAD, sent - MINUTE - CLOCK_SKEW)  # a firing before this had run by `sent`
    while True:
        fired = recurrence.latest_firing(
            parsed, zone(spec.zone), after=floor, until=until, start=spec.start, end=spec.end
        )
        if fired is None:
            return found
        began = minute_start(fired) - CLOCK_SKEW
        ahead = began > landed
        late = written is not None and written < began and sent < began + MINUTE + 2 * CLOCK_SKEW
        if (ahead or late) and _covered(step.before, spec, fired):
            found.insert(0, fired)
        until = fired - timedelta(seconds=1)  # firings fall on whole seconds, at least a minute apart


def _first_after(spec: Recurrence, parsed: Expression, written: datetime, until: datetime) -> list[datetime]:
    """The first few firings whose minute began after `written` and that came by `until`: those a handling of the
    write may have taken from Scheduler (`_taken_over`), oldest first."""
    from st_core import recurrence

    found: list[datetime] = []
    for _ in range(FIRST_AFTER_LOOKS):
        fired = recurrence.latest_firing(
            parsed, zone(spec.zone), after=written, until=until, start=spec.start, end=spec.end
        )
        if fired is None:
            break
        if minute_start(fired) - CLOCK_SKEW > written:
            found.insert(0, fired)
        until = fired - timedelta(seconds=1)
    return found[:OWED_LOOKS]


def _written(record: DynamoDBStreamRecord) -> datetime | None:
    """When the record's change was made, as Lambda gives it (None when the record does not say)."""
    moment = changed_at(record)
    return None if moment is None else datetime.fromtimestamp(moment, UTC)


def _covered(before: Recurrence | None, spec: Recurrence, fired: datetime) -> bool:
    """True when the item's previous rule had the schedule fire at `fired` already: the same expression and zone
    (only its start or end changed) with `fired` within its bounds, or another rule that fires at that instant too
    (`rate(1 day)` changed to `rate(1 hour)` fires at midnight under both). Either way the firing has the same id
    (`naming.recurring_firing_id`: the item and the instant), so it was the schedule's as it was, not a firing the
    new rule missed."""
    if before is None:
        return False
    if (before.expression, before.zone) == (spec.expression, spec.zone):
        return (before.start is None or before.start <= fired) and (before.end is None or fired <= before.end)
    from st_core import recurrence

    parsed = recurrence.parse(before.expression)
    latest = recurrence.latest_firing(
        parsed, zone(before.zone), after=fired - timedelta(seconds=1), until=fired, start=before.start, end=before.end
    )
    return latest == fired


def handle_batch(
    event: DynamoDBStreamEvent | object,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Clock = lambda: datetime.now(UTC),
    sleep: Sleep = time.sleep,
) -> BatchResponse:
    scheduling = Scheduling(config, clients, now, sleep)
    return handle_stream_batch(
        event,
        config,
        mode=MODE,
        handle=scheduling,
        clients=clients,
        handle_group=scheduling.item,
        prepare=scheduling.prepare,
        finish=scheduling.finish,
        counts=scheduling.counts,
        identity_of=scheduling.identity,
    )


def handler(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """Lambda entry point (`eventbridge.handler`)."""
    log.invoked(context)
    return handle_batch(event, load_config())
