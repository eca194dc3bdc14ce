"""Due times as items carry them: ISO-8601 strings (no offset means UTC, or the item's zone) or epoch seconds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from .errors import PermanentError

# Epoch seconds this large are year 5138 and later: such a value is almost surely milliseconds.
_MAX_EPOCH_SECONDS = 100_000_000_000


def parse_due(value: object, zone: tzinfo = UTC) -> datetime:
    """The due time as an aware UTC datetime in whole seconds, rounded up: acting at the returned second is never
    before the time the item names (12:00:00.2 is due at 12:00:01).

    An ISO-8601 time without an offset is wall time in `zone`. Where the clocks skip it (01:30 on the day they go
    forward) it is read with the offset before the change, so it lands as far past the gap as it was into it (02:30
    summer time); where they repeat it, it is the first of the two (the earlier instant)."""
    if isinstance(value, bool):
        raise PermanentError(f"due time must be an ISO-8601 string or epoch seconds, got a boolean ({value})")
    if isinstance(value, int | float | Decimal):
        return _from_epoch(value)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise PermanentError("due time is an empty string")
        try:
            return _from_epoch(Decimal(text)) if _looks_numeric(text) else _from_iso(text, zone)
        except (InvalidOperation, ValueError, OverflowError) as exc:
            raise PermanentError(f"due time {text[:64]!r} is not ISO-8601 or epoch seconds") from exc
    raise PermanentError(f"due time must be an ISO-8601 string or epoch seconds, got {type(value).__name__}")


def format_due(moment: datetime) -> str:
    """ISO-8601 UTC with a Z, the form every due event carries: always a four-digit year (RFC 3339 and the due
    event's schema), which `strftime("%Y")` does not write for years before 1000 on Linux ("999-01-01...")."""
    return f"{_wall(moment)}Z"


def at_expression(moment: datetime) -> str:
    """EventBridge Scheduler one-time expression, evaluated in UTC."""
    return f"at({_wall(moment)})"


def _wall(moment: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SS` in UTC, the year zero-padded to four digits (Python's datetimes end at 9999)."""
    # isoformat pads the year to four digits and, with timespec="seconds", drops the microseconds; the offset of a
    # UTC time is "+00:00", cut. A third of the cost of formatting each field (every record names its due time).
    return moment.astimezone(UTC).isoformat(timespec="seconds")[:-6]


def minute_at_or_after(moment: datetime) -> datetime:
    """The first whole minute at or after `moment`. Scheduler ignores the seconds of an `at()` time and fires
    anywhere within that minute, so only a schedule set on this minute is never early for `moment`."""
    floor = moment.astimezone(UTC).replace(second=0, microsecond=0)
    return floor if floor == moment else floor + timedelta(minutes=1)


def minute_start(moment: datetime) -> datetime:
    """The start of the minute `moment` falls in."""
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def _looks_numeric(text: str) -> bool:
    return text.lstrip("+-").replace(".", "", 1).isdigit()


def _from_epoch(value: int | float | Decimal) -> datetime:
    seconds = Decimal(str(value))
    if not seconds.is_finite():
        raise PermanentError(f"due time {value} is not a finite number")
    if abs(seconds) >= _MAX_EPOCH_SECONDS:
        raise PermanentError(f"due time {value} is too large for epoch seconds (milliseconds? divide by 1000)")
    try:
        return datetime.fromtimestamp(int(seconds.to_integral_value(rounding=ROUND_CEILING)), tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise PermanentError(f"due time {value} is out of range") from exc


def _from_iso(text: str, zone: tzinfo) -> datetime:
    moment = datetime.fromisoformat(text.replace("z", "Z"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone, fold=0)
    moment = moment.astimezone(UTC)
    if moment.microsecond:
        moment = moment.replace(microsecond=0) + timedelta(seconds=1)
    return moment


def zone(name: str | None) -> tzinfo:
    """An IANA time zone (UTC when absent); PermanentError for a name the zone database does not know. Here, not in
    st_core/recurrence.py, so that a due time in a zone does not compile the recurrence parser."""
    if not name or name.upper() == "UTC":
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # only items with a zone pay for it

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise PermanentError(f"time zone {name[:60]!r} is not an IANA zone name (e.g. Europe/London)") from exc
