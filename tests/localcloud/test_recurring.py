"""The local cloud's recurring schedules: Scheduler's firing times (zone, DST, start, end), its minute, its input."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from localcloud.recurring import RecurringTicker, first_firing, next_firing, render_input

LONDON = ZoneInfo("Europe/London")


def schedule(expression: str, zone: str = "UTC", **extra: Any) -> dict[str, Any]:
    return {"ScheduleExpression": expression, "ScheduleExpressionTimezone": zone, "State": "ENABLED", **extra}


def firings(spec: dict[str, Any], after: datetime, count: int) -> list[datetime]:
    found: list[datetime] = []
    moment: datetime | None = after
    while len(found) < count and moment is not None:
        moment = next_firing(spec, moment)
        if moment is not None:
            found.append(moment)
    return found


def test_a_weekly_0900_london_schedule_fires_at_0900_local_every_week_across_both_changes() -> None:
    weeks = firings(schedule("cron(0 9 ? * MON *)", "Europe/London"), datetime(2026, 3, 1, tzinfo=UTC), 40)
    local = [w.astimezone(LONDON) for w in weeks]
    assert all((t.weekday(), t.hour, t.minute) == (0, 9, 0) for t in local)
    assert [b - a for a, b in itertools.pairwise(local)] == [timedelta(days=7)] * 39
    # In UTC the firing moves an hour with the clocks: 09:00 GMT until 29 March, 08:00 UTC (BST) until 25 October.
    assert weeks[0] == datetime(2026, 3, 2, 9, tzinfo=UTC)
    assert datetime(2026, 3, 30, 8, tzinfo=UTC) in weeks and datetime(2026, 10, 19, 8, tzinfo=UTC) in weeks
    assert datetime(2026, 10, 26, 9, tzinfo=UTC) in weeks


def test_a_time_the_clocks_skip_is_skipped_and_a_repeated_one_runs_once() -> None:
    daily = schedule("cron(30 1 * * ? *)", "Europe/London")
    spring = firings(daily, datetime(2026, 3, 27, tzinfo=UTC), 3)
    assert [t.astimezone(LONDON).day for t in spring] == [27, 28, 30]  # no 01:30 on 29 March
    autumn = firings(daily, datetime(2026, 10, 24, tzinfo=UTC), 3)
    assert [t.astimezone(LONDON).day for t in autumn] == [24, 25, 26]  # 25 October once, not twice
    assert autumn[1] == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # the first 01:30 (BST)


def test_a_rate_counts_from_its_start_or_without_one_fires_at_once_from_its_last_change() -> None:
    start = datetime(2026, 5, 1, 12, 0, 30, tzinfo=UTC)
    spec = schedule("rate(2 hours)", StartDate=start.timestamp())
    assert firings(spec, start - timedelta(days=1), 3) == [start + timedelta(hours=h) for h in (0, 2, 4)]
    assert first_firing(spec, start - timedelta(days=1)) == start
    # AWS: a rate without a StartDate "starts invoking the target immediately", from each create or update.
    made = datetime(2026, 5, 1, 9, 15, tzinfo=UTC)
    unanchored = schedule("rate(5 minutes)", LastModificationDate=made.timestamp())
    assert first_firing(unanchored, made + timedelta(seconds=1)) == made
    assert next_firing(unanchored, made) == made + timedelta(minutes=5)


def test_nothing_fires_before_the_start_or_after_the_end() -> None:
    start, end = datetime(2026, 6, 1, tzinfo=UTC), datetime(2026, 6, 20, tzinfo=UTC)
    weekly = schedule("cron(0 9 ? * MON *)", "Europe/London", StartDate=start.timestamp(), EndDate=end.timestamp())
    fired = firings(weekly, datetime(2026, 1, 1, tzinfo=UTC), 10)
    assert [t.day for t in fired] == [1, 8, 15]  # Mondays from 1 June; the 22nd is past the end


def test_the_input_gets_scheduler_context_attributes() -> None:
    text = (
        '{"dueAt":"<aws.scheduler.scheduled-time>","arn":"<aws.scheduler.schedule-arn>",'
        '"n":"<aws.scheduler.attempt-number>"}'
    )
    rendered = render_input(
        text, scheduled=datetime(2026, 3, 30, 8, tzinfo=UTC), arn="arn:aws:scheduler:x", execution="e-1"
    )
    assert rendered == '{"dueAt":"2026-03-30T08:00:00Z","arn":"arn:aws:scheduler:x","n":"1"}'


def test_the_ticker_fires_each_firing_once_at_its_drawn_instant_and_a_change_never_replays_one() -> None:
    ticker = RecurringTicker(lambda what, named: named + 37)  # every firing drawn 37 s into its minute
    spec = schedule("cron(* * * * ? *)", LastModificationDate=1)
    t0 = datetime(2026, 7, 1, 10, 0, 5, tzinfo=UTC)
    assert ticker.due("k", spec, t0) is None  # lines up 10:01, runs at 10:01:37
    assert ticker.due("k", spec, t0.replace(minute=1, second=30)) is None
    assert ticker.due("k", spec, t0.replace(minute=1, second=40)) == datetime(2026, 7, 1, 10, 1, tzinfo=UTC)
    assert ticker.due("k", spec, t0.replace(minute=1, second=50)) is None  # once
    # Changed (the handler updated it) long after: its firings count from the change, none missed is replayed.
    changed = schedule("cron(* * * * ? *)", LastModificationDate=2)
    late = datetime(2026, 7, 1, 11, 0, 10, tzinfo=UTC)
    assert ticker.due("k", changed, late) is None
    assert ticker.due("k", changed, late.replace(minute=1, second=38)) == datetime(2026, 7, 1, 11, 1, tzinfo=UTC)
