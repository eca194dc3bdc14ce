"""`ttl` mode: act when DynamoDB's TTL deletes an item (seeds 001 and 004).

The event source mapping lets through only TTL deletions (REMOVE by the DynamoDB service), so inserts, updates and
users' deletes never invoke this function. Each deletion becomes one due event, built from the old image, at most
once per occurrence (see `st_core.idempotency`), and a repeating item is written back with its next due time.

With `precise`, TTL's lateness (minutes to days) is cut to Scheduler's: every item also gets one `at()` schedule
on the first whole minute at or after its due time (Scheduler fires anywhere in an `at()` minute, so that is the
only minute that is never early). The schedule does not delete the item: a plain delete in the stream looks like
anyone's, so a user's delete just before the due second could not be told from it. It fires the item instead,
through the universal target `dynamodb:updateItem`, only while its TTL value is unchanged: `SET stFiredAt = <due>
REMOVE <time attribute>`. That MODIFY is unmistakably the schedule's (a marker equal to the due time the item just
lost): the executor acts on it, once per occurrence (ledger), then deletes the item, or writes it back with its next
due time when it repeats, only while it is still in that fired state. Its own delete holds no due time, so the
mapping's filters never pass it. Every other REMOVE is judged by when it happened (its `ApproximateCreationDateTime`,
not when it is processed, so a late or redelivered batch decides the same): at or after the due second means due
(DynamoDB's TTL, or a user deleting an expired item), before it means the user cancelled. The action itself never
runs before the due time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from st_core import log
from st_core.batch import handle_stream_batch
from st_core.clients import CLIENTS, Clients
from st_core.config import load_config
from st_core.constants import UNIVERSAL_TARGET_PREFIX
from st_core.dispatch import due_event, schedule_target, send_now, target_input
from st_core.errors import PermanentError, error_code, persist
from st_core.idempotency import Ledger
from st_core.naming import item_keys, item_schedule_name, occurrence_id
from st_core.stream import (
    BatchResponse,
    DynamoDBStreamEvent,
    DynamoDBStreamRecord,
    changed_at,
    decode_image,
    due_type_problem,
    to_request,
)
from st_core.timeparse import format_due, minute_start, parse_due

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import HandlerConfig

# The AWS actions this module's own calls need (checked by tests/iam): put the next occurrence of a repeating item
# back; with `precise`, fire an item already due, delete or re-arm one that fired, and read an item's due time
# before its schedule is made or deleted (on the table).
AWS_ACTIONS = ("dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")

MODE = "ttl"
TTL_SERVICE = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
# Precise mode: what the schedule does at the due time (Scheduler's universal target for DynamoDB UpdateItem), and
# the attribute it sets to the due time the item gives up. Reserved on precise tables: an item written with it and
# without a due time is one that has fired.
UPDATE_ITEM_UNIVERSAL_TARGET = UNIVERSAL_TARGET_PREFIX + "dynamodb:updateItem"
FIRED = "stFiredAt"
# A repeat interval longer than this is a mistake in the data (and overflows date arithmetic soon after).
MAX_REPEAT_SECONDS = 100 * 366 * 24 * 3600
Clock = Callable[[], datetime]
Sleep = Callable[[float], None]


class Step(StrEnum):
    EXECUTE = "execute"
    FIRED = "fired"  # precise: the schedule (or the executor, for a due time already past) fired the item
    CANCELLED = "cancelled"
    SCHEDULE = "schedule"
    UNSCHEDULE = "unschedule"
    IGNORE = "ignore"


class Decision(NamedTuple):  # not a frozen dataclass: cheaper to build at import (see eventbridge.Recurrence)
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


def fire_request(table: str, keys: dict[str, Any], attribute: str, value: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB UpdateItem (DynamoDB JSON) that fires an item: its due time moves into `stFiredAt`, only while
    `attribute` still holds `value` (a later change of the due time, or a delete, makes it a no-op)."""
    return {
        "TableName": table,
        "Key": keys,
        "UpdateExpression": "SET #fired = :due REMOVE #due",
        "ConditionExpression": "#due = :due",
        "ExpressionAttributeNames": {"#due": attribute, "#fired": FIRED},
        "ExpressionAttributeValues": {":due": value},
    }


def fired(old: dict[str, Any], new: dict[str, Any], attribute: str) -> bool:
    """True for the MODIFY a fire request makes: the item gave up its due time and holds it as `stFiredAt`. A user's
    update that removes the due time, or any other write, leaves no such pair."""
    due = old.get(attribute)
    return due is not None and new.get(attribute) is None and new.get(FIRED) == due


def schedule_name(record: DynamoDBStreamRecord, config: HandlerConfig) -> str:
    """Precise mode: the item's one schedule's name."""
    return item_schedule_name(item_keys(record["dynamodb"]["Keys"], config))


def decide(record: DynamoDBStreamRecord, config: HandlerConfig, changed: datetime) -> Decision:
    """What one record means, without calling AWS; `changed` is when its change happened."""
    data = record["dynamodb"]
    name = schedule_name(record, config)
    attribute = config["timeAttribute"]
    precise = config["ttl"]["precise"]
    if record["eventName"] == "REMOVE":
        old = decode_image(data.get("OldImage")) or {}
        if is_ttl_deletion(record):
            return Decision(Step.EXECUTE, name, expiry(old, attribute))
        if not precise:
            return Decision(Step.IGNORE, name, reason="not a TTL deletion")
        if old.get(attribute) is None and old.get(FIRED) is not None:
            # The executor's own delete of a fired item (the mapping does not pass it): acted on when it fired.
            return Decision(Step.IGNORE, name, reason="deleted after it fired")
        try:
            due = expiry(old, attribute)
        except PermanentError:
            return Decision(Step.UNSCHEDULE, name, reason="deleted; its TTL was never valid")
        # The schedule never deletes an item, so this is a user's (or another writer's) delete: at or after the due
        # second the item had expired, before it the user cancelled, even inside the due minute.
        if changed >= due:
            return Decision(Step.EXECUTE, name, due)
        return Decision(Step.CANCELLED, name, due, reason="deleted before its due time")
    if not precise:
        return Decision(Step.IGNORE, name, reason=f"{record['eventName']} is not an expiry")
    raw_due = (data.get("NewImage") or {}).get(attribute)
    if not (isinstance(raw_due, dict) and "S" in raw_due):  # a string has its reason from `expiry`
        problem = due_type_problem(data.get("NewImage"), attribute, ("N",))
        if problem:  # binary, boolean, null, a set, a map, a list: TTL ignores it, and so would the schedule
            return Decision(Step.UNSCHEDULE, name, reason=problem, poison=True)
    new = decode_image(data.get("NewImage")) or {}
    if new.get(attribute) is None:
        old = decode_image(data.get("OldImage")) or {}
        if record["eventName"] == "MODIFY" and fired(old, new, attribute):
            try:
                due = expiry(old, attribute)
            except PermanentError as exc:
                return Decision(Step.IGNORE, name, reason=str(exc), poison=True)
            if changed < minute_start(due):
                # Scheduler fires at or after the due minute's end, the executor only once the time has passed.
                return Decision(
                    Step.IGNORE,
                    name,
                    reason=f"{FIRED} was set at {format_due(changed)}, before its due time {format_due(due)}: only "
                    "the table's schedule may set it; the item was not acted on",
                    poison=True,
                )
            return Decision(Step.FIRED, name, due)
        if record["eventName"] == "MODIFY" and old.get(attribute) is None and old.get(FIRED) is not None:
            # A write to an item that fired and is not deleted yet (the mapping does not pass it): its schedule ran.
            return Decision(Step.IGNORE, name, reason="a fired item changed")
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
            self._unschedule(record, decision.name)
        if decision.step in (Step.EXECUTE, Step.FIRED) and decision.due is not None:
            self._execute(record, decision.name, decision.due, fired=decision.step is Step.FIRED)
        elif decision.step is Step.SCHEDULE and decision.due is not None:
            self._schedule(record, decision.name, decision.due)
        elif decision.poison:
            raise PermanentError(decision.reason)
        else:
            log.debug(decision.step.value, schedule=decision.name, reason=decision.reason)

    def _execute(self, record: DynamoDBStreamRecord, name: str, due: datetime, *, fired: bool = False) -> None:
        """Act on one occurrence, once. `fired`: the record is the schedule's fire (the item is still there, without
        its due time): the item is deleted, or written back for its next occurrence, only once the action is done,
        so a record that fails for good is redriven while the item still says what it was."""
        data = record["dynamodb"]
        raw = {k: v for k, v in (data.get("OldImage") or {}).items() if k != FIRED}
        item = decode_image(raw) or {}
        item_key = item_keys(data["Keys"], self.config)
        keys = item_key.plain
        occurrence = occurrence_id(item_key, due)
        early = (due - self.now()).total_seconds()
        if early > 0:
            # This invocation's clock behind the change's (a due time already past, fired by another invocation):
            # the action waits for the due second. At most a minute, within any function timeout this mode allows.
            self.sleep(min(early, 60.0))
        if not self.ledger.claim(occurrence):
            log.debug("duplicate", schedule=name, dueAt=format_due(due))
            if fired:  # done before, perhaps without its settling write (a crash, a timeout): settle it now
                self._settle(record, raw, item, due)
            return
        repeat_problem = ""
        try:
            following, repeat_problem = self._following(raw, item, due)
            if not fired:
                self._put_back(raw, following)
            event = due_event(
                mode=MODE, table=self.config["table"], keys=keys, due=due, item=item, occurrence=occurrence
            )
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
        if fired:
            self._write_settled(record, following)
        if repeat_problem:
            raise PermanentError(f"fired, but not repeated: {repeat_problem}")

    def _following(self, raw: dict[str, Any], item: dict[str, Any], due: datetime) -> tuple[Any, str]:
        """The item for the next occurrence (None when it does not repeat), and why it cannot repeat, if so: the
        occurrence still fires, and the record is parked afterwards."""
        try:
            return next_item(raw, item, due, self.now(), self.config), ""
        except PermanentError as exc:
            return None, str(exc)

    def _settle(self, record: DynamoDBStreamRecord, raw: dict[str, Any], item: dict[str, Any], due: datetime) -> None:
        following, _ = self._following(raw, item, due)
        self._write_settled(record, following)

    def _write_settled(self, record: DynamoDBStreamRecord, following: Any) -> None:
        """A fired item leaves the fired state: deleted, or replaced by its next occurrence (whose MODIFY comes back
        here and is scheduled). Only while it is still fired for this due time: a user who changed, re-armed or
        deleted it since keeps their write. The delete holds no due time, so the mapping never passes it back."""
        data = record["dynamodb"]
        attribute = self.config["timeAttribute"]
        guard = {
            "ConditionExpression": "#fired = :due AND attribute_not_exists(#due)",
            "ExpressionAttributeNames": {"#fired": FIRED, "#due": attribute},
            "ExpressionAttributeValues": to_request({":due": data["OldImage"][attribute]}),
        }
        ddb = self.clients.get("dynamodb")
        try:
            if following is None:
                ddb.delete_item(TableName=self.config["table"], Key=to_request(data["Keys"]), **guard)
            else:
                ddb.put_item(TableName=self.config["table"], Item=to_request(following), **guard)
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            log.debug("settled-already", keys=json.dumps(decode_image(data["Keys"]) or {}, default=str)[:200])
            return
        log.debug("settled", repeated=following is not None)

    def _put_back(self, raw: dict[str, Any], following: Any) -> None:
        """After a deletion (TTL's, or a user's after the due time): the next occurrence, as a new item."""
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

    def _held_due(self, record: DynamoDBStreamRecord) -> Any:
        """The item's due time now (a consistent read of that one attribute): a number, or None when the item is
        gone or holds none (or holds one TTL cannot read)."""
        attribute = self.config["timeAttribute"]
        found = self.clients.get("dynamodb").get_item(
            TableName=self.config["table"],
            Key=to_request(record["dynamodb"]["Keys"]),
            ConsistentRead=True,
            ProjectionExpression="#due",
            ExpressionAttributeNames={"#due": attribute},
        )
        value = (decode_image(found.get("Item")) or {}).get(attribute)
        return value if isinstance(value, int | float | Decimal) and not isinstance(value, bool) else None

    def _unschedule(self, record: DynamoDBStreamRecord, name: str) -> None:
        """Delete the item's schedule (one per item, whatever its due time), unless the item holds a due time again:
        then a record after this one gave it that time and made the schedule for it, and this is an old record
        handled again (an out-of-order replay, a redrive) whose delete would leave that time to TTL's delay."""
        from st_core import schedules  # precise mode only: plain ttl never compiles it

        if self._held_due(record) is not None:
            self._stale(name, "unschedule")
            return
        schedules.delete(self.clients, self.config["scheduler"]["group"], name)
        self._warn_if_firing(record, name)

    def _warn_if_firing(self, record: DynamoDBStreamRecord, name: str) -> None:
        """The item left a due time (a move, a delete, TTL's own deletion) when that time's schedule may already have
        been running: a delete or update of a schedule cannot stop a firing under way. Its UpdateItem then fails
        its condition (the item no longer holds that time), Scheduler does not retry a failed condition, and the
        firing lands in the target DLQ, raising the DLQ alarm. Nothing is lost or sent twice by it (the item's
        current state is handled by its own records); this line names the dead letter for the operator."""
        from st_core import schedules

        old = (decode_image(record["dynamodb"].get("OldImage")) or {}).get(self.config["timeAttribute"])
        try:
            due = expiry({"due": old}, "due")
        except PermanentError:
            return
        if schedules.may_be_firing(due, self.now()):
            log.warning(
                "stale-firing-possible",
                schedule=name,
                dueAt=format_due(due),
                note="a ConditionalCheckFailedException of this schedule in the target DLQ is this firing: no action",
            )

    def _stale(self, name: str, call: str) -> None:
        log.debug("schedule-stale", schedule=name, skipped=call)

    def _schedule(self, record: DynamoDBStreamRecord, name: str, due: datetime) -> None:
        data = record["dynamodb"]
        attribute = self.config["timeAttribute"]
        if record["eventName"] == "MODIFY":
            old = (data.get("OldImage") or {}).get(attribute)
            if old == data["NewImage"][attribute]:
                log.debug("unchanged", schedule=name)
                return
        from st_core import schedules  # precise mode only

        if self._held_due(record) != (decode_image(data["NewImage"]) or {}).get(attribute):
            # The item has left this due time since this record (or is gone): the record that moved or deleted it
            # comes after this one and sets the schedule itself. Only an old record handled again (Lambda replaying
            # a batch after a newer one, a redrive) gets here; making the schedule for its time would undo the move:
            # the old time would fire, fail its condition and land in the target DLQ, and the new time would wait
            # for TTL. One consistent read per schedule made.
            self._stale(name, "schedule")
            return
        scheduler = self.config["scheduler"]
        if record["eventName"] == "MODIFY":
            self._warn_if_firing(record, name)  # a move: the old time's firing may be under way
        # Scheduler's universal target takes DynamoDB JSON as Lambda delivers it (binary as base64 text).
        request = fire_request(self.config["table"], data["Keys"], attribute, data["NewImage"][attribute])
        now = self.now()
        if due <= now:
            # Due already: fire it now, as its schedule would; that MODIFY comes back here and executes.
            schedules.delete(self.clients, scheduler["group"], name)
            direct = {
                **request,
                "Key": to_request(request["Key"]),
                "ExpressionAttributeValues": to_request(request["ExpressionAttributeValues"]),
            }
            try:
                self.clients.get("dynamodb").update_item(**direct)
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
                target=schedule_target(UPDATE_ITEM_UNIVERSAL_TARGET, scheduler, json.dumps(request)),
                description=f"scheduled-table {MODE} precise {self.config['table']}",
                key=schedules.payload_key(scheduler),
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
    log.invoked(context)
    return handle_batch(event, load_config())
