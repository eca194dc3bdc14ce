"""eventbridge's steps for a one-time due time the item left: delivered once if it had come (`settle`), its
schedule deleted if it had not (`cancel`). (A recurring item that left its rule: `Recurring.cancel`.)"""

from __future__ import annotations

from functools import partial

from st_core import log, schedules
from st_core.errors import persist
from st_core.idempotency import SHORTEST_WINDOW_SECONDS, remembered
from st_core.stream import DynamoDBStreamRecord
from st_core.timeparse import format_due

from eventbridge.context import BatchContext
from eventbridge.planning import Step

# No AWS calls of its own: Scheduler's through st_core.schedules, the ledger's through st_core.idempotency.
AWS_ACTIONS: tuple[str, ...] = ()


class Settling:
    """Settles and cancels the one-time occurrences an item left."""

    def __init__(self, context: BatchContext) -> None:
        self.context = context

    def settle(self, record: DynamoDBStreamRecord, step: Step) -> None:
        """The item left a due time after it came: delivered now, once, unless a schedule or a delivery owns it."""
        # With precision="second" the release consumer drops an occurrence whose item has left its due time (it
        # cannot tell when the item left it): this record says it left after the time came, so it is delivered here,
        # through the same claim, which the schedule's marker does not stop.
        occurrence = step.occurrence
        now = self.context.now()
        # The ledger's memory counts from the due time, or from when the item took that time if later and known (the
        # batch holds that write: `coalesce`). Delivering a past due time is that write's own effect (`OneTime.schedule`
        # delivers it however old the time), so an item written long past due and removed before the handler saw the
        # write is delivered once, through the claim, as its write alone would have been.
        since = occurrence.due if step.since is None else max(occurrence.due, step.since)
        window = float(self.context.ledger.window_seconds)
        if remembered(since, now, window) and not remembered(since, now, SHORTEST_WINDOW_SECONDS):
            # Its entry may have been written under a narrower window than today's (the window was raised since):
            # one read of the narrowest the table ran with, only for an occurrence that old.
            window = self.context.ledger.narrowest_window()
        if not remembered(since, now, window):
            # The ledger may have forgotten this occurrence's delivery (its schedule ran, or a claim delivered it,
            # longer ago than the window): a claim would let it through a second time. An item lives on for months
            # after its occurrences (deleted, moved, removed by a cleanup TTL days later), so it is not delivered
            # again, as reconcile does not deliver it. Judged now, when the claim would be made: never earlier than
            # the change (a record handled a day late, or redriven, is judged then).
            self.context.count("forgotten")
            log.debug("settle-forgotten", schedule=occurrence.name, dueAt=format_due(occurrence.due))
            return
        self.context.deliver(occurrence, take_over=self.context.second)

    def cancel(self, record: DynamoDBStreamRecord, step: Step) -> None:
        """The item left a due time before it came: its schedule is deleted, unless it may have started firing."""
        occurrence = step.occurrence
        if self.context.may_have_started(occurrence.due, self.context.now()):
            # Its schedule may be running or have run, and a delete now could not tell which: Scheduler removes a
            # schedule some time after invoking its target (and keeps it while retrying the target). So it is left
            # to run, with its ledger marker: the occurrence is delivered once, by it, also if the item comes back to
            # this time (a delete that won the race would have kept the marker and lost that return). The limit
            # the README states: a cancel handled once the schedule's minute began does not take it back.
            # (Second precision: the releaser still drops it at its second if the item left the time.)
            self.context.count("tooLateToCancel")
            log.debug("cancel-too-late", schedule=occurrence.name, dueAt=format_due(occurrence.due))
            return
        schedules.delete(self.context.clients, self.context.group, occurrence.name)
        # Deleted, or found gone, before its minute began: no schedule of this occurrence has run or will, so none
        # owns it and its marker is forgotten (a return to this due time is then scheduled or delivered afresh).
        # Judged by the clock once the delete has answered: one that answered later may have raced a firing, and
        # keeps the marker.
        if not self.context.may_have_started(occurrence.due, self.context.now()):
            persist(partial(self.context.ledger.unschedule, occurrence.name))
        self.context.count("cancelled")
        log.debug("cancelled", schedule=occurrence.name, dueAt=format_due(occurrence.due))
