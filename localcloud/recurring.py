"""Recurring schedules (`rate(...)`, `cron(...)`) fired as EventBridge Scheduler fires them, inside ministack.

ministack fires a rate from its creation and its cron on UTC fields, ignores the schedule's time zone, and passes
`Target.Input` as written. Scheduler evaluates both in `ScheduleExpressionTimezone` with its daylight-saving rules
(a skipped time is skipped, a repeated one runs once), honours StartDate and EndDate, invokes anywhere within the
minute of each firing (as for `at()`, see scheduler_minute.MinuteWindow), and writes context attributes such as
`<aws.scheduler.scheduled-time>` into the input. The firing times come from the same parser the handlers validate
with (`st_core.recurrence`), so what the handler accepts is what the local cloud runs.

`next_firing` and `render_input` are pure (tested with a fake clock across DST changes); `RecurringTicker` keeps
each schedule's next firing and is driven by ministack's scheduler tick (`install`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .component import constants, runtime_module
from .emulators import log
from .stores import snapshot

Instant = Callable[[str, float], float]  # (what fires, its scheduled epoch) -> when it runs (MinuteWindow.instant)
CONTEXT_ATTRIBUTES = ("scheduled-time", "schedule-arn", "execution-id", "attempt-number")


def is_recurring(expression: str) -> bool:
    return expression.strip().startswith(("rate(", "cron("))


def _moment(value: Any) -> datetime | None:
    """StartDate/EndDate/CreationDate as ministack stores them (epoch numbers or ISO text)."""
    if value is None:
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)


def next_firing(schedule: dict[str, Any], after: datetime) -> datetime | None:
    """The schedule's first scheduled time strictly after `after` within its start and end; None when none is left
    (past its EndDate, or a cron with no later match)."""
    recurrence = runtime_module("recurrence")
    parsed = recurrence.parse(schedule["ScheduleExpression"])
    start = _moment(schedule.get("StartDate"))
    end = _moment(schedule.get("EndDate"))
    if isinstance(parsed, recurrence.Rate):
        # A rate counts from its StartDate, or, without one, from when the schedule was made or last changed (and
        # its first firing is then at once: see `first_firing`).
        anchor = start or _moment(schedule.get("LastModificationDate") or schedule.get("CreationDate")) or after
        fired: datetime | None = parsed.next_after(after, anchor)
    else:
        floor = after if start is None or after >= start else start - timedelta(microseconds=1)
        fired = parsed.next_after(floor, recurrence.zone(schedule.get("ScheduleExpressionTimezone")))
    if fired is None or (end is not None and fired > end):
        return None
    return fired


def first_firing(schedule: dict[str, Any], now: datetime) -> datetime | None:
    """The first firing of a schedule just made or changed. AWS: "If you do not provide a StartDate for a rate-based
    schedule, your schedule starts invoking the target immediately" (each create or update starts it again)."""
    recurrence = runtime_module("recurrence")
    if isinstance(recurrence.parse(schedule["ScheduleExpression"]), recurrence.Rate) and not schedule.get("StartDate"):
        made = _moment(schedule.get("LastModificationDate") or schedule.get("CreationDate")) or now
        end = _moment(schedule.get("EndDate"))
        return None if end is not None and made > end else made
    return next_firing(schedule, now)


def render_input(text: str, *, scheduled: datetime, arn: str, execution: str, attempt: int = 1) -> str:
    """`Target.Input` with Scheduler's context attributes written in (scheduled time as `2026-03-30T08:00:00Z`)."""
    values = {
        "scheduled-time": scheduled.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "schedule-arn": arn,
        "execution-id": execution,
        "attempt-number": str(attempt),
    }
    for name in CONTEXT_ATTRIBUTES:
        text = text.replace(f"<aws.scheduler.{name}>", values[name])
    return text


@dataclass
class _Next:
    signature: tuple[Any, ...]
    scheduled: datetime | None


class RecurringTicker:
    """Each recurring schedule's next scheduled time, fired once its drawn instant in that minute has come."""

    def __init__(self, instant: Instant) -> None:
        self.instant = instant
        self.pending: dict[Any, _Next] = {}

    def due(self, key: Any, schedule: dict[str, Any], now: datetime) -> datetime | None:
        """The scheduled time to fire now for this schedule, if one has come (then the next one is lined up)."""
        signature = tuple(
            schedule.get(f)
            for f in (
                "ScheduleExpression",
                "ScheduleExpressionTimezone",
                "StartDate",
                "EndDate",
                "LastModificationDate",
                "State",
            )
        )
        entry = self.pending.get(key)
        if entry is None or entry.signature != signature:
            # New or changed: its firings count from now (a change never replays a missed one).
            entry = _Next(signature, self._refused_or(lambda: first_firing(schedule, now), key))
            self.pending[key] = entry
        scheduled = entry.scheduled
        if scheduled is None or now.timestamp() < self.instant(f"{key}@{scheduled.isoformat()}", scheduled.timestamp()):
            return None
        entry.scheduled = self._refused_or(lambda: next_firing(schedule, scheduled), key)
        return scheduled

    @staticmethod
    def _refused_or(firing: Callable[[], datetime | None], key: Any) -> datetime | None:
        """An expression Scheduler refuses (ministack stores any) never fires, and does not stop the others."""
        try:
            return firing()
        except runtime_module("errors").PermanentError as refused:
            log.warning("recurring schedule %s never fires: Scheduler refuses it: %s", key, refused)
            return None

    def forget(self, live: set[Any]) -> None:
        for key in [k for k in self.pending if k not in live]:
            del self.pending[key]


def install(instant: Instant) -> None:
    """Fire ministack's recurring schedules with `RecurringTicker`, leaving its `at()` handling as it is."""
    from ministack.core.responses import (
        get_account_id,
        get_region,
        new_uuid,
        set_request_account_id,
        set_request_region,
    )
    from ministack.services import eventbridge, scheduler

    ticker = RecurringTicker(instant)
    original_tick = scheduler._tick_schedules

    def tick() -> None:
        now = time.time()
        moment = datetime.fromtimestamp(now, UTC)
        live = set()
        previous = (get_account_id(), get_region())
        try:
            for state_key, schedule in snapshot(scheduler._schedules._data):
                universal = str((schedule.get("Target") or {}).get("Arn", "")).startswith(
                    constants.UNIVERSAL_TARGET_PREFIX
                )
                recurring = is_recurring(schedule.get("ScheduleExpression", ""))
                if universal or recurring:
                    # ministack's own tick skips a schedule it believes fired just now. Universal targets are the
                    # emulators' (localcloud/emulators.py); left to ministack, it would fail to call one and delete
                    # the schedule, sometimes before the emulator had seen it.
                    scheduler._schedule_last_fired[state_key] = now
                if universal or not recurring:
                    continue
                live.add(state_key)
                if schedule.get("State") != "ENABLED":
                    continue
                scheduled = ticker.due(state_key, schedule, moment)
                if scheduled is None:
                    continue
                account, region, _ = state_key
                set_request_account_id(account)
                set_request_region(region)
                target = dict(schedule.get("Target") or {})
                execution = new_uuid()
                if "Input" in target:
                    target["Input"] = render_input(
                        target["Input"], scheduled=scheduled, arn=schedule.get("Arn", ""), execution=execution
                    )
                event = {
                    "EventId": execution,
                    "Source": "aws.scheduler",
                    "DetailType": "Scheduled Event",
                    "Detail": "{}",
                    "Time": now,
                    "Resources": [schedule.get("Arn", "")],
                    "Account": account,
                    "Region": region,
                }
                try:
                    eventbridge._invoke_target(target, event, schedule)
                except Exception:  # as ministack's own tick: a failed target does not stop the others
                    scheduler.logger.exception("recurring schedule %s failed to invoke its target", state_key)
            ticker.forget(live)
        finally:
            set_request_account_id(previous[0])
            set_request_region(previous[1])
        original_tick()

    scheduler._tick_schedules = tick
