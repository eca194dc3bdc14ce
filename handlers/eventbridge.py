"""`eventbridge` mode: one EventBridge Scheduler `at()` schedule per occurrence (item keys + due time).

Thin entry point: `plan` reads one stream record into steps (pure), `Scheduling` carries them out.

Once per occurrence, under AWS's real behaviour:
- Scheduler fires anywhere in the minute of its `at()` time, so schedules are set on the first whole minute at or
  after the due time (never early; at most about 60 s late, 120 s when made less than 10 s before that minute).
- Stream batches are delivered at least once, whole, possibly much later. A record is judged by when its change
  happened (`ApproximateCreationDateTime`), not by when it is processed: a due time the item held when it came is
  due (delivered once), one the item left before it came is cancelled (never delivered). A write that keeps the due
  time never delivers again: a consumer that writes back on delivery cannot loop.
- The idempotency ledger records which occurrences a schedule owns and which were delivered directly, so a
  redelivered batch neither re-creates a fired schedule nor delivers a past occurrence twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from st_core import log, schedules
from st_core.batch import handle_stream_batch
from st_core.clients import CLIENTS, Clients
from st_core.config import HandlerConfig, load_config
from st_core.dispatch import due_event, scheduler_target, send_now, target_input
from st_core.errors import PermanentError, persist
from st_core.idempotency import Ledger
from st_core.naming import schedule_name
from st_core.stream import (
    BatchResponse,
    DynamoDBStreamEvent,
    DynamoDBStreamRecord,
    changed_at,
    decode_image,
    key_identity,
    to_request,
)
from st_core.timeparse import format_due, parse_due

MODE = "eventbridge"
Clock = Callable[[], datetime]


class Action(StrEnum):
    SCHEDULE = "schedule"  # the item holds this due time: a schedule delivers it, or it is delivered now if past
    SETTLE = "settle"  # the item left this due time after it came: it was due, make sure it was delivered
    CANCEL = "cancel"  # the item left this due time before it came: it must never fire


@dataclass(frozen=True)
class Occurrence:
    name: str  # its schedule's name, and its id in the ledger
    due: datetime
    keys: dict[str, Any]
    item: dict[str, Any]


@dataclass(frozen=True)
class Step:
    action: Action
    occurrence: Occurrence


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    poison_reason: str | None = None


def occurrence_name(identity: str, keys: dict[str, Any], due: datetime) -> str:
    """One schedule per (item, due time): valid Scheduler name, readable prefix, collision-safe hash."""
    return schedule_name(f"{identity}\x1f{format_due(due)}", "-".join(str(v) for v in keys.values()))


def occurrence_of(
    image: dict[str, Any] | None, identity: str, keys: dict[str, Any], config: HandlerConfig
) -> Occurrence | None:
    """None when the image carries no due time; PermanentError when it carries one that cannot be used."""
    if image is None or image.get(config["timeAttribute"]) is None:
        return None
    due = parse_due(image[config["timeAttribute"]])
    return Occurrence(occurrence_name(identity, keys, due), due, keys, image)


def plan(record: DynamoDBStreamRecord, config: HandlerConfig, changed: datetime) -> Plan:
    """What one record means for the item's occurrences, given when its change happened (no AWS calls)."""
    data = record["dynamodb"]
    identity = key_identity(record)
    keys = decode_image(data["Keys"]) or {}
    name = record["eventName"]
    try:
        old = occurrence_of(decode_image(data.get("OldImage")), identity, keys, config)
    except PermanentError:
        old = None  # it never had a usable time, so nothing was scheduled for it
    poison: str | None = None
    new: Occurrence | None = None
    if name != "REMOVE":
        try:
            new = occurrence_of(decode_image(data.get("NewImage")), identity, keys, config)
        except PermanentError as exc:
            poison = str(exc)
    steps: list[Step] = []
    if old is not None and (new is None or new.due != old.due):
        steps.append(Step(Action.SETTLE if old.due <= changed else Action.CANCEL, old))
    if new is not None:
        kept = old is not None and old.due == new.due
        # A write that keeps a due time that had already come is not a new occurrence: the write that set the time
        # delivers it. (A kept time still ahead may carry a new payload: the schedule is refreshed.)
        if not (kept and (new.due <= changed or new.item == old.item)):  # type: ignore[union-attr]
            steps.append(Step(Action.SCHEDULE, new))
    return Plan(tuple(steps), poison)


class Scheduling:
    """Carries out plans: Scheduler calls, direct delivery of past occurrences, the ledger."""

    def __init__(self, config: HandlerConfig, clients: Clients, now: Clock) -> None:
        self.config = config
        self.clients = clients
        self.now = now
        section = config["eventbridge"]
        self.ledger = Ledger(
            section["ledgerTable"],
            clients=clients,
            lease_seconds=section["leaseSeconds"],
            window_seconds=section["windowSeconds"],
        )
        self.group = config["scheduler"]["group"]

    def __call__(self, record: DynamoDBStreamRecord) -> None:
        moment = changed_at(record)
        changed = datetime.fromtimestamp(moment, UTC) if moment is not None else self.now()
        step_plan = plan(record, self.config, changed)
        actions = {Action.SCHEDULE: self._schedule, Action.SETTLE: self._settle, Action.CANCEL: self._cancel}
        for step in step_plan.steps:
            actions[step.action](record, step.occurrence)
        if step_plan.poison_reason:
            raise PermanentError(step_plan.poison_reason)

    def _schedule(self, record: DynamoDBStreamRecord, occurrence: Occurrence) -> None:
        now = self.now()
        if occurrence.due <= now:
            # Scheduler cannot fire in the past. Deliver now, if the item still holds this time (otherwise a later
            # record says whether it left it before or after it came) and no schedule or earlier run owns it.
            if self._still_holds(record, occurrence):
                self._deliver(occurrence)
            return
        if schedules.may_be_firing(occurrence.due, now) and self.ledger.taken(occurrence.name):
            log.debug("firing-left-alone", schedule=occurrence.name)
            return
        fire = schedules.fire_time(occurrence.due, now)
        scheduler = self.config["scheduler"]
        payload = target_input(self.config["target"], self._event(occurrence), via_scheduler=True)
        request = schedules.schedule_request(
            group=self.group,
            name=occurrence.name,
            fire=fire,
            target=scheduler_target(self.config["target"], scheduler, payload),
            description=f"scheduled-table {MODE} {self.config['table']}",
        )
        schedules.upsert(self.clients, request, create_first=record["eventName"] == "INSERT")
        # After the schedule exists: a crash in between can only cost a duplicate, never the occurrence.
        persist(lambda: self.ledger.scheduled(occurrence.name, fire.timestamp()))
        log.info("scheduled", schedule=occurrence.name, dueAt=format_due(occurrence.due), fireAt=format_due(fire))

    def _settle(self, record: DynamoDBStreamRecord, occurrence: Occurrence) -> None:
        self._deliver(occurrence)

    def _cancel(self, record: DynamoDBStreamRecord, occurrence: Occurrence) -> None:
        deleted = schedules.delete(self.clients, self.group, occurrence.name)
        # Forget the ledger's marker only for a schedule that surely had not run: one this call deleted, before its
        # minute. A schedule already gone may have fired (a replayed cancel after the firing): its marker stays, so a
        # replayed INSERT after it does not deliver the occurrence a second time.
        if deleted and not schedules.may_be_firing(occurrence.due, self.now()):
            persist(lambda: self.ledger.unschedule(occurrence.name))
        log.info("cancelled", schedule=occurrence.name, dueAt=format_due(occurrence.due))

    def _deliver(self, occurrence: Occurrence) -> None:
        """Deliver a come-due occurrence now, once: unless a schedule or an earlier delivery owns it."""
        if not self.ledger.claim(occurrence.name):
            log.info("duplicate", schedule=occurrence.name, dueAt=format_due(occurrence.due))
            return
        try:
            payload = target_input(self.config["target"], self._event(occurrence))
            send_now(
                self.config["target"],
                payload,
                occurrence=schedules.occurrence(occurrence.name, occurrence.due),
                clients=self.clients,
            )
        except Exception:
            persist(lambda: self.ledger.release(occurrence.name))
            raise
        persist(lambda: self.ledger.complete(occurrence.name))
        late = (self.now() - occurrence.due).total_seconds()
        log.info("dispatched-now", schedule=occurrence.name, dueAt=format_due(occurrence.due), lateSeconds=late)

    def _still_holds(self, record: DynamoDBStreamRecord, occurrence: Occurrence) -> bool:
        attribute = self.config["timeAttribute"]
        found = self.clients.get("dynamodb").get_item(
            TableName=self.config["table"],
            Key=to_request(record["dynamodb"]["Keys"]),
            ConsistentRead=True,
            ProjectionExpression="#t",
            ExpressionAttributeNames={"#t": attribute},
        )
        value = (decode_image(found.get("Item")) or {}).get(attribute)
        try:
            return value is not None and parse_due(value) == occurrence.due
        except PermanentError:
            return False

    def _event(self, occurrence: Occurrence) -> Any:
        return due_event(
            mode=MODE, table=self.config["table"], keys=occurrence.keys, due=occurrence.due, item=occurrence.item
        )


def handle_batch(
    event: DynamoDBStreamEvent | object,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Clock = lambda: datetime.now(UTC),
) -> BatchResponse:
    return handle_stream_batch(event, config, mode=MODE, handle=Scheduling(config, clients, now), clients=clients)


def handler(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """Lambda entry point (`eventbridge.handler`)."""
    return handle_batch(event, load_config())
