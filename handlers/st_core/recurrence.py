"""EventBridge Scheduler's recurring expressions, `rate(...)` and AWS's six-field `cron(...)`, in an IANA time zone.

Two users: the handlers, which refuse an expression or zone Scheduler would refuse (the record is parked with the
reason instead of failing on every retry), and the local cloud, which fires recurring schedules as Scheduler does.
AWS's cron is not Unix cron: six fields (minutes hours day-of-month month day-of-week year), day-of-week 1-7 is
SUN-SAT, exactly one of the two day fields is `?`, and `L`, `W` and `#` have AWS's meanings. Daylight saving time
as Scheduler documents it: a time that does not exist on the day the clocks go forward is skipped, a time that
happens twice on the day they go back runs once (the first). A `rate` counts fixed durations (a day is 24 hours).
No library here parses AWS's dialect (croniter and friends are Unix cron), so it is written once, against AWS's
documented examples (tests/handlers/test_recurrence.py).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache

from .errors import PermanentError
from .timeparse import zone as zone  # where it lives now; callers of recurrence.zone keep working

MONTHS = {
    m: i
    for i, m in enumerate(["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], start=1)
}
DAYS = {d: i for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"], start=1)}
RANGES = {"minutes": (0, 59), "hours": (0, 23), "day-of-month": (1, 31), "month": (1, 12), "day-of-week": (1, 7)}
YEARS = (1970, 2199)
RATE_UNITS = {"minute": 60, "hour": 3600, "day": 86400}
# How far ahead `Cron.next_after` looks: beyond it an expression has no next time (a past year, 30 February).
HORIZON_DAYS = 366 * 8


@dataclass(frozen=True)
class Rate:
    seconds: int

    def next_after(self, moment: datetime, start: datetime) -> datetime:
        """The first time after `moment` of start, start + rate, start + 2 x rate, ..."""
        if moment < start:
            return start
        steps = int((moment - start).total_seconds() // self.seconds) + 1
        return start + timedelta(seconds=steps * self.seconds)


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    years: frozenset[int] | None  # None: every year
    day_of_month: str  # kept as written ("?" or a list of terms): L and W depend on the month
    day_of_week: str

    def next_after(self, moment: datetime, zone: tzinfo) -> datetime | None:
        """The first firing strictly after `moment` (aware), as an aware UTC datetime; None if there is none."""
        local = moment.astimezone(zone)
        day = local.date()
        for _ in range(HORIZON_DAYS):
            if (self.years is None or day.year in self.years) and day.month in self.months and self._day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        fired = _existing(datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone))
                        if fired is not None and fired > moment:
                            return fired.astimezone(UTC)
            day += timedelta(days=1)
        return None

    def last_at_or_before(self, moment: datetime, zone: tzinfo, floor: datetime) -> datetime | None:
        """The last firing at or before `moment` and after `floor` (both aware), as an aware UTC datetime; None if
        there is none. The mirror of `next_after`, bounded below so a short window costs a day or two of search."""
        day = moment.astimezone(zone).date()
        first_day = max(floor.astimezone(zone).date(), day - timedelta(days=HORIZON_DAYS))
        while day >= first_day:
            if (self.years is None or day.year in self.years) and day.month in self.months and self._day_matches(day):
                for hour in sorted(self.hours, reverse=True):
                    for minute in sorted(self.minutes, reverse=True):
                        fired = _existing(datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone))
                        if fired is not None and floor < fired <= moment:
                            return fired.astimezone(UTC)
            day -= timedelta(days=1)
        return None

    def _day_matches(self, day: date) -> bool:
        if self.day_of_month != "?":
            return any(_dom_term(term, day) for term in self.day_of_month.split(","))
        return any(_dow_term(term, day) for term in self.day_of_week.split(","))


Expression = Rate | Cron
# A rate without a start counts from here (so `rate(1 hour)` runs on the hour); see handlers/eventbridge/firings.py.
RATE_ORIGIN = datetime.fromtimestamp(0, UTC)


def latest_firing(
    expression: Expression,
    zone: tzinfo,
    *,
    after: datetime,
    until: datetime,
    start: datetime | None = None,
    end: datetime | None = None,
) -> datetime | None:
    """The last time in (`after`, `until`] a schedule of `expression` in `zone`, bounded by `start` and `end` as
    Scheduler bounds it (StartDate and EndDate, both inclusive), would fire; None if it would not fire in that window.

    What a recurring item missed when its schedule was made late: `after` is when the item was given the rule,
    `until` when its schedule existed. A rate counts from its start (or `RATE_ORIGIN`), as the handler sets it."""
    if end is not None:
        until = min(until, end)
    floor = after if start is None else max(after, start - timedelta(microseconds=1))
    if until <= floor:
        return None
    if isinstance(expression, Rate):
        origin = start or RATE_ORIGIN
        steps = int((until - origin).total_seconds() // expression.seconds)
        fired: datetime | None = origin + timedelta(seconds=steps * expression.seconds)
    else:
        fired = expression.last_at_or_before(until, zone, floor)
    if fired is None or fired <= floor:
        return None
    return fired


def _existing(wall: datetime) -> datetime | None:
    """The wall time in its zone, or None where the clocks skip it. A repeated wall time is its first instance
    (fold 0), so a schedule runs once on the day the clocks go back."""
    there_and_back = wall.astimezone(UTC).astimezone(wall.tzinfo)
    if there_and_back.replace(tzinfo=None) != wall.replace(tzinfo=None):
        return None
    return wall.replace(fold=0)


def _weekday(day: date) -> int:
    """AWS numbering: 1 = Sunday ... 7 = Saturday."""
    return (day.weekday() + 1) % 7 + 1


def _dom_term(term: str, day: date) -> bool:
    last = calendar.monthrange(day.year, day.month)[1]
    if term == "L":
        return day.day == last
    if term == "LW":
        return day == _nearest_weekday(day.replace(day=last))
    if term.endswith("W"):
        wanted = min(int(term[:-1]), last)
        return day == _nearest_weekday(day.replace(day=wanted))
    return day.day in _values(term, "day-of-month")


def _nearest_weekday(day: date) -> date:
    """AWS's `W`: the weekday nearest the given day, never crossing into another month."""
    if day.weekday() < 5:
        return day
    last = calendar.monthrange(day.year, day.month)[1]
    if day.weekday() == 5:  # Saturday: the Friday before, or the Monday after if that Friday is last month's
        return day - timedelta(days=1) if day.day > 1 else day + timedelta(days=2)
    return day + timedelta(days=1) if day.day < last else day - timedelta(days=2)  # Sunday


def _dow_term(term: str, day: date) -> bool:
    weekday = _weekday(day)
    if term == "L":
        return weekday == 7
    if term.endswith("L"):  # the last such weekday of the month
        last = calendar.monthrange(day.year, day.month)[1]
        return weekday == _day_number(term[:-1]) and day.day > last - 7
    if "#" in term:  # the n-th such weekday of the month
        name, nth = term.split("#")
        return weekday == _day_number(name) and (day.day - 1) // 7 + 1 == int(nth)
    return weekday in _values(term, "day-of-week")


def _day_number(text: str) -> int:
    return DAYS[text] if text in DAYS else int(text)


@lru_cache(maxsize=512)
def _values(term: str, field: str) -> frozenset[int]:
    """One comma-free term of a numeric field: `*`, `n`, `a-b`, `*/s`, `a/s`, `a-b/s` (names allowed)."""
    low, high = YEARS if field == "year" else RANGES[field]
    names = MONTHS if field == "month" else DAYS if field == "day-of-week" else {}
    if not TERM.match(term):
        raise ValueError(f"{field} {term!r} is not a value, a range or an increment (allowed: {WILDCARDS[field]})")
    base, slash, step_text = term.partition("/")
    if slash and (not step_text.isdigit() or int(step_text) < 1):
        raise ValueError(f"{field} {term!r}: an increment is a whole number from 1")
    step = int(step_text) if step_text else 1
    if base == "*":
        first, last = low, high
    elif "-" in base:
        a, b = base.split("-", 1)
        first, last = _number(a, names, field), _number(b, names, field)
    else:
        first = _number(base, names, field)
        last = high if step_text else first
    if not (low <= first <= high and low <= last <= high):
        raise ValueError(f"{field} {term!r} is outside {low}-{high}")
    if first <= last:
        return frozenset(range(first, last + 1, step))
    # A wrapping range (FRI-MON, 22-2): AWS allows it in day-of-week and hours.
    span = list(range(first, high + 1)) + list(range(low, last + 1))
    return frozenset(span[::step])


def _number(text: str, names: dict[str, int], field: str) -> int:
    if text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        kind = " or a month name" if field == "month" else " or a day name" if field == "day-of-week" else ""
        raise ValueError(f"{field} {text!r} is not a number{kind}")
    return int(text)


# AWS's cron reference, per field: the values and the wildcards it allows. Anything else Scheduler refuses with a
# ValidationException, so it is refused here with the rule it breaks (and the local cloud never fires it).
WILDCARDS = {
    "minutes": ", - * /",
    "hours": ", - * /",
    "day-of-month": ", - * ? / L W",
    "month": ", - * /",
    "day-of-week": ", - * ? L #",
    "year": ", - * /",
}
TERM = re.compile(r"^(\*|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]*)?$")


def parse(expression: str) -> Expression:
    """A Scheduler `rate(...)` or `cron(...)` expression; PermanentError naming what is wrong."""
    text = expression.strip()
    try:
        if text.startswith("rate(") and text.endswith(")"):
            return _rate(text[5:-1])
        if text.startswith("cron(") and text.endswith(")"):
            return _cron(text[5:-1])
    except (ValueError, KeyError) as exc:
        raise PermanentError(f"recurrence {expression[:80]!r} is not a valid Scheduler expression: {exc}") from exc
    raise PermanentError(
        f"recurrence {expression[:80]!r} is not a Scheduler expression: use rate(5 minutes) or "
        "cron(minutes hours day-of-month month day-of-week year), e.g. cron(0 9 ? * MON *)"
    )


def _rate(body: str) -> Rate:
    value_text, _, unit = body.strip().partition(" ")
    value = int(value_text)
    singular = unit.strip().removesuffix("s")
    if value < 1 or singular not in RATE_UNITS:
        raise ValueError("a rate is a positive whole number of minutes, hours or days")
    if (value == 1) != (unit.strip() == singular):
        raise ValueError("the unit is singular for 1 (rate(1 hour)) and plural above (rate(2 hours))")
    return Rate(value * RATE_UNITS[singular])


def _cron(body: str) -> Cron:
    fields = body.split()
    if len(fields) != 6:
        raise ValueError(f"{len(fields)} fields, not six (minutes hours day-of-month month day-of-week year)")
    minutes, hours, dom, month, dow, year = fields
    for name, text in zip(WILDCARDS, fields, strict=True):
        _check_field(name, text)
    if (dom == "?") == (dow == "?"):
        raise ValueError("exactly one of day-of-month and day-of-week must be '?'")
    return Cron(
        minutes=_union(minutes, "minutes"),
        hours=_union(hours, "hours"),
        months=_union(month, "month"),
        years=None if year == "*" else _union(year, "year"),
        day_of_month=dom.upper(),
        day_of_week=dow.upper(),
    )


def _check_field(field: str, text: str) -> None:
    """Refuse what AWS's cron reference refuses in `field`; the ValueError names the field, the term and the rule."""
    terms = text.upper().split(",")
    if "" in terms:
        raise ValueError(f"{field} {text!r} has an empty item in its list")
    if "?" in terms:
        if field not in ("day-of-month", "day-of-week"):
            raise ValueError(f"{field} {text!r}: '?' is only for day-of-month or day-of-week")
        if len(terms) > 1:
            raise ValueError(f"{field} {text!r}: '?' stands alone, in no list")
        return
    if field == "day-of-week" and "#" in text and len(terms) > 1:
        raise ValueError(
            f"day-of-week {text!r}: with '#' the field holds only one expression (AWS reads this as {len(terms)})"
        )
    names = "|".join(MONTHS if field == "month" else DAYS if field == "day-of-week" else ["(?!)"])
    for term in terms:
        bare = re.sub(names, "", term)  # JUL holds an L and WED a W; neither is a wildcard
        for mark in "LW#":
            if mark in bare and mark not in WILDCARDS[field]:
                only = {"L": "day-of-month and day-of-week", "W": "day-of-month", "#": "day-of-week"}[mark]
                raise ValueError(
                    f"{field} {term!r}: {mark!r} is not allowed in {field} (allowed: {WILDCARDS[field]}); it is for "
                    f"{only} only"
                )
        if field == "day-of-week" and "/" in term:
            raise ValueError(
                f"day-of-week {term!r}: '/' (increments) is not allowed in day-of-week (allowed: , - * ? L #)"
            )
        if field == "day-of-month":
            _check_day_of_month(term)
        elif field == "day-of-week":
            _check_day_of_week(term)
        else:
            _values(term, field)


def _check_day_of_month(term: str) -> None:
    if term in ("L", "LW"):
        return
    if term.endswith("W") and term[:-1].isdigit():
        if not 1 <= int(term[:-1]) <= 31:
            raise ValueError(f"day-of-month {term!r}: the day before W is outside 1-31")
        return
    if "L" in term or "W" in term:
        raise ValueError(f"day-of-month {term!r} is not a valid day term: L and W are written L, LW or 15W")
    _values(term, "day-of-month")


def _check_day_of_week(term: str) -> None:
    if term == "L":
        return
    special = re.fullmatch(r"(.*?)(L|#(.*))", term)
    if special is None:
        _values(term, "day-of-week")
        return
    day, nth = special.group(1), special.group(3)
    valid_day = day in DAYS or (day.isdigit() and 1 <= int(day) <= 7)
    if not valid_day or (nth is not None and nth not in ("1", "2", "3", "4", "5")):
        raise ValueError(
            f"day-of-week {term!r} is not a valid day term: nL is the last such day of the month and n#k its k-th "
            "(n 1-7 or SUN-SAT, k 1-5)"
        )


def _union(text: str, field: str) -> frozenset[int]:
    values: frozenset[int] = frozenset()
    for term in text.split(","):
        values |= _values(term, field)
    return values
