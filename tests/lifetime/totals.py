"""`aggregate` in the lifetime world (tests/lifetime/world.py): scored items over weeks, the aggregator as the
stream's consumer, and the verdict on its totals.

Each item (`Scored`) is created in a group with a score, then has its score changed, is moved to another group (the
group is an attribute, `owner`, not a key), written again unchanged, deleted, created again, and removed by the
user's own TTL days late; several items share a group, their writes close together or weeks apart. Around them the
world does what AWS does: Lambda's lag, failed batches retried from the failed record with every record after it,
succeeded batches delivered again whole or from a record on at any later time within the stream's 24 h; DynamoDB's
TTL removes the ledger's markers anywhere from their expiry to days later; the table refuses the aggregator's writes
through outages (`Setting.outages`: ThrottlingException, as DynamoDB answers when it cannot take them). A user's bug
writes text into a total (`Break`): its group's records are parked with the reason until the operator fixes the
total and runs `redrive poison`, hours or days later, sometimes before the fix, and sometimes twice (a redrive's
delete of a message was lost, and the message is redriven again).

`totals_verdict`: at the end each group's total is exactly what its records add up to (with `on_change="adjust"`
the items as they finally are, which the verdict also checks the records against; with "ignore" every score
inserted), less the records the handler parked with a reason and never applied, named apart: no record counted
twice, none missed, and a record parked because its total could not be written is applied when it is replayed
after the total was fixed (the documented replay window, docs/modes/aggregate.md)."""

from __future__ import annotations

import copy
import functools
import itertools
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Context, Decimal
from typing import Any
from unittest import mock

from aggregate import UNAPPLIED  # on a record parked because its total could not be written: the groups it missed
from botocore.exceptions import ClientError
from hypothesis import strategies as st
from st_core.clients import CLIENTS
from st_core.stream import identity_of

from tests.lifetime.world import CLEANUP, DAY, HOUR, START, Verdict, World

GROUPS = ("USER#ada", "USER#bob", "USER#cy")
OWNER = "owner"  # the group attribute: not a key, so a score can move between groups
TOTAL = "totalScore"
BROKEN = "n/a"  # what a user's bug writes into a total
# Lambda keeps an idle container for minutes, not for ever: an invocation after this long starts a new one, and
# now and then one does anyway (scaling, a recycled host). A new container has no memory of the totals' ids.
IDLE = timedelta(minutes=10)
NEW_CONTAINER = 0.2
TYPE_FIRST = 0.5  # how often DynamoDB refuses an ADD to a total holding text before checking the ids on it
EXACT = Context(prec=100)  # the verdict's own sums: never rounded
_NAMES = itertools.count()

# Seconds between an item's changes: the same batch, minutes, hours, days and weeks.
GAP = st.one_of(st.integers(0, 5), st.integers(6, 3600), st.integers(3600, 86400), st.integers(86400, 21 * 86400))
# Scores: small, and 31 digits (a sum needs DynamoDB's 38; Python's default context has 28).
VALUES = st.one_of(st.integers(-50, 1000), st.integers(-9, 9).map(lambda k: k * 10**30 + 7))


@dataclass(frozen=True)
class Step:
    """One change of a scored item: "score" (UpdateItem of its value), "move" (UpdateItem of its group), "rewrite"
    (read and PutItem back unchanged), "delete", "create" (PutItem of a new item: again after a delete, or replacing
    it); changes of an item that is gone (deleted, or removed by TTL) are skipped, the app finding nothing."""

    kind: str
    after: int  # seconds after the change before it
    value: int = 0
    group: int = 0


@dataclass(frozen=True)
class Scored:
    created: int  # seconds after START
    group: int
    value: int
    steps: tuple[Step, ...]
    cleanup: int | None = None  # the user's TTL: seconds after each creation


@dataclass(frozen=True)
class Break:
    """A user's bug writes text into a group's total at `at` hours; the operator puts back the number it held
    `fixed` hours later and runs `redrive poison` at each of `redrives` hours from the fix (negative: before it);
    `again` hours after the first redrive the messages it took come back (its deletes were lost) and are redriven."""

    group: int
    at: int
    fixed: int
    redrives: tuple[int, ...]
    again: int | None = None


@st.composite
def scored_lives(draw: st.DrawFn) -> Scored:
    steps = st.builds(
        Step,
        kind=st.sampled_from(["score", "score", "move", "move", "rewrite", "delete", "create"]),
        after=GAP,
        value=VALUES,
        group=st.integers(0, len(GROUPS) - 1),
    )
    return Scored(
        created=draw(st.integers(0, 3 * 86400)),
        group=draw(st.integers(0, len(GROUPS) - 1)),
        value=draw(VALUES),
        steps=tuple(draw(st.lists(steps, max_size=4))),
        cleanup=draw(st.none() | st.integers(3600, 10 * 86400)),
    )


def breaks() -> st.SearchStrategy[Break]:
    return st.builds(
        Break,
        group=st.integers(0, len(GROUPS) - 1),
        at=st.integers(0, 5 * 24),
        fixed=st.integers(1, 72),
        redrives=st.lists(st.integers(-2, 10 * 24), min_size=1, max_size=2).map(tuple),
        again=st.none() | st.integers(1, 36),
    )


def changes(record: dict[str, Any], adjust: bool) -> dict[str, Decimal]:
    """What a stream record changes, per group, read from its images (the documented rule, not the handler's code):
    an INSERT adds its score; with `adjust` a MODIFY adds the new score and takes the old one from its old group, a
    REMOVE takes its score."""
    data = record["dynamodb"]
    parts: list[tuple[dict[str, Any], int]] = []
    if record["eventName"] == "INSERT":
        parts.append((data["NewImage"], 1))
    elif adjust and record["eventName"] == "MODIFY":
        parts += [(data["NewImage"], 1), (data["OldImage"], -1)]
    elif adjust and record["eventName"] == "REMOVE":
        parts.append((data["OldImage"], -1))
    found: dict[str, Decimal] = {}
    for image, sign in parts:
        group = image[OWNER]["S"]
        value = Decimal(image["Score"]["N"])
        found[group] = EXACT.add(found.get(group, Decimal(0)), value if sign > 0 else value.copy_negate())
    return {group: delta for group, delta in found.items() if delta != 0}


class TotalsWorld(World):
    """The world with the aggregator as the stream's consumer: what each invocation applied and parked (by the
    records it reported done and the poison messages it sent), the table's outages, a user's bug in a total, and
    the operator's redrives."""

    def __init__(self, env: Any, **options: Any) -> None:
        super().__init__(env, **options)
        self.adjust = env.config["aggregate"]["onChange"] == "adjust"
        self.mapping = self.passes
        self.passes = self._noted
        self.made: dict[str, dict[str, Any]] = {}  # eventID -> each user's change the mapping hands the handler
        self.applied: set[tuple[str, str]] = set()  # (eventID, group) an invocation reported done and did not park
        self.parks: dict[tuple[str, str], list[str]] = {}  # (eventID, group) -> each reason it was parked with
        self.unwritable: set[tuple[str, str]] = set()  # (eventID, group) parked while the group's total was broken
        self.refused: list[str] = []  # replays of those not applied since, after the fix, parked again
        self.replaying = False  # the operator's redrive is invoking the handler
        self.parking: list[dict[str, Any]] = []  # the poison messages of the invocation under way
        self.broken: dict[str, dict[str, Any] | None] = {}  # group -> what its total held before a user's bug
        self.redrives = 0
        self.final: dict[str, Decimal | str] = {}  # each group's total at the end (read by the verdict)
        self.last: datetime | None = None  # the aggregator's last invocation
        self.containers = 0  # containers it ran in (each new one starts with no memory of the totals)
        self.calls: Counter[str] = Counter()  # the aggregator's DynamoDB calls, by operation (refused ones too)

    def _noted(self, record: dict[str, Any]) -> bool:
        passes = self.mapping(record)
        if passes:
            self.made[record["eventID"]] = copy.deepcopy(record)
        return passes

    @contextmanager
    def running(self) -> Iterator[World]:
        """The world's, with the table refusing the aggregator's calls while it is down, its poison messages
        noted as it sends them (they stay in the queue for the operator's redrive), and no real sleeps."""
        from aggregate import totals

        from components.cli.redrive import queues

        CLIENTS.get("dynamodb").meta.events.register("before-call.dynamodb", self._refuse)
        CLIENTS.get("dynamodb").meta.events.register("before-parameter-build.dynamodb.UpdateItem", self._typed)
        CLIENTS.get("sqs").meta.events.register("before-parameter-build.sqs.SendMessage", self._parked)
        with (
            mock.patch.object(totals, "RETRY_DELAY_SECONDS", 0),
            mock.patch.object(queues, "WAIT_SECONDS", 0),
            super().running() as world,
        ):
            yield world

    def _refuse(self, model: Any, **_: Any) -> None:
        """Through an outage DynamoDB throttles every call of the aggregator (counted either way)."""
        self.calls[model.name] += 1
        if self.down():
            error = {"Code": "ThrottlingException", "Message": "the table is not taking writes (outage)"}
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, model.name)

    def _typed(self, params: dict[str, Any], **_: Any) -> None:
        """An ADD to a total holding text: DynamoDB refuses it, and may do so before it checks the write's
        condition (the ids on the total) as well as after (moto checks the condition first): drawn per call."""
        group = params.get("Key", {}).get("PK", {}).get("S")
        adds = "ADD" in str(params.get("UpdateExpression", ""))
        if group in self.broken and adds and self.random.random() < TYPE_FIRST:
            error = {
                "Code": "ValidationException",
                "Message": "An operand in the update expression has an incorrect data type",
            }
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, "UpdateItem")

    def _parked(self, params: dict[str, Any], **_: Any) -> None:
        """A poison message, as the aggregator sends it (the invocation under way's)."""
        if params.get("QueueUrl") == self.env.poison_url:
            self.parking.append(json.loads(params["MessageBody"]))

    def collect(self, path: str, at: datetime) -> None:
        """Nothing to take: no target, and parked records stay in the poison queue for the operator's redrive."""

    # -- the aggregator --------------------------------------------------------------------------------------------

    def handle(self, records: list[dict[str, Any]]) -> Any:
        """The aggregator on `records` now; what it applied and parked, noted."""
        import aggregate

        self.parking = []
        if self.last is None or self.t - self.last >= IDLE or self.random.random() < NEW_CONTAINER:
            aggregate.RINGS.clear()  # a new container: it knows nothing of the totals but what DynamoDB says
            self.containers += 1
        self.last = self.t
        now = self.t.timestamp()
        response = aggregate.handle_batch({"Records": records}, self.env.config, now=lambda: now)
        self._account(records, response)
        return response

    def groups(self, record: dict[str, Any]) -> set[str]:
        """The groups a record (or the replay of one parked unapplied: only those it missed) changes."""
        found = set(changes(record, self.adjust))
        missed = record.get(UNAPPLIED)
        if isinstance(missed, list):
            found = {g for g in found if identity_of({"group": {"S": g}}) in missed}
        return found

    def _account(self, records: list[dict[str, Any]], response: Any) -> None:
        """Lambda moves past the records before the first failure the response reports: each of those was applied
        to its groups but where this invocation parked it. A message's groups are those it names as missed, or (one
        parked for an unwritable total without naming them) those broken now, or else all of the record's."""
        failures = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        numbers = [r["dynamodb"]["SequenceNumber"] for r in records]
        first = min((numbers.index(f) for f in failures if f in numbers), default=0 if failures else len(records))
        parked: dict[str, set[str]] = {}
        for message in self.parking:
            record, reason = message.get("record") or {}, str(message.get("reason", ""))
            groups = self.groups(record) if isinstance(record.get("dynamodb"), dict) else set()
            # Parked because a total cannot be written: the message names the groups it missed, or (an unstamped
            # one) its reason says so, and the totals it missed are those broken now.
            unwritable = UNAPPLIED in record or "cannot be written" in reason
            if UNAPPLIED not in record and unwritable:
                groups &= set(self.broken)
            for group in groups:
                key = (record["eventID"], group)
                self.parks.setdefault(key, []).append(reason)
                if unwritable:
                    self.unwritable.add(key)
                elif self.replaying and key in self.unwritable and key not in self.applied:
                    when = f"{self.t:%Y-%m-%d %H:%M}"
                    self.refused.append(f"{record['eventID'][:12]} to {group}, replayed at {when}: {reason[:200]}")
            parked.setdefault(str(record.get("eventID")), set()).update(groups)
        for record in records[:first]:
            again = parked.get(record["eventID"], set())
            self.applied.update((record["eventID"], group) for group in self.groups(record) - again)

    def redeliver_all(self) -> None:
        """Lambda delivers every record made so far again, an item's records as one batch (a retry from an earlier
        sequence number with every record after it, or the stream DLQ's range redriven)."""
        by_item: dict[str, list[dict[str, Any]]] = {}
        for record in self.made.values():
            by_item.setdefault(record["dynamodb"]["Keys"]["PK"]["S"], []).append(copy.deepcopy(record))
        for records in by_item.values():
            self.invoke(records, "handler")

    # -- the user and the operator ---------------------------------------------------------------------------------

    def key(self, group: str) -> dict[str, Any]:
        return {"PK": {"S": group}, "SK": {"S": "TOTAL"}}

    def break_total(self, group: str) -> bool:
        """A user's bug writes text into the group's total (its other attributes stay); False if it was already."""
        item = self.env.ddb.get_item(TableName=self.env.table, Key=self.key(group), ConsistentRead=True)
        held = item.get("Item", {}).get(TOTAL)
        if group in self.broken:
            return False
        self.broken[group] = held
        self.env.ddb.update_item(
            TableName=self.env.table,
            Key=self.key(group),
            UpdateExpression="SET #t = :x",
            ExpressionAttributeNames={"#t": TOTAL},
            ExpressionAttributeValues={":x": {"S": BROKEN}},
        )
        self.observe("user")
        return True

    def fix_total(self, group: str) -> None:
        """The operator puts back what the total held before the bug (while broken, nothing was added to it)."""
        held = self.broken.pop(group)
        update: dict[str, Any] = {"UpdateExpression": "REMOVE #t"}
        if held is not None:
            update = {"UpdateExpression": "SET #t = :n", "ExpressionAttributeValues": {":n": held}}
        self.env.ddb.update_item(
            TableName=self.env.table, Key=self.key(group), ExpressionAttributeNames={"#t": TOTAL}, **update
        )
        self.observe("user")

    def redrive(self) -> list[str]:
        """The operator's `redrive poison` now, through the real command; the messages it found (their bodies)."""
        from components.cli.command import main
        from components.modes.aggregate import aggregate_filters
        from tests.iam import enforce
        from tests.redrive.conftest import Function, aws, bodies

        section = self.env.config["aggregate"]
        patterns = aggregate_filters(self.env.config["partitionKey"], section["sourcePrefix"], section["onChange"])
        function = Function(self.env, lambda event, config: self.handle(event["Records"]), patterns)
        found = [json.dumps(body) for body in bodies(self.env, self.env.poison_url)]
        lines: list[str] = []
        self.replaying = True
        try:
            with enforce.operating():
                main(["redrive", "poison", "--function", function.name], client=aws(function), emit=lines.append)
        finally:
            self.replaying = False
        self.redrives += 1
        self.observe("handler")
        return found

    def resend(self, found: list[str]) -> None:
        """Messages a redrive took come back to the poison queue (its deletes of them were lost)."""
        for body in found:
            self.env.sqs.send_message(QueueUrl=self.env.poison_url, MessageBody=body)

    def total(self, group: str) -> Decimal | str:
        item = self.env.ddb.get_item(TableName=self.env.table, Key=self.key(group), ConsistentRead=True)
        value = item.get("Item", {}).get(TOTAL, {"N": "0"})
        return Decimal(value["N"]) if "N" in value else f"not a number: {value}"

    def items(self) -> dict[str, Decimal]:
        """The scored items as they finally are, summed per group."""
        found: dict[str, Decimal] = {}
        for page in self.env.ddb.get_paginator("scan").paginate(TableName=self.env.table, ConsistentRead=True):
            for item in page["Items"]:
                if item["PK"]["S"].startswith("SCORE"):
                    group = item[OWNER]["S"]
                    found[group] = EXACT.add(found.get(group, Decimal(0)), Decimal(item["Score"]["N"]))
        return found


# -- lives ------------------------------------------------------------------------------------------------------------


def play(world: TotalsWorld, life: Scored) -> None:
    """Put the item's life on the world's queue: its creation, then each step `after` seconds after the one before."""
    pk = f"SCORE#{next(_NAMES)}"
    table, key = world.env.table, {"PK": {"S": pk}, "SK": {"S": "s"}}

    def gone() -> bool:
        return world.history[pk][-1].value is None

    def create(group: int, value: int) -> None:
        item: dict[str, Any] = {"PK": pk, "SK": "s", OWNER: GROUPS[group], "Score": value}
        if life.cleanup is not None:
            item[CLEANUP] = int(world.t.timestamp()) + life.cleanup
        world.write(pk, (group, value), lambda: world.env.put(item))
        if life.cleanup is not None:
            world.expire(pk, item[CLEANUP])

    def update(name: str, value: dict[str, Any], held: tuple[int, int]) -> None:
        world.write(
            pk,
            held,
            lambda: world.env.ddb.update_item(
                TableName=table,
                Key=key,
                UpdateExpression="SET #a = :v",
                ExpressionAttributeNames={"#a": name},
                ExpressionAttributeValues={":v": value},
            ),
        )

    def step(index: int) -> None:
        if index == len(life.steps):
            return
        change = life.steps[index]

        def act() -> None:
            held = world.history[pk][-1].value
            if change.kind == "create":
                create(change.group, change.value)
            elif gone():
                pass  # deleted, or removed by the user's TTL: the app finds no item to change
            elif change.kind == "score":
                update("Score", {"N": str(change.value)}, (held[0], change.value))
            elif change.kind == "move":
                update(OWNER, {"S": GROUPS[change.group]}, (change.group, held[1]))
            elif change.kind == "rewrite":
                item = world.env.ddb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
                world.write(pk, held, lambda: world.env.ddb.put_item(TableName=table, Item=item))
            else:
                world.write(pk, None, lambda: world.env.delete(pk, "s"))
            step(index + 1)

        world.at(world.t + timedelta(seconds=change.after), act)

    def begin() -> None:
        create(life.group, life.value)
        step(0)

    world.at(START + timedelta(seconds=life.created), begin)


def operate(world: TotalsWorld, found: list[Break], again: tuple[int, ...] = ()) -> None:
    """Put the users' bugs in totals, the operator's fixes and redrives on the world's queue; and at each of `again`
    (seconds from the start) Lambda delivering every record made so far again, an item's records as one batch."""
    for broken in found:
        _operate(world, broken)
    for second in again:
        world.at(START + timedelta(seconds=second), world.redeliver_all)


def _operate(world: TotalsWorld, broken: Break) -> None:
    group = GROUPS[broken.group]
    start = START + broken.at * HOUR
    fixed = start + broken.fixed * HOUR
    did: list[bool] = []

    def fix() -> None:
        if did and did[0]:  # this bug broke it (not one before it, still unfixed)
            world.fix_total(group)

    world.at(start, lambda: did.append(world.break_total(group)))
    world.at(fixed, fix)
    for index, hours in enumerate(broken.redrives):
        again = broken.again if index == 0 else None  # the first redrive's deletes may be lost
        world.at(max(start, fixed + hours * HOUR), functools.partial(_redrive, world, again))


def _redrive(world: TotalsWorld, again: int | None) -> None:
    found = world.redrive()
    if again is not None:

        def lost_deletes() -> None:
            world.resend(found)
            world.redrive()

        world.at(world.t + again * HOUR, lost_deletes)


def horizon(lives: list[Scored], found: list[Break]) -> datetime:
    """A bound on when the lives' last change and the operator's last redrive can come."""
    latest = START
    for life in lives:
        moment = START + timedelta(seconds=life.created + sum(s.after for s in life.steps))
        if life.cleanup is not None:
            moment += timedelta(seconds=life.cleanup) + 3 * DAY  # the user's TTL, days late
        latest = max(latest, moment)
    for broken in found:
        last = broken.at + broken.fixed + max(broken.redrives) + (broken.again or 0)
        latest = max(latest, START + max(last, broken.at + broken.fixed) * HOUR)
    return latest + DAY


# -- the verdict ------------------------------------------------------------------------------------------------------


def totals_verdict(world: TotalsWorld) -> Verdict:
    """Each group's total is exactly its records' sum less the records parked with a reason and never applied; the
    records add up to the items as they are (`adjust`); a replay after a fix is applied. `occurrences`: the
    (record, group) changes checked."""
    result = Verdict()
    deltas = {
        (event_id, group): delta
        for event_id, record in world.made.items()
        for group, delta in changes(record, world.adjust).items()
    }
    result.occurrences = len(deltas)
    summed: dict[str, Decimal] = {}
    for (_, group), delta in deltas.items():
        summed[group] = EXACT.add(summed.get(group, Decimal(0)), delta)
    if world.adjust:
        items = world.items()
        for group in GROUPS:
            if items.get(group, Decimal(0)) != summed.get(group, Decimal(0)):
                result.lost.append(f"{group}: the items add up to {items.get(group)}, their records to {summed[group]}")
    expired = {pk: reason for pk, reason in world.parked if isinstance(pk, str)}  # Lambda gave up (24 h)
    target = dict(summed)
    for (event_id, group), delta in sorted(deltas.items()):
        if (event_id, group) in world.applied:
            continue
        pk = world.made[event_id]["dynamodb"]["Keys"]["PK"]["S"]
        reasons = world.parks.get((event_id, group)) or ([expired[pk]] if pk in expired else [])
        label = f"{pk} record {event_id[:12]} ({delta:+} to {group})"
        if reasons:
            target[group] = EXACT.subtract(target[group], delta)
            result.parked.append(f"{label}: {reasons[-1][:200]}")
        else:
            result.lost.append(f"{label}: never applied, never parked")
    for group in GROUPS:
        want, got = target.get(group, Decimal(0)), world.total(group)
        world.final[group] = got
        if isinstance(got, str) or got < want:
            result.lost.append(f"{group}: total {got}, the records applied add up to {want}")
        elif got > want:
            result.twice.append(f"{group}: total {got}, the records applied add up to {want} (counted twice)")
    result.lost += [f"replay after the fix parked again: {label}" for label in world.refused]
    return result
