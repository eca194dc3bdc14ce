"""AWS's recurring expressions against AWS's documented examples, and daylight saving time as Scheduler handles it."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from st_core.errors import PermanentError
from st_core.recurrence import Cron, Rate, latest_firing, parse, zone

from tests.handlers.conftest import Env

LONDON = ZoneInfo("Europe/London")


def fires(expression: str, after: datetime, count: int, where: str = "UTC") -> list[datetime]:
    parsed = parse(expression)
    assert isinstance(parsed, Cron)
    out: list[datetime] = []
    moment = after
    for _ in range(count):
        found = parsed.next_after(moment, zone(where))
        assert found is not None
        out.append(found)
        moment = found
    return out


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[arg-type, misc]


# AWS's documented cron examples (EventBridge Scheduler user guide), each with the times it must give.
@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("cron(0 10 * * ? *)", utc(2026, 11, 21, 10, 0), [utc(2026, 11, 22, 10, 0), utc(2026, 11, 23, 10, 0)]),
        ("cron(15 12 * * ? *)", utc(2026, 11, 21), [utc(2026, 11, 21, 12, 15), utc(2026, 11, 22, 12, 15)]),
        # 18:00 Monday to Friday: 2026-11-20 is a Friday, so the next is Monday the 23rd.
        ("cron(0 18 ? * MON-FRI *)", utc(2026, 11, 20, 18, 0), [utc(2026, 11, 23, 18, 0), utc(2026, 11, 24, 18, 0)]),
        ("cron(0 8 1 * ? *)", utc(2026, 11, 21), [utc(2026, 12, 1, 8, 0), utc(2027, 1, 1, 8, 0)]),
        ("cron(0/15 * * * ? *)", utc(2026, 11, 21, 9, 7), [utc(2026, 11, 21, 9, 15), utc(2026, 11, 21, 9, 30)]),
        ("cron(0/5 8-17 ? * MON-FRI *)", utc(2026, 11, 20, 17, 55), [utc(2026, 11, 23, 8, 0), utc(2026, 11, 23, 8, 5)]),
        # 09:00 on the first Monday of the month.
        ("cron(0 9 ? * 2#1 *)", utc(2026, 11, 21), [utc(2026, 12, 7, 9, 0), utc(2027, 1, 4, 9, 0)]),
        # Last day of the month; last Friday; nearest weekday to the 15th (2026-11-15 is a Sunday -> Monday 16th).
        ("cron(0 0 L * ? *)", utc(2026, 11, 21), [utc(2026, 11, 30), utc(2026, 12, 31)]),
        ("cron(0 0 ? * 6L *)", utc(2026, 11, 1), [utc(2026, 11, 27), utc(2026, 12, 25)]),
        ("cron(0 0 15W * ? *)", utc(2026, 11, 1), [utc(2026, 11, 16), utc(2026, 12, 15)]),
        # A year field: nothing after the last year named.
        ("cron(0 12 1 JAN ? 2027)", utc(2026, 11, 21), [utc(2027, 1, 1, 12, 0)]),
    ],
)
def test_documented_cron_examples(expression: str, after: datetime, expected: list[datetime]) -> None:
    assert fires(expression, after, len(expected)) == expected


def test_a_year_that_has_passed_has_no_next_time() -> None:
    parsed = parse("cron(0 12 1 JAN ? 2027)")
    assert isinstance(parsed, Cron)
    assert parsed.next_after(utc(2027, 1, 1, 12, 0), UTC) is None


def test_weekly_0900_london_stays_0900_local_across_both_dst_changes() -> None:
    # Mondays from early March to mid November 2026: BST starts 29 March, ends 25 October.
    times = fires("cron(0 9 ? * MON *)", utc(2026, 3, 1), 38, where="Europe/London")
    assert {t.astimezone(LONDON).strftime("%a %H:%M") for t in times} == {"Mon 09:00"}
    offsets = {t.astimezone(LONDON).date().isoformat(): t.hour for t in times}
    assert offsets["2026-03-23"] == 9 and offsets["2026-03-30"] == 8  # 09:00 GMT, then 09:00 BST (08:00 UTC)
    assert offsets["2026-10-19"] == 8 and offsets["2026-10-26"] == 9
    assert all(
        b - a in (timedelta(days=7), timedelta(days=7, hours=-1), timedelta(days=7, hours=1))
        for a, b in itertools.pairwise(times)
    )


def test_a_time_the_clocks_skip_is_skipped_and_a_repeated_time_runs_once() -> None:
    # 01:30 London does not exist on 29 March 2026 and happens twice on 25 October 2026.
    spring = fires("cron(30 1 * * ? *)", utc(2026, 3, 27), 3, where="Europe/London")
    assert [t.astimezone(LONDON).date().isoformat() for t in spring] == ["2026-03-27", "2026-03-28", "2026-03-30"]
    autumn = fires("cron(30 1 * * ? *)", utc(2026, 10, 24), 3, where="Europe/London")
    assert [t.astimezone(LONDON).date().isoformat() for t in autumn] == ["2026-10-24", "2026-10-25", "2026-10-26"]
    assert autumn[1] == utc(2026, 10, 25, 0, 30)  # the first 01:30 (BST), not the second (GMT)


def test_rates_count_fixed_durations() -> None:
    assert parse("rate(5 minutes)") == Rate(300) and parse("rate(1 hour)") == Rate(3600)
    day = parse("rate(1 day)")
    assert isinstance(day, Rate)
    start = utc(2026, 3, 28, 9, 0)
    assert day.next_after(start, start) == utc(2026, 3, 29, 9, 0)  # 24 hours, whatever the clocks do
    assert day.next_after(utc(2026, 3, 1), start) == start


@pytest.mark.parametrize(
    ("expression", "where"),
    [
        ("cron(0 9 ? * MON *)", "Europe/London"),
        ("cron(30 1 * * ? *)", "Europe/London"),  # skipped in spring, once in autumn
        ("cron(15 8 L * ? *)", "America/New_York"),
        ("cron(0/20 22-2 ? * FRI-MON *)", "Asia/Kolkata"),
        ("cron(0 12 ? * 6L *)", "UTC"),
        ("cron(0 0 15W * ? *)", "Australia/Lord_Howe"),  # a half-hour DST shift
    ],
)
def test_the_latest_firing_in_a_window_mirrors_the_next_one(expression: str, where: str) -> None:
    # Every firing of 2026's two DST changes and a month around each, found going backwards as going forwards.
    for begin in (utc(2026, 3, 1), utc(2026, 10, 1)):
        times = fires(expression, begin, 40, where=where)
        parsed = parse(expression)
        for before, fired in itertools.pairwise([begin, *times]):
            window = {"after": begin - timedelta(days=1), "start": None, "end": None}
            assert latest_firing(parsed, zone(where), until=fired, **window) == fired  # type: ignore[arg-type]
            second = timedelta(seconds=1)
            previous = latest_firing(parsed, zone(where), until=fired - second, **window)  # type: ignore[arg-type]
            assert previous == (before if before != begin else previous)
            # A window that opens at a firing excludes it: only what came after the item's write counts.
            assert latest_firing(parsed, zone(where), after=fired, until=fired + second) is None


def test_the_latest_firing_respects_the_window_and_the_bounds() -> None:
    weekly, london = parse("cron(0 9 ? * MON *)"), zone("Europe/London")
    monday = utc(2026, 11, 30, 9, 0)  # 09:00 GMT
    second, early = timedelta(seconds=1), utc(2026, 11, 1)
    assert latest_firing(weekly, london, after=monday - timedelta(minutes=2), until=monday) == monday
    assert latest_firing(weekly, london, after=monday - timedelta(minutes=2), until=monday - second) is None
    # Three weeks missed: only the latest.
    assert latest_firing(weekly, london, after=early, until=monday + timedelta(hours=1)) == monday
    last_week = monday - timedelta(days=7)
    assert latest_firing(weekly, london, after=early, until=monday, end=monday - timedelta(days=1)) == last_week
    assert latest_firing(weekly, london, after=early, until=monday, start=monday) == monday
    assert latest_firing(weekly, london, after=early, until=monday, start=monday + second) is None
    hourly = parse("rate(1 hour)")
    five = timedelta(minutes=5)
    assert latest_firing(hourly, UTC, after=monday - five, until=monday + five) == monday
    # A rate counts from its start, not from the hour.
    start = utc(2026, 11, 30, 8, 20)
    window = {"after": monday - timedelta(minutes=50), "until": monday + timedelta(minutes=30)}
    assert latest_firing(hourly, UTC, start=start, **window) == utc(2026, 11, 30, 9, 20)
    assert latest_firing(hourly, UTC, after=monday, until=monday + timedelta(minutes=10), start=start) is None
    assert latest_firing(hourly, UTC, after=start - timedelta(hours=5), until=start - second, start=start) is None


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("every monday", "not a Scheduler expression"),
        ("cron(0 9 * * MON *)", "exactly one of day-of-month and day-of-week"),
        ("cron(0 9 ? * MON)", "5 fields, not six"),
        ("cron(60 9 ? * MON *)", "outside 0-59"),
        ("cron(0 24 ? * MON *)", "outside 0-23"),
        ("cron(0 9 32 * ? *)", "outside 1-31"),
        ("cron(0 9 ? * 8 *)", "outside 1-7"),
        ("cron(0 9 ? * MON#6 *)", "not a valid day term"),
        ("rate(0 minutes)", "positive whole number"),
        ("rate(2 hour)", "singular for 1"),
        ("rate(1 weeks)", "positive whole number"),
    ],
)
def test_invalid_expressions_are_refused_with_the_reason(expression: str, fragment: str) -> None:
    with pytest.raises(PermanentError, match=fragment):
        parse(expression)


def test_unknown_zone_is_refused_with_an_example() -> None:
    with pytest.raises(PermanentError, match="not an IANA zone name"):
        zone("Mars/Olympus_Mons")
    assert zone(None) is UTC and zone("Europe/London") == LONDON


# AWS's cron reference, field by field (EventBridge "Cron expressions reference", the table EventBridge Scheduler's
# cron-based schedules use): minutes 0-59 `, - * /`; hours 0-23 `, - * /`; day-of-month 1-31 `, - * ? / L W`; month
# 1-12 or JAN-DEC `, - * /`; day-of-week 1-7 or SUN-SAT `, - * ? L #` (no `/`), and with `#` the field holds one
# expression only ("3#1,6#3" is invalid); year 1970-2199 `, - * /`. Each case puts one field's term into an
# otherwise valid expression, so the verdict is that field's alone.
def in_field(field: str, term: str) -> str:
    fields = {"minutes": "0", "hours": "9", "day-of-month": "?", "month": "*", "day-of-week": "MON", "year": "*"}
    if field == "day-of-month":
        fields["day-of-week"] = "?"
    fields[field] = term
    return f"cron({' '.join(fields.values())})"


ACCEPTED = {
    "minutes": ["0", "59", "0,15,30", "10-20", "*", "0/15", "*/5", "5-50/5"],
    "hours": ["0", "23", "8-17", "*", "0/2", "1,13", "22-2"],
    "day-of-month": ["1", "31", "1-15", "*", "1/2", "1-31/7", "L", "LW", "15W", "1W", "31W", "1,15"],
    "month": ["1", "12", "JAN", "jan", "JAN-MAR", "JAN,JUL", "*", "1/3", "*/2"],
    "day-of-week": ["1", "7", "SUN", "MON-FRI", "FRI-MON", "MON,WED,FRI", "*", "L", "6L", "FRIL", "2#1", "MON#5"],
    "year": ["1970", "2199", "2026-2030", "2026,2028", "*", "2026/2"],
}

REFUSED = {
    # field: [(term, what the reason says)]
    "minutes": [
        ("60", "outside 0-59"),
        ("?", "'?' is only for day-of-month or day-of-week"),
        ("L", "'L' is not allowed in minutes"),
        ("5W", "'W' is not allowed in minutes"),
        ("1#2", "'#' is not allowed in minutes"),
        ("MON", "not a number"),
        ("5/0", "increment"),
        ("/5", "not a value, a range or an increment"),
        ("1,,2", "empty"),
    ],
    "hours": [("24", "outside 0-23"), ("L", "'L' is not allowed in hours"), ("?", "'?' is only for day-of-month")],
    "day-of-month": [
        ("0", "outside 1-31"),
        ("32", "outside 1-31"),
        ("32W", "outside 1-31"),
        ("0W", "outside 1-31"),
        ("1#2", "'#' is not allowed in day-of-month"),
        ("5L", "not a valid day term"),
        ("L-3", "not a valid day term"),
        ("W", "not a valid day term"),
        ("MON", "not a number"),
        ("?,5", "'?' stands alone"),
    ],
    "month": [
        ("13", "outside 1-12"),
        ("0", "outside 1-12"),
        ("L", "'L' is not allowed in month"),
        ("MON", "not a number or a month name"),
        ("?", "'?' is only for day-of-month"),
    ],
    "day-of-week": [
        ("8", "outside 1-7"),
        ("0", "outside 1-7"),
        ("2/2", "'/' (increments) is not allowed in day-of-week"),
        ("*/2", "'/' (increments) is not allowed in day-of-week"),
        ("MON/2", "'/' (increments) is not allowed in day-of-week"),
        ("3#1,6#3", "only one expression"),
        ("MON#1,FRI", "only one expression"),
        ("FRI,MON#1", "only one expression"),
        ("MON#6", "not a valid day term"),
        ("MON#0", "not a valid day term"),
        ("MON-FRI#2", "not a valid day term"),
        ("8L", "not a valid day term"),
        ("LW", "'W' is not allowed in day-of-week"),
        ("15W", "'W' is not allowed in day-of-week"),
        ("JAN", "not a number or a day name"),
        ("?,MON", "'?' stands alone"),
    ],
    "year": [("1969", "outside 1970-2199"), ("2200", "outside 1970-2199"), ("L", "'L' is not allowed in year")],
}


@pytest.mark.parametrize(("field", "term"), [(f, t) for f, terms in ACCEPTED.items() for t in terms])
def test_each_field_accepts_what_aws_accepts(field: str, term: str) -> None:
    parsed = parse(in_field(field, term))
    assert isinstance(parsed, Cron)
    if field != "year":  # a year field limits the firings to those years
        assert parsed.next_after(utc(2026, 1, 1), UTC) is not None


@pytest.mark.parametrize(("field", "term", "reason"), [(f, t, r) for f, cases in REFUSED.items() for t, r in cases])
def test_each_field_refuses_what_aws_refuses_with_a_readable_reason(field: str, term: str, reason: str) -> None:
    expression = in_field(field, term)
    with pytest.raises(PermanentError, match="is not a valid Scheduler expression") as refused:
        parse(expression)
    assert reason in str(refused.value), str(refused.value)
    if field != "minutes" or term != "?":
        assert field in str(refused.value) or "day term" in str(refused.value), str(refused.value)


def test_the_issues_examples_are_refused() -> None:
    for expression in ("cron(0 9 ? * 2/2 *)", "cron(0 9 ? * 3#1,6#3 *)", "cron(0 9 ? * MON#1,FRI *)"):
        with pytest.raises(PermanentError, match="day-of-week"):
            parse(expression)


def test_the_local_cloud_never_fires_an_expression_scheduler_refuses() -> None:
    """ministack stores any expression; the local cloud's ticker reads it with this same parser (st_core.recurrence,
    loaded from the handler runtime), so a refused one never fires, and does not stop the ticker."""
    from localcloud.recurring import RecurringTicker

    ticker = RecurringTicker(lambda what, named: named)
    start = utc(2026, 11, 23, 8, 0)  # a Monday
    for expression in ("cron(0 9 ? * 2/2 *)", "cron(0 9 ? * 3#1,6#3 *)", "cron(0 9 ? * MON#1,FRI *)"):
        spec = {"ScheduleExpression": expression, "ScheduleExpressionTimezone": "UTC", "State": "ENABLED"}
        fired = [ticker.due(expression, spec, start + timedelta(hours=h)) for h in range(0, 24 * 40, 6)]
        assert fired == [None] * len(fired), expression


@pytest.mark.parametrize("expression", ["cron(0 9 ? * 2/2 *)", "cron(0 9 ? * 3#1,6#3 *)", "cron(0 9 ? * MON#1,FRI *)"])
def test_an_item_with_a_refused_expression_is_parked_with_the_reason_and_makes_no_schedule(
    env: Env, expression: str
) -> None:
    from tests.handlers.test_recurring import item, run, zoned

    zoned(env).put(item(dueAt=expression))
    run(env)
    (parked,) = env.messages(env.poison_url)
    assert expression in parked["reason"] and "day-of-week" in parked["reason"], parked["reason"]
    assert env.schedules() == []
