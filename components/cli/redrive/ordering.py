"""The ordering rule: Lambda hands the consumer an item's records in order and the handlers rely on it; a redrive
comes after later records were applied, so it replays a record whole only while it is its item's latest change, and
otherwise only what it says of the due time the item left (`judge`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from ... import modes
from ...packaging import error_code, runtime_module
from ..aws import Client
from .discovery import Stack
from .records import lambda_json, sequence_order


def current_item(client: Client, stack: Stack, record: dict[str, Any]) -> dict[str, Any] | None:
    """The item the record is about, as it is now (read consistently). The record's keys are Lambda's (binary as
    base64 text): boto3 wants bytes, or it encodes the text a second time and asks for another item."""
    keys = runtime_module("stream").to_request((record.get("dynamodb") or {}).get("Keys") or {})
    found = client("dynamodb").get_item(TableName=stack.config["table"], Key=keys, ConsistentRead=True)
    item = found.get("Item")
    return dict(item) if item is not None else None


def moved_on(stack: Stack, record: dict[str, Any], now: dict[str, Any] | None) -> bool:
    """True when the item is no longer what this record made it (its NewImage, or absent after a REMOVE): a later
    change was made after it."""
    if record.get("eventName") == "REMOVE":
        return now is not None
    if now is None:
        return True
    ignored: tuple[str, ...] = ()
    if modes.operated(stack.config).due_index:  # the assigner's own attributes change after every user write
        ignored = runtime_module("pending").INDEX_ATTRIBUTES

    def plain(image: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in json.loads(json.dumps(image, default=lambda_json)).items() if k not in ignored}

    return plain(now) != plain((record.get("dynamodb") or {}).get("NewImage") or {})


def stateless(stack: Stack) -> bool:
    """Modes whose records replay in any order: `aggregate` records are increments, each counted once by its id;
    plain `ttl` records are TTL's deletions of items that are gone, each acted on once."""
    return not modes.operated(stack.config).ordered_by_item


# What an item's due time attribute holds, as the eventbridge handler reads it: ("at", instant), ("recurring",
# "") (one schedule per item whatever its rule), or None (no time, or one the handler cannot use: nothing was
# scheduled for it).
DueSpec = tuple[str, Any] | None


def due_spec(config: dict[str, Any], image: dict[str, Any] | None) -> DueSpec:
    """The due time a plain image holds, with the handler's own parsing (formats, the item's time zone)."""
    if image is None or image.get(config["timeAttribute"]) is None:
        return None
    value = image[config["timeAttribute"]]
    if isinstance(value, str) and value.strip().startswith(("rate(", "cron(")):
        return ("recurring", "")
    zone_attribute = (config.get("eventbridge") or {}).get("timeZoneAttribute")
    zone_name = image.get(zone_attribute) if zone_attribute else None
    try:
        if isinstance(zone_name, str) and zone_name:
            return ("at", runtime_module("timeparse").parse_due(value, runtime_module("recurrence").zone(zone_name)))
        return ("at", runtime_module("timeparse").parse_due(value))
    except Exception:  # the handler parks such an image's record: nothing was scheduled for it
        return None


def schedules_of(config: dict[str, Any], record: dict[str, Any], image: dict[str, Any]) -> list[tuple[str, Any]]:
    """The schedules the eventbridge handler makes for an image of the record's item: (name, when it acts), named
    by the handlers' own `naming.occurrence_id` and `naming.recurring_name`."""
    spec = due_spec(config, image)
    if spec is None:
        return []
    naming = runtime_module("naming")
    keys = naming.item_keys(record["dynamodb"]["Keys"], config)
    if spec[0] == "recurring":
        return [(naming.recurring_name(keys), None)]
    due = spec[1]
    offsets = (config.get("eventbridge") or {}).get("offsets") or [0]
    return [(naming.occurrence_id(keys, due, int(o)), due + timedelta(seconds=int(o))) for o in offsets]


@dataclass(frozen=True)
class Verdict:
    """What a redrive does with one parked record: `send` it (the record, or only what it says of the time the item
    left), or nothing (`send` None), and why."""

    send: dict[str, Any] | None
    note: str = ""
    whole: bool = True
    # Sent right after `send`: the item's current state again, where replaying `send` undoes what the item's later
    # change did (precise ttl: a REMOVE deletes the item's one schedule, which the item's re-creation had made).
    then: dict[str, Any] | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        return [r for r in (self.send, self.then) if r is not None]


def judge(client: Client, stack: Stack, record: dict[str, Any], newest: int) -> Verdict:
    """The ordering rule (see `poison`): a record is replayed whole only while it is its item's latest change (no
    newer parked record of the item in this run, and the item still what the record made it). Otherwise only what
    it says of the due time the item left is replayed, which stays true whatever came after: the left time's
    cancel (unless its schedules are provably gone, or the item holds that time again, so the schedule is the
    current one) or its delivery (a time that came while the item held it); what it says of the new state is
    not (the later change decided that, and replaying it would bring back a schedule the item left)."""
    if stateless(stack):
        return Verdict(record)
    now = current_item(client, stack, record)
    if sequence_order(record) >= newest and not moved_on(stack, record, now):
        return Verdict(record)
    mode = stack.config.get("mode")
    later = "a later change of the item came after it"
    if mode == "eventbridge":
        return _left_time(client, stack, record, now, later)
    if mode == "ttl" and record.get("eventName") == "REMOVE":
        return _ttl_removal(stack, record, now, later)
    return Verdict(None, f"{later}: not replayed (what it says, the later change said again)")


def _changed(record: dict[str, Any]) -> datetime:
    from datetime import UTC

    moment = (record.get("dynamodb") or {}).get("ApproximateCreationDateTime")
    if isinstance(moment, int | float) and not isinstance(moment, bool):
        return datetime.fromtimestamp(moment, UTC)
    return datetime.now(UTC)


def _left_time(client: Client, stack: Stack, record: dict[str, Any], now: dict[str, Any] | None, later: str) -> Verdict:
    """eventbridge: replay only the record's leaving of its old due time, as a REMOVE of its OldImage (same keys,
    sequence number and change time: the handler cancels each occurrence of that time that had not come when the
    item left it, and delivers, once, each that had)."""
    config = stack.config
    decode = runtime_module("stream").decode_image
    data = record.get("dynamodb") or {}
    old = decode(data.get("OldImage"))
    old_spec = due_spec(config, old)
    new_spec = due_spec(config, decode(data.get("NewImage"))) if record.get("eventName") != "REMOVE" else None
    if old is None or old_spec is None or old_spec == new_spec:
        return Verdict(None, f"{later}; it left no due time (it had none, or kept it): not replayed")
    if due_spec(config, decode(now)) == old_spec:
        return Verdict(None, f"{later}, and the item holds that time again (its schedule is the current one)")
    changed = _changed(record)
    occurrences = schedules_of(config, record, old)
    came = any(when is not None and when <= changed for _, when in occurrences)
    cancels = [name for name, when in occurrences if when is None or when > changed]
    if not came and all(_schedule_gone(client, stack, name) for name in cancels):
        return Verdict(None, f"{later}; the schedules of the time it left no longer exist: nothing to cancel")
    left = {"eventName": "REMOVE", "dynamodb": {k: v for k, v in data.items() if k != "NewImage"}}
    what = "its delivery, once: it came while the item held it" if came else "its cancel"
    return Verdict({**record, **left}, f"{later}: only the due time it left is replayed ({what})", whole=False)


def _current_state(record: dict[str, Any], now: dict[str, Any]) -> dict[str, Any]:
    """The item's current state as a stream change with no old image, just after `record` (its own event id and a
    sequence number after it, so the batch answer tells the two apart)."""
    data = record.get("dynamodb") or {}
    image = json.loads(json.dumps(now, default=lambda_json))  # as Lambda delivers it: binary as base64 text
    return {
        **{k: v for k, v in record.items() if k != "userIdentity"},
        "eventID": f"{record.get('eventID')}-current",
        "eventName": "MODIFY",
        "dynamodb": {
            "Keys": data.get("Keys"),
            "NewImage": image,
            "SequenceNumber": f"{data.get('SequenceNumber')}1",
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }


def _schedule_gone(client: Client, stack: Stack, name: str) -> bool:
    """True only when Scheduler says the schedule does not exist; any other answer leaves the cancel to be done."""
    try:
        client("scheduler").get_schedule(Name=name, GroupName=stack.config["scheduler"]["group"])
    except Exception as error:
        return error_code(error) == "ResourceNotFoundException"
    return False


def _ttl_removal(stack: Stack, record: dict[str, Any], now: dict[str, Any] | None, later: str) -> Verdict:
    """precise ttl: a deletion at or after the item's due time (or TTL's own) acted, whatever came after: replayed
    (the ledger lets its action through once). The handler deletes the item's one schedule first, which the item's
    later change (a re-creation) had made: so the item's current state follows it, as a change with no old image,
    and the handler makes that schedule again (or deletes the item at once if its time has passed). An earlier
    deletion was a cancel of that one schedule, which every later change of the item has made again or deleted:
    not replayed."""
    data = record.get("dynamodb") or {}
    old = runtime_module("stream").decode_image(data.get("OldImage")) or {}
    value = old.get(stack.config["timeAttribute"])
    identity = record.get("userIdentity") or {}
    due = None
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        due = runtime_module("timeparse").parse_due(value)
    by_ttl = identity.get("type") == "Service" and identity.get("principalId") == "dynamodb.amazonaws.com"
    came = by_ttl or (due is not None and _changed(record) >= runtime_module("timeparse").minute_start(due))
    if came:
        note = f"{later}: the deletion came at its due time, so it still acts (once)"
        then = None
        if now is not None and now.get(stack.config["timeAttribute"]) is not None:
            then = _current_state(record, now)
            note += "; then the item's current schedule is made again"
        return Verdict(record, note, whole=False, then=then)
    return Verdict(None, f"{later}; a cancel of the item's schedule, which the later change made again or deleted")
