"""`ttl` mode: act when DynamoDB's TTL deletes an item (seeds 001 and 004).

The event source mapping lets through only TTL deletions (REMOVE by the DynamoDB service), so inserts, updates and
users' deletes never invoke this function. Each deletion becomes one due event, built from the old image, at most
once per occurrence (see `st_core.idempotency`), and a repeating item is written back with its next due time.

With `precise`, TTL's lateness (minutes to days) is cut to Scheduler's: every item also gets one `at()` schedule
that deletes it through the universal target `dynamodb:deleteItem`, only while its TTL value is unchanged, set on
the first whole minute at or after its due time (Scheduler fires anywhere in an `at()` minute, so that is the only
minute that is never early). Those deletes are ordinary REMOVEs, so in precise mode the mapping also passes
inserts, updates and removes of items with a due time, and a REMOVE is judged by when it happened (its
`ApproximateCreationDateTime`, not when it is processed, so a late or redelivered batch decides the same): in the
due minute or after means due, before means the user cancelled. The action itself never runs before the due time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any

from st_core import log, schedules
from st_core.batch import handle_stream_batch
from st_core.clients import CLIENTS, Clients
from st_core.config import HandlerConfig, load_config
from st_core.dispatch import (
    DELETE_ITEM_UNIVERSAL_TARGET,
    delete_item_request,
    due_event,
    schedule_target,
    send_now,
    target_input,
)
from st_core.errors import PermanentError, error_code, persist
from st_core.idempotency import Ledger
from st_core.naming import schedule_name
from st_core.stream import (
    BatchResponse,
    DynamoDBStreamEvent,
    DynamoDBStreamRecord,
    changed_at,
    decode_image,
    key_identity,
    to_request,
)
from st_core.timeparse import format_due, minute_start, parse_due

# The AWS actions this module's own calls need (checked by tests/iam): put the next occurrence of a repeating item
# back; with `precise`, delete an item whose schedule fired (on the table).
AWS_ACTIONS = ("dynamodb:DeleteItem", "dynamodb:PutItem")

MODE = "ttl"
TTL_SERVICE = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
# A repeat interval longer than this is a mistake in the data (and overflows date arithmetic soon after).
MAX_REPEAT_SECONDS = 100 * 366 * 24 * 3600
Clock = Callable[[], datetime]
Sleep = Callable[[float], None]


class Step(StrEnum):
    EXECUTE = "execute"
    CANCELLED = "cancelled"
    SCHEDULE = "schedule"
    UNSCHEDULE = "unschedule"
    IGNORE = "ignore"


@dataclass(frozen=True)
class Decision:
    step: Step
    name: str
    due: datetime | None = None
    reason: str = ""
    poison: bool = False


def is_ttl_deletion(record: DynamoDBStreamRecord) -> bool:
    identity = record.get("userIdentity")
    return identity is not None and all(identity.get(k) == v for k, v in TTL_SERVICE.items())


def expiry(image: dict[str, Any], attribute: str) -> datetime:
    """The item's TTL as a time. DynamoDB TTL only reads numbers (epoch seconds); anything else never expires."""
    value = image.get(attribute)
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise PermanentError(
            f"TTL attribute {attribute!r} is {type(value).__name__} {str(value)[:40]!r}, not a number of epoch "
            "seconds: DynamoDB TTL ignores it and the item never expires"
        )
    return parse_due(value)


def decide(record: DynamoDBStreamRecord, config: HandlerConfig, changed: datetime) -> Decision:
    """What one record means, without calling AWS; `changed` is when its change happened."""
    data = record["dynamodb"]
    keys = decode_image(data["Keys"]) or {}
    name = schedule_name(key_identity(record), "-".join(str(v) for v in keys.values()))
    attribute = config["timeAttribute"]
    precise = config["ttl"]["precise"]
    if record["eventName"] == "REMOVE":
        old = decode_image(data.get("OldImage")) or {}
        if is_ttl_deletion(record):
            return Decision(Step.EXECUTE, name, expiry(old, attribute))
        if not precise:
            return Decision(Step.IGNORE, name, reason="not a TTL deletion")
        try:
            due = expiry(old, attribute)
        except PermanentError:
            return Decision(Step.UNSCHEDULE, name, reason="deleted; its TTL was never valid")
        # Our own delete runs in the minute at or after the due time; so does any delete that counts as due.
        if changed >= minute_start(due):
            return Decision(Step.EXECUTE, name, due)
        return Decision(Step.CANCELLED, name, due, reason="deleted before its due time")
    if not precise:
        return Decision(Step.IGNORE, name, reason=f"{record['eventName']} is not an expiry")
    new = decode_image(data.get("NewImage")) or {}
    if new.get(attribute) is None:
        return Decision(Step.UNSCHEDULE, name, reason="no due time")
    try:
        due = expiry(new, attribute)
    except PermanentError as exc:
        return Decision(Step.UNSCHEDULE, name, reason=str(exc), poison=True)
    return Decision(Step.SCHEDULE, name, due)


def next_item(raw: dict[str, Any], item: dict[str, Any], due: datetime, now: datetime, config: HandlerConfig) -> Any:
    """The item to write back for its next occurrence (DynamoDB JSON as Lambda gives it), or None when it does not
    repeat (again). The next due time is the first one after `now`: missed occurrences are skipped, never fired in a
    burst. Any unusable repeat setting is a PermanentError (raised only after the occurrence fired)."""
    ttl = config["ttl"]
    every = item.get(ttl["repeatAttribute"])
    if every is None:
        return None
    if isinstance(every, bool) or not isinstance(every, int | Decimal) or not 1 <= every <= MAX_REPEAT_SECONDS:
        raise PermanentError(
            f"repeat attribute {ttl['repeatAttribute']!r} is {str(every)[:40]!r}: it must be a number of seconds "
            f"from 1 to {MAX_REPEAT_SECONDS}"
        )
    step = int(every)
    skipped = max(0, int((now - due).total_seconds()) // step)
    try:
        following = due + timedelta(seconds=step * (skipped + 1))
        until = item.get(ttl["repeatUntilAttribute"])
        if until is not None and following > parse_due(until):
            return None
    except (OverflowError, ValueError) as exc:
        raise PermanentError(f"the next occurrence after {format_due(due)} is out of range: {exc}") from exc
    count = item.get(ttl["occurrenceAttribute"]) or 0
    if isinstance(count, bool) or not isinstance(count, int | Decimal):
        count = 0
    return {
        **raw,
        config["timeAttribute"]: {"N": str(int(following.timestamp()))},
        ttl["occurrenceAttribute"]: {"N": str(int(count) + 1)},
    }


class Executor:
    """Carries out decisions: the action (once per occurrence), repeats, and precise-mode schedules."""

    def __init__(self, config: HandlerConfig, clients: Clients, now: Clock, sleep: Sleep = time.sleep) -> None:
        self.config = config
        self.clients = clients
        self.now = now
        self.sleep = sleep
        self.ledger = Ledger.of(config["ttl"], clients)

    def __call__(self, record: DynamoDBStreamRecord) -> None:
        moment = changed_at(record)
        changed = datetime.fromtimestamp(moment, UTC) if moment is not None else self.now()
        decision = decide(record, self.config, changed)
        precise = self.config["ttl"]["precise"]
        if precise and decision.step in (Step.EXECUTE, Step.CANCELLED, Step.UNSCHEDULE):
            schedules.delete(self.clients, self.config["scheduler"]["group"], decision.name)
        if decision.step is Step.EXECUTE and decision.due is not None:
            self._execute(record, decision.name, decision.due)
        elif decision.step is Step.SCHEDULE and decision.due is not None:
            self._schedule(record, decision.name, decision.due)
        elif decision.poison:
            raise PermanentError(decision.reason)
        else:
            log.debug(decision.step.value, schedule=decision.name, reason=decision.reason)

    def _execute(self, record: DynamoDBStreamRecord, name: str, due: datetime) -> None:
        data = record["dynamodb"]
        raw = data.get("OldImage") or {}
        item = decode_image(raw) or {}
        keys = decode_image(data["Keys"]) or {}
        occurrence = schedules.occurrence(name, due)
        early = (due - self.now()).total_seconds()
        if early > 0:
            # A delete inside the due minute but before its second (a user's, say) counts as due: the action still
            # waits for the due second. At most a minute, within any function timeout this mode allows.
            self.sleep(min(early, 60.0))
        if not self.ledger.claim(occurrence):
            log.debug("duplicate", schedule=name, dueAt=format_due(due))
            return
        repeat_problem = ""
        try:
            try:
                self._repeat(raw, item, due)
            except PermanentError as exc:
                repeat_problem = str(exc)  # the occurrence still fires; the record is parked afterwards
            event = due_event(mode=MODE, table=self.config["table"], keys=keys, due=due, item=item)
            send_now(
                self.config["target"],
                target_input(self.config["target"], event),
                occurrence=occurrence,
                clients=self.clients,
            )
        except Exception:
            persist(lambda: self.ledger.release(occurrence))
            raise
        persist(lambda: self.ledger.complete(occurrence))
        late = (self.now() - due).total_seconds()
        log.debug("executed", schedule=name, dueAt=format_due(due), lateSeconds=round(late, 3))
        if repeat_problem:
            raise PermanentError(f"fired, but not repeated: {repeat_problem}")

    def _repeat(self, raw: dict[str, Any], item: dict[str, Any], due: datetime) -> None:
        following = next_item(raw, item, due, self.now(), self.config)
        if following is None:
            return
        partition = self.config["partitionKey"]
        try:
            # Only if the item is still gone: a retry (or a user who re-created it) must not be overwritten.
            self.clients.get("dynamodb").put_item(
                TableName=self.config["table"],
                Item=to_request(following),
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": partition},
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            log.debug("repeat-exists", keys=json.dumps(decode_image(raw) or {}, default=str)[:200])
            return
        log.debug("repeated", nextDueAt=following[self.config["timeAttribute"]]["N"])

    def _schedule(self, record: DynamoDBStreamRecord, name: str, due: datetime) -> None:
        data = record["dynamodb"]
        attribute = self.config["timeAttribute"]
        if record["eventName"] == "MODIFY":
            old = (data.get("OldImage") or {}).get(attribute)
            if old == data["NewImage"][attribute]:
                log.debug("unchanged", schedule=name)
                return
        scheduler = self.config["scheduler"]
        # Scheduler's universal target takes DynamoDB JSON as Lambda delivers it (binary as base64 text).
        request = delete_item_request(self.config["table"], data["Keys"], attribute, data["NewImage"][attribute])
        now = self.now()
        if due <= now:
            # Due already: delete it now; its REMOVE comes back here and executes.
            schedules.delete(self.clients, scheduler["group"], name)
            direct = {**request, "Key": to_request(request["Key"])}
            try:
                self.clients.get("dynamodb").delete_item(**direct)
            except Exception as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise
            return
        schedules.upsert(
            self.clients,
            schedules.schedule_request(
                group=scheduler["group"],
                name=name,
                fire=schedules.fire_time(due, now),
                target=schedule_target(DELETE_ITEM_UNIVERSAL_TARGET, scheduler, json.dumps(request)),
                description=f"scheduled-table {MODE} precise {self.config['table']}",
            ),
            create_first=record["eventName"] == "INSERT",
        )


def handle_batch(
    event: DynamoDBStreamEvent | object,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Clock = lambda: datetime.now(UTC),
    sleep: Sleep = time.sleep,
) -> BatchResponse:
    executor = Executor(config, clients, now, sleep)
    return handle_stream_batch(event, config, mode=MODE, handle=executor, clients=clients)


def handler(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """Lambda entry point (`ttl.handler`)."""
    return handle_batch(event, load_config())
