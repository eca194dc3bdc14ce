"""eventbridge's recurring firings (pure, no AWS calls): the window a recurring schedule is made with, and which
firings an update of the item's schedule takes from Scheduler (`taken_over`), may owe (`first_after`) or missed
before its schedule existed (`missed`). `Recurring` sends them."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from st_core.naming import recurring_firing_id
from st_core.schedules import CLOCK_SKEW, MIN_LEAD
from st_core.stream import DynamoDBStreamRecord, changed_at
from st_core.timeparse import minute_start, zone

from eventbridge.planning import EPOCH, Occurrence, Recurrence, Step

if TYPE_CHECKING:
    from st_core.recurrence import Expression

# No AWS calls here.
AWS_ACTIONS: tuple[str, ...] = ()

MINUTE = timedelta(minutes=1)
# A record handled again looks in the ledger for at most this many firings after its write that an earlier handling
# may owe (one read each, only for firings whose time has passed); it walks back at most FIRST_AFTER_LOOKS firings.
OWED_LOOKS = 3
FIRST_AFTER_LOOKS = 2000
# Lambda first hands a stream record over within the stream's 24 h, so a firing an earlier handling took over is at
# most this (and MIN_LEAD) after the write: a record redriven days later looks no further (1,440 firings of a
# `rate(1 minute)`, within FIRST_AFTER_LOOKS).
STREAM_RETENTION = timedelta(hours=24)


def recurring_window(
    spec: Recurrence, parsed: Expression, now: datetime
) -> tuple[datetime | None, datetime | None] | None:
    """The StartDate and EndDate of the item's recurring schedule as made at `now` (see `Recurring.schedule`): a rate
    starts on its own grid (the item's start, or the epoch), at its next firing; a cron expression drops a past start.
    None when nothing is left to fire (the end has passed, or comes before the start)."""
    from st_core import recurrence

    start = spec.start
    if isinstance(parsed, recurrence.Rate):
        if start is None or start <= now + MIN_LEAD:
            start = parsed.next_after(now + MIN_LEAD, start or EPOCH)
    elif start is not None and start <= now + MIN_LEAD:
        start = None
    if spec.end is not None and (spec.end <= now + MIN_LEAD or (start is not None and start > spec.end)):
        return None
    return start, spec.end


def next_second(moment: datetime) -> datetime:
    """The first whole second after `moment`: a schedule starting there runs no firing at or before `moment`
    (firings fall on whole seconds), whatever precision Scheduler keeps of its StartDate."""
    return moment.replace(microsecond=0) + timedelta(seconds=1)


def rule_marker(occurrence: Occurrence, version: str) -> str:
    """The ledger id under which the first time a schedule existed for one version of an item's rule (the rule one
    stream record, `version`, gave the item) is kept."""
    return recurring_firing_id(occurrence.name, f"rule-{version}")


def taken_over(
    step: Step,
    spec: Recurrence,
    parsed: Expression,
    until: datetime,
    landed: datetime,
    *,
    sent: datetime,
    written: datetime | None,
    claimed: bool = False,
) -> list[datetime]:
    """The firings the item's schedule held that its update takes from Scheduler, oldest first: the updated
    schedule starts after `until` (a rate on its next firing past it, a cron on the second after it), so it runs
    none up to there. Without this, a write in the seconds before a firing (a status, a counter, a consumer's
    write-back) would lose it, and writes every few seconds would stop the item for good. Each is the handler's,
    sent once through the ledger (by `Recurring`). Only firings the schedule as it was held (`covered`). Two kinds:

    - its minute had not begun when the update `landed` (Scheduler fires anywhere in a firing's minute, never
      before it; less the clocks' skew): Scheduler has not run it, and now never will;
    - the item was `written` before its minute began, and the update was `sent` before the minute was over: the
      update may have landed before Scheduler ran it (a record handled late: Lambda's lag, a batch redelivered, a
      busy invocation). Scheduler may also have run it first, so the target may get it twice, with the same
      `occurrenceId`; sending nothing would lose it whenever the update came first.

    A firing whose minute had begun before the write is left to Scheduler: it may have run already (a consumer
    writes back right after a firing, in its minute), and sending it again would double every firing of such an
    item. Its limit: a write made inside a firing's minute, before Scheduler runs it, loses that firing
    (Scheduler's instant in the minute cannot be known).

    `claimed` (`precision="second"`): Scheduler's copy of each firing goes through the release queue, whose
    consumer claims the same ledger id before it sends, so whichever path comes first sends it and the other finds
    it claimed. Every firing whose minute was not over when the update was `sent` is then taken, whenever the
    item was written: no limit, and no second copy."""
    found: list[datetime] = []
    floor = min(landed - MIN_LEAD, sent - MINUTE - CLOCK_SKEW)  # a firing before this had run by `sent`
    for fired in backwards(spec, parsed, floor, until):
        began = minute_start(fired) - CLOCK_SKEW
        ahead = began > landed
        late = (claimed or (written is not None and written < began)) and sent < began + MINUTE + 2 * CLOCK_SKEW
        if (ahead or late) and covered(step.before, spec, fired):
            found.insert(0, fired)
    return found


def in_minute(rule: Recurrence, until: datetime, *, sent: datetime, written: datetime | None) -> list[datetime]:
    """`precision="second"`: the firings of `rule` (the schedule as it was before a change that deletes it or
    gives it another rule) up to `until` whose minute had begun when the change was `written` (unknown: counted)
    and was not over when its handling `sent` the delete or update, oldest first. Scheduler may not have run
    them yet, and never will once the schedule is gone or holds another rule; a change made inside a firing's
    minute is most often the consumer's reaction to it, so Scheduler may have run it too. Sent through the ledger
    claim Scheduler's copy (through the release queue) makes as well: once, whichever comes first. A change made
    before the minute began is a cancel of that firing: not sent (Scheduler's copy, if it ran first, is the one)."""
    from st_core import recurrence

    found: list[datetime] = []
    for fired in backwards(rule, recurrence.parse(rule.expression), sent - MINUTE - 2 * CLOCK_SKEW, until):
        began = minute_start(fired) - CLOCK_SKEW
        if (written is None or began <= written) and sent < began + MINUTE + 2 * CLOCK_SKEW:
            found.insert(0, fired)
    return found


def backwards(spec: Recurrence, parsed: Expression, after: datetime, until: datetime) -> Iterator[datetime]:
    """The firings of `spec` (`parsed`) after `after` and up to `until`, within its start and end, latest first."""
    from st_core import recurrence

    while True:
        fired = recurrence.latest_firing(
            parsed, zone(spec.zone), after=after, until=until, start=spec.start, end=spec.end
        )
        if fired is None:
            return
        yield fired
        until = fired - timedelta(seconds=1)  # firings fall on whole seconds, at least a minute apart


def first_after(spec: Recurrence, parsed: Expression, written: datetime, until: datetime) -> list[datetime]:
    """The first few firings whose minute began after `written` and that came by `until`: those a handling of the
    write may have taken from Scheduler (`taken_over`), oldest first."""
    found: list[datetime] = []
    until = min(until, written + STREAM_RETENTION + MIN_LEAD)
    for fired in itertools.islice(backwards(spec, parsed, written, until), FIRST_AFTER_LOOKS):
        if minute_start(fired) - CLOCK_SKEW > written:
            found.insert(0, fired)
    return found[:OWED_LOOKS]


def written_at(record: DynamoDBStreamRecord) -> datetime | None:
    """When the record's change was made, as Lambda gives it (None when the record does not say)."""
    moment = changed_at(record)
    return None if moment is None else datetime.fromtimestamp(moment, UTC)


def covered(before: Recurrence | None, spec: Recurrence, fired: datetime) -> bool:
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


def missed(step: Step, spec: Recurrence, parsed: Expression, until: datetime) -> datetime | None:
    """The firing of a new rule the handler sends: the latest after the item took the rule (`step.since`) and
    no later than `until`, within its start and end. None for a rule the item held before (`step.since` None),
    and for a firing the item's previous rule fired at too (`covered`: only its start or end changed, or
    another rule firing at that instant), which was Scheduler's under the schedule as it was (a late batch
    updates the schedule after it ran the firing), or the handler's if the update took it from Scheduler
    (`taken_over`)."""
    if step.since is None:
        return None
    from st_core import recurrence

    fired = recurrence.latest_firing(
        parsed, zone(spec.zone), after=step.since, until=until, start=spec.start, end=spec.end
    )
    return None if fired is None or covered(step.before, spec, fired) else fired
