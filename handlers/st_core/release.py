"""`precision="second"` (eventbridge mode): due events held in the table's release queue until their second.

Scheduler runs an `at()` schedule anywhere within its minute, so no schedule can name a second. Instead:

- The stream handler sets each occurrence's schedule on the minute *before* the due time's minute
  (`release_fire_time`): it runs within [M-60 s, M), wholly before a due second in [M, M+60). Its target is the
  release queue (Scheduler's SQS target, so a failure to send is Scheduler's to retry and then park in the target
  DLQ: no code of ours runs between Scheduler and the queue). The message is a release envelope: the occurrence,
  its due second, the item's keys and the due event exactly as the target will get it.
- An occurrence too close for that schedule (`may_be_firing`: less than about 70 s ahead) goes straight into the
  release queue with `DelaySeconds` = the seconds left, to the nearest second; one already due is delivered at once.
- The release consumer (`handle_messages`, an SQS event source mapping with no batching window) takes a message
  that arrived before its second (always, from a schedule) and sends it back with the seconds left as its delay
  (`DelaySeconds` <= 130 here, never near SQS's 900); a remainder of a second or less (the rounding, clock skew) it
  sleeps. Once the second has come it checks the item still holds that due time (one consistent GetItem), claims
  the occurrence in the ledger, sends the due event to the target (`dispatch.send_now`) and completes the claim.

Once per occurrence under AWS's at-least-once everything (Scheduler's rare second invocation, SQS redelivery, a
message sent twice after a crash, a redelivered stream batch delivering a past occurrence directly): every path
claims the occurrence's one ledger id before sending, and only the first claim sends. The release path's claim
takes over the schedule's SCHEDULED marker (it *is* that schedule's delivery); a direct delivery does not.

A recurring item's schedule targets the release queue too, each firing a release message (`recurring_envelope`:
Scheduler writes the firing's scheduled time into it): released at that time, not checked against the item (a
firing Scheduler ran is owed whatever the item did inside its minute), claimed under the firing's id, the one the
stream handler claims for a firing it takes over (eventbridge/recurring.py). So each firing is sent once, by
whichever path claims it first.

An item that no longer holds the due time when its second comes is not delivered by the release path: if it left
the time before the second, the stream's record of that change cancels the occurrence; if it left it after (a
write at the due second), that record settles it, and the settle delivers it through the same claim. So a
cancellation is honoured even when the stream is late, and no occurrence that came is lost. A dropped release
forgets the occurrence's schedule marker: an item written back to that due time after its second is then
delivered at once by the stream handler (once: every path claims).
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from threading import Lock
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from . import log
from .clients import CLIENTS, Clients
from .constants import RELEASE_ENVELOPE, SCHEDULER_INPUT_BYTES
from .dispatch import schedule_target, send_now
from .errors import PermanentError, advice, error_code, is_transient, persist
from .idempotency import Ledger
from .jsontext import dumps, size
from .naming import SCHEDULED_TIME, recurring_firing_id
from .poison import PoisonQueue, message_limit
from .stream import decode_image, to_request
from .timeparse import format_due, minute_start, parse_due, zone

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from .config import HandlerConfig

# The AWS actions this module's own calls need (checked by tests/iam): send to the release queue and the target DLQ,
# read the item back before a delivery.
AWS_ACTIONS = ("dynamodb:GetItem", "sqs:SendMessage")

MODE = "release"
# The key that marks a release queue message (and names its envelope).
ENVELOPE = RELEASE_ENVELOPE
# SQS holds a message back at most 15 minutes (DelaySeconds 0-900).
SQS_MAX_DELAY_SECONDS = 900
# A message this close to its second waits in the function (clock skew, rounding); farther, it goes back to SQS.
MAX_SLEEP_SECONDS = 1.0
# Scheduler's error attributes on a message parked in the target DLQ, which the release path writes the same way.
ERROR_CODE = "ERROR_CODE"
ERROR_MESSAGE = "ERROR_MESSAGE"

Clock = Callable[[], datetime]
Sleep = Callable[[float], None]


# The response's shape, for the type checker only (a plain dict at run time: see st_core/stream.py).
if TYPE_CHECKING:

    class SqsBatchItemFailure(TypedDict):
        itemIdentifier: str

    class SqsBatchResponse(TypedDict):
        batchItemFailures: list[SqsBatchItemFailure]

else:
    SqsBatchItemFailure = SqsBatchResponse = dict


def enabled(config: HandlerConfig) -> bool:
    """True on a table configured with `precision="second"`."""
    return "release" in config.get("eventbridge", {})


# -- when: pure ----------------------------------------------------------------------------------------------------


def release_fire_time(due: datetime) -> datetime:
    """The `at()` minute of an occurrence's schedule: the minute before its due time's minute. Scheduler runs it
    within [M-60 s, M), M the start of the due second's minute, so always before the due second (which is in
    [M, M+60)). M itself is the only later minute, and it may run after the due second (at(12:00) at 12:00:59 for
    12:00:07): this is the latest minute that is never late for the release."""
    return minute_start(due) - timedelta(minutes=1)


def may_be_firing(due: datetime, now: datetime) -> bool:
    """True when a release schedule for `due` may already be running, or would be made too late to be stored in
    time (closer than `schedules.MIN_LEAD`): the occurrence then goes straight into the release queue instead.
    That is up to ~70 s ahead for a due time on a minute, up to ~130 s for one at its minute's last second.
    (`schedules` is imported here, by the scheduling function that has it already: the releaser never compiles it.)"""
    from . import schedules

    return now >= release_fire_time(due) - schedules.MIN_LEAD


def may_have_started(due: datetime, now: datetime) -> bool:
    """True once a release schedule for `due` may have started to run (its minute, less the clocks' skew); see
    `schedules.may_have_started`."""
    from . import schedules

    return now >= release_fire_time(due) - schedules.CLOCK_SKEW


def delay_seconds(due: datetime, now: datetime) -> int:
    """SQS's DelaySeconds for a message that must not be sent on before `due`: the seconds left, rounded to the
    nearest second (a half up), within SQS's 0-900. Whole seconds cannot name the due second's fraction, so the
    message becomes visible up to half a second early (the releaser then sleeps the rest: `MAX_SLEEP_SECONDS`, never
    early at the target) or up to half a second late. Rounding up instead is never early at the queue but up to a
    second late (half a second on average); sleeping every fraction is never late but pays for half a second of
    Lambda time per occurrence on average. Rounding to the nearest halves the worst case of the first for a quarter
    of the cost of the second (an eighth of a second slept on average)."""
    left = math.floor((due - now).total_seconds() + 0.5)
    return max(0, min(SQS_MAX_DELAY_SECONDS, left))


# -- the envelope ----------------------------------------------------------------------------------------------------


class Release(NamedTuple):
    """What a release message carries: enough to check the item, claim the occurrence and send the due event. (A
    NamedTuple: a frozen dataclass would generate and compile its methods on every cold start.)"""

    name: str  # the occurrence's schedule name, its ledger id (a recurring firing's: `naming.recurring_firing_id`)
    due: datetime  # when it acts (the item's due time plus the offset; a recurring firing's scheduled time)
    item_due: datetime | None  # the item's due time, as the item must still hold it; None: a recurring firing
    keys: dict[str, Any]  # the item's keys, as the stream delivered them (DynamoDB JSON, binary as base64 text)
    payload: str  # the target's input, as `dispatch.target_input` made it


def envelope(release: Release) -> str:
    """The message text. The payload rides as a JSON value rather than a string (no escaping, so it is as big in
    the envelope as on its own, and `dispatch.target_input` has already kept room for the rest); `parse` gives back
    exactly the payload's text (jsontext writes sorted keys, and numbers exactly, both ways)."""
    meta: dict[str, Any] = {"name": release.name, "dueAt": format_due(release.due), "keys": release.keys}
    if release.item_due is None:
        meta["recurring"] = True
    else:
        meta["itemDueAt"] = format_due(release.item_due)
    return _text(meta, release.payload)


def recurring_envelope(schedule: str, keys: dict[str, Any], payload: str) -> str:
    """A recurring schedule's input (`precision="second"`): each firing's release message once Scheduler has
    written the firing's scheduled time where the text says `naming.SCHEDULED_TIME` (its name, its `dueAt` and the
    payload's, made by `target_input(..., via_scheduler=True)`). Scheduler writes it into the text as it stands, so
    the envelope holds the placeholder as plain JSON strings; `parse` reads the message it becomes."""
    meta = {"name": recurring_firing_id(schedule), "dueAt": SCHEDULED_TIME, "recurring": True, "keys": keys}
    return _text(meta, payload)


def _text(meta: dict[str, Any], payload: str) -> str:
    text = dumps({ENVELOPE: meta, "payload": json.loads(payload, parse_float=Decimal, parse_int=Decimal)})
    if size(text) > SCHEDULER_INPUT_BYTES:
        # Only keys near DynamoDB's 2 KB + 1 KB limits beside an item trimmed to the limit come here.
        raise PermanentError(
            f"the release message is {size(text)} bytes, over Scheduler's {SCHEDULER_INPUT_BYTES}: the item's keys "
            "are too large for precision='second'"
        )
    return text


def keys_of(body: object) -> dict[str, Any]:
    """The item's keys from a release message, or from a recurring schedule's input before Scheduler wrote a
    firing's time into it (`recurring_envelope`); PermanentError for anything else."""
    try:
        return _keys(json.loads(str(body), parse_float=Decimal, parse_int=Decimal))
    except (ValueError, KeyError, TypeError) as exc:
        raise PermanentError(f"not a release message ({type(exc).__name__}: {str(exc)[:200]})") from exc


def _keys(document: Any) -> dict[str, Any]:
    keys = document[ENVELOPE]["keys"]
    if not isinstance(keys, dict) or not keys:
        raise TypeError("keys must be a DynamoDB key")
    return keys


def parse(body: object) -> Release:
    """A release message back; PermanentError (parked with the reason) for anything else. A recurring firing's
    (`recurring`) has no item due time, and its name must be its schedule's firing id for its `dueAt`: the id the
    stream handler claims when it takes that firing over."""
    try:
        document = json.loads(str(body), parse_float=Decimal, parse_int=Decimal)
        keys = _keys(document)
        meta = document[ENVELOPE]
        name = meta["name"]
        if not isinstance(name, str):
            raise TypeError("name must be a string")
        due = parse_due(meta["dueAt"])
        item_due = None if meta.get("recurring") is True else parse_due(meta["itemDueAt"])
        if item_due is None and name != recurring_firing_id(name.rpartition("@")[0], format_due(due)):
            raise ValueError(f"a recurring firing's name must be its schedule's, @, and its dueAt ({format_due(due)})")
        return Release(name=name, due=due, item_due=item_due, keys=keys, payload=dumps(document["payload"]))
    except (ValueError, KeyError, TypeError, PermanentError) as exc:
        raise PermanentError(f"not a release message ({type(exc).__name__}: {str(exc)[:200]})") from exc


# -- sending to the release queue ----------------------------------------------------------------------------------


def queue_url(config: HandlerConfig) -> str:
    return str(config["eventbridge"]["release"]["queueUrl"])


def scheduler_release_target(config: HandlerConfig, text: str) -> dict[str, Any]:
    """A release schedule's `Target`: the release queue, with the component's retries and target DLQ."""
    arn = str(config["eventbridge"]["release"]["queueArn"])
    return schedule_target(arn, config["scheduler"], text)


def enqueue(clients: Clients, config: HandlerConfig, text: str, delay: int) -> None:
    """Into the release queue, held back `delay` seconds (0-900)."""
    clients.get("sqs").send_message(QueueUrl=queue_url(config), MessageBody=text, DelaySeconds=delay)


# -- the release consumer ------------------------------------------------------------------------------------------


class Outcome:
    """What became of one message; every one but RETRY deletes it from the queue."""

    DELIVERED = "delivered"
    DELAYED = "delayed"  # before its second: sent back with the seconds left
    DUPLICATE = "duplicates"  # claimed and delivered before (redelivery, a second copy)
    DROPPED = "dropped"  # the item no longer holds the due time (its stream record decides)
    PARKED = "parked"  # malformed (poison queue), or the target refused it for good (target DLQ)
    RETRY = "retried"  # transient: left in the queue, received again after its visibility timeout


def item_holds(clients: Clients, config: HandlerConfig, keys: dict[str, Any], item_due: datetime) -> bool:
    """The item still holds this due time (read consistently; any format of the same instant, in the item's zone,
    counts). `keys` as the stream delivers them. Before an occurrence is delivered directly or released."""
    attribute = config["timeAttribute"]
    names = {"#t": attribute}
    zone_attribute = config["eventbridge"].get("timeZoneAttribute")
    if zone_attribute:
        names["#z"] = zone_attribute
    found = clients.get("dynamodb").get_item(
        TableName=config["table"],
        Key=to_request(keys),
        ConsistentRead=True,
        ProjectionExpression=", ".join(names),
        ExpressionAttributeNames=names,
    )
    item = decode_image(found.get("Item")) or {}
    value = item.get(attribute)
    zone_name = item.get(zone_attribute) if zone_attribute else None
    if value is None or not isinstance(zone_name, str | None):
        return False  # no time, or a zone the stream handler would park: not this occurrence's item any more
    try:
        return parse_due(value, zone(zone_name)) == item_due
    except PermanentError:
        return False


class Releaser:
    """The release consumer for one batch of release queue messages."""

    def __init__(self, config: HandlerConfig, clients: Clients, now: Clock, sleep: Sleep) -> None:
        self.config = config
        self.clients = clients
        self.now = now
        self.sleep = sleep
        self.ledger = Ledger.of(config["eventbridge"], clients)
        self.poison = PoisonQueue(
            config["poisonQueueUrl"], mode=MODE, table=config["table"], clients=clients, limit=message_limit(config)
        )
        self.counts: Counter[str] = Counter()
        self.latest = 0.0  # the latest delivery after its second in this batch, seconds
        self._lock = Lock()

    def message(self, parsed: Parsed) -> str:
        outcome = self._outcome(parsed)
        with self._lock:
            self.counts[outcome] += 1
        return outcome

    def _outcome(self, parsed: Parsed) -> str:
        record, release = parsed
        if isinstance(release, str):
            return self._park_malformed(record, release)
        try:
            return self._release(release)
        except Exception as exc:
            if is_transient(exc):
                log.warning("release-retry", schedule=release.name, error=error_code(exc), detail=str(exc)[:300])
                return Outcome.RETRY
            return self._park_refused(record, release, exc)

    def _release(self, release: Release) -> str:
        left = (release.due - self.now()).total_seconds()
        if left > MAX_SLEEP_SECONDS:
            # Early (from a schedule, always): back into the queue for the seconds left. A copy sent twice (a crash
            # before the delete) is harmless: the claim below lets one through.
            enqueue(self.clients, self.config, envelope(release), delay_seconds(release.due, self.now()))
            log.debug("release-delayed", schedule=release.name, dueAt=format_due(release.due), seconds=left)
            return Outcome.DELAYED
        if left > 0:
            self.sleep(left)
        if release.item_due is not None and not self._holds(release.keys, release.item_due):
            # The item left this due time: the stream's record of that change decides (a cancel, or a settle that
            # delivers through the same claim). Nothing of this release owns the occurrence any more: its marker is
            # forgotten, so an item written back to this time after its second is delivered at once by the stream
            # handler. Read again after that: a return in between (whose delivery found the marker and left the
            # occurrence to this release) is seen here and delivered.
            persist(lambda: self.ledger.unschedule(release.name))
            if not self._holds(release.keys, release.item_due):
                log.debug("release-dropped", schedule=release.name, dueAt=format_due(release.due))
                return Outcome.DROPPED
        # A recurring firing (no item due time) is owed whatever the item did inside its minute: Scheduler ran it,
        # and the stream handler, which sends the firings a change took from Scheduler, claims the same id. No marker
        # stands for it, so the claim takes over none.
        if not self.ledger.claim(release.name, take_over_scheduled=release.item_due is not None):
            log.debug("duplicate", schedule=release.name, dueAt=format_due(release.due))
            return Outcome.DUPLICATE
        try:
            send_now(
                self.config["target"],
                release.payload,
                occurrence=release.name,  # the occurrence's id (naming.occurrence_id)
                clients=self.clients,
            )
        except Exception:
            persist(lambda: self.ledger.release(release.name))
            raise
        late = (self.now() - release.due).total_seconds()
        persist(lambda: self.ledger.complete(release.name))
        with self._lock:
            self.latest = max(self.latest, late)
        log.debug("released", schedule=release.name, dueAt=format_due(release.due), lateSeconds=round(late, 3))
        return Outcome.DELIVERED

    def _holds(self, keys: dict[str, Any], item_due: datetime) -> bool:
        return item_holds(self.clients, self.config, keys, item_due)

    def _park_malformed(self, record: dict[str, Any], reason: str) -> str:
        try:
            self.poison.send(record, reason, "MalformedRelease")
        except Exception as exc:
            log.error("poison-failed", messageId=record.get("messageId"), error=error_code(exc), reason=reason)
            return Outcome.RETRY
        log.warning("poisoned", messageId=record.get("messageId"), error="MalformedRelease", reason=reason)
        return Outcome.PARKED

    def _park_refused(self, record: dict[str, Any], release: Release, exc: Exception) -> str:
        """The target refused for good (a 4xx it will always give): into the target DLQ, with Scheduler's error
        attributes, as a schedule that could not deliver would have put it."""
        extra = advice(exc)
        code, reason = error_code(exc), (str(exc)[: 1000 - len(extra)] + extra) or error_code(exc)
        try:
            self.clients.get("sqs").send_message(
                QueueUrl=self.config["eventbridge"]["release"]["deadLetterUrl"],
                MessageBody=str(record.get("body")),
                MessageAttributes={
                    ERROR_CODE: {"DataType": "String", "StringValue": code},
                    ERROR_MESSAGE: {"DataType": "String", "StringValue": reason},
                },
            )
        except Exception as failed:
            log.error("dead-letter-failed", schedule=release.name, error=error_code(failed), reason=reason)
            return Outcome.RETRY
        log.warning("release-refused", schedule=release.name, error=code, reason=reason)
        return Outcome.PARKED


def sqs_records(event: object) -> tuple[list[dict[str, Any]], list[tuple[object, str]]]:
    """The SQS records of an event, and whatever in it is not one (with the reason)."""
    records = event.get("Records") if isinstance(event, dict) else None
    if not isinstance(records, list):
        return [], [(event, "not an SQS batch: no Records list")]
    good: list[dict[str, Any]] = []
    bad: list[tuple[object, str]] = []
    for record in records:
        if isinstance(record, dict) and isinstance(record.get("messageId"), str):
            good.append(record)
        else:
            bad.append((record, "not an SQS record: no messageId"))
    return good, bad


# A release queue record and its release, or the reason it is not a release message.
Parsed = tuple[dict[str, Any], Release | str]


def parsed_record(record: dict[str, Any]) -> Parsed:
    try:
        return record, parse(record.get("body"))
    except PermanentError as exc:
        return record, str(exc)


def _due_order(parsed: Parsed) -> float:
    """Malformed messages first (parked at once), then by due second."""
    release = parsed[1]
    return float("-inf") if isinstance(release, str) else release.due.timestamp()


def handle_messages(
    event: object,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Clock = lambda: datetime.now(UTC),
    sleep: Sleep = time.sleep,
) -> SqsBatchResponse:
    """One batch from the release queue: each message released, delayed again, dropped or parked; only transient
    failures are reported (`batchItemFailures`), so SQS redelivers just those, and after the queue's
    `maxReceiveCount` moves them to the target DLQ."""
    started = time.perf_counter()
    releaser = Releaser(config, clients, now, sleep)
    records, malformed = sqs_records(event)
    for thing, reason in malformed:
        # Nothing to retry by: if parking fails the invocation fails, and SQS delivers the batch again.
        releaser.poison.send(thing, reason, "MalformedRecord")
        log.warning("poisoned", error="MalformedRecord", reason=reason)
    # Earliest second first: a message that comes early waits in the function for its second, so with fewer
    # workers than messages one due later would otherwise hold back one due sooner.
    parsed = sorted((parsed_record(record) for record in records), key=_due_order)
    workers = max(1, min(config["maxWorkers"], len(parsed)))
    if workers == 1:
        outcomes = [releaser.message(item) for item in parsed]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            outcomes = list(pool.map(releaser.message, parsed))
    failures: list[SqsBatchItemFailure] = [
        {"itemIdentifier": record["messageId"]}
        for (record, _), outcome in zip(parsed, outcomes, strict=True)
        if outcome == Outcome.RETRY
    ]
    summary: dict[str, Any] = dict(releaser.counts)
    summary["milliseconds"] = round((time.perf_counter() - started) * 1000)
    summary["lateMillisecondsMax"] = round(releaser.latest * 1000)
    log.metrics(
        "ScheduledTable",
        {"Table": config["table"], "Mode": MODE},
        properties=summary,
        Records=len(records) + len(malformed),
        Poisoned=releaser.poison.sent,
        Retried=len(failures),
    )
    return {"batchItemFailures": failures}
