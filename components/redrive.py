"""Getting parked work back after a fix: the poison queue, the stream DLQ and the target DLQ of one ScheduledTable.

Pure logic over injected boto3 clients (`client(service)`), so it runs against AWS, the local cloud and moto alike;
`cli.py` is the thin command around it. Everything is found from the consumer function alone: its
`SCHEDULED_TABLE_CONFIG` names the poison queue, the target and the target DLQ; its event source mapping names the
stream DLQ (the on-failure destination) and the filter the records passed.

Replays go through the deployed consumer itself (a synthetic stream batch, invoked RequestResponse), so a redriven
record meets the same code, the same ledger and the same exactly-once checks as a redelivered one: a record that
had in fact been applied is not applied again. Lambda hands the consumer an item's records in order and the
handlers rely on it; a redrive comes after later records were applied, so it replays a record whole only while it
is its item's latest change, and otherwise only what it says of the due time the item left (`judge`). Second
precision's target dead letters go back into the release queue, never straight to the target (`_release_event`).
A message is deleted only once what it holds succeeded; anything else stays in its queue, visible again when the
run ends.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

Client = Callable[[str], Any]
Emit = Callable[[str], None]

CONFIG_VARIABLE = "SCHEDULED_TABLE_CONFIG"
UNIVERSAL_PREFIX = "arn:aws:scheduler:::aws-sdk:"
# Messages stay hidden from other readers while a run works on them; the ones kept are made visible at the end.
VISIBILITY_SECONDS = 600
# Long polling for each receive: it asks every SQS server, so an empty answer means an empty queue (short polling
# samples a few servers and may answer empty while messages wait).
WAIT_SECONDS = 1
# Lambda takes 6 MB in a RequestResponse payload; a batch of replayed records stays well under it.
INVOKE_PAYLOAD_BYTES = 5_000_000
INVOKE_RECORDS = 100
# GetRecords pages read for one failure record's range before giving up on reaching its end.
MAX_EMPTY_PAGES = 20
# Errors that mean the stream no longer holds a range: records older than 24 h are trimmed; a shard or stream that
# is gone (the table's stream disabled or replaced) takes its records with it.
EXPIRED_CODES = ("TrimmedDataAccessException", "ResourceNotFoundException", "ExpiredIteratorException")


@dataclass(frozen=True)
class Selection:
    """Which messages a redrive takes, and whether it only says what it would do."""

    reason: re.Pattern[str] | None = None  # only messages whose reason matches
    limit: int | None = None  # at most this many
    dry_run: bool = False
    wait_seconds: int = 1  # long polling of each receive


EVERYTHING = Selection()


class RedriveError(Exception):
    """What the operator must fix before a redrive can start (a wrong function name, a queue not found)."""


# -- the stack, found from its consumer function --------------------------------------------------------------------


@dataclass(frozen=True)
class Stack:
    function: str
    config: dict[str, Any]
    poison_url: str
    stream_dlq_url: str | None
    target_dlq_url: str | None
    filters: list[dict[str, Any]]


def error_code(error: BaseException) -> str:
    response = getattr(error, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    return str(code) if code else type(error).__name__


def queue_url(client: Client, arn: str) -> str:
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise RedriveError(f"{arn!r} is not an SQS queue ARN")
    answer = client("sqs").get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])
    return str(answer["QueueUrl"])


def discover(client: Client, function: str) -> Stack:
    """The stack's queues and the mapping's filters, from the consumer function (the `function_name` output)."""
    lam = client("lambda")
    try:
        configuration = lam.get_function_configuration(FunctionName=function)
    except Exception as error:
        raise RedriveError(f"function {function!r}: {error_code(error)}: {error}") from error
    raw = (configuration.get("Environment") or {}).get("Variables", {}).get(CONFIG_VARIABLE)
    if not raw:
        raise RedriveError(f"function {function!r} has no {CONFIG_VARIABLE}: name a ScheduledTable's function_name")
    config: dict[str, Any] = json.loads(raw)
    mappings = lam.list_event_source_mappings(FunctionName=function).get("EventSourceMappings", [])
    stream_dlq_url = None
    filters: list[dict[str, Any]] = []
    for mapping in mappings:
        destination = ((mapping.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if destination:
            stream_dlq_url = queue_url(client, destination)
        for item in (mapping.get("FilterCriteria") or {}).get("Filters") or []:
            filters.append(json.loads(item["Pattern"]))
    target_dlq_url = None
    if config.get("polling", {}).get("deadLetterUrl"):
        target_dlq_url = str(config["polling"]["deadLetterUrl"])
    elif config.get("scheduler", {}).get("deadLetterArn"):
        target_dlq_url = queue_url(client, config["scheduler"]["deadLetterArn"])
    return Stack(function, config, str(config["poisonQueueUrl"]), stream_dlq_url, target_dlq_url, filters)


# -- queue handling ------------------------------------------------------------------------------------------------


@dataclass
class Message:
    id: str
    receipt: str
    body: str
    attributes: dict[str, str] = field(default_factory=dict)


class Queue:
    """Reads a queue once through: each message is received (and hidden) at most once per run; `finish` deletes the
    ones that succeeded and makes every other one visible again at once, so the next run or reader sees it."""

    def __init__(self, client: Client, url: str, *, wait_seconds: int = 1) -> None:
        self.sqs = client("sqs")
        self.url = url
        self.wait_seconds = wait_seconds
        self.held: dict[str, Message] = {}

    def messages(self) -> Iterator[Message]:
        """Every message visible now, each once. Long polling (`wait_seconds` > 0) asks every SQS server, so an
        empty answer means the queue has nothing visible; short polling may miss messages."""
        while True:
            answer = self.sqs.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=VISIBILITY_SECONDS,
                WaitTimeSeconds=self.wait_seconds,
                MessageAttributeNames=["All"],
            )
            batch = answer.get("Messages", [])
            fresh = [m for m in batch if m["MessageId"] not in self.held]
            for raw in batch:
                attributes = {k: str(v.get("StringValue", "")) for k, v in (raw.get("MessageAttributes") or {}).items()}
                self.held[raw["MessageId"]] = Message(raw["MessageId"], raw["ReceiptHandle"], raw["Body"], attributes)
            if not fresh:
                return
            for raw in fresh:
                yield self.held[raw["MessageId"]]

    def delete(self, message: Message) -> None:
        self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message.receipt)
        self.held.pop(message.id, None)

    def release(self) -> None:
        """Make every message still held visible again."""
        held = list(self.held.values())
        for start in range(0, len(held), 10):
            entries = [
                {"Id": str(i), "ReceiptHandle": m.receipt, "VisibilityTimeout": 0}
                for i, m in enumerate(held[start : start + 10])
            ]
            self.sqs.change_message_visibility_batch(QueueUrl=self.url, Entries=entries)
        self.held.clear()


# -- the report ----------------------------------------------------------------------------------------------------


@dataclass
class Report:
    """Counts by outcome, and the lines printed, one per message (or record) plus the summary."""

    emit: Emit
    counts: dict[str, int] = field(default_factory=dict)
    # Outcomes that mean something in scope could not be redriven: the command exits non-zero.
    unresolved: tuple[str, ...] = ("failed", "parked again", "expired", "cannot replay", "cannot resend")

    def line(self, outcome: str, what: str, detail: str = "") -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        self.emit(f"{outcome:<14} {what}" + (f"  {detail}" if detail else ""))

    def summary(self, queue: str) -> str:
        parts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.counts.items())) or "nothing to do"
        return f"{queue}: {parts}"

    @property
    def ok(self) -> bool:
        return not any(self.counts.get(outcome) for outcome in self.unresolved)


def _short(value: object, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- stream records -------------------------------------------------------------------------------------------------


def sequence_order(record: dict[str, Any]) -> int:
    sequence = str((record.get("dynamodb") or {}).get("SequenceNumber", ""))
    return int(sequence) if sequence.isdigit() else 0


def record_keys(record: object) -> str:
    """The item's keys as plain JSON for a line of output (DynamoDB JSON unwrapped), best effort."""
    data = record.get("dynamodb") if isinstance(record, dict) else None
    keys = data.get("Keys") if isinstance(data, dict) else None
    if not isinstance(keys, dict):
        return "(no keys)"
    plain = {k: next(iter(v.values())) if isinstance(v, dict) and len(v) == 1 else v for k, v in keys.items()}
    return _short(plain, 120)


def item_identity(record: dict[str, Any]) -> str:
    return json.dumps(record.get("dynamodb", {}).get("Keys"), sort_keys=True, default=str)


def lambda_shape(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A record as DynamoDB Streams' GetRecords returns it through boto3 -> the record Lambda hands the consumer:
    binary as base64 text, `ApproximateCreationDateTime` in epoch seconds, `eventSourceARN` added."""
    shaped = {**record, "eventSourceARN": stream_arn}
    return dict(json.loads(json.dumps(shaped, default=_lambda_json)))


def _lambda_json(value: object) -> object:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return int(value.timestamp())
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"{type(value).__name__} is not in a Lambda stream event")


def matches(pattern: object, value: object, present: bool = True) -> bool:
    """Lambda's event filtering (EventBridge pattern syntax) for what the component's filters use: lists of exact
    values, `{"exists": bool}`, `{"prefix": text}`, nested objects. Anything else raises, rather than replaying
    records the mapping would not have let through."""
    if isinstance(pattern, dict):
        if not isinstance(value, dict):
            return all(_absent_ok(p) for p in pattern.values()) if not present or value is None else False
        return all(matches(p, value.get(k), k in value) for k, p in pattern.items())
    if isinstance(pattern, list):
        candidates = value if isinstance(value, list) else [value]
        return any(_leaf(rule, candidate, present) for rule in pattern for candidate in candidates or [None])
    raise ValueError(f"unsupported filter pattern {pattern!r}")


def _absent_ok(pattern: object) -> bool:
    """Whether a pattern matches a field that is not there (only `exists: false` does)."""
    if isinstance(pattern, dict):
        return all(_absent_ok(p) for p in pattern.values())
    return isinstance(pattern, list) and any(isinstance(r, dict) and r.get("exists") is False for r in pattern)


def _leaf(rule: object, value: object, present: bool) -> bool:
    if isinstance(rule, dict):
        if set(rule) == {"exists"}:
            exists = present and value is not None and not isinstance(value, dict)
            return exists is bool(rule["exists"])
        if set(rule) == {"prefix"}:
            return present and isinstance(value, str) and value.startswith(str(rule["prefix"]))
        raise ValueError(f"unsupported filter rule {rule!r}")
    return present and value == rule


def passes(filters: list[dict[str, Any]], record: dict[str, Any]) -> bool:
    """No filter lets everything through; otherwise any one pattern must match (Lambda ORs them)."""
    return not filters or any(matches(f, record) for f in filters)


# -- invoking the consumer ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Invocation:
    failures: list[str]
    error: str | None = None


def invoke(client: Client, function: str, records: list[dict[str, Any]]) -> Invocation:
    """One synthetic stream batch through the consumer, as Lambda's event source mapping would hand it over."""
    payload = json.dumps({"Records": records}, separators=(",", ":")).encode("utf-8")
    try:
        answer = client("lambda").invoke(FunctionName=function, InvocationType="RequestResponse", Payload=payload)
    except Exception as error:
        return Invocation([], f"{error_code(error)}: {_short(str(error))}")
    body = answer["Payload"].read() if answer.get("Payload") is not None else b""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    if answer.get("FunctionError"):
        return Invocation([], f"the function failed ({answer['FunctionError']}): {_short(text)}")
    try:
        response = json.loads(text) if text.strip() else None
    except ValueError:
        return Invocation([], f"the function answered something that is not JSON: {_short(text)}")
    failures = (response or {}).get("batchItemFailures") or [] if isinstance(response, dict) else []
    return Invocation([str((f or {}).get("itemIdentifier") or "") for f in failures])


def chunks(records: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    size = 0
    for record in records:
        record_size = len(json.dumps(record, separators=(",", ":")).encode("utf-8")) + 1
        if chunk and (len(chunk) >= INVOKE_RECORDS or size + record_size > INVOKE_PAYLOAD_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(record)
        size += record_size
    if chunk:
        yield chunk


@dataclass(frozen=True)
class Settled:
    done: list[dict[str, Any]]
    failed: list[tuple[dict[str, Any], str]]


def _runtime(name: str) -> Any:
    from .packaging import runtime_module

    return runtime_module(name)


def current_item(client: Client, stack: Stack, record: dict[str, Any]) -> dict[str, Any] | None:
    """The item the record is about, as it is now (read consistently). The record's keys are Lambda's (binary as
    base64 text): boto3 wants bytes, or it encodes the text a second time and asks for another item."""
    keys = _runtime("stream").to_request((record.get("dynamodb") or {}).get("Keys") or {})
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
    if stack.config.get("mode") == "polling":  # the assigner's own attributes change after every user write
        ignored = _runtime("pending").INDEX_ATTRIBUTES

    def plain(image: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in json.loads(json.dumps(image, default=_lambda_json)).items() if k not in ignored}

    return plain(now) != plain((record.get("dynamodb") or {}).get("NewImage") or {})


def stateless(stack: Stack) -> bool:
    """Modes whose records replay in any order: `aggregate` records are increments, each counted once by its id;
    plain `ttl` records are TTL's deletions of items that are gone, each acted on once."""
    mode = stack.config.get("mode")
    return mode == "aggregate" or (mode == "ttl" and not (stack.config.get("ttl") or {}).get("precise"))


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
            return ("at", _runtime("timeparse").parse_due(value, _runtime("recurrence").zone(zone_name)))
        return ("at", _runtime("timeparse").parse_due(value))
    except Exception:  # the handler parks such an image's record: nothing was scheduled for it
        return None


def occurrence_names(config: dict[str, Any], record: dict[str, Any], image: dict[str, Any]) -> list[tuple[str, Any]]:
    """The schedules the eventbridge handler makes for an image of the record's item: (name, when it acts), named
    by the handlers' own `naming.occurrence_id` and `naming.recurring_name`."""
    spec = due_spec(config, image)
    if spec is None:
        return []
    stream, naming = _runtime("stream"), _runtime("naming")
    identity = stream.key_identity(record)
    keys = stream.decode_image(record["dynamodb"]["Keys"]) or {}
    if spec[0] == "recurring":
        return [(naming.recurring_name(identity, keys), None)]
    due = spec[1]
    offsets = (config.get("eventbridge") or {}).get("offsets") or [0]
    return [(naming.occurrence_id(identity, keys, due, int(o)), due + timedelta(seconds=int(o))) for o in offsets]


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
    decode = _runtime("stream").decode_image
    data = record.get("dynamodb") or {}
    old = decode(data.get("OldImage"))
    old_spec = due_spec(config, old)
    new_spec = due_spec(config, decode(data.get("NewImage"))) if record.get("eventName") != "REMOVE" else None
    if old is None or old_spec is None or old_spec == new_spec:
        return Verdict(None, f"{later}; it left no due time (it had none, or kept it): not replayed")
    if due_spec(config, decode(now)) == old_spec:
        return Verdict(None, f"{later}, and the item holds that time again (its schedule is the current one)")
    changed = _changed(record)
    occurrences = occurrence_names(config, record, old)
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
    image = json.loads(json.dumps(now, default=_lambda_json))  # as Lambda delivers it: binary as base64 text
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
    old = _runtime("stream").decode_image(data.get("OldImage")) or {}
    value = old.get(stack.config["timeAttribute"])
    identity = record.get("userIdentity") or {}
    due = None
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        due = _runtime("timeparse").parse_due(value)
    by_ttl = identity.get("type") == "Service" and identity.get("principalId") == "dynamodb.amazonaws.com"
    came = by_ttl or (due is not None and _changed(record) >= _runtime("timeparse").minute_start(due))
    if came:
        note = f"{later}: the deletion came at its due time, so it still acts (once)"
        then = None
        if now is not None and now.get(stack.config["timeAttribute"]) is not None:
            then = _current_state(record, now)
            note += "; then the item's current schedule is made again"
        return Verdict(record, note, whole=False, then=then)
    return Verdict(None, f"{later}; a cancel of the item's schedule, which the later change made again or deleted")


def replay(client: Client, function: str, records: list[dict[str, Any]]) -> Settled:
    """Every record through the consumer, in stream order, with Lambda's contract for the answer: records before
    the lowest reported sequence number succeeded, the reported one failed, and the ones after it were not
    confirmed, so they go again (the handlers are safe to run twice on a record: that is what redelivery is). A
    failed record holds back the later records of the same item, as the stream would."""
    pending = sorted(records, key=sequence_order)
    done: list[dict[str, Any]] = []
    failed: list[tuple[dict[str, Any], str]] = []

    def fail(record: dict[str, Any], reason: str) -> None:
        nonlocal pending
        failed.append((record, reason))
        identity = item_identity(record)
        later = [r for r in pending if item_identity(r) == identity]
        pending = [r for r in pending if item_identity(r) != identity]
        failed.extend((r, "held back: an earlier record of the same item failed") for r in later)

    while pending:
        chunk = next(chunks(pending))
        pending = pending[len(chunk) :]
        result = invoke(client, function, chunk)
        if result.error is not None:
            for record in chunk:
                fail(record, result.error)
            continue
        if not result.failures:
            done.extend(chunk)
            continue
        sequences = [str(r["dynamodb"]["SequenceNumber"]) for r in chunk]
        reported = [sequences.index(s) for s in result.failures if s in sequences]
        if len(reported) != len(result.failures):
            # Lambda fails the whole batch for an identifier it does not know (empty, null, another batch's).
            for record in chunk:
                fail(record, f"the function reported unknown batchItemFailures {_short(result.failures)}")
            continue
        first = min(reported)
        done.extend(chunk[:first])
        pending = chunk[first + 1 :] + pending
        fail(chunk[first], "reported in batchItemFailures again (transient: see the function's log)")
    return Settled(done, failed)


# -- from the poison queue ------------------------------------------------------------------------------------------


@dataclass
class Parked:
    message: Message
    body: dict[str, Any]
    reason: str

    @property
    def record(self) -> Any:
        return self.body.get("record")

    @property
    def identity(self) -> tuple[str, str]:
        record = self.record if isinstance(self.record, dict) else {}
        return str(record.get("eventID")), str((record.get("dynamodb") or {}).get("SequenceNumber"))

    def describe(self) -> str:
        return f"{record_keys(self.record)} {self.body.get('eventName') or ''} failedAt={self.body.get('failedAt')}"


def replay_problem(body: dict[str, Any]) -> str:
    """Why a parked record cannot be replayed as it is, or "" when it can."""
    from .packaging import runtime_module

    note = str(body.get("note") or "")
    if "record" not in body or "trimmed" in note or "omitted" in note:
        return (
            f"{note or 'no record'}: the message keeps only the keys (the record was larger than an SQS message); "
            "write the item again to make a new record, then delete this message"
        )
    problem: str = runtime_module("stream").record_problem(body["record"])
    if problem:
        return f"not a stream record Lambda could send ({problem}): nothing to replay; delete it once understood"
    return ""


def poison(
    client: Client,
    stack: Stack,
    report: Report,
    choice: Selection = EVERYTHING,
) -> Report:
    """Re-run parked records through the consumer. Several messages of one record (parked on two deliveries) are
    replayed once and deleted together. A record parked again by the replay has a new message with the new reason,
    so its old message is deleted too; it is reported as parked again (and the command fails).

    Ordering (`judge`): a record is replayed whole only while it is its item's latest change: no newer record of
    the item is parked (every message is read for that, also those --reason or --max leave out) and the item is
    still what the record made it. Otherwise only what it says of the due time the item left is replayed. An item's
    records go in sequence order, and a failed one holds back the item's later ones (`replay`)."""
    reason, limit, dry_run, wait_seconds = choice.reason, choice.limit, choice.dry_run, choice.wait_seconds
    queue = Queue(client, stack.poison_url, wait_seconds=wait_seconds)
    selected: dict[tuple[str, str], list[Parked]] = {}
    newest: dict[str, int] = {}
    try:
        for message in queue.messages():
            try:
                body = json.loads(message.body)
            except ValueError:
                body = {"reason": "", "note": "not JSON"}
            if not isinstance(body, dict):
                body = {"reason": "", "note": "not a JSON object"}
            parked = Parked(message, body, str(body.get("reason") or ""))
            if isinstance(parked.record, dict) and isinstance(parked.record.get("dynamodb"), dict):
                key = item_identity(parked.record)
                newest[key] = max(newest.get(key, 0), sequence_order(parked.record))
            if limit is not None and sum(len(v) for v in selected.values()) >= limit:
                continue
            if reason is not None and not reason.search(parked.reason):
                continue
            problem = replay_problem(body)
            if problem:
                report.line("cannot replay", parked.describe(), f"reason={_short(parked.reason, 120)!r}; {problem}")
                continue
            selected.setdefault(parked.identity, []).append(parked)
        verdicts: dict[tuple[str, str], Verdict] = {}
        for identity, group in list(selected.items()):
            record = group[0].record
            verdict = judge(client, stack, record, newest.get(item_identity(record), 0))
            if verdict.send is None:
                del selected[identity]
                report.line("would skip" if dry_run else "superseded", group[0].describe(), verdict.note)
                if not dry_run:
                    for parked in group:
                        queue.delete(parked.message)
                continue
            verdicts[identity] = verdict
        if dry_run:
            for identity, group in selected.items():
                first = group[0]
                copies = f" ({len(group)} messages)" if len(group) > 1 else ""
                note = "" if verdicts[identity].whole else f"; {verdicts[identity].note}"
                report.line("would replay", first.describe() + copies, f"reason={_short(first.reason, 160)!r}{note}")
            return report
        owner = {_identity(r): identity for identity, verdict in verdicts.items() for r in verdict.records}
        settled = replay(client, stack.function, [r for verdict in verdicts.values() for r in verdict.records])
        failed: dict[tuple[str, str], str] = {}
        for record, why in settled.failed:
            failed.setdefault(owner[_identity(record)], why)
        done = [identity for identity in verdicts if identity not in failed]
        replayed = set(done)
        for identity in done:
            for parked in selected[identity]:
                queue.delete(parked.message)
        for identity, why in failed.items():
            report.line("failed", selected[identity][0].describe(), why)
        # A replayed record the handler parked again has a new message now: tell it apart from a success.
        again = {}
        for message in queue.messages():
            try:
                body = json.loads(message.body)
            except ValueError:
                continue
            if isinstance(body, dict):
                identity = Parked(message, body, "").identity
                if identity in replayed:
                    again[identity] = str(body.get("reason") or "")
        for identity in done:
            first = selected[identity][0]
            if identity in again:
                report.line("parked again", first.describe(), f"new reason={_short(again[identity], 160)!r}")
            else:
                note = "" if verdicts[identity].whole else f"; {verdicts[identity].note}"
                report.line("replayed", first.describe(), f"was: {_short(first.reason, 120)!r}{note}")
        return report
    finally:
        queue.release()


def _identity(record: dict[str, Any]) -> tuple[str, str]:
    return str(record.get("eventID")), str((record.get("dynamodb") or {}).get("SequenceNumber"))


# -- from the stream DLQ --------------------------------------------------------------------------------------------


class Expired(Exception):
    """The stream no longer holds the range (DynamoDB Streams keeps records for 24 hours)."""


def read_range(client: Client, info: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of one on-failure record's range, in Lambda's shape, read from the stream while it holds them."""
    streams = client("dynamodbstreams")
    stream_arn, shard = str(info["streamArn"]), str(info["shardId"])
    start, end = str(info["startSequenceNumber"]), int(str(info["endSequenceNumber"]))
    try:
        iterator = streams.get_shard_iterator(
            StreamArn=stream_arn, ShardId=shard, ShardIteratorType="AT_SEQUENCE_NUMBER", SequenceNumber=start
        ).get("ShardIterator")
        records: list[dict[str, Any]] = []
        empty = 0
        while iterator and empty < MAX_EMPTY_PAGES:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            got = page.get("Records", [])
            empty = 0 if got else empty + 1
            for record in got:
                if sequence_order(record) > end:
                    return records
                records.append(lambda_shape(record, stream_arn))
                if sequence_order(record) == end:
                    return records
            iterator = page.get("NextShardIterator")
    except Exception as error:
        if error_code(error) in EXPIRED_CODES:
            raise Expired(f"{error_code(error)}: {_short(str(error), 160)}") from error
        raise
    if records and sequence_order(records[-1]) >= end:
        return records
    raise Expired(f"the shard ended before sequence number {end} ({len(records)} records read)")


def stream_dlq(
    client: Client,
    stack: Stack,
    report: Report,
    choice: Selection = EVERYTHING,
) -> Report:
    """Re-invoke the consumer with each failed batch's records, read again from the stream; the message is deleted
    once every record of its range succeeded (or was parked with a reason: the poison queue has it then)."""
    reason, limit, dry_run, wait_seconds = choice.reason, choice.limit, choice.dry_run, choice.wait_seconds
    if stack.stream_dlq_url is None:
        raise RedriveError(f"{stack.function} has no event source mapping with an on-failure destination")
    queue = Queue(client, stack.stream_dlq_url, wait_seconds=wait_seconds)
    taken = 0
    try:
        for message in queue.messages():
            if limit is not None and taken >= limit:
                break
            try:
                body = json.loads(message.body)
                info = body["DDBStreamBatchInfo"]
                what = f"shard {info['shardId']} {info['startSequenceNumber']}..{info['endSequenceNumber']}"
            except (ValueError, KeyError, TypeError):
                report.line("cannot replay", f"message {message.id}", "not a DynamoDB stream on-failure record")
                continue
            context = body.get("requestContext") or {}
            why = f"{context.get('condition')}; {(body.get('responseContext') or {}).get('functionError')}"
            if reason is not None and not reason.search(why):
                continue
            taken += 1
            what += f" ({info.get('batchSize')} records from {info.get('approximateArrivalOfFirstRecord')})"
            try:
                records = read_range(client, info)
            except Expired as gone:
                report.line("expired", what, f"the stream no longer holds this range (kept: 24 h retention): {gone}")
                continue
            passing = [r for r in records if passes(stack.filters, r)]
            newest: dict[str, int] = {}
            for record in passing:
                newest[item_identity(record)] = max(newest.get(item_identity(record), 0), sequence_order(record))
            verdicts = [judge(client, stack, r, newest[item_identity(r)]) for r in passing]
            chosen = [r for v in verdicts for r in v.records]
            counted = f"{len(passing)} of {len(records)} records pass the mapping's filter"
            partly = sum(1 for v in verdicts if v.send is not None and not v.whole)
            if partly:
                counted += f", {partly} replayed only for the due time they left (the item changed after them)"
            if len(chosen) < len(passing):
                counted += f", {len(passing) - len(chosen)} superseded by the item's later changes (not replayed)"
            if dry_run:
                report.line("would replay", what, f"{counted}; {why}")
                continue
            settled = replay(client, stack.function, chosen)
            if settled.failed:
                record, failure = settled.failed[0]
                report.line("failed", what, f"{len(settled.failed)} failed, first {record_keys(record)}: {failure}")
                continue
            queue.delete(message)
            report.line("replayed", what, counted)
        return report
    finally:
        queue.release()


# -- from the target DLQ --------------------------------------------------------------------------------------------


def _dispatch() -> Any:
    from .packaging import runtime_module

    return runtime_module("dispatch")


class _Clients:
    """The handlers' client registry, answered by the injected clients (so `send_now` uses our endpoint)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def get(self, service: str) -> Any:
        return self.client(service)


def universal_call(client: Client, arn: str, payload: str) -> str:
    """A Scheduler universal target (`arn:aws:scheduler:::aws-sdk:<service>:<action>`) called as Scheduler would:
    the schedule's Input is the request. A conditional delete whose condition fails found the item changed or gone
    (a later write took over); nothing is left to do."""
    from botocore import xform_name

    service, action = arn.removeprefix(UNIVERSAL_PREFIX).split(":", 1)
    request = json.loads(payload)
    try:
        getattr(client(service), xform_name(action[:1].upper() + action[1:]))(**request)
    except Exception as error:
        if error_code(error) == "ConditionalCheckFailedException":
            return "the item changed since: the condition failed, nothing to do"
        raise
    return f"{service}.{action}"


def target_dlq(
    client: Client,
    stack: Stack,
    report: Report,
    choice: Selection = EVERYTHING,
) -> Report:
    """Send each dead-lettered due event to the target again; the message is deleted once the target took it.
    Scheduler's messages (eventbridge, precise ttl) hold the schedule's Input as their body; polling's hold the keys,
    the item and the due time, from which the same due event is built again."""
    reason, limit, dry_run, wait_seconds = choice.reason, choice.limit, choice.dry_run, choice.wait_seconds
    if stack.target_dlq_url is None:
        raise RedriveError(f"{stack.function}'s table has no target DLQ (mode {stack.config.get('mode')})")
    queue = Queue(client, stack.target_dlq_url, wait_seconds=wait_seconds)
    polling = stack.config.get("mode") == "polling"
    taken = 0
    try:
        for message in queue.messages():
            if limit is not None and taken >= limit:
                break
            try:
                send, what, why = (_polling_event if polling else _scheduler_event)(client, stack, message)
            except (ValueError, KeyError, TypeError) as problem:
                report.line("cannot resend", f"message {message.id}", f"{type(problem).__name__}: {problem}")
                continue
            if reason is not None and not reason.search(why):
                continue
            taken += 1
            if dry_run:
                report.line("would resend", what, f"reason={_short(why, 160)!r}")
                continue
            try:
                detail = send()
            except Exception as error:
                report.line("failed", what, f"{error_code(error)}: {_short(str(error), 200)}")
                continue
            queue.delete(message)
            report.line("resent", what, detail)
        return report
    finally:
        queue.release()


Prepared = tuple[Callable[[], str], str, str]


def _scheduler_event(client: Client, stack: Stack, message: Message) -> Prepared:
    """A Scheduler dead-letter event: the body is the target's Input; ERROR_CODE, ERROR_MESSAGE, SCHEDULE_ARN and
    TARGET_ARN come as message attributes."""
    attributes = message.attributes
    why = f"{attributes.get('ERROR_CODE', '')}: {attributes.get('ERROR_MESSAGE', '')}"
    target_arn = attributes.get("TARGET_ARN") or stack.config["target"]["arn"]
    payload = message.body
    document = json.loads(payload)
    schedule = attributes.get("SCHEDULE_ARN", "").rsplit("/", 1)[-1]
    if isinstance(document, dict) and _release().ENVELOPE in document:
        return _release_event(client, stack, message, why)
    if isinstance(document, dict) and "dueAt" in document:
        what = f"{_short(document.get('keys'), 120)} dueAt={document['dueAt']} schedule={schedule or '?'}"
    else:
        what = f"schedule={schedule or '?'} {_short(document, 120)}"
    if target_arn.startswith(UNIVERSAL_PREFIX):
        return (lambda: universal_call(client, target_arn, payload)), what, why
    # The due event's own occurrenceId; before it had one, a one-time schedule's name was already that id.
    occurrence = message.id
    if isinstance(document, dict) and "dueAt" in document:
        occurrence = str(document.get("occurrenceId") or schedule or message.id)

    return _sender(client, stack, payload, occurrence), what, why


def _sender(client: Client, stack: Stack, payload: str, occurrence: str) -> Callable[[], str]:
    """Send `payload` to the stack's target through the handlers' dispatch, under the occurrence's name."""
    dispatch = _dispatch()

    def send() -> str:
        dispatch.send_now(stack.config["target"], payload, occurrence=occurrence, clients=_Clients(client))
        return f"to {stack.config['target']['kind']} {stack.config['target']['arn']}"

    return send


def _release() -> Any:
    from .packaging import runtime_module

    return runtime_module("release")


def _release_event(client: Client, stack: Stack, message: Message, why: str) -> Prepared:
    """A dead letter of `precision="second"` (Scheduler's, for a release schedule that could not reach the release
    queue, or the releaser's, for a target that refused): the release envelope goes back into the release queue,
    held until its due second, never to the target. The releaser then does what it does for every release: sends it
    on only at its second, only if the item still holds that due time (a cancelled occurrence is dropped), and only
    through the occurrence's ledger claim (one delivered since is not delivered again)."""
    release = _release().parse(message.body)
    if not _release().enabled(stack.config):
        raise ValueError("a release envelope, but the function's table has no release queue (precision is not second)")
    queue = _release().queue_url(stack.config)
    what = f"{record_keys({'dynamodb': {'Keys': release.keys}})} dueAt={release.due:%Y-%m-%dT%H:%M:%SZ} (second)"

    def send() -> str:
        from datetime import UTC

        delay = _release().delay_seconds(release.due, datetime.now(UTC))
        _release().enqueue(_Clients(client), stack.config, message.body, delay)
        return f"to the release queue {queue} (held {delay} s): released at its second if the item still holds it"

    return send, what, why


def _polling_event(client: Client, stack: Stack, message: Message) -> Prepared:
    """A polling dead letter: the same due event as the processor's, under the same occurrence name."""
    body = json.loads(message.body)
    if "dueAt" not in body:
        raise ValueError("no dueAt: dead-lettered by a version before redrive; send it by hand from its keys")
    from .packaging import runtime_module

    dispatch = _dispatch()
    due = runtime_module("timeparse").parse_due(body["dueAt"])
    item = body.get("item") or {}
    # Dead letters carry the occurrence's id (older ones a name of their own: kept, so a redrive dedupes as before).
    occurrence = str(body.get("occurrence") or message.id)
    event = dispatch.due_event(
        mode="polling", table=body["table"], keys=body["keys"], due=due, item=item, occurrence=occurrence
    )
    if "trimmed" in str(body.get("note") or "") or not item:
        event["item"], event["itemTrimmed"] = {}, True
    what = f"{_short(body['keys'], 120)} dueAt={body['dueAt']} attempts={body.get('attempts')}"
    target = stack.config["target"]

    def send() -> str:
        payload = dispatch.target_input(target, event)
        dispatch.send_now(target, payload, occurrence=occurrence, clients=_Clients(client))
        return f"to {target['kind']} {target['arn']}"

    return send, what, str(body.get("reason") or "")


def replace_queue(stack: Stack, source: str, url: str) -> Stack:
    """The stack with the queue of one redrive source (poison, stream, target) named by the operator instead."""
    if source == "poison":
        return dataclasses.replace(stack, poison_url=url)
    if source == "stream":
        return dataclasses.replace(stack, stream_dlq_url=url)
    return dataclasses.replace(stack, target_dlq_url=url)
