"""`aggregate` mode (seed 003): source items (partition key starting `SCORE`) keep a running total per group (the
user) in the same table, at `PK=<group>`, `SK=TOTAL`.

Exactly once, one write per group per batch, and no transaction on the normal path: the batch's records are
coalesced into one delta per group, and that delta is added by one conditional UpdateItem of the total which also
records which stream records it applied. The total item keeps the ids of its recent records (`record_digest` of
the record's `eventID` and the group: 6 bytes) in binary sets, one per 15-minute bucket of the records' creation
time (`ApproximateCreationDateTime`, the same on every delivery of a record): attributes `stIds<bucket>`. The write
is conditional on `NOT contains(stIds<bucket>, id)` for each of its records, so a record applied before (a batch
delivered again, a retry from a sequence number, a bisected batch, a response lost after the write happened) fails
it; DynamoDB then returns the item as it was (ReturnValuesOnConditionCheckFailure), the records whose ids it holds
are dropped and the rest written again. Nothing here depends on the order of records or on shards, so any
parallelization factor works: writes to one total are serialized by DynamoDB, each checking every id it adds.

A record cannot come back once it is older than the horizon (`horizonSeconds`: the event source mapping's maximum
record age, plus the function timeout for a delivery that started just before that age, plus a margin); a bucket is
removed by the next write of its total once every record it can hold is past the horizon. Records older than the
horizon cannot be checked and are parked with the reason (Lambda does not deliver them).

A record parked because its group's total cannot be written (the total is not a number, the sum leaves DynamoDB's
range) was not applied: it is parked with the groups it was not applied to (`stUnapplied` on the parked record), and
its replay (`redrive poison`, once the total is fixed) is applied to those groups only, through the ledger's marker
whatever its age, so a replay a day later counts once, and so does a second replay of it while the ledger remembers
the first (`windowSeconds`). Its ids on the total are checked as well while they are there.

The ids take at most RING_BYTES of the item, so a total stays under 1 KB and a write costs one write unit. A group
with more records within the horizon than fit falls back to the ledger: its write becomes a transaction with one
marker per record in the ledger table (2 write units each), which also sets `stLedgerUntil` to now + the horizon
on the total. Writes without markers require `stLedgerUntil` to be absent or past, so a record applied through the
ledger is checked against the ledger for as long as it can come back; the ledger path checks the ids on the total
as well, and puts its own there when they fit (so ledger mode ends one horizon after the last write whose ids did
not fit). A record without a creation time (Lambda always gives one) can only be checked in the ledger, and takes
that path. `stIds*` and `stLedgerUntil` are reserved names on the total item.

On another account's table the ledger path cannot be a transaction (DynamoDB refuses one whose items are in two
accounts, and the ledger is in the deploying account): the write there takes the records' markers from the ledger
first, adds to the total with a journal of its records' ids (`stJournal`, also reserved), then puts their markers and
clears the journal (see `Totals._in_steps`).

Each container remembers the ids of the totals it wrote (DynamoDB returns the item with every write, at no cost):
a record whose id it saw there was applied, and is skipped without a write (Lambda's retry of a batch mostly
reaches the container of its first delivery); the memory also names the expired buckets to remove. It is only a
hint: a new container learns from the first failed condition, and the conditions alone make each record count once.

The ledger has no stream and the total's key does not start with the source prefix, so nothing written here can
invoke this function again.

Sums use DynamoDB's number arithmetic exactly (38 significant digits; Python's default context has 28). A total
that can never be written (the sum leaves DynamoDB's range, the total attribute is not a number) is parked with the
reason, record by record, instead of blocking the shard until its retries run out.
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Context, Decimal, Inexact, InvalidOperation, Overflow, Underflow
from enum import StrEnum
from functools import cached_property
from threading import Lock
from typing import TYPE_CHECKING, Any

from st_core import log
from st_core.batch import batch_metrics, park_malformed, process_batch, sequence_order
from st_core.clients import CLIENTS, Clients
from st_core.config import load_config
from st_core.errors import PermanentError, TransientError, error_code, is_transient
from st_core.idempotency import DIGEST_BYTES, marker_put, put_markers, record_digest, shares_account_with_ledger
from st_core.poison import PoisonQueue, message_limit
from st_core.reads import read_items
from st_core.stream import (
    AttributeValue,
    BatchResponse,
    DynamoDBStreamEvent,
    DynamoDBStreamRecord,
    changed_at,
    decode_image,
    identity_of,
    request_value,
    sequence_number,
    split_event,
)

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import AggregateConfig, HandlerConfig

# The AWS actions this module's own calls need (checked by tests/iam): the total's update on the table, alone or in
# a transaction with one marker put per record into the ledger (on another account's table, the markers are read
# and put in batches by st_core's reads and idempotency, which declare those).
AWS_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem")

MODE = "aggregate"
MARKER_PREFIX = "aggregate#"
# On a record parked because its group's total cannot be written: the groups (`Contribution.group`) it was not
# applied to. Its replay applies it to those only, through the ledger (see the module's docstring).
UNAPPLIED = "stUnapplied"
# Records per write: a transaction holds at most 100 actions (the total's update and up to 99 markers).
RECORDS_PER_WRITE = 99
# DynamoDB allows 300 operators and functions in an expression. A write's condition has 2 per record (`contains`
# and an `OR`, or the bucket's `NOT`), 1 per bucket (its `AND`) and 4 for the ledger guard: chunks stay below this.
# The 4 KB limit on an expression's length follows: 2.2 KB for 99 records in one bucket, at most 2.9 KB (95 records
# in as many buckets); the update expression stays under 1.5 KB with 40 expired buckets to remove.
MAX_OPERATORS = 290
# Ids are grouped by the record's creation time into buckets of this many seconds. Fixed, not derived from the
# horizon, so a changed configuration never moves a record to another bucket than the one its id was written to;
# 15 minutes keeps about 5 buckets (5 attribute names) on a total at the default horizon while holding ids at most
# 15 minutes beyond it.
BUCKET_SECONDS = 900
# What the ids may take of the total item (each 6 bytes, each bucket's name 12): about 130 ids, so that with a short
# group key the total stays under 1 KB and every write to it costs one write unit.
RING_BYTES = 800
RING_PREFIX = "stIds"
LEDGER_UNTIL = "stLedgerUntil"
# On another account's table: the ids of a ledger-path write applied to the total whose markers may not be in the
# ledger yet (see `Totals._in_steps`).
JOURNAL = "stJournal"
# Totals whose ids this container remembers (about 1 KB each when full): a hint, never needed for correctness.
CACHED_TOTALS = 10_000
# A write that fails for a transient reason (throttled, 5xx, timed out, a transaction conflict) is tried again this
# many times in the invocation, after 50, 100 and 200 ms, before the group is reported for Lambda's retry: every
# attempt is conditional, so repeating one is safe, and Lambda's retry resends the rest of the batch as well.
TRANSIENT_RETRIES = 3
RETRY_DELAY_SECONDS = 0.05
# Attempts of a chunk whose condition failed because of what another write did meanwhile.
CONDITION_ATTEMPTS = 4
BUCKET_NAME = rf"^{RING_PREFIX}(\d+)$"  # compiled on first use (re caches it), not on every cold start
# DynamoDB numbers: 38 significant digits, magnitudes 1E-130 to 9.99..E+125. Every inexact or out-of-range result
# is an error here, as it is in DynamoDB, never a silent rounding.
DYNAMODB_NUMBERS = Context(prec=38, Emax=125, Emin=-130, traps=[Inexact, Overflow, Underflow, InvalidOperation])


class Aggregation(StrEnum):
    SUM = "sum"
    COUNT = "count"


# The records below are plain classes, not dataclasses: a dataclass generates and compiles its methods when the
# module is imported, 0.5-0.9 ms each on every cold start.


class Contribution:
    """One record's change to one group's total."""

    def __init__(
        self,
        group: str,  # the group key's canonical identity (type tag included)
        key: AttributeValue,  # the group key as a request value (the total's partition key)
        delta: Decimal,
        event_id: str,
        sequence: str,
        created: float | None = None,  # the record's ApproximateCreationDateTime (epoch seconds)
        record: DynamoDBStreamRecord | None = None,
    ) -> None:
        self.group, self.key, self.delta, self.event_id, self.sequence = group, key, delta, event_id, sequence
        self.created, self.record = created, record
        self.ledger_only = False  # a replay of a record parked unapplied: checked in the ledger, whatever its age

    @property
    def marker(self) -> str:
        return f"{MARKER_PREFIX}{self.event_id}#{self.group}"

    @cached_property
    def digest(self) -> bytes:
        return record_digest(self.event_id, self.group)

    @property
    def step_marker(self) -> str:
        """Its marker on another account's table, where a journal names records by digest (`Totals._in_steps`)."""
        return journal_marker(self.group, self.digest)

    @property
    def bucket(self) -> int | None:
        """The bucket its id lives in; None when the record does not say when it was made (ledger only)."""
        return None if self.created is None else math.floor(self.created / BUCKET_SECONDS)


def journal_marker(group: str, digest: bytes) -> str:
    """The ledger marker of a record by its digest (a journal holds digests, not the records' event ids)."""
    return f"{MARKER_PREFIX}{digest.hex()}#{group}"


class Collected:
    def __init__(self) -> None:
        self.contributions: list[Contribution] = []
        self.lock = Lock()

    def add(self, items: list[Contribution]) -> None:
        with self.lock:
            self.contributions.extend(items)


def _value(image: dict[str, Any], settings: AggregateConfig) -> Decimal:
    if Aggregation(settings["aggregation"]) is Aggregation.COUNT:
        return Decimal(1)
    value = image.get(settings["valueAttribute"])
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise PermanentError(
            f"value attribute {settings['valueAttribute']!r} is {type(value).__name__} {str(value)[:40]!r}, "
            "not a number"
        )
    return Decimal(value)


def _group(image: dict[str, Any], typed: dict[str, Any], settings: AggregateConfig) -> tuple[str, AttributeValue]:
    """The group's identity and its key value (string or binary, as the table's partition key is typed)."""
    group = image.get(settings["groupFrom"])
    tag = next(iter(typed.get(settings["groupFrom"]) or {"NULL": True}))
    if tag not in ("S", "B") or not isinstance(group, str) or not group:
        raise PermanentError(f"group attribute {settings['groupFrom']!r} is missing or not a string or binary")
    if tag == "S" and group.startswith(settings["sourcePrefix"]):
        # Its total would itself look like a source item and count itself: refuse rather than loop.
        raise PermanentError(f"group {group[:60]!r} starts with the source prefix {settings['sourcePrefix']!r}")
    value = typed[settings["groupFrom"]]
    return identity_of({"group": value}), request_value(value)


def _created(record: DynamoDBStreamRecord) -> float | None:
    moment = changed_at(record)
    return moment if moment is not None and math.isfinite(moment) else None


def contributions(record: DynamoDBStreamRecord, settings: AggregateConfig) -> list[Contribution]:
    """What one record changes, per group (pure). INSERT adds; with `onChange=adjust` a MODIFY applies the
    difference (moving between groups if the group changed) and a REMOVE subtracts."""
    data = record["dynamodb"]
    new_typed, old_typed = data.get("NewImage"), data.get("OldImage")
    new, old = decode_image(new_typed), decode_image(old_typed)
    event_id, sequence = str(record.get("eventID", "")), sequence_number(record)
    if not event_id:
        raise PermanentError("stream record has no eventID to apply it exactly once")
    adjust = settings["onChange"] == "adjust"
    parts: list[tuple[tuple[str, AttributeValue], Decimal]] = []
    name = record["eventName"]
    if name == "INSERT" and new is not None and new_typed is not None:
        parts.append((_group(new, new_typed, settings), _value(new, settings)))
    elif name == "MODIFY" and adjust and new is not None and old is not None and new_typed and old_typed:
        parts.append((_group(new, new_typed, settings), _value(new, settings)))
        parts.append((_group(old, old_typed, settings), _value(old, settings).copy_negate()))
    elif name == "REMOVE" and adjust and old is not None and old_typed is not None:
        parts.append((_group(old, old_typed, settings), _value(old, settings).copy_negate()))
    merged: dict[str, tuple[AttributeValue, Decimal]] = {}
    try:
        for (group, key), delta in parts:
            merged[group] = (key, DYNAMODB_NUMBERS.add(merged.get(group, (key, Decimal(0)))[1], delta))
    except ArithmeticError as exc:
        raise PermanentError(f"the record's change is not a DynamoDB number: {type(exc).__name__}") from exc
    created = _created(record)
    return [
        Contribution(group=g, key=k, delta=d, event_id=event_id, sequence=sequence, created=created, record=record)
        for g, (k, d) in merged.items()
        if d != 0
    ]


# -- the ids on a total ------------------------------------------------------------------------------------------


def bucket_name(bucket: int) -> str:
    return f"{RING_PREFIX}{bucket}"


class Ring:
    """What this container last saw of a total: its ids by bucket (each bucket's digests joined in one bytes value,
    to keep a cached total near 1 KB), and the ledger guard. An id seen on the total is a record applied: ids are
    only written by a write that applies their record, and only removed once their record cannot come back."""

    def __init__(self, ids: dict[int, bytes] | None = None, ledger_until: int = 0) -> None:
        self.ids: dict[int, bytes] = {} if ids is None else ids
        self.ledger_until = ledger_until

    @classmethod
    def of(cls, item: dict[str, Any]) -> Ring:
        """From a total item as DynamoDB returns it (ReturnValues)."""
        ids = {}
        for name, value in item.items():
            found = re.match(BUCKET_NAME, name)
            if found and isinstance(value, dict) and "BS" in value:
                ids[int(found.group(1))] = b"".join(sorted(bytes(b) for b in value["BS"]))
        until = item.get(LEDGER_UNTIL, {}).get("N")
        return cls(ids, int(Decimal(until)) if until else 0)

    @property
    def buckets(self) -> dict[int, int]:
        """Bucket -> how many ids it holds."""
        return {b: len(joined) // DIGEST_BYTES for b, joined in self.ids.items()}

    def holds(self, c: Contribution) -> bool:
        joined = self.ids.get(c.bucket) if c.bucket is not None else None
        if not joined:
            return False
        return any(joined[i : i + DIGEST_BYTES] == c.digest for i in range(0, len(joined), DIGEST_BYTES))

    @staticmethod
    def size(buckets: dict[int, int]) -> int:
        """Bytes of these buckets (name and ids) on the item."""
        return sum(len(bucket_name(b)) + DIGEST_BYTES * n for b, n in buckets.items())


class RingCache:
    """Per container: the last known ring of each total (LRU). Only a hint: it saves a failed write in ledger mode
    and tells which expired buckets to remove; the write's conditions are what make each record count once."""

    def __init__(self, capacity: int = CACHED_TOTALS) -> None:
        self.capacity = capacity
        self._rings: OrderedDict[tuple[str, str], Ring] = OrderedDict()
        self._lock = Lock()

    def get(self, key: tuple[str, str]) -> Ring | None:
        with self._lock:
            ring = self._rings.get(key)
            if ring is not None:
                self._rings.move_to_end(key)
            return ring

    def put(self, key: tuple[str, str], ring: Ring) -> None:
        with self._lock:
            self._rings[key] = ring
            self._rings.move_to_end(key)
            while len(self._rings) > self.capacity:
                self._rings.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._rings.clear()


RINGS = RingCache()


class Unwritable(PermanentError):
    """A group's total can never be written: the reason, and the records of it that were not applied."""

    def __init__(self, reason: str, records: list[Contribution], code: str = "") -> None:
        super().__init__(reason)
        self.records = records
        self.code = code


class Plan:
    """One write of a chunk of one group's records: which path, what it adds, checks and removes."""

    def __init__(self, *, ledger: bool, add_ids: bool, set_until: bool, expired: list[int]) -> None:
        self.ledger = ledger
        self.add_ids = (
            add_ids  # put the chunk's ids on the total (always on the ring path; on the ledger path when they fit)
        )
        self.set_until = set_until  # stamp stLedgerUntil: some record is applied without its id on the total
        self.expired = expired  # buckets every record of which is past the horizon


class Outcome:
    def __init__(self) -> None:
        self.applied = 0
        self.skipped = 0  # records applied before (found on the total, in this container's memory of it, or the ledger)
        self.units = 0.0  # write units DynamoDB reported (ConsumedCapacity) for the successful writes
        self.failed_writes = 0  # conditional writes that failed (each also costs at least one write unit)
        self.writes = 0
        self.ledger_writes = 0

    def add(self, other: Outcome) -> None:
        for name in ("applied", "skipped", "units", "failed_writes", "writes", "ledger_writes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


def chunks(items: list[Contribution]) -> Iterator[list[Contribution]]:
    """A group's records in writes that fit a transaction and DynamoDB's expression limits (by bucket, so that each
    write's condition names few buckets)."""
    ordered = sorted(items, key=lambda c: (c.bucket is None, c.bucket or 0))
    chunk: list[Contribution] = []
    buckets: set[int | None] = set()
    for item in ordered:
        grown = buckets | {item.bucket}
        if chunk and (len(chunk) == RECORDS_PER_WRITE or 2 * (len(chunk) + 1) + len(grown) + 4 > MAX_OPERATORS):
            yield chunk
            chunk, grown = [], {item.bucket}
        chunk.append(item)
        buckets = grown
    if chunk:
        yield chunk


class Totals:
    """Applies coalesced deltas: one conditional write per group (per chunk), each record counted once."""

    def __init__(
        self, config: HandlerConfig, clients: Clients, now: Callable[[], float], rings: RingCache = RINGS
    ) -> None:
        self.config = config
        self.settings = config["aggregate"]
        self.horizon = int(self.settings["horizonSeconds"])
        self.clients = clients
        self.now = now
        self.rings = rings

    def apply(self, group: str, items: list[Contribution], outcome: Outcome) -> None:
        """Applies what of `items` was not applied before, counting in `outcome`. Unwritable, naming the records not
        applied, when the total can never be written (every chunk is tried: some may be applied before)."""
        failed: Unwritable | None = None
        unapplied: list[Contribution] = []
        for chunk in chunks(items):
            try:
                self._apply_chunk(group, chunk, outcome)
            except Unwritable as exc:
                failed = failed or exc
                unapplied += exc.records
        if failed is not None:
            raise Unwritable(str(failed), unapplied, failed.code)

    def _apply_chunk(self, group: str, chunk: list[Contribution], outcome: Outcome) -> None:
        conditions = transient = 0
        while True:
            # Records whose ids this container saw on the total were applied: no write needed to learn that again
            # (Lambda's retry of a batch mostly reaches the container that saw its first delivery).
            known = self.rings.get((self.config["table"], group))
            pending = [c for c in chunk if known is None or not known.holds(c)]
            outcome.skipped += len(chunk) - len(pending)
            chunk = pending
            if not chunk:
                return
            try:
                seen = self._write(group, chunk, outcome)
            except Exception as exc:
                if isinstance(exc, PermanentError):
                    raise Unwritable(str(exc), self._unapplied(group, chunk), error_code(exc)) from exc
                if not is_transient(exc) or transient == TRANSIENT_RETRIES:
                    raise
                transient += 1
                time.sleep(RETRY_DELAY_SECONDS * 2 ** (transient - 1))
                continue
            if seen is None:
                outcome.applied += len(chunk)
                return
            outcome.skipped += len(seen)
            chunk = [c for i, c in enumerate(chunk) if i not in seen]
            conditions += 1
            if chunk and conditions == CONDITION_ATTEMPTS:
                raise TransientError(f"group {group!r}: the total's write kept failing its condition")

    def _unapplied(self, group: str, chunk: list[Contribution]) -> list[Contribution]:
        """Of a chunk whose write can never succeed, the records whose ids the total does not hold: the others were
        applied before, whichever check DynamoDB made first. The total is read with a write that cannot happen (its
        condition is false on any item; DynamoDB returns the item that failed it): UpdateItem is all this function
        may call on the table. A record applied through the ledger is found by its marker when it is replayed."""
        s = self.settings
        hash_name = str(self.config["partitionKey"])
        try:
            self.clients.get("dynamodb").update_item(
                TableName=self.config["table"],
                Key={hash_name: chunk[0].key, str(self.config["sortKey"]): {"S": s["totalSortKey"]}},
                UpdateExpression="REMOVE #until",
                ConditionExpression="attribute_exists(#key) AND attribute_not_exists(#key)",
                ExpressionAttributeNames={"#until": LEDGER_UNTIL, "#key": hash_name},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            held = _present(chunk, getattr(exc, "response", {}).get("Item") or {})
            return [c for i, c in enumerate(chunk) if i not in held]
        raise TransientError(f"group {group!r}: a condition that cannot hold held")  # never: DynamoDB checks it

    # -- one write ---------------------------------------------------------------------------------------------------

    def _write(self, group: str, chunk: list[Contribution], outcome: Outcome) -> set[int] | None:
        """One attempt: None when the chunk was applied, else the indexes of its records applied before (possibly
        none, when only the ledger guard failed: the next attempt takes the ledger path)."""
        now = int(self.now())
        cache_key = (self.config["table"], group)
        known = self.rings.get(cache_key)
        plan = self._plan(chunk, known, now)
        request = self._request(group, chunk, plan, now)
        try:
            if plan.ledger and not shares_account_with_ledger(self.config["table"]):
                return self._in_steps(group, chunk, plan, request, now, outcome)
            if plan.ledger:
                return self._transact(group, chunk, plan, request, now, outcome)
            response = self.clients.get("dynamodb").update_item(
                **request, ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        except Exception as exc:
            code = error_code(exc)
            if code == "ValidationException":
                raise PermanentError(f"group {group!r}: the total cannot be written: {str(exc)[:300]}") from exc
            if code != "ConditionalCheckFailedException":
                raise
            outcome.failed_writes += 1
            item = getattr(exc, "response", {}).get("Item")
            if item is None:
                # AWS returns the item whenever this write's condition can fail (it only fails on an existing item).
                raise TransientError(f"group {group!r}: condition failed and DynamoDB returned no item") from exc
            self.rings.put(cache_key, Ring.of(item))
            return _present(chunk, item)
        outcome.units += _units(response)
        outcome.writes += 1
        self.rings.put(cache_key, Ring.of(response.get("Attributes", {})))
        self._applied(group, chunk, plan, request, _units(response))
        return None

    def _plan(self, chunk: list[Contribution], known: Ring | None, now: int) -> Plan:
        ring = known or Ring()
        referenced = {c.bucket for c in chunk if c.bucket is not None}
        expired = sorted(b for b in ring.buckets if self._expired(b, now) and b not in referenced)
        kept = {b: n for b, n in ring.buckets.items() if b not in expired}
        for c in chunk:
            if c.bucket is not None:
                kept[c.bucket] = kept.get(c.bucket, 0) + 1
        fits = ring.size(kept) <= RING_BYTES
        timed = len(referenced) > 0
        ring_only = all(c.bucket is not None and not c.ledger_only for c in chunk)
        if fits and timed and ring_only and ring.ledger_until < now:
            return Plan(ledger=False, add_ids=True, set_until=False, expired=expired)
        add_ids = fits and timed
        return Plan(ledger=True, add_ids=add_ids, set_until=timed and not add_ids, expired=expired)

    def _expired(self, bucket: int, now: int) -> bool:
        """True once no record of the bucket can come back: its latest record is older than the horizon."""
        return (bucket + 1) * BUCKET_SECONDS + self.horizon < now

    def _request(self, group: str, chunk: list[Contribution], plan: Plan, now: int) -> dict[str, Any]:
        """The total's UpdateItem (alone, or the Update of the ledger path's transaction)."""
        s = self.settings
        try:
            delta = Decimal(0)
            for c in chunk:
                delta = DYNAMODB_NUMBERS.add(delta, c.delta)
        except ArithmeticError as exc:
            raise PermanentError(
                f"group {group!r}: the batch's change to the total is beyond DynamoDB's numbers (38 digits, "
                f"magnitude up to 1E+126): {type(exc).__name__}"
            ) from exc
        names: dict[str, str] = {"#total": s["totalAttribute"]}
        values: dict[str, Any] = {":delta": {"N": str(delta)}}
        by_bucket: dict[int, list[tuple[int, bytes]]] = {}
        for index, c in enumerate(chunk):
            if c.bucket is not None:
                by_bucket.setdefault(c.bucket, []).append((index, c.digest))
        adds = ["#total :delta"]
        checks: list[str] = []
        for n, (bucket, members) in enumerate(sorted(by_bucket.items())):
            names[f"#b{n}"] = bucket_name(bucket)
            clauses = []
            for index, digest in members:
                values[f":i{index}"] = {"B": digest}
                clauses.append(f"contains(#b{n},:i{index})")
            checks.append(f"NOT ({' OR '.join(clauses)})")
            if plan.add_ids:
                # A set has no duplicates: two records with one digest (about 1e-12) share it, and both count.
                values[f":s{n}"] = {"BS": sorted({digest for _, digest in members})}
                adds.append(f"#b{n} :s{n}")
        expression = "ADD " + ", ".join(adds)
        if not plan.ledger:
            names["#until"] = LEDGER_UNTIL
            values[":now"] = {"N": str(now)}
            checks.insert(0, "(attribute_not_exists(#until) OR #until < :now)")
        elif plan.set_until:
            names["#until"] = LEDGER_UNTIL
            values[":until"] = {"N": str(now + self.horizon)}
            expression += " SET #until = :until"
        if plan.expired:
            for n, bucket in enumerate(plan.expired):
                names[f"#x{n}"] = bucket_name(bucket)
            expression += " REMOVE " + ", ".join(f"#x{n}" for n in range(len(plan.expired)))
        request: dict[str, Any] = {
            "TableName": self.config["table"],
            "Key": {self.config["partitionKey"]: chunk[0].key, str(self.config["sortKey"]): {"S": s["totalSortKey"]}},
            "UpdateExpression": expression,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnConsumedCapacity": "TOTAL",
        }
        if checks:
            request["ConditionExpression"] = " AND ".join(checks)
        return request

    def _transact(
        self,
        group: str,
        chunk: list[Contribution],
        plan: Plan,
        request: dict[str, Any],
        now: int,
        outcome: Outcome,
    ) -> set[int] | None:
        """The ledger path: the total's update and one marker per record, all or nothing."""
        s = self.settings
        update = {k: v for k, v in request.items() if k != "ReturnConsumedCapacity"}
        update["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        expires = self._marker_expiry(now)
        actions: list[dict[str, Any]] = [{"Update": update}]
        actions += [marker_put(s["ledgerTable"], c.marker, expires) for c in chunk]
        try:
            response = self.clients.get("dynamodb").transact_write_items(
                TransactItems=actions, ReturnConsumedCapacity="TOTAL"
            )
        except Exception as exc:
            code = error_code(exc)
            if code == "ValidationException":
                raise PermanentError(f"group {group!r}: the total cannot be written: {str(exc)[:300]}") from exc
            if code != "TransactionCanceledException":
                raise
            reasons = getattr(exc, "response", {}).get("CancellationReasons", [])
            invalid = [r for r in reasons if r.get("Code") in ("ValidationError", "ValidationException")]
            if invalid:
                # The total is not a number, or the sum leaves DynamoDB's range: retrying cannot help.
                message = invalid[0].get("Message") or invalid[0].get("Code")
                raise PermanentError(f"group {group!r}: the total cannot be written: {message}") from exc
            failed = [i for i, r in enumerate(reasons) if r.get("Code") == "ConditionalCheckFailed"]
            if not failed:
                raise TransientError(f"group {group!r}: transaction cancelled ({reasons})") from exc
            outcome.failed_writes += 1
            seen = {i - 1 for i in failed if i > 0}
            if 0 in failed:
                item = reasons[0].get("Item")
                if item is None:
                    raise TransientError(f"group {group!r}: condition failed and DynamoDB returned no item") from exc
                self.rings.put((self.config["table"], group), Ring.of(item))
                seen |= _present(chunk, item)
            return seen
        units = _units(response)
        outcome.units += units
        outcome.writes += 1
        outcome.ledger_writes += 1
        self._remember(group, chunk, plan, now)
        self._applied(group, chunk, plan, request, units)
        return None

    def _in_steps(
        self,
        group: str,
        chunk: list[Contribution],
        plan: Plan,
        request: dict[str, Any],
        now: int,
        outcome: Outcome,
    ) -> set[int] | None:
        """The ledger path on another account's table, without a transaction: each record still counts once.

        1. read the chunk's markers (consistent): a record with one was applied;
        2. add to the total as the transaction's update would, and add the chunk's ids to `stJournal`, conditional
           (besides the ids on the total) on the total having no journal;
        3. put the chunk's markers, then remove the journal (conditional on it being this write's).

        A record is applied exactly when its id is on the total (ring or journal) or its marker is in the ledger,
        and every write checks the total's ids and journal in its own condition: a crash after step 2 leaves the
        journal, which fails the next ledger-path write of that total (any container's, any batch's); that write
        puts the journal's markers and removes it (`_settle`), and its own records are then checked in the ledger
        again (step 1), where the journal's now are. Steps 1 and 2 are not one: a record counted by another write
        between them would count twice; a record is only ever in one invocation at a time (Lambda runs one batch
        per shard, or per key with a parallelization factor, and retries a batch only after it ended).
        Cost: one consistent read per record, the update, a put per record and the journal's removal (the
        transaction: two write units per record and two for the update)."""
        keys = [{"id": {"S": c.step_marker}} for c in chunk]
        found = read_items(self.clients, self.settings["ledgerTable"], {identity_of(k): k for k in keys}, workers=1)
        if any(identity_of(k) not in found for k in keys):
            raise TransientError(f"group {group!r}: the ledger's markers could not all be read")
        marked = {i for i, k in enumerate(keys) if found[identity_of(k)] is not None}
        if marked:
            return marked
        journal = sorted({c.digest for c in chunk})
        update = {
            **request,
            "UpdateExpression": request["UpdateExpression"].replace("ADD ", "ADD #journal :journal, ", 1),
            "ConditionExpression": " AND ".join(
                [
                    "attribute_not_exists(#journal)",
                    *([request["ConditionExpression"]] if "ConditionExpression" in request else []),
                ]
            ),
            "ExpressionAttributeNames": {**request["ExpressionAttributeNames"], "#journal": JOURNAL},
            "ExpressionAttributeValues": {**request["ExpressionAttributeValues"], ":journal": {"BS": journal}},
        }
        ddb = self.clients.get("dynamodb")
        try:
            response = ddb.update_item(**update, ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            outcome.failed_writes += 1
            item = getattr(exc, "response", {}).get("Item")
            if item is None:
                raise TransientError(f"group {group!r}: condition failed and DynamoDB returned no item") from exc
            self.rings.put((self.config["table"], group), Ring.of(item))
            left = {bytes(b) for b in item.get(JOURNAL, {}).get("BS", [])}
            if left:
                self._settle(group, chunk[0].key, left, now)
            return _present(chunk, item) | {i for i, c in enumerate(chunk) if c.digest in left}
        units = _units(response)
        outcome.units += units
        outcome.writes += 1
        outcome.ledger_writes += 1
        self.rings.put((self.config["table"], group), Ring.of(response.get("Attributes", {})))
        self._settle(group, chunk[0].key, set(journal), now)
        self._applied(group, chunk, plan, request, units)
        return None

    def _settle(self, group: str, key: AttributeValue, journal: set[bytes], now: int) -> None:
        """Put the markers of the records a total's journal names, then remove the journal (if it is still that
        one: another container may have settled it first)."""
        s = self.settings
        markers = [journal_marker(group, d) for d in sorted(journal)]
        put_markers(self.clients, s["ledgerTable"], markers, self._marker_expiry(now))
        try:
            self.clients.get("dynamodb").update_item(
                TableName=self.config["table"],
                Key={self.config["partitionKey"]: key, str(self.config["sortKey"]): {"S": s["totalSortKey"]}},
                UpdateExpression="REMOVE #journal",
                ConditionExpression="#journal = :journal",
                ExpressionAttributeNames={"#journal": JOURNAL},
                ExpressionAttributeValues={":journal": {"BS": sorted(journal)}},
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    def _marker_expiry(self, now: int) -> int:
        """A marker must outlive every redelivery of its record, however the ledger window is set."""
        return now + max(self.settings["windowSeconds"], self.horizon)

    def _remember(self, group: str, chunk: list[Contribution], plan: Plan, now: int) -> None:
        """A transaction returns no item: what this write did to the ring, applied to what was known of it."""
        key = (self.config["table"], group)
        known = self.rings.get(key)
        if known is None:
            return
        ids = {b: joined for b, joined in known.ids.items() if b not in plan.expired}
        if plan.add_ids:
            for c in chunk:
                if c.bucket is not None and not known.holds(c):
                    ids[c.bucket] = ids.get(c.bucket, b"") + c.digest
        until = now + self.horizon if plan.set_until else known.ledger_until
        self.rings.put(key, Ring(ids, until))

    def _applied(
        self, group: str, chunk: list[Contribution], plan: Plan, request: dict[str, Any], units: float
    ) -> None:
        delta = request["ExpressionAttributeValues"][":delta"]["N"]
        path = "ledger" if plan.ledger else "ring"
        log.debug("total-updated", group=group, delta=delta, records=len(chunk), path=path, writeUnits=units)


def _present(chunk: list[Contribution], item: dict[str, Any]) -> set[int]:
    """Indexes of the chunk's records whose ids the total holds: applied before."""
    ring = Ring.of(item)
    return {index for index, c in enumerate(chunk) if ring.holds(c)}


def _units(response: dict[str, Any]) -> float:
    """Write units of a successful write, as DynamoDB reports them (ReturnConsumedCapacity=TOTAL)."""
    consumed = response.get("ConsumedCapacity") or []
    entries = consumed if isinstance(consumed, list) else [consumed]
    return float(sum(e.get("CapacityUnits", 0) for e in entries if isinstance(e, dict)))


def handle_batch(
    event: DynamoDBStreamEvent | object,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], float] = time.time,
) -> BatchResponse:
    settings = config["aggregate"]
    horizon = int(settings["horizonSeconds"])
    poison = PoisonQueue(
        config["poisonQueueUrl"], mode=MODE, table=config["table"], clients=clients, limit=message_limit(config)
    )
    records, malformed = split_event(event)
    park_malformed(poison, malformed)
    collected = Collected()

    def collect(record: DynamoDBStreamRecord) -> None:
        found = contributions(record, settings)
        groups = unapplied_groups(record)
        if groups is not None:
            # A replay of a record parked unapplied, at any age: to the groups it was not applied to (the others
            # were), each checked in the ledger.
            found = [c for c in found if c.group in groups]
            for c in found:
                c.ledger_only = True
            collected.add(found)
            return
        age = now() - found[0].created if found and found[0].created is not None else 0.0
        if age > horizon:
            raise PermanentError(
                f"stream record is {age:.0f} s old, beyond the {horizon} s horizon (maximum record age + "
                "function timeout + margin): Lambda does not deliver records that old, and it cannot be checked "
                "against an earlier delivery"
            )
        collected.add(found)

    # Phase 1, per record: what it contributes; bad records go to the poison queue with the reason.
    parsed = process_batch(records, collect, poison=poison, max_workers=config["maxWorkers"])
    # Phase 2, per group: one write for the whole batch's delta. A record twice in one event counts once.
    by_group: dict[str, list[Contribution]] = {}
    unique: set[tuple[str, str]] = set()
    for item in collected.contributions:
        if (item.event_id, item.group) not in unique:
            unique.add((item.event_id, item.group))
            by_group.setdefault(item.group, []).append(item)
    totals = Totals(config, clients, now)
    outcomes: list[Outcome] = []
    unwritable: list[Unwritable] = []

    def apply(group: str) -> list[str]:
        """The sequence numbers to retry from when this group's total could not be written (none if parked)."""
        items = by_group[group]
        outcome = Outcome()
        outcomes.append(outcome)
        try:
            totals.apply(group, items, outcome)
        except Unwritable as exc:
            unwritable.append(exc)  # parked once every group is done: a record once, with all it was not applied to
            return []
        except Exception as exc:
            if isinstance(exc, PermanentError) or not is_transient(exc):
                return _park_group(poison, items, str(exc), error_code(exc))
            # Retried from this group's first record; what was applied meanwhile is skipped by its id.
            log.warning("total-failed", group=group, error=type(exc).__name__, reason=str(exc)[:300])
            return [min((c.sequence for c in items), key=sequence_order)]
        return []

    failed = [f["itemIdentifier"] for f in parsed["batchItemFailures"]]
    # Groups are independent (different items, ADD is atomic): their writes run concurrently.
    workers = max(1, min(config["maxWorkers"], len(by_group)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for sequences in pool.map(apply, list(by_group)):
            failed += sequences
    failed += _park_unapplied(poison, unwritable)
    response: BatchResponse = {
        "batchItemFailures": [{"itemIdentifier": seq} for seq in sorted(set(failed), key=sequence_order)]
    }
    summary = Outcome()
    for outcome in outcomes:
        summary.add(outcome)
    log.info(
        "totals-updated",
        groups=len(by_group),
        applied=summary.applied,
        alreadyApplied=summary.skipped,
        writes=summary.writes,
        ledgerWrites=summary.ledger_writes,
        failedConditions=summary.failed_writes,
        writeUnits=summary.units,
    )
    batch_metrics(config, mode=MODE, records=len(records) + len(malformed), poison=poison, response=response)
    return response


def unapplied_groups(record: DynamoDBStreamRecord) -> set[str] | None:
    """The groups a parked record was not applied to (`UNAPPLIED`), when it was parked so; None otherwise."""
    groups = record.get(UNAPPLIED) if isinstance(record, dict) else None
    return {str(g) for g in groups} if isinstance(groups, list) else None


def _park_unapplied(poison: PoisonQueue, failures: list[Unwritable]) -> list[str]:
    """Park each record of totals that can never be written once, with every group it was not applied to: its
    replay applies it to those (`unapplied_groups`). The sequence numbers of those the queue refuses, for retry."""
    by_record: dict[str, tuple[DynamoDBStreamRecord, set[str], list[str], list[str], list[str]]] = {}
    for failure in failures:
        for c in failure.records:
            if c.record is None:
                continue
            record, groups, reasons, codes, sequences = by_record.setdefault(c.event_id, (c.record, set(), [], [], []))
            groups.add(c.group)
            sequences.append(c.sequence)
            if str(failure) not in reasons:
                reasons.append(str(failure))
                codes.append(failure.code)
    retry: list[str] = []
    for record, groups, reasons, codes, sequences in by_record.values():
        stamped = {**record, UNAPPLIED: sorted(groups)}
        try:
            poison.send(stamped, "; ".join(reasons), codes[0])
        except Exception as exc:
            log.error("poison-failed", sequenceNumber=sequences[0], error=error_code(exc), reason=reasons[0])
            retry += sequences
    if by_record:
        log.warning("total-parked", records=len(by_record), reason=reasons[0][:300])
    return retry


def _park_group(poison: PoisonQueue, items: list[Contribution], reason: str, code: str) -> list[str]:
    """Park each record of a group whose total can never be written; those the queue refuses are retried."""
    retry: list[str] = []
    for item in items:
        try:
            poison.send(item.record, reason, code)
        except Exception as exc:
            log.error("poison-failed", sequenceNumber=item.sequence, error=error_code(exc), reason=reason)
            retry.append(item.sequence)
    log.warning("total-parked", records=len(items), reason=reason[:300])
    return retry


def handler(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """Lambda entry point (`aggregate.handler`)."""
    log.invoked(context)
    return handle_batch(event, load_config())
