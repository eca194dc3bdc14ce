"""One EventBridge Scheduler `at()` schedule per item, kept in step with the item: created, moved, deleted.

Shared by every mode that schedules per item (`eventbridge` delivers the due event; `ttl` with `precise` deletes the
item on time). Every call is safe to repeat: a duplicate stream delivery converges on the same schedules.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from . import log
from .clients import Clients
from .errors import TransientError, error_code
from .naming import dedupe_name
from .timeparse import at_expression, format_due


def schedule_request(
    *, group: str, name: str, due: datetime, target: dict[str, Any], description: str
) -> dict[str, Any]:
    return {
        "Name": name,
        "GroupName": group,
        "ScheduleExpression": at_expression(due),
        "ScheduleExpressionTimezone": "UTC",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "ActionAfterCompletion": "DELETE",
        "State": "ENABLED",
        "Description": description[:512],
        "Target": target,
    }


def upsert(clients: Clients, request: dict[str, Any], *, create_first: bool) -> None:
    """Create or update the schedule; `create_first` when the item is new (saves a failed update)."""
    client = clients.get("scheduler")
    calls: list[Callable[[Any, dict[str, Any]], None]] = [_create, _update] if create_first else [_update, _create]
    for call in calls:
        try:
            call(client, request)
        except Exception as exc:
            # Create on an existing schedule (a duplicate delivery) and update of a missing one (it fired, or was
            # never made) both mean "use the other call"; anything else is a real failure.
            if error_code(exc) in ("ConflictException", "ResourceNotFoundException"):
                continue
            raise
        log.info(f"schedule-{call.__name__.strip('_')}", schedule=request["Name"], at=request["ScheduleExpression"])
        return
    raise TransientError(f"schedule {request['Name']} changed under us (created and deleted concurrently); retrying")


def delete(clients: Clients, group: str, name: str) -> None:
    """Delete the schedule if it exists (it is gone once it fired: `ActionAfterCompletion` DELETE)."""
    try:
        clients.get("scheduler").delete_schedule(Name=name, GroupName=group)
    except Exception as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise
        return
    log.info("schedule-deleted", schedule=name)


def occurrence(name: str, due: datetime) -> str:
    """Names one firing of an item's schedule (its schedule name and due time), for targets that dedupe by name."""
    return dedupe_name(name, format_due(due))


def _create(client: Any, request: dict[str, Any]) -> None:
    token = dedupe_name(request["Name"], request["ScheduleExpression"], request["Target"]["Input"], length=64)
    client.create_schedule(**request, ClientToken=token)


def _update(client: Any, request: dict[str, Any]) -> None:
    client.update_schedule(**request)
