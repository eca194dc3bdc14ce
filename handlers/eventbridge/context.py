"""What every step of an eventbridge batch shares: the configuration, the clients and clocks, the ledger, the
batch's items as they are now (read back once, `prepare`), each record's plan, the counts, and the delivery of a
come-due occurrence (`deliver`). One per batch, used by `OneTime`, `Recurring` and `Settling`."""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from threading import Lock
from typing import TYPE_CHECKING, Any

from st_core import log, schedules
from st_core.clients import Clients
from st_core.dispatch import due_event, send_now, target_input
from st_core.errors import PermanentError, persist
from st_core.idempotency import Ledger
from st_core.naming import RECURRING, SCHEDULED_TIME, item_keys, recurring_firing_id
from st_core.reads import Found, read_items
from st_core.stream import DynamoDBStreamRecord, changed_at, decode_image, key_identity, to_request
from st_core.timeparse import format_due

from eventbridge.planning import EPOCH, MODE, Action, Clock, Occurrence, Plan, Sleep, occurrences_of, offsets_of, plan

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import HandlerConfig

# The AWS actions this module's own calls need (checked by tests/iam); the rest go through st_core (the batch's
# items are read back with st_core.reads' BatchGetItem). An item the batch read could not settle is read on its own.
AWS_ACTIONS: tuple[str, ...] = ("dynamodb:GetItem",)


class BatchContext:
    """One batch's shared state and the calls every kind of step makes."""

    def __init__(self, config: HandlerConfig, clients: Clients, now: Clock, sleep: Sleep = time.sleep) -> None:
        self.config = config
        self.clients = clients
        self.now = now
        self.sleep = sleep
        self.ledger = Ledger.of(config["eventbridge"], clients)
        self.group = config["scheduler"]["group"]
        # precision="second": schedules release into the release queue (the test `release.enabled` makes; the release
        # module itself is compiled only by tables that use it)
        self.second = "release" in config.get("eventbridge", {})
        # Each record's plan, made once (`prepare` plans the batch to know which items to read), by record object.
        self._plans: dict[int, Plan] = {}
        # Each record's item's key identity, worked out once (`prepare` and `current` both ask), by record object.
        self._identities: dict[int, str] = {}
        # The batch's items as they are now, by key identity (`prepare`); an item missing here is read on its own.
        self._items: Found = {}
        self.tally: Counter[str] = Counter()
        self.lock = Lock()

    def counts(self) -> dict[str, int]:
        """What the batch did, by kind (the batch's summary log and metrics)."""
        with self.lock:
            return dict(self.tally)

    def count(self, action: str) -> None:
        """One more of `action` (steps run on several workers at once)."""
        with self.lock:
            self.tally[action] += 1

    def identity(self, record: DynamoDBStreamRecord) -> str:
        """`stream.key_identity(record)`, worked out once per record (planning the batch works it out first)."""
        found = self._identities.get(id(record))
        if found is None:
            found = self._identities[id(record)] = key_identity(record)
        return found

    def plan_of(self, record: DynamoDBStreamRecord) -> Plan:
        """The record's `plan`, made once per batch (judged by when its change happened, or now if it does not say)."""
        known = self._plans.get(id(record))
        if known is not None:
            return known
        moment = changed_at(record)
        changed = datetime.fromtimestamp(moment, UTC) if moment is not None else self.now()
        keys = item_keys(record["dynamodb"]["Keys"], self.config)
        self._identities[id(record)] = keys.identity  # `key_identity(record)`, worked out once
        made = plan(record, self.config, changed, keys)
        self._plans[id(record)] = made
        return made

    def prepare(self, records: list[DynamoDBStreamRecord]) -> None:
        """Plan every record and read back, in one consistent BatchGetItem per 100 keys, each item a step will
        check against what the item holds now (`current`): the item of any record that schedules, and of any that
        cancels a recurring schedule. Read after the batch's records were written, each item is at least as new as
        the batch's last record of it. A record this batch cannot plan is planned again, and fails, per item."""
        keys: dict[str, Any] = {}
        for record in records:
            try:
                step_plan = self.plan_of(record)
            except Exception:
                continue
            if any(
                s.action is Action.SCHEDULE or (s.action is Action.CANCEL and s.occurrence.recurrence is not None)
                for s in step_plan.steps
            ):
                keys[self.identity(record)] = record["dynamodb"]["Keys"]
        if keys:
            found = read_items(
                self.clients, self.config["table"], keys, workers=self.config["maxWorkers"], sleep=self.sleep
            )
            with self.lock:
                self._items.update(found)

    def as_held(self, record: DynamoDBStreamRecord, occurrence: Occurrence) -> Occurrence | None:
        """The item's recurring occurrence as the item holds it now (`current`), if that is the same rule
        as `occurrence`'s; None when the item is gone or holds another rule, a time, or nothing usable."""
        current = self.held(record, occurrence)
        if current is None or current.recurrence != occurrence.recurrence:
            return None
        return current

    def held(self, record: DynamoDBStreamRecord, occurrence: Occurrence) -> Occurrence | None:
        """The item's occurrence in `occurrence`'s place (its offset, or its recurring one) as the item holds it
        now, whatever its time or rule; None when the item is gone or holds nothing usable there."""
        return self._held_in(self.current(record), record, occurrence)

    def _held_in(
        self, current: dict[str, Any] | None, record: DynamoDBStreamRecord, occurrence: Occurrence
    ) -> Occurrence | None:
        try:
            keys = item_keys(record["dynamodb"]["Keys"], self.config)
            held = occurrences_of(current, keys, self.config)
        except PermanentError:
            return None
        return held.get(RECURRING if occurrence.recurrence is not None else occurrence.offset)

    def holds(self, current: dict[str, Any] | None, record: DynamoDBStreamRecord, occurrence: Occurrence) -> bool:
        """The item as read (`current`) still holds this one-time occurrence's due time (any format of the instant)."""
        held = self._held_in(current, record, occurrence)
        return held is not None and held.due == occurrence.due

    def current(self, record: DynamoDBStreamRecord) -> dict[str, Any] | None:
        """The record's item as it is now: from the batch read (`prepare`), or, for an item that read did not
        settle, one consistent GetItem of its own."""
        identity = self.identity(record)
        with self.lock:
            if identity in self._items:
                return self._items[identity]
        found = self.clients.get("dynamodb").get_item(
            TableName=self.config["table"], Key=to_request(record["dynamodb"]["Keys"]), ConsistentRead=True
        )
        return decode_image(found.get("Item"))

    def may_be_firing(self, due: datetime, now: datetime) -> bool:
        if self.second:
            from st_core import release

            return release.may_be_firing(due, now)
        return schedules.may_be_firing(due, now)

    def may_have_started(self, due: datetime, now: datetime) -> bool:
        if self.second:
            from st_core import release

            return release.may_have_started(due, now)
        return schedules.may_have_started(due, now)

    def deliver(
        self, occurrence: Occurrence, take_over: bool = False, fired: datetime | None = None, *, owe: bool = False
    ) -> None:
        """Deliver a come-due occurrence now, once: unless a schedule (`take_over`: unless a delivery) owns it.
        `fired`: one firing of a recurring occurrence, under the id Scheduler gives that firing; `owe`: a firing
        taken from Scheduler, left OWED in the ledger if the send fails (`Recurring`)."""
        due = occurrence.due if fired is None else fired
        name = occurrence.name if fired is None else recurring_firing_id(occurrence.name, format_due(fired))
        if not self.ledger.claim(name, self.now().timestamp(), take_over_scheduled=take_over):
            self.count("duplicates")
            log.debug("duplicate", schedule=name, dueAt=format_due(due))
            return
        try:
            payload = target_input(self.config["target"], self.event(occurrence, fired))
            send_now(self.config["target"], payload, occurrence=name, clients=self.clients)
        except Exception:
            persist(lambda: self.ledger.owe(name) if owe else self.ledger.release(name))
            raise
        persist(lambda: self.ledger.complete(name))
        late = (self.now() - due).total_seconds()
        self.count("delivered")
        log.debug("dispatched-now", schedule=name, dueAt=format_due(due), lateSeconds=late)

    def event(self, occurrence: Occurrence, fired: datetime | None = None) -> Any:
        """The due event; a recurring occurrence's is the template Scheduler completes with each firing's scheduled
        time, or, for a firing the handler delivers itself (`fired`), completed here the same way."""
        if occurrence.recurrence is not None:
            scheduled = SCHEDULED_TIME if fired is None else format_due(fired)
            event = due_event(
                mode=MODE,
                table=self.config["table"],
                keys=occurrence.keys,
                due=EPOCH,
                item=occurrence.item,
                occurrence=recurring_firing_id(occurrence.name, scheduled),
            )
            event["dueAt"] = scheduled
            event["recurrence"] = occurrence.recurrence.expression
            event["timeZone"] = occurrence.recurrence.zone
            return event
        return due_event(
            mode=MODE,
            table=self.config["table"],
            keys=occurrence.keys,
            due=occurrence.item_due,
            item=occurrence.item,
            occurrence=occurrence.name,
            offset=occurrence.offset if offsets_of(self.config) != [0] else None,
        )
