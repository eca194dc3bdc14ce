"""`eventbridge` mode: one EventBridge Scheduler `at()` schedule per occurrence (item keys + due time).

The package's parts: `planning` (pure: `plan` reads one stream record into steps, `coalesce` reduces an item's
records to their net effect), `firings` (pure: the recurring arithmetic), and `Scheduling` (`scheduling`), which
carries the steps out through `OneTime` (`one_time`: `at()` schedules, past occurrences delivered at once, the
schedules' ledger markers), `Recurring` (`recurring`: an item's recurring schedule) and `Settling` (`settle`: due
times the item left), sharing one `BatchContext` (`context`: the batch's items read back, the counts, a delivery).
The entry points (`handle_batch`, `handler`) are here.

Once per occurrence, under AWS's real behaviour:
- Scheduler fires anywhere in the minute of its `at()` time, so schedules are set on the first whole minute at or
  after the due time (never early; at most about 60 s late, 120 s when made less than 10 s before that minute).
- Stream batches are delivered at least once, whole, possibly much later. A record is judged by when its change
  happened (`ApproximateCreationDateTime`), not by when it is processed: a due time the item held when it came is
  due (delivered once), one the item left before it came is cancelled (never delivered, if the cancel is handled
  before its schedule's minute; from then on the schedule may be running and is left to run, so an item that
  comes back to that time is delivered once whatever the timing). A write that keeps the due time never delivers
  again: a consumer that writes back on delivery cannot loop.
- A record acts only for what its item still holds, read back once per batch (one consistent BatchGetItem per
  100 items, `Scheduling.prepare`): a replayed INSERT never schedules or delivers a time the item has left, and a
  schedule's payload is written only by the item's latest record (an old batch handled again never puts older
  data back into a schedule).
- The idempotency ledger records which occurrences a schedule owns and which were delivered directly, so a
  redelivered batch neither re-creates a fired schedule nor delivers a past occurrence twice.

Recurring items: the time attribute may hold a Scheduler `rate(...)` or `cron(...)` expression instead of a time
(in the item's time zone attribute, with optional start and end attributes). The item then has one recurring
schedule (ActionAfterCompletion NONE), made, updated in place and deleted with the item; Scheduler delivers every
firing itself, with its scheduled time in the due event's `dueAt`. The firings this function delivers: one that
came after the item took its rule and before the schedule existed (a late batch): Scheduler only fires from then
on, so it is delivered at once, under the `occurrenceId` Scheduler gives it, once through the ledger (unless the
rule the schedule held until then fired at that instant too: that firing, of the same id, was Scheduler's); and one
of the seconds before an update of the schedule, which the update takes from Scheduler (`firings.taken_over`), the same
way. A redelivered batch otherwise only repeats idempotent create/update/delete calls,
made only for the rule the item still holds (a consistent read), so an old batch handled after a newer one brings
no deleted schedule back. The expression shares the time attribute (rather than an attribute of its own) so the
mapping's filters stay within Lambda's five per event source mapping.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from st_core import log
from st_core.batch import handle_stream_batch
from st_core.clients import CLIENTS, Clients
from st_core.config import load_config
from st_core.stream import BatchResponse, DynamoDBStreamEvent

from eventbridge.firings import recurring_window
from eventbridge.planning import (
    EPOCH,
    MODE,
    Action,
    Clock,
    Occurrence,
    Plan,
    Planned,
    Recurrence,
    Sleep,
    Step,
    coalesce,
    is_recurrence,
    item_zone,
    occurrences_of,
    offsets_of,
    plan,
    recurring_occurrence,
)
from eventbridge.scheduling import Scheduling

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import HandlerConfig

__all__ = [
    "AWS_ACTIONS",
    "EPOCH",
    "MODE",
    "Action",
    "Clock",
    "Occurrence",
    "Plan",
    "Planned",
    "Recurrence",
    "Scheduling",
    "Sleep",
    "Step",
    "coalesce",
    "handle_batch",
    "handler",
    "is_recurrence",
    "item_zone",
    "occurrences_of",
    "offsets_of",
    "plan",
    "recurring_occurrence",
    "recurring_window",
]

# No AWS calls of its own: each module of the package declares those it makes (checked by tests/iam).
AWS_ACTIONS: tuple[str, ...] = ()


def handle_batch(
    event: DynamoDBStreamEvent | object,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Clock = lambda: datetime.now(UTC),
    sleep: Sleep = time.sleep,
) -> BatchResponse:
    scheduling = Scheduling(config, clients, now, sleep)
    return handle_stream_batch(
        event,
        config,
        mode=MODE,
        handle=scheduling,
        clients=clients,
        handle_group=scheduling.item,
        prepare=scheduling.prepare,
        finish=scheduling.finish,
        counts=scheduling.counts,
        identity_of=scheduling.identity,
    )


def handler(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """Lambda entry point (`eventbridge.handler`)."""
    log.invoked(context)
    return handle_batch(event, load_config())
