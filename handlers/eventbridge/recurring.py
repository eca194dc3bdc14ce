"""eventbridge's recurring items: the item's one recurring schedule, made, updated in place (taking over the
firings an update takes from Scheduler) and deleted with the item; the firings a new rule missed before its schedule
existed (`_catch_up`), and those an earlier handling owes (`_settle_owed`). Which firings: `firings` (pure)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from st_core import log, schedules
from st_core.dispatch import scheduler_target, target_input
from st_core.errors import is_transient, persist
from st_core.idempotency import remembered
from st_core.naming import recurring_firing_id
from st_core.schedules import MIN_LEAD
from st_core.stream import DynamoDBStreamRecord
from st_core.timeparse import format_due

from eventbridge.context import BatchContext
from eventbridge.firings import (
    MINUTE,
    first_after,
    in_minute,
    missed,
    next_second,
    recurring_window,
    rule_marker,
    taken_over,
    written_at,
)
from eventbridge.planning import MODE, Occurrence, Recurrence, Step

if TYPE_CHECKING:
    from st_core.recurrence import Expression

# No AWS calls of its own: Scheduler's through st_core.schedules, the ledger's through st_core.idempotency, the
# target's through st_core.dispatch.
AWS_ACTIONS: tuple[str, ...] = ()


class Recurring:
    """Carries out the steps of an item's recurring occurrence."""

    def __init__(self, context: BatchContext) -> None:
        self.context = context

    def schedule(self, record: DynamoDBStreamRecord, step: Step) -> None:
        """Make or update the item's recurring schedule; delete it once its end has passed (Scheduler refuses an
        EndDate in the past).

        StartDate: Scheduler refuses one more than five minutes ago, and starts a rate without one at once, from
        each create or update. So a rate always gets a start on its own grid (the item's start, or the epoch when it
        has none: `rate(1 hour)` runs on the hour), moved to its next firing: an update for any other change of the
        item (a consumer writing back after each firing) neither fires it again nor shifts it. A cron expression is
        its own grid: a past start is dropped.

        Made only for the rule the item still holds, read consistently (`as_held`), with the item as it is now:
        records of one item come in order, but an old batch may be handled again after a newer one (a redrive).
        The item comes from the batch's one read (`prepare`); for a new rule one ledger write (`_catch_up`)."""
        from st_core import recurrence

        now = self.context.now()
        spec = step.occurrence.recurrence
        assert spec is not None
        occurrence = self.context.as_held(record, step.occurrence)
        if occurrence is None or occurrence.recurrence is None:
            # The item no longer holds this rule (deleted, given another rule or a time): this record is older than
            # the item's latest change, which makes or deletes the schedule itself. Making it here would bring back
            # a schedule that change deleted, firing for ever (an old batch handled after a newer one).
            self.context.count("stale")
            log.debug("recurring-stale", schedule=step.occurrence.name, expression=spec.expression)
            return
        spec = occurrence.recurrence
        parsed = recurrence.parse(spec.expression)
        marker = None if step.since is None else rule_marker(occurrence, step.version)
        known = None if marker is None else self.context.ledger.first_scheduled_at(marker)
        lived = self.context.ledger.rule_marker_seconds
        if known is None and step.since is not None and not remembered(step.since, now, lived):
            # The rule's first-scheduled entry may have expired (a record redriven longer after its change than the
            # entry lives): a schedule may have existed since long ago, running the firings a catch-up would send
            # again, and when it was made (what it missed) is unknown. The schedule is made or updated; no catch-up.
            self.context.count("forgotten")
            log.debug("recurring-catch-up-forgotten", schedule=occurrence.name, expression=spec.expression)
            step = Step(step.action, step.occurrence, fresh=step.fresh, before=step.before, version=step.version)
        if known is not None:
            # This version of the rule had its schedule made before: its record is handled again (Lambda delivering
            # the batch again, a redrive), and the records after it, handled since, made the schedule what the item
            # holds. Updating it again changes nothing but could disturb a firing under way (whether Scheduler still
            # runs a firing whose schedule is updated in its minute is not documented). Only a firing missed before
            # the schedule existed is looked at. One ledger read per new rule's record.
            self.context.count("unchanged")
            self._catch_up(step, occurrence, spec, parsed, datetime.fromtimestamp(known, UTC), recorded=True)
            return
        window = recurring_window(spec, parsed, now)
        reach = now + MIN_LEAD  # the handler sends a new rule's firing up to here (`_catch_up`), Scheduler after it
        start = None if window is None else window[0]
        written = written_at(record)
        claimed = self.context.second  # Scheduler's copies claim too (through the release queue)
        held = taken_over(step, spec, parsed, reach, now, sent=now, written=written, claimed=claimed)
        if window is not None and start is None and (held or missed(step, spec, parsed, reach) is not None):
            # A cron schedule made without a start would run that firing too (Scheduler runs one made before it, or
            # inside its minute): it starts on the next whole second instead (a rate starts past `reach` already).
            start = next_second(reach)
            if spec.end is not None and start > spec.end:
                window = None  # no firing is left between them for Scheduler
        if window is None:
            self.delete(occurrence)  # nothing is left to fire
            self._owned(
                occurrence,
                parsed,
                taken_over(step, spec, parsed, reach, self.context.now(), sent=now, written=written, claimed=claimed),
                written,
            )
            self._left_behind(step, occurrence, held, written, now)
            self._catch_up(step, occurrence, spec, parsed, self.context.now())
            return
        request = schedules.recurring_request(
            group=self.context.group,
            name=occurrence.name,
            expression=spec.expression,
            zone=spec.zone,
            start=start,
            end=spec.end,
            target=self._target(record, occurrence),
            description=f"scheduled-table {MODE} {self.context.config['table']} recurring",
            key=schedules.payload_key(self.context.config["scheduler"]),
        )
        try:
            schedules.upsert(self.context.clients, request, create_first=step.fresh)
        except Exception as exc:
            if not is_transient(exc):
                # Scheduler refused the item's new rule for good (the record is parked with its reason): the old
                # rule no longer says what the item wants, so it must not go on firing.
                self.delete(occurrence)
            raise
        self.context.count("scheduled")
        log.debug("recurring", schedule=occurrence.name, expression=spec.expression, zone=spec.zone)
        made = self.context.now()
        # Scheduler answered before `reach`: the schedule's start divides the firings (up to `reach` the handler's,
        # after it Scheduler's). A create slower than that: every firing up to MIN_LEAD after it answered.
        taken = taken_over(step, spec, parsed, reach, made, sent=now, written=written, claimed=claimed)
        self._owned(occurrence, parsed, taken, written)
        self._left_behind(step, occurrence, taken, written, now)
        self._catch_up(step, occurrence, spec, parsed, now if made <= reach else made)

    def _target(self, record: DynamoDBStreamRecord, occurrence: Occurrence) -> dict[str, Any]:
        """The schedule's target: the target itself, or with `precision="second"` the release queue, each firing a
        release message its consumer claims (under the firing's id) before it sends, as the handler's take-over
        does: every path to the target claims one id per firing, and only the first sends."""
        config = self.context.config
        payload = target_input(config["target"], self.context.event(occurrence), via_scheduler=True)
        if not self.context.second:
            return scheduler_target(config["target"], config["scheduler"], payload)
        from st_core import release

        text = release.recurring_envelope(occurrence.name, record["dynamodb"]["Keys"], payload)
        return release.scheduler_release_target(config, text)

    def _left_behind(
        self, step: Step, occurrence: Occurrence, taken: list[datetime], written: datetime | None, now: datetime
    ) -> None:
        """`precision="second"`: a new rule's schedule no longer runs the old rule's firing whose minute the change
        was made in (`in_minute`); sent here through the claim Scheduler's copy makes too, with the old rule in its
        due event as Scheduler's would carry it. Nothing at minute precision (the documented limit: without a
        claim on Scheduler's path, sending it would double every firing a consumer reacts to by writing)."""
        before = step.before
        if not self.context.second or before is None or before == occurrence.recurrence:
            return
        old = Occurrence(occurrence.name, occurrence.due, occurrence.keys, occurrence.item, recurrence=before)
        self._in_minute(old, written, now, taken)

    def _in_minute(
        self, occurrence: Occurrence, written: datetime | None, now: datetime, taken: list[datetime]
    ) -> None:
        """Send the firings of `occurrence`'s rule whose minute a change that ends the rule was made in
        (`in_minute`, less those `taken` already), and those an earlier handling of the same record took and could
        not send (OWED: the retry may come after the minute, when `in_minute` finds none)."""
        rule = occurrence.recurrence
        assert rule is not None
        firings = [f for f in in_minute(rule, now + MIN_LEAD, sent=now, written=written) if f not in taken]
        self._take_over(occurrence, firings)
        if written is not None:
            inside = in_minute(rule, written + MINUTE, sent=written, written=written)  # the write's own minute
            self._settle_owed(occurrence, inside, taken + firings)

    def _owned(
        self,
        occurrence: Occurrence,
        parsed: Expression,
        taken: list[datetime],
        written: datetime | None,
    ) -> None:
        """Send what the schedule's update took from Scheduler (`taken`: `taken_over`), and what an earlier
        handling of the record took and owes (with `precision="second"` that may be the firing whose minute the
        write was made in, too)."""
        self._take_over(occurrence, taken)
        if written is not None:
            spec = occurrence.recurrence
            assert spec is not None
            candidates = first_after(spec, parsed, written, self.context.now())
            if self.context.second:
                candidates = in_minute(spec, written + MINUTE, sent=written, written=written) + candidates
            self._settle_owed(occurrence, candidates, taken)

    def _take_over(self, occurrence: Occurrence, firings: list[datetime]) -> None:
        """Send the firings an update took from the item's schedule (`taken_over`), each at its time (never
        early: the wait is at most `MIN_LEAD`), once through the ledger under the id Scheduler gives it: a write
        every few seconds takes the same firing again, and finds it claimed."""
        for fired in firings:
            early = (fired - self.context.now()).total_seconds()
            if early > 0:
                self.context.sleep(min(early, MIN_LEAD.total_seconds()))
            self.context.count("takenOver")
            log.debug("firing-taken-over", schedule=occurrence.name, dueAt=format_due(fired))
            self.context.deliver(occurrence, fired=fired, owe=True)

    def _settle_owed(self, occurrence: Occurrence, candidates: list[datetime], sent: list[datetime]) -> None:
        """Send the firings an earlier handling of this record took from Scheduler and could not send (the target
        refused them: the ledger says OWED, and the record failed and came back). Whether a firing is the handler's
        is judged by the clock when the record is first handled; a retry after that moment would judge otherwise,
        and the firing would be nobody's. `candidates`: the firings such a handling could have taken (the first
        ones after the write, and with `precision="second"` the one whose minute the write was made in); one ledger
        read each, only for those whose time has passed and that this handling did not send itself."""
        wanted = [fired for fired in candidates if fired not in sent and fired <= self.context.now()]
        if not wanted:
            return
        names = {recurring_firing_id(occurrence.name, format_due(fired)): fired for fired in wanted}
        owed = self.context.ledger.owed(list(names))
        self._take_over(occurrence, sorted(names[name] for name in owed))

    def _catch_up(
        self,
        step: Step,
        occurrence: Occurrence,
        spec: Recurrence,
        parsed: Expression,
        made: datetime,
        *,
        recorded: bool = False,
    ) -> None:
        """Deliver the firing a new rule missed: Scheduler fires a recurring schedule only from when it exists, so a
        firing that came between the item's write (`step.since`) and the schedule (`made`) would otherwise wait for
        the next one (a week, for a weekly rule). Only the latest such firing (missed ones are not fired in a
        burst), with the `occurrenceId` and `dueAt` Scheduler would have given it, through a ledger claim: once from
        the handler however often the batch comes back.

        A firing less than `MIN_LEAD` after the schedule was made counts too, as it does for `at()` schedules: one
        made that close to its time may not fire it. The handler waits for its time (at most `MIN_LEAD`), never
        sending it early, and the schedule starts after it (`schedule`: a rate on its next firing, a cron on the
        second after `MIN_LEAD`), so Scheduler does not run it as well. `made` is then the clock before the create
        (the one the schedule's start was worked out from); after a create slower than `MIN_LEAD`, the clock once
        Scheduler answered.

        A redelivered batch must not deliver the firings the schedule ran since it was first made: the first time a
        schedule existed for this version of the rule is kept in the ledger (one conditional write per new rule),
        and only firings up to it count (`recorded`: `made` is that time, read from the ledger)."""
        if step.since is None:
            return
        marker = rule_marker(occurrence, step.version)
        existed = made
        if not recorded:
            first = persist(lambda: self.context.ledger.first_scheduled(marker, made.timestamp()))
            existed = datetime.fromtimestamp(first, UTC)
        fired = missed(step, spec, parsed, existed + MIN_LEAD)
        if fired is None:
            return
        early = (fired - self.context.now()).total_seconds()
        if early > 0:
            self.context.sleep(min(early, MIN_LEAD.total_seconds()))
        self.context.deliver(occurrence, fired=fired)

    def cancel(self, record: DynamoDBStreamRecord, step: Step) -> None:
        """The item left its rule: its schedule is deleted, unless a later record gave the item a rule again. With
        `precision="second"`, a firing whose minute the item left its rule in is sent (`in_minute`), once through
        the claim Scheduler's copy makes too, even when a later record gave the item a rule again (that record's
        schedule starts after it)."""
        occurrence = step.occurrence
        now = self.context.now()
        if self.context.held(record, occurrence) is not None:
            # The item holds a rule again (re-created, or given one back): a later record made its schedule,
            # which has the same name (one per item). This record is an old one handled again (its batch
            # delivered again after a newer one's, a redrive): deleting would silence the item until its next
            # write. The item comes from the batch's one read (`prepare`).
            self.context.count("stale")
            log.debug("recurring-cancel-stale", schedule=occurrence.name)
        else:
            self.delete(occurrence)
        if self.context.second:
            self._in_minute(occurrence, written_at(record), now, [])

    def delete(self, occurrence: Occurrence) -> None:
        """Delete the item's recurring schedule. No ledger entry: what each firing's delivery claims is its own."""
        schedules.delete(self.context.clients, self.context.group, occurrence.name)
        self.context.count("cancelled")
        log.debug("cancelled", schedule=occurrence.name)
