"""eventbridge's one-time occurrences: an `at()` schedule per occurrence (or, with `precision="second"`, a release
schedule or message), a past one delivered at once, and the ledger markers of the schedules a batch made."""

from __future__ import annotations

from typing import TYPE_CHECKING

from st_core import log, schedules
from st_core.batch import permanent_outcome
from st_core.dispatch import scheduler_target, target_input
from st_core.errors import error_code, persist
from st_core.idempotency import BATCH_WRITE_LIMIT
from st_core.stream import DynamoDBStreamRecord, sequence_number
from st_core.timeparse import format_due

from eventbridge.context import BatchContext
from eventbridge.planning import MODE, Step

if TYPE_CHECKING:
    from datetime import datetime

# No AWS calls of its own: Scheduler's through st_core.schedules, the release queue's through st_core.release, the
# ledger's through st_core.idempotency.
AWS_ACTIONS: tuple[str, ...] = ()


class OneTime:
    """Schedules (or delivers) an item's one-time occurrences; keeps the batch's schedule markers."""

    def __init__(self, context: BatchContext) -> None:
        self.context = context
        # Ledger markers of schedules made in this batch, written together at its end (`finish`).
        self._markers: list[tuple[str, float, str]] = []

    def schedule(self, record: DynamoDBStreamRecord, step: Step) -> None:
        occurrence = step.occurrence
        now = self.context.now()
        past = occurrence.due <= now
        current = self.context.current(record)
        if current != occurrence.item and (not past or not self.context.holds(current, record, occurrence)):
            # This record is not the item's latest. If the item has left this due time (or is gone), a later record
            # of the stream cancels or settles it, so nothing is made or sent here. A replay is the case: Lambda
            # replays from a sequence number with every record after it, but a bisected or cut-short retry may hand
            # the INSERT over alone and the REMOVE that cancelled it only in the next batch, once the minute began
            # (too late to delete: `Settling.cancel`), so a schedule made here would deliver a cancelled item. If the
            # item still holds this time, still ahead, it has changed since: a later record (handled already, when
            # an old batch comes again, or still to come, in stream order) made or will make the schedule with the
            # item as it is; this record's older image would put stale data back into the due event. A past time
            # the item still holds is delivered below: a later write may have come after the time, when no
            # schedule is made for it. The item is read once per batch (`prepare`), after every record of it.
            self.context.count("stale")
            if log.debugging():
                log.debug("schedule-stale", schedule=occurrence.name, dueAt=format_due(occurrence.due))
            return
        if past:
            # Scheduler cannot fire in the past: delivered now, unless a schedule or an earlier run owns it.
            self.context.deliver(occurrence)
            return
        firing = self.context.may_be_firing(occurrence.due, now)
        if firing and self.context.ledger.taken(occurrence.name):
            log.debug("firing-left-alone", schedule=occurrence.name)
            return
        payload = target_input(self.context.config["target"], self.context.event(occurrence), via_scheduler=True)
        if self.context.second:
            fire = self._release(record, step, payload, now, firing)
        else:
            fire = schedules.fire_time(occurrence.due, now)
            request = schedules.schedule_request(
                group=self.context.group,
                name=occurrence.name,
                fire=fire,
                target=scheduler_target(self.context.config["target"], self.context.config["scheduler"], payload),
                description=f"scheduled-table {MODE} {self.context.config['table']}",
                key=schedules.payload_key(self.context.config["scheduler"]),
            )
            schedules.upsert(self.context.clients, request, create_first=step.fresh)
        # After the schedule exists (written at the end of the batch): a crash in between can only cost a duplicate,
        # never the occurrence.
        chunk: list[tuple[str, float, str]] = []
        with self.context.lock:
            self._markers.append((occurrence.name, fire.timestamp(), sequence_number(record)))
            self.context.tally["scheduled"] += 1
            if len(self._markers) >= BATCH_WRITE_LIMIT:
                chunk, self._markers = self._markers[:BATCH_WRITE_LIMIT], self._markers[BATCH_WRITE_LIMIT:]
        if chunk:
            self._write(chunk)
        if log.debugging():
            log.debug("scheduled", schedule=occurrence.name, dueAt=format_due(occurrence.due), fireAt=format_due(fire))

    def _release(self, record: DynamoDBStreamRecord, step: Step, payload: str, now: datetime, firing: bool) -> datetime:
        """`precision="second"`: a schedule in the minute before the due time's minute, into the release queue; or,
        when that minute is too close, straight into the queue, held back until the due second (st_core/release.py).
        Returns when the occurrence leaves Scheduler (the marker's expiry counts from it)."""
        from st_core import release

        occurrence = step.occurrence
        text = release.envelope(
            release.Release(
                name=occurrence.name,
                due=occurrence.due,
                item_due=occurrence.item_due,
                keys=record["dynamodb"]["Keys"],
                payload=payload,
            )
        )
        if firing:
            release.enqueue(self.context.clients, self.context.config, text, release.delay_seconds(occurrence.due, now))
            return now
        fire = release.release_fire_time(occurrence.due)
        request = schedules.schedule_request(
            group=self.context.group,
            name=occurrence.name,
            fire=fire,
            target=release.scheduler_release_target(self.context.config, text),
            description=f"scheduled-table {MODE} {self.context.config['table']} release",
            key=schedules.payload_key(self.context.config["scheduler"]),
        )
        schedules.upsert(self.context.clients, request, create_first=step.fresh)
        return fire

    def finish(self) -> list[str]:
        """Write the batch's remaining schedule markers. Sequence numbers to retry from for those that could not be
        written: the records are safe to run again, and a schedule is only remembered once its marker is written."""
        with self.context.lock:
            markers, self._markers = self._markers, []
        try:
            persist(lambda: self.context.ledger.scheduled_many([(name, fire) for name, fire, _ in markers]))
        except Exception as exc:
            if permanent_outcome(exc, "ledger") is not None:
                raise
            return sorted({seq for _, _, seq in markers})
        return []

    def _write(self, chunk: list[tuple[str, float, str]]) -> None:
        """A full BatchWriteItem of markers, written by the worker that filled it (overlapping the other workers'
        calls); if it fails, the markers go back to the batch's list and `finish` tries again or reports them."""
        try:
            persist(lambda: self.context.ledger.scheduled_many([(name, fire) for name, fire, _ in chunk]))
        except Exception as exc:
            log.debug("markers-deferred", markers=len(chunk), error=error_code(exc))
            with self.context.lock:
                self._markers.extend(chunk)
