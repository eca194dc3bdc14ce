"""`eventbridge` mode: keep one EventBridge Scheduler `at()` schedule per item that carries a due time.

Thin entry point: parse the stream record into a plan (pure), then apply the plan with Scheduler calls.
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
from st_core.errors import PermanentError
from st_core.naming import schedule_name
from st_core.stream import BatchResponse, DynamoDBStreamEvent, DynamoDBStreamRecord, decode_image, key_identity
from st_core.timeparse import format_due, parse_due

MODE = "eventbridge"
Clock = Callable[[], datetime]


class Action(StrEnum):
    NOOP = "noop"
    UPSERT = "upsert"
    DELETE = "delete"


@dataclass(frozen=True)
class Desired:
    """What the item's schedule must look like: when it fires and exactly what it delivers."""

    due: datetime
    payload: str


@dataclass(frozen=True)
class Plan:
    action: Action
    name: str
    desired: Desired | None = None
    create_first: bool = False
    poison_reason: str | None = None


def desired_schedule(image: dict[str, Any] | None, keys: dict[str, Any], config: HandlerConfig) -> Desired | None:
    """None when the image carries no due time; PermanentError when it carries one that cannot be used."""
    if image is None or image.get(config["timeAttribute"]) is None:
        return None
    due = parse_due(image[config["timeAttribute"]])
    event = due_event(mode=MODE, table=config["table"], keys=keys, due=due, item=image)
    return Desired(due=due, payload=target_input(config["target"], event))


def plan(record: DynamoDBStreamRecord, config: HandlerConfig) -> Plan:
    """Decide what one stream record means for the item's schedule, without calling AWS."""
    data = record["dynamodb"]
    keys = decode_image(data["Keys"]) or {}
    name = schedule_name(key_identity(record), "-".join(str(v) for v in keys.values()))
    if record["eventName"] == "REMOVE":
        return Plan(Action.DELETE, name)
    new_image = decode_image(data.get("NewImage"))
    old_image = decode_image(data.get("OldImage"))
    try:
        new = desired_schedule(new_image, keys, config)
    except PermanentError as exc:
        # The item now names an unusable time: its old schedule must not fire either.
        return Plan(Action.DELETE, name, poison_reason=str(exc))
    if new is None:
        return Plan(Action.DELETE, name)
    if record["eventName"] == "MODIFY":
        try:
            old = desired_schedule(old_image, keys, config)
        except PermanentError:
            old = None
        if old == new:
            return Plan(Action.NOOP, name)
    return Plan(Action.UPSERT, name, new, create_first=record["eventName"] == "INSERT")


def apply(
    step: Plan, config: HandlerConfig, *, clients: Clients = CLIENTS, now: Clock = lambda: datetime.now(UTC)
) -> None:
    """Make Scheduler match the plan. Safe to repeat: a duplicate delivery converges on the same schedules."""
    scheduler = config["scheduler"]
    if step.action is Action.NOOP:
        log.debug("unchanged", schedule=step.name)
        return
    if step.action is Action.DELETE or step.desired is None:
        schedules.delete(clients, scheduler["group"], step.name)
        if step.poison_reason:
            raise PermanentError(step.poison_reason)
        return
    desired = step.desired
    lead = (desired.due - now()).total_seconds()
    if lead < scheduler["dispatchNowWithinSeconds"]:
        # Scheduler does not fire one-time schedules in the past and fires `at()` with one-minute precision:
        # a due time that has come (or nearly) is delivered now, and any older schedule for the item removed.
        schedules.delete(clients, scheduler["group"], step.name)
        occurrence = schedules.occurrence(step.name, desired.due)
        send_now(config["target"], desired.payload, occurrence=occurrence, clients=clients)
        log.info("dispatched-now", schedule=step.name, dueAt=format_due(desired.due), lateSeconds=round(-lead, 3))
        return
    _upsert(clients, config, step.name, desired, create_first=step.create_first)


def handle_batch(
    event: DynamoDBStreamEvent,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Clock = lambda: datetime.now(UTC),
) -> BatchResponse:
    return handle_stream_batch(
        event,
        config,
        mode=MODE,
        handle=lambda record: apply(plan(record, config), config, clients=clients, now=now),
        clients=clients,
    )


def handler(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """Lambda entry point (`eventbridge.handler`)."""
    return handle_batch(event, load_config())


def _upsert(clients: Clients, config: HandlerConfig, name: str, desired: Desired, *, create_first: bool) -> None:
    scheduler = config["scheduler"]
    request = schedules.schedule_request(
        group=scheduler["group"],
        name=name,
        due=desired.due,
        target=scheduler_target(config["target"], scheduler, desired.payload),
        description=f"scheduled-table {MODE} {config['table']}",
    )
    schedules.upsert(clients, request, create_first=create_first)
