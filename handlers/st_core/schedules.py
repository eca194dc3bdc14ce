"""EventBridge Scheduler `at()` schedules kept in step with items: created, moved, deleted.

Shared by every mode that schedules (`eventbridge` delivers the due event; `ttl` with `precise` deletes the item on
time). Scheduler ignores the seconds of an `at()` time and fires anywhere in that minute (`at(12:00:45)` may run at
12:00:03), so a schedule is always set on the first whole minute at or after the due time, which makes it never
early and at most 60 s (plus Scheduler's own delay) late. Every call is safe to repeat.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from . import log
from .clients import Clients
from .errors import TransientError, error_code
from .timeparse import at_expression, minute_at_or_after

if TYPE_CHECKING:
    from .config import SchedulerConfig

# The AWS actions this module's own calls need (checked by tests/iam): schedules in the table's group, and handing
# Scheduler its role with each one made or changed.
AWS_ACTIONS = ("iam:PassRole", "scheduler:CreateSchedule", "scheduler:DeleteSchedule", "scheduler:UpdateSchedule")

# A schedule is only made for a minute that starts at least this far ahead: one whose time has passed by the time
# Scheduler stores it would never fire. Closer than that, the following minute is used.
MIN_LEAD = timedelta(seconds=10)


def fire_time(due: datetime, now: datetime) -> datetime:
    """The `at()` time for a due time: its minute boundary, or the next one when that is too close to now."""
    fire = minute_at_or_after(due)
    return fire if fire - now >= MIN_LEAD else minute_at_or_after(now + MIN_LEAD)


# How far the function's clock may be from Scheduler's. Both keep AWS's time (Amazon Time Sync, well within a
# millisecond); a second is the margin.
CLOCK_SKEW = timedelta(seconds=1)


def may_be_firing(due: datetime, now: datetime) -> bool:
    """True when a schedule made for `due` may already be firing (or have fired): changing it now could run it a
    second time or not at all."""
    return now >= minute_at_or_after(due) - MIN_LEAD


def may_have_started(due: datetime, now: datetime) -> bool:
    """True once a schedule made for `due` may have started to run: from its minute (the earliest any schedule of
    this due time names), less the clocks' skew. Before then, a schedule deleted or found missing has surely never
    run; from then on a successful delete cannot tell (Scheduler removes a schedule some time after invoking its
    target, and keeps it while it retries the target)."""
    return now >= minute_at_or_after(due) - CLOCK_SKEW


def schedule_request(
    *, group: str, name: str, fire: datetime, target: dict[str, Any], description: str, key: str | None = None
) -> dict[str, Any]:
    """A one-time schedule; `key`: the customer-managed key its payload is kept under (`payload_key`)."""
    return {
        "Name": name,
        "GroupName": group,
        "ScheduleExpression": at_expression(fire),
        "ScheduleExpressionTimezone": "UTC",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "ActionAfterCompletion": "DELETE",
        "State": "ENABLED",
        "Description": description[:512],
        "Target": target,
        **_encrypted(key),
    }


def payload_key(scheduler: SchedulerConfig) -> str | None:
    """The customer-managed key the configuration keeps schedules' payloads under (the table's), or None."""
    return scheduler.get("kmsKeyArn") or None


def _encrypted(key: str | None) -> dict[str, str]:
    """A schedule's payload holds the item whole: with a customer-managed key, Scheduler keeps it under that key
    (and its own AWS owned key) instead of its AWS owned key alone."""
    return {"KmsKeyArn": key} if key else {}


def recurring_request(
    *,
    group: str,
    name: str,
    expression: str,
    zone: str,
    start: datetime | None,
    end: datetime | None,
    target: dict[str, Any],
    description: str,
    key: str | None = None,
) -> dict[str, Any]:
    """A recurring schedule: it stays after each firing until the item's change deletes it, or, with an end, until
    Scheduler completes it there (ActionAfterCompletion DELETE then, so finished schedules do not pile up against
    the account's quota; a later change of the item makes it again). Scheduler evaluates the expression in `zone`,
    with its daylight-saving rules (see st_core.recurrence). Its payload under `key`, as `schedule_request`'s."""
    request: dict[str, Any] = {
        "Name": name,
        "GroupName": group,
        "ScheduleExpression": expression,
        "ScheduleExpressionTimezone": zone,
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "ActionAfterCompletion": "NONE" if end is None else "DELETE",
        "State": "ENABLED",
        "Description": description[:512],
        "Target": target,
        **_encrypted(key),
    }
    if start is not None:
        request["StartDate"] = start
    if end is not None:
        request["EndDate"] = end
    return request


def upsert(clients: Clients, request: dict[str, Any], *, create_first: bool) -> None:
    """Create or update the schedule; `create_first` when it is probably new (saves a failed update).

    No `ClientToken` of our own: the SDK gives each call one (kept across its own retries, so a retried request is
    one creation), and the schedule's name already makes a second creation a ConflictException, answered by an
    update. A token derived from the stream record would be wrong: when Lambda replays a REMOVE and the INSERT after
    it, the replayed REMOVE deletes the live schedule and the INSERT's CreateSchedule, carrying a token Scheduler
    has already seen, would succeed without creating anything."""
    client = clients.get("scheduler")

    def create(c: Any, r: dict[str, Any]) -> None:
        c.create_schedule(**r)

    def update(c: Any, r: dict[str, Any]) -> None:
        c.update_schedule(**r)

    calls: list[tuple[str, Callable[[Any, dict[str, Any]], None]]] = [("create", create), ("update", update)]
    if not create_first:
        calls.reverse()
    for verb, call in calls:
        try:
            call(client, request)
        except Exception as exc:
            # Create on an existing schedule and update of a missing one both mean "use the other call".
            if error_code(exc) in ("ConflictException", "ResourceNotFoundException"):
                continue
            raise
        log.debug(f"schedule-{verb}", schedule=request["Name"], at=request["ScheduleExpression"])
        return
    raise TransientError(f"schedule {request['Name']} changed under us (created and deleted concurrently); retrying")


def delete(clients: Clients, group: str, name: str) -> bool:
    """Delete the schedule if it exists (it is gone once it fired: `ActionAfterCompletion` DELETE); True if it did."""
    try:
        clients.get("scheduler").delete_schedule(Name=name, GroupName=group)
    except Exception as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise
        return False
    log.debug("schedule-deleted", schedule=name)
    return True
