"""eventbridge's batch: one item's records planned (`plan`), reduced to their net effect (`coalesce`) and each step
carried out by the part that owns it: a one-time occurrence's schedule (`OneTime`), a recurring item's schedule
(`Recurring`), a due time the item left (`Settling`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from st_core.batch import Parked, permanent_outcome
from st_core.errors import PermanentError
from st_core.stream import DynamoDBStreamRecord, sequence_number

from eventbridge.context import BatchContext
from eventbridge.one_time import OneTime
from eventbridge.planning import Action, Clock, Sleep, Step, coalesce
from eventbridge.recurring import Recurring
from eventbridge.settle import Settling

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.clients import Clients
    from st_core.config import HandlerConfig

# No AWS calls of its own (the parts' modules declare theirs).
AWS_ACTIONS: tuple[str, ...] = ()


class Scheduling:
    """Carries out plans: Scheduler calls, direct delivery of past occurrences, the ledger."""

    def __init__(self, config: HandlerConfig, clients: Clients, now: Clock, sleep: Sleep = time.sleep) -> None:
        self.context = BatchContext(config, clients, now, sleep)
        self.one_time = OneTime(self.context)
        self.recurring = Recurring(self.context)
        self.settling = Settling(self.context)
        self.prepare = self.context.prepare
        self.identity = self.context.identity
        self.counts = self.context.counts
        self.finish = self.one_time.finish

    def act(self, record: DynamoDBStreamRecord, step: Step) -> None:
        """One step, by the part that owns its kind of occurrence."""
        recurring = step.occurrence.recurrence is not None
        if step.action is Action.SCHEDULE:
            (self.recurring.schedule if recurring else self.one_time.schedule)(record, step)
        elif step.action is Action.SETTLE:
            self.settling.settle(record, step)
        else:
            (self.recurring.cancel if recurring else self.settling.cancel)(record, step)

    def __call__(self, record: DynamoDBStreamRecord) -> None:
        """One record on its own (the fallback when an item's merged records fail in a way no record explains)."""
        step_plan = self.context.plan_of(record)
        for step in step_plan.steps:
            self.act(record, step)
        if step_plan.poison_reason:
            raise PermanentError(step_plan.poison_reason)

    def item(self, records: list[DynamoDBStreamRecord]) -> list[Parked]:
        """All of one item's records of the batch, acted on by their net effect: k changes of an item make one
        schedule call for its final due time (plus a delete per due time it left, see `coalesce`), not k."""
        parked: list[Parked] = []
        planned = []
        for record in records:
            step_plan = self.context.plan_of(record)
            planned.append((record, step_plan))
            if step_plan.poison_reason:
                parked.append((record, step_plan.poison_reason, "PermanentError"))
        for entry in coalesce(planned):
            try:
                self.act(entry.record, entry.step)
            except Exception as exc:
                outcome = permanent_outcome(exc, sequence_number(entry.record))
                if outcome is None:
                    raise
                parked.append((entry.record, *outcome))
        return parked
