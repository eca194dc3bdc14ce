"""Backfill and reconcile: make every existing item what a fresh write would have made, and repair drift.

A stream carries only changes made after it exists, so items already in the table when the stack attaches
(`existing_table`), items written while the stream was off or longer ago than its 24-hour retention, and items of
a table whose mode changed have no schedule, index entry or total. This module scans the table (one segment of a
parallel scan at a time, resumable from its LastEvaluatedKey) and hands each item to the deployed mode's own code
as the stream record a fresh write would produce: an INSERT with the item as its NewImage, in Lambda's shape (`B`
as base64 text, `N` as strings, `ApproximateCreationDateTime` in epoch seconds, a synthetic sequence number and
event id). No mode is implemented a second time here: `feed` is the consumer (invoked, or its `handle_batch` run
in-process), and the checks of what already exists use the handlers' public planning functions.

Safe beside live traffic: after a batch is fed, each item is read again with a consistent read; one that a live
write changed meanwhile (moved, deleted, re-created) gets the change from what was fed to what it is now, as the
stream would have carried it (MODIFY, REMOVE or INSERT), until a read after a feed finds the item as fed. Any write
after that read reaches the live function after this run's calls for the item, so the live write has the last word:
a deleted item's schedule is not resurrected, a newer due time is not overridden. Polling's assigner writes only
on conditions about the item as the record shows it, so it needs no such loop.

Aggregate totals are not fed: each source item's contribution is computed by the handler's `contributions` (the
same group and value rules), summed exactly (38 digits) per group across the scan, and a total that differs is
replaced by one conditional write on the total as read (its value, its applied-record ids and its ledger guard):
an increment applied concurrently fails the condition, so none is lost; such a group is reported busy.

Also the Lambda entry point (`backfill.handler`) of the optional backfill function: one segment slice per
invocation within the time budget, returning the checkpoint to resume from. Standard library + boto3 only; the
mode modules are imported lazily.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from st_core.clients import CLIENTS, Clients
from st_core.config import HandlerConfig

if TYPE_CHECKING:
    from st_core.stream import DynamoDBStreamRecord

Record = dict[str, Any]
Failure = tuple[Record, str]
Feed = Callable[[list[Record]], list[Failure]]
Clock = Callable[[], float]
Sleep = Callable[[float], None]

# Items per scan page: a page is fed as one batch (the consumer's batch size is at most 100 in a RequestResponse
# redrive too), then read back with BatchGetItem (100 keys per call).
# The AWS actions this module's own calls need (checked by tests/iam): scan and read the table, look schedules up
# (reconcile lists the group's), replace a drifted aggregate total, park what cannot be fed in the poison queue.
AWS_ACTIONS = (
    "dynamodb:BatchGetItem",
    "dynamodb:DescribeTable",
    "dynamodb:GetItem",
    "dynamodb:Scan",
    "dynamodb:UpdateItem",
    "scheduler:GetSchedule",
    "scheduler:ListSchedules",
    "sqs:SendMessage",
)

PAGE_ITEMS = 100
# Feeds of one item that follow live writes before it is parked as "kept changing".
ROUNDS = 5
# Default ceilings: well below DynamoDB's on-demand table limits and Scheduler's default 5,000 CreateSchedule/s per
# account and Region, which the live function shares.
READ_UNITS_PER_SECOND = 500.0
SCHEDULER_CALLS_PER_SECOND = 200.0
# Aggregate: how long a record may take from its write to its total (stream lag); the total of a group with a record
# applied later than this before the scan began is left alone (busy).
SETTLE_SECONDS = 60.0
# The Lambda entry point stops taking pages this long before its deadline.
MARGIN_SECONDS = 30.0


class Throttle:
    """A token bucket: `take(n)` returns once n units fit under `rate` per second (a burst of one second's worth).
    Taking more than is available leaves a debt that the caller sleeps off, so the average never exceeds the rate.
    `rate` None: no ceiling. Clock and sleep are injectable (tests prove the ceiling with a fake clock)."""

    def __init__(self, rate: float | None, clock: Clock = time.monotonic, sleep: Sleep = time.sleep) -> None:
        if rate is not None and rate <= 0:
            raise ValueError(f"a rate ceiling must be positive, got {rate}")
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self.tokens = rate or 0.0
        self.stamp = clock()
        self.taken = 0.0
        self._lock = threading.Lock()

    def take(self, units: float) -> None:
        if self.rate is None or units == 0:
            self.taken += units
            return
        with self._lock:
            now = self.clock()
            self.tokens = min(self.rate, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            self.tokens -= units
            self.taken += units
            wait = -self.tokens / self.rate if self.tokens < 0 else 0.0
        if wait > 0:
            self.sleep(wait)


@dataclass
class Tally:
    """What a run did, by outcome (scanned, acted, skipped, failed) and by kind, with a few examples of each kind."""

    scanned: int = 0
    acted: int = 0
    skipped: int = 0
    failed: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    EXAMPLES = 3

    def note(self, outcome: str, kind: str, example: str = "") -> None:
        """One thing done; `outcome` "" counts the kind only (aggregate's source items: the acts are per group)."""
        if outcome:
            setattr(self, outcome, getattr(self, outcome) + 1)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if example and len(self.examples.setdefault(kind, [])) < self.EXAMPLES:
            self.examples[kind].append(example[:200])

    def merge(self, other: Tally) -> None:
        for name in ("scanned", "acted", "skipped", "failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for kind, count in other.kinds.items():
            self.kinds[kind] = self.kinds.get(kind, 0) + count
        for kind, found in other.examples.items():
            mine = self.examples.setdefault(kind, [])
            mine.extend(found[: max(0, self.EXAMPLES - len(mine))])

    def to_json(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "acted": self.acted,
            "skipped": self.skipped,
            "failed": self.failed,
            "kinds": dict(self.kinds),
            "examples": {k: list(v) for k, v in self.examples.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Tally:
        data = data or {}
        return cls(
            int(data.get("scanned", 0)),
            int(data.get("acted", 0)),
            int(data.get("skipped", 0)),
            int(data.get("failed", 0)),
            {str(k): int(v) for k, v in (data.get("kinds") or {}).items()},
            {str(k): [str(e) for e in v] for k, v in (data.get("examples") or {}).items()},
        )


# -- the shape of items and records --------------------------------------------------------------------------------


def wire(value: Any) -> Any:
    """A boto3 item (binary as bytes) as Lambda delivers images (binary as base64 text); numbers stay strings."""
    return json.loads(json.dumps(value, default=_wire_json))


def _wire_json(value: object) -> object:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not in a DynamoDB item")


_SERIAL = itertools.count(1)
_SERIAL_LOCK = threading.Lock()


def _sequence() -> str:
    """A synthetic sequence number: digits, increasing within the process (Lambda's are 21+ digit decimals)."""
    with _SERIAL_LOCK:
        return f"9{int(time.time() * 1000):013d}{next(_SERIAL):09d}"


def change(config: HandlerConfig, old: Record | None, new: Record | None, now: float) -> Record:
    """The stream record of a change from `old` to `new` (Lambda-shaped images; None: absent), as the table's stream
    would carry it now: INSERT, MODIFY or REMOVE, NEW_AND_OLD_IMAGES. The event id is derived from the item and its
    new state, so feeding the same state twice is one record to the handlers that key on it."""
    image = new if new is not None else old
    assert image is not None
    names = _key_names(config)
    keys = {name: image[name] for name in names if name in image}
    data: dict[str, Any] = {
        "Keys": keys,
        "ApproximateCreationDateTime": int(now),
        "SequenceNumber": _sequence(),
        "SizeBytes": len(json.dumps(image)),
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if new is not None:
        data["NewImage"] = new
    if old is not None:
        data["OldImage"] = old
    name = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
    digest = hashlib.sha256(json.dumps([name, old, new], sort_keys=True).encode()).hexdigest()[:32]
    return {
        "eventID": f"backfill-{digest}",
        "eventName": name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "",
        "dynamodb": data,
    }


def _key_names(config: HandlerConfig) -> tuple[str, ...]:
    from st_core.naming import key_names

    return key_names(config)


def _stream(record: Record) -> DynamoDBStreamRecord:
    """A synthetic record as the handlers' typed view of a stream record (it has every field Lambda's has)."""
    return cast("DynamoDBStreamRecord", record)


def identity(config: HandlerConfig, image: Record) -> str:
    from st_core.stream import identity_of

    names = _key_names(config)
    return str(identity_of({n: image[n] for n in names if n in image}))


def describe(config: HandlerConfig, image: Record) -> str:
    from st_core.stream import decode_image

    names = _key_names(config)
    plain = decode_image({n: image[n] for n in names if n in image}) or {}
    return json.dumps(plain, default=str, sort_keys=True)


def _same(a: Record | None, b: Record | None) -> bool:
    from st_core.stream import decode_image

    return decode_image(a) == decode_image(b)


def kind_of(config: HandlerConfig) -> str:
    """Which backfill a table's mode takes."""
    mode = config["mode"]
    if mode == "ttl":
        return "ttl-precise" if config["ttl"]["precise"] else "ttl"
    return str(mode)


# -- one run over one segment --------------------------------------------------------------------------------------


@dataclass
class Options:
    dry_run: bool = False
    reconcile: bool = False  # also repair what exists but disagrees (a schedule for another time, an index entry)
    started: float = field(default_factory=time.time)  # when the run's scan began (aggregate's busy rule)
    # A first attach: no item has its schedule yet, so none is looked up (one Scheduler call per occurrence instead
    # of two). Safe either way: the consumer updates a schedule that exists in place.
    fresh: bool = False


class Engine:
    """Acts on scan pages for one table: feeds what the mode must do to `feed`, counts in `tally`."""

    def __init__(
        self,
        config: HandlerConfig,
        feed: Feed,
        *,
        clients: Clients = CLIENTS,
        options: Options | None = None,
        reads: Throttle | None = None,
        calls: Throttle | None = None,
        now: Clock = time.time,
    ) -> None:
        self.config = config
        self.feed = feed
        self.clients = clients
        self.options = options or Options()
        self.reads = reads or Throttle(None)
        self.calls = calls or Throttle(None)
        self.now = now
        self.kind = kind_of(config)
        self.tally = Tally()
        # aggregate: group identity -> [key value (request form), exact sum, items]; totals as scanned.
        self.sums: dict[str, list[Any]] = {}
        self.totals: dict[str, Record] = {}
        self._unusable: set[int] = set()  # records fed whose time the consumer cannot use (it parks them)
        self._lock = threading.Lock()  # guards the tally and the sums (pages of one segment act from worker threads)

    # -- the scan ----------------------------------------------------------------------------------------------------

    def tally_now(self) -> Tally:
        """A copy of the tally as of now (the segment's threads go on counting meanwhile)."""
        with self._lock:
            return Tally.from_json(self.tally.to_json())

    def scan_page(self, segment: int, segments: int, start: Record | None, limit: int = PAGE_ITEMS) -> Record | None:
        """Read one page of one segment (paced), act on it; the key to go on from, None when the segment is done."""
        from st_core.stream import to_request

        request: dict[str, Any] = {
            "TableName": self.config["table"],
            "Segment": segment,
            "TotalSegments": segments,
            "Limit": limit,
            "ReturnConsumedCapacity": "TOTAL",
        }
        if start:
            request["ExclusiveStartKey"] = to_request(start)
        estimate = limit * 0.5  # eventually consistent: half a unit per item of up to 4 KB
        self.reads.take(estimate)
        page = self.clients.get("dynamodb").scan(**request)
        used = float((page.get("ConsumedCapacity") or {}).get("CapacityUnits") or estimate)
        self.reads.take(used - estimate)
        self.act([wire(item) for item in page.get("Items", [])])
        following = page.get("LastEvaluatedKey")
        return wire(following) if following else None

    def act(self, items: list[Record]) -> None:
        """One page of items (Lambda-shaped), by the table's mode."""
        with self._lock:
            self.tally.scanned += len(items)
        {
            "eventbridge": self._timed,
            "ttl-precise": self._timed,
            "ttl": self._plain_ttl,
            "polling": self._polling,
            "aggregate": self._aggregate,
        }[self.kind](items)

    # -- eventbridge and precise ttl ---------------------------------------------------------------------------------

    def _timed(self, items: list[Record]) -> None:
        attribute = self.config["timeAttribute"]
        due: list[Record] = []
        timed: list[Record] = []
        for image in items:
            value = image.get(attribute)
            if not isinstance(value, dict) or not ({"S", "N"} & set(value)):
                self._note("skipped", "no due time")
                continue
            timed.append(change(self.config, None, image, self.now()))
        # What exists already, asked with the consumer's concurrency (each a Scheduler or ledger read).
        with ThreadPoolExecutor(max_workers=max(1, int(self.config.get("maxWorkers") or 8))) as pool:
            needs = list(pool.map(self._needs, timed))
        for record, need in zip(timed, needs, strict=True):
            image = record["dynamodb"]["NewImage"]
            if not need:
                self._note("skipped", "already scheduled")
                continue
            if self.options.dry_run:
                self._note("acted", f"would {need}", describe(self.config, image))
                continue
            due.append(record)
            if need.startswith("park"):
                self._unusable.add(id(record))
        if due:
            self._feed_settled(due)

    def _needs(self, record: Record) -> str:
        """What a fresh write of this item would do that is not done: "" when its schedules exist (as they should),
        else a word for it. Past occurrences are always fed: the handler's ledger delivers each once."""
        now = datetime.fromtimestamp(self.now(), UTC)
        if self.kind == "eventbridge":
            import eventbridge

            planned = eventbridge.plan(_stream(record), self.config, now)
            if planned.poison_reason:
                return "park (unusable due time)"
            for step in planned.steps:
                occurrence = step.occurrence
                if occurrence.recurrence is None and occurrence.due <= now:
                    if self._ledger().taken(occurrence.name, aliases=occurrence.aliases):
                        continue  # delivered already (by an earlier run, or the live function)
                    return "deliver (past due)"
                if self.options.fresh or self._found(occurrence.name, *occurrence.aliases) is None:
                    return "schedule"
            return ""
        import ttl

        decision = ttl.decide(_stream(record), self.config, now)
        if decision.poison:
            return "park (unusable TTL)"
        if decision.step is not ttl.Step.SCHEDULE or decision.due is None:
            return ""
        if decision.due <= now:
            return "delete now (past due)"
        if self.options.fresh:
            return "schedule"
        found = self._found(*ttl.schedule_names(_stream(record), self.config))
        if found is None:
            return "schedule"
        held = record["dynamodb"]["NewImage"][self.config["timeAttribute"]]
        try:
            request = json.loads(found["Target"]["Input"])
            kept = request["ExpressionAttributeValues"][":due"]
        except (KeyError, TypeError, ValueError):
            kept = None
        if kept != held:
            return "reschedule (the schedule holds another time)"
        return ""

    def _ledger(self) -> Any:
        from st_core.idempotency import Ledger

        return Ledger.of(self.config["eventbridge"], self.clients)

    def _found(self, *names: str) -> Record | None:
        """The first of these schedules that exists (an occurrence's name, then older names of it), if any."""
        for name in names:
            found = self._schedule(name)
            if found is not None:
                return found
        return None

    def _schedule(self, name: str) -> Record | None:
        self.calls.take(1)
        try:
            found: Record = self.clients.get("scheduler").get_schedule(
                Name=name, GroupName=self.config["scheduler"]["group"]
            )
        except Exception as exc:
            from st_core.errors import error_code

            if error_code(exc) == "ResourceNotFoundException":
                return None
            raise
        return found

    def _calls_for(self, record: Record) -> int:
        """Scheduler calls one fed record may make (its occurrences; one for precise ttl)."""
        if self.kind == "eventbridge":
            return max(1, len(self.config.get("eventbridge", {}).get("offsets") or [0]))
        return 1 if self.kind == "ttl-precise" else 0

    def _feed_settled(self, records: list[Record]) -> None:
        """Feed, then follow every item a live write changed meanwhile until a read after a feed finds it as fed."""
        pending = records
        first = True
        for _ in range(ROUNDS):
            self.calls.take(sum(self._calls_for(r) for r in pending))
            failed = {id(r): why for r, why in self.feed(pending)}
            fed: dict[str, Record] = {}
            for record in pending:
                data = record["dynamodb"]
                image = data.get("NewImage") if record["eventName"] != "REMOVE" else data.get("OldImage")
                where = describe(self.config, image or data["Keys"])
                if id(record) in failed:
                    self._park(record, f"backfill: the consumer failed it: {failed[id(record)]}")
                    self._note("failed", "failed (parked)", where)
                    continue
                if first and id(record) in self._unusable:
                    # The consumer parks it with its reason, as it parks such a live write.
                    self._note("failed", "unusable time (the consumer parked it: see the poison queue)", where)
                elif first:
                    self._note("acted", "fed as a fresh write", where)
                fed[identity(self.config, data["Keys"])] = record
            first = False
            current = self._read([r["dynamodb"]["Keys"] for r in fed.values()])
            pending = []
            for key, record in fed.items():
                data = record["dynamodb"]
                last = data.get("NewImage") if record["eventName"] != "REMOVE" else None
                now = current.get(key)
                if _same(last, now):
                    continue
                if last is None and now is None:
                    continue
                pending.append(change(self.config, last, now, self.now()))
                self._note("acted", "followed a live write", describe(self.config, data["Keys"]))
            if not pending:
                return
        for record in pending:
            self._park(record, "backfill: the item kept changing while backfill followed it; run backfill again")
            self._note("failed", "kept changing (parked)", describe(self.config, record["dynamodb"]["Keys"]))

    def _read(self, keys: list[Record]) -> dict[str, Record]:
        """The items now (consistent reads, paced), by identity; absent items are missing from the answer."""
        from st_core.stream import to_request

        found: dict[str, Record] = {}
        ddb = self.clients.get("dynamodb")
        table = self.config["table"]
        for start in range(0, len(keys), 100):
            request: dict[str, Any] = {
                table: {"Keys": [to_request(k) for k in keys[start : start + 100]], "ConsistentRead": True}
            }
            while request:
                self.reads.take(len(request[table]["Keys"]))
                answer = ddb.batch_get_item(RequestItems=request)
                for item in answer.get("Responses", {}).get(table, []):
                    image = wire(item)
                    found[identity(self.config, image)] = image
                request = answer.get("UnprocessedKeys") or {}
        return found

    def _park(self, record: Record, reason: str) -> None:
        """To the poison queue with the reason (never lost): `redrive poison` replays it once fixed."""
        from st_core.poison import poison_message

        body = poison_message(
            record=record, reason=reason, error="Backfill", mode=self.config["mode"], table=self.config["table"]
        )
        self.clients.get("sqs").send_message(QueueUrl=self.config["poisonQueueUrl"], MessageBody=body)

    def _note(self, outcome: str, kind: str, example: str = "") -> None:
        with self._lock:
            self.tally.note(outcome, kind, example)

    # -- reconcile: schedules no item asks for -------------------------------------------------------------------

    def sweep_schedules(self) -> None:
        """Every schedule of the group, checked against its item (consistent read): one whose item is gone, or
        holds another time (its occurrence is no longer the item's), is deleted. Runs after the item pass, which
        made what was missing. A schedule whose keys cannot be read from its input (an email target) is left alone
        and counted."""
        if self.kind not in ("eventbridge", "ttl-precise"):
            return
        scheduler = self.clients.get("scheduler")
        token: str | None = None
        while True:
            self.calls.take(1)
            request: dict[str, Any] = {"GroupName": self.config["scheduler"]["group"]}
            if token:
                request["NextToken"] = token
            page = scheduler.list_schedules(**request)
            for summary in page.get("Schedules", []):
                self._sweep(str(summary["Name"]))
            token = page.get("NextToken")
            if not token:
                return

    def _sweep(self, name: str) -> None:
        found = self._schedule(name)
        if found is None:
            return  # fired (and deleted itself) since it was listed
        keys = self._keys_of(found)
        if keys is None:
            self._note("skipped", "schedule not understood (left alone)", name)
            return
        where = f"{name} ({describe(self.config, keys)})"
        item = self._read([keys]).get(identity(self.config, keys))
        own = self._wanted(item).get(name)
        if own == name:
            self._note("skipped", "schedule matches its item")
            return
        why = "item gone or holds another time"
        if own is not None:
            # The occurrence's schedule under the name an earlier version gave it: it is the occurrence's one
            # schedule, unless one under its own name exists too (then this copy would deliver it a second time).
            if self._schedule(own) is None:
                self._note("skipped", "schedule matches its item (under an earlier version's name)")
                return
            why = f"a second copy of {own}, under an earlier version's name"
        if self.options.dry_run:
            self._note("acted", f"would delete schedule ({why})", where)
            return
        from st_core import schedules

        self.calls.take(1)
        deleted = schedules.delete(self.clients, self.config["scheduler"]["group"], name)
        if deleted and self.kind == "eventbridge" and not self._firing(found):
            from st_core.errors import persist

            persist(lambda: self._ledger().unschedule(name))  # as the handler's cancel: the marker goes with it
        self._note("acted", f"deleted schedule ({why})", where)
        # A live write may have given the item that time again between the read and the delete: follow it.
        now = self._read([keys]).get(identity(self.config, keys))
        if now is not None and self._wanted(now).get(name) == name:
            self._feed_settled([change(self.config, None, now, self.now())])

    def _wanted(self, image: Record | None) -> dict[str, str]:
        """The schedule names a fresh write of the item would make (none for an absent item), and the names earlier
        versions gave the same schedules, each mapped to the schedule's own name."""
        if image is None:
            return {}
        record = change(self.config, None, image, self.now())
        moment = datetime.fromtimestamp(self.now(), UTC)
        if self.kind == "eventbridge":
            import eventbridge

            steps = eventbridge.plan(_stream(record), self.config, moment).steps
            names = [(step.occurrence.name, *step.occurrence.aliases) for step in steps]
        else:
            import ttl

            decision = ttl.decide(_stream(record), self.config, moment)
            names = [ttl.schedule_names(_stream(record), self.config)] if decision.step is ttl.Step.SCHEDULE else []
        return {alias: each[0] for each in names for alias in each}

    def _keys_of(self, schedule: Record) -> Record | None:
        """The item's keys (Lambda-shaped) from a schedule's input: the release envelope's (second precision), the
        conditional delete's (precise ttl), or the due event's (plain values, typed by the table's key schema)."""
        text = str((schedule.get("Target") or {}).get("Input") or "")
        try:
            document = json.loads(text)
        except ValueError:
            return None
        if not isinstance(document, dict):
            return None
        from st_core import release

        if release.ENVELOPE in document:
            try:
                return dict(release.parse(text).keys)
            except Exception:
                return None
        if isinstance(document.get("Key"), dict):
            return dict(document["Key"])
        plain = document.get("keys")
        if not isinstance(plain, dict):
            return None
        types = self._key_types()
        typed: Record = {}
        for name, value in plain.items():
            tag = types.get(name)
            if tag is None:
                return None
            typed[name] = {tag: str(value)}
        return typed

    def _key_types(self) -> dict[str, str]:
        if not hasattr(self, "_types"):
            table = self.clients.get("dynamodb").describe_table(TableName=self.config["table"])["Table"]
            self._types = {d["AttributeName"]: d["AttributeType"] for d in table["AttributeDefinitions"]}
        return self._types

    def _firing(self, schedule: Record) -> bool:
        """Whether the schedule may be firing now (its marker then stays, as the handler's cancel keeps it)."""
        from st_core import schedules

        expression = str(schedule.get("ScheduleExpression") or "")
        if not expression.startswith("at("):
            return False
        fire = datetime.fromisoformat(expression[3:-1]).replace(tzinfo=UTC)
        return bool(schedules.may_be_firing(fire, datetime.fromtimestamp(self.now(), UTC)))

    # -- plain ttl -----------------------------------------------------------------------------------------------

    def _plain_ttl(self, items: list[Record]) -> None:
        """Nothing to create (TTL deletes and the stream brings the deletion); items whose time has passed and
        that TTL has not deleted yet are reported: TTL deletes within days, not at the second."""
        from st_core.stream import decode_image

        attribute = self.config["timeAttribute"]
        for image in items:
            value = (decode_image({"t": image[attribute]}) or {}).get("t") if attribute in image else None
            if isinstance(value, bool) or not isinstance(value, int | Decimal):
                self._note("skipped", "no TTL")
            elif value <= self.now():
                self._note("skipped", "past its TTL, not deleted yet", describe(self.config, image))
            else:
                self._note("skipped", "TTL ahead (TTL deletes it)")

    # -- polling -------------------------------------------------------------------------------------------------

    def _polling(self, items: list[Record]) -> None:
        """Items without the mode's status were never indexed: an INSERT through the assigner indexes them (on
        conditions about the item as read, so a live write wins). With `reconcile`, a waiting item whose index entry
        disagrees with its time (or lacks one) is indexed again through the assigner."""
        from st_core.pending import DUE, SHARD, STATUS, Status, shard_of
        from st_core.stream import decode_image

        fresh: list[Record] = []
        for image in items:
            status = image.get(STATUS, {}).get("S")
            if status is None:
                if self.options.dry_run:
                    self._note("acted", "would index", describe(self.config, image))
                else:
                    fresh.append(change(self.config, None, image, self.now()))
                continue
            if not self.options.reconcile or status != Status.PENDING.value:
                self._note("skipped", "already indexed")
                continue
            plain = decode_image(image) or {}
            shard = shard_of(identity(self.config, image), self.config["polling"]["shards"])
            expected_due = None
            if plain.get(self.config["timeAttribute"]) is not None:
                import polling_assign as polling

                try:
                    expected_due = int(polling.due_of(plain, self.config, datetime.now(UTC)).timestamp())
                except Exception:
                    expected_due = None
            wrong = plain.get(SHARD) != shard or DUE not in plain
            wrong = wrong or (expected_due is not None and plain.get(DUE) != expected_due)
            if not wrong:
                self._note("skipped", "index entry agrees")
                continue
            if self.options.dry_run:
                self._note("acted", "would re-index (entry disagrees)", describe(self.config, image))
                continue
            # The item's time "written again": the assigner re-indexes a waiting item whose time changed.
            old = {k: v for k, v in image.items() if k != self.config["timeAttribute"]}
            fresh.append(change(self.config, old, image, self.now()))
        if fresh:
            failed = {id(r): why for r, why in self.feed(fresh)}
            # Read back: an item the assigner parked (no usable time) is still without a status.
            current = self._read([r["dynamodb"]["Keys"] for r in fresh if id(r) not in failed])
            for record in fresh:
                where = describe(self.config, record["dynamodb"]["Keys"])
                if id(record) in failed:
                    self._park(record, f"backfill: the assigner failed it: {failed[id(record)]}")
                    self._note("failed", "failed (parked)", where)
                    continue
                now = current.get(identity(self.config, record["dynamodb"]["Keys"]))
                if now is None:
                    self._note("skipped", "deleted meanwhile (nothing to index)", where)
                elif STATUS not in now:
                    self._note("failed", "not indexed (the assigner parked it: see the poison queue)", where)
                else:
                    self._note("acted", "indexed" if record["eventName"] == "INSERT" else "re-indexed", where)

    # -- aggregate -----------------------------------------------------------------------------------------------

    def _aggregate(self, items: list[Record]) -> None:
        """Sum each source item's contribution (the handler's own rules), exactly; remember the totals seen."""
        import aggregate
        from st_core.errors import PermanentError

        settings = self.config["aggregate"]
        partition = self.config["partitionKey"]
        sort = self.config.get("sortKey")
        for image in items:
            key = image.get(partition, {})
            if isinstance(key.get("S"), str) and key["S"].startswith(settings["sourcePrefix"]):
                try:
                    parts = aggregate.contributions(_stream(change(self.config, None, image, self.now())), settings)
                except PermanentError as exc:
                    # As the live function parks such a record: with its reason, for `redrive poison` once fixed.
                    self._park(change(self.config, None, image, self.now()), f"backfill: {exc}")
                    self._note("failed", "unusable item (parked)", describe(self.config, image))
                    continue
                with self._lock:
                    for part in parts:
                        entry = self.sums.setdefault(part.group, [part.key, Decimal(0), 0])
                        entry[1] = aggregate.DYNAMODB_NUMBERS.add(entry[1], part.delta)
                        entry[2] += 1
                self._note("", "source item counted")
            elif sort and image.get(sort, {}).get("S") == settings["totalSortKey"]:
                from st_core.stream import identity_of

                with self._lock:
                    self.totals[identity_of({"group": key})] = image
                self._note("", "total read")
            else:
                self._note("skipped", "not a source item")

    def partial(self) -> dict[str, Any]:
        """Aggregate's state to carry in a checkpoint: the sums so far and the totals seen."""
        return {
            "sums": {g: [wire(k), str(s), n] for g, (k, s, n) in self.sums.items()},
            "totals": dict(self.totals),
        }

    def absorb(self, partial: dict[str, Any] | None) -> None:
        import aggregate
        from st_core.stream import request_value

        for group, (key, total, count) in ((partial or {}).get("sums") or {}).items():
            entry = self.sums.setdefault(group, [request_value(key), Decimal(0), 0])
            entry[1] = aggregate.DYNAMODB_NUMBERS.add(entry[1], Decimal(total))
            entry[2] += int(count)
        self.totals.update((partial or {}).get("totals") or {})

    def settle_totals(self, sleep: Sleep = time.sleep) -> None:
        """After every segment: replace each total that differs from its items' sum, or report it (dry run; and in
        reconcile with `onChange=ignore`, where a total keeps the items' first values by design)."""
        settings = self.config["aggregate"]
        wait = self.options.started + SETTLE_SECONDS - self.now()
        if wait > 0 and not self.options.dry_run:
            sleep(wait)  # a record written just before the scan began has reached its total by now
        for group in sorted(set(self.sums) | set(self.totals)):
            key, expected, count = self.sums.get(group, [None, Decimal(0), 0])
            total = self.totals.get(group)
            held = _number(total, settings["totalAttribute"]) if total else None
            if (held if held is not None else Decimal(0)) == expected and (total is not None or count == 0):
                self._note("skipped", "total agrees")
                continue
            where = f"group {group} total {held} items {expected} ({count} items)"
            if self.options.dry_run or (self.options.reconcile and settings["onChange"] != "adjust"):
                self._note("acted", "would replace total", where)
                continue
            if key is None and total is not None:
                key = {k: v for k, v in total.items() if k == self.config["partitionKey"]}[self.config["partitionKey"]]
            self._replace_total(group, key, expected, total, where)

    def _replace_total(self, group: str, key: Record, expected: Decimal, seen: Record | None, where: str) -> None:
        import aggregate
        from st_core.errors import error_code
        from st_core.stream import request_value, to_request

        settings = self.config["aggregate"]
        table, partition, sort = self.config["table"], self.config["partitionKey"], str(self.config["sortKey"])
        ddb = self.clients.get("dynamodb")
        item_key = {partition: request_value(key), sort: {"S": settings["totalSortKey"]}}
        self.reads.take(1)
        now_item = ddb.get_item(TableName=table, Key=item_key, ConsistentRead=True).get("Item")
        current = wire(now_item) if now_item else None
        first_bucket = math.floor((self.options.started - SETTLE_SECONDS) / aggregate.BUCKET_SECONDS)
        recent = [
            name
            for name in (current or {})
            if name.startswith(aggregate.RING_PREFIX)
            and name[len(aggregate.RING_PREFIX) :].isdigit()
            and int(name[len(aggregate.RING_PREFIX) :]) >= first_bucket
        ]
        if not _same(current, seen) or recent:
            self._note("failed", "busy: written during the run (run again when quiet)", where)
            return
        names = {"#total": settings["totalAttribute"]}
        values: dict[str, Any] = {":sum": {"N": str(expected)}}
        if current is None:
            names["#pk"] = partition
            condition = ["attribute_not_exists(#pk)"]
        else:
            condition = []
            for n, (name, value) in enumerate(sorted(current.items())):
                if name in (partition, sort):
                    continue
                names[f"#a{n}"] = name
                values[f":a{n}"] = to_request({"v": value})["v"]
                condition.append(f"#a{n} = :a{n}")
            now_bucket = math.floor(self.now() / aggregate.BUCKET_SECONDS)
            for n, bucket in enumerate(range(first_bucket, now_bucket + 2)):
                names[f"#n{n}"] = aggregate.bucket_name(bucket)
                condition.append(f"attribute_not_exists(#n{n})")
            if aggregate.LEDGER_UNTIL not in current:
                names["#until"] = aggregate.LEDGER_UNTIL
                condition.append("attribute_not_exists(#until)")
        try:
            ddb.update_item(
                TableName=table,
                Key=item_key,
                UpdateExpression="SET #total = :sum",
                ConditionExpression=" AND ".join(condition),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            self._note("failed", "busy: written during the run (run again when quiet)", where)
            return
        self._note("acted", "total replaced", where)


def _number(item: Record, attribute: str) -> Decimal | None:
    value = item.get(attribute) or {}
    return Decimal(value["N"]) if "N" in value else None


# -- feeding the mode's code ---------------------------------------------------------------------------------------


def answer_failures(records: list[Record], response: object) -> list[Failure]:
    """Lambda's partial-batch contract: the lowest reported sequence number failed, and every record after it was not
    confirmed (failed too, for a caller that cannot retry from there); an answer that is not one fails them all."""
    if not isinstance(response, dict):
        return [(r, "the function answered no batch response") for r in records]
    reported = [str((f or {}).get("itemIdentifier")) for f in response.get("batchItemFailures") or []]
    if not reported:
        return []
    sequences = [str(r["dynamodb"]["SequenceNumber"]) for r in records]
    positions = [sequences.index(s) for s in reported if s in sequences]
    first = min(positions) if positions else 0
    return [(r, "reported in batchItemFailures (transient: see the function's log)") for r in records[first:]]


def in_process(config: HandlerConfig, clients: Clients = CLIENTS) -> Feed:
    """The mode's own `handle_batch`, run here (the backfill function holds the consumer's permissions)."""
    mode = config["mode"]

    def feed(records: list[Record]) -> list[Failure]:
        event = {"Records": records}
        if mode == "eventbridge":
            import eventbridge

            response: object = eventbridge.handle_batch(event, config, clients=clients)
        elif mode == "ttl":
            import ttl

            response = ttl.handle_batch(event, config, clients=clients)
        elif mode == "polling":
            import polling

            response = polling.handle_assign_batch(event, config, clients=clients)
        else:
            raise ValueError(f"mode {mode!r} is not fed record by record")
        return answer_failures(records, response)

    return feed


# -- one segment slice, and the Lambda entry point -------------------------------------------------------------------


def run_slice(
    engine: Engine,
    segment: int,
    segments: int,
    start: Record | None,
    *,
    keep_going: Callable[[], bool] = lambda: True,
    saved: Callable[[Record | None, bool], None] = lambda key, done: None,
    limit: int = PAGE_ITEMS,
) -> tuple[Record | None, bool]:
    """Pages of one segment from `start` while `keep_going()`: after each page `saved(key, done)` (the checkpoint:
    a page is only passed once every item of it was acted on). Returns where it stopped and whether it is done."""
    key = start
    while True:
        key = engine.scan_page(segment, segments, key, limit)
        saved(key, key is None)
        if key is None:
            return None, True
        if not keep_going():
            return key, False


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Lambda entry point (`backfill.handler`) of the optional backfill function: one slice of one segment within
    the invocation's time budget. Event: {"segment", "segments", "startKey" (or null), "dryRun", "reconcile",
    "readUnitsPerSecond", "schedulerCallsPerSecond", "started", "partial", "pageItems", "fresh"}. Answer: {"segment",
    "startKey" (where to resume), "done", "tally", "partial" (aggregate's sums so far)}; the caller invokes again
    until done."""
    from st_core.config import load_config

    config = load_config()
    options = Options(
        bool(event.get("dryRun")),
        bool(event.get("reconcile")),
        float(event.get("started") or time.time()),
        bool(event.get("fresh")),
    )
    reads = Throttle(_rate(event.get("readUnitsPerSecond")))
    calls = Throttle(_rate(event.get("schedulerCallsPerSecond")))
    feed = in_process(config) if config["mode"] != "aggregate" else _no_feed
    engine = Engine(config, feed, options=options, reads=reads, calls=calls)
    if config["mode"] == "aggregate":
        engine.absorb(event.get("partial"))

    def keep_going() -> bool:
        left = context.get_remaining_time_in_millis() / 1000 if context is not None else math.inf
        return bool(left > MARGIN_SECONDS)

    key, done = run_slice(
        engine,
        int(event["segment"]),
        int(event["segments"]),
        event.get("startKey"),
        keep_going=keep_going,
        limit=int(event.get("pageItems") or PAGE_ITEMS),
    )
    answer: dict[str, Any] = {
        "segment": int(event["segment"]),
        "startKey": key,
        "done": done,
        "tally": engine.tally.to_json(),
    }
    if config["mode"] == "aggregate":
        answer["partial"] = engine.partial()
    return answer


def _rate(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _no_feed(records: Iterable[Record]) -> list[Failure]:
    raise AssertionError("aggregate totals are not fed record by record")
