"""A model check of `aggregate` mode: random sequences of score writes (new, corrected, moved to another group,
deleted, re-inserted), the stream's lag, batch redeliveries (in order, and old batches out of order), deliveries
through transient AWS faults with Lambda's retries and through writes whose response is lost after DynamoDB acted,
time passing (so ids leave the totals once past the horizon, while Lambda still redelivers anything younger than
the maximum record age), containers recycled (nothing remembered of the totals) and three room sizes for the ids on
a total (the default, a few, none: every write through the ledger), compared with a plain reference model of the
guarantee.

The guarantee (README, "Guarantees, per mode" and "`aggregate` mode, in detail"): each record counts exactly once
per group, with exact 38-digit sums. So once the records up to a point of the stream are processed, however often
and in whatever pieces they were delivered, each group's total is exactly the sum of the source items' current
values (`on_change="adjust"`, here with a group attribute that is not a key, so a score can move between groups) or
of every inserted score (the default, `ignore`, grouped by the sort key). Two configurations, drawn per sequence.

moto adds numbers that have a fraction with Python's 28 digits, DynamoDB with 38: moto is given DynamoDB's arithmetic
for the run (`dynamodb_number_arithmetic`), so a rounded total is the handler's doing, never the emulator's.

`MODEL_EXAMPLES` sets the number of sequences (50 by default); `MODEL_RANDOM=1` draws new sequences instead of the
fixed ones `make test` runs; hypothesis prints a failing sequence shrunk.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Context, Decimal
from typing import Any
from unittest import mock

import aggregate
import boto3
from aggregate import totals as aggregate_totals
from botocore.config import Config
from botocore.exceptions import ReadTimeoutError
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule
from moto import mock_aws
from st_core.clients import CLIENTS

from components.filters import filter_patterns
from components.modes.aggregate import aggregate_filters
from tests.handlers.conftest import Env
from tests.handlers.faults import FaultInjector, FaultyClients, replay
from tests.handlers.model_support import StreamDelivery, dynamodb_number_arithmetic, model_env, model_test
from tests.support.patterns import LambdaFilter

# A mapping with a short maximum record age (600 s) and the 60 s timeout: horizon 600 + 60 + 300 s. Short against
# the 900 s id buckets, so ids leave the totals within a few steps and an early removal would show.
MAX_RECORD_AGE = 600  # Lambda delivers no record older than this
# Bytes for ids on a total: the default, room for a few (so totals move between ids and the ledger), and none.
RING_ROOM = [aggregate_totals.RING_BYTES, 24, 0]
SCORES = ["SCORE#1", "SCORE#2", "SCORE#3"]
GROUPS = ["USER#ada", "USER#bob", "USER#cy"]
# Small numbers, 31-digit ones and fractions, so sums need all of DynamoDB's 38 digits (Python's default is 28).
VALUES = st.one_of(
    st.integers(-1000, 1000),
    st.integers(-9, 9).map(lambda k: k * 10**30 + 7),
    st.decimals(min_value=-1000, max_value=1000, places=3, allow_nan=False, allow_infinity=False),
)


@dataclass(frozen=True)
class Variant:
    name: str
    on_change: str
    group_from: str  # "owner": an attribute that is not a key; "SK": the sort key (seed 003's layout)


EXACT = Context(prec=100)  # the reference's own sums: exact, never rounded to a context's digits

VARIANTS = [Variant("adjust, grouped by a non-key attribute", "adjust", "owner"), Variant("default", "ignore", "SK")]


@dataclass
class Reference:
    """The source items as the user wrote them, and the totals each point of the stream must give."""

    adjust: bool
    items: dict[tuple[str, str], tuple[str, Decimal]] = field(default_factory=dict)  # key -> (group, value)
    inserted: dict[str, Decimal] = field(default_factory=dict)  # every inserted score, per group

    def write(self, key: tuple[str, str], group: str, value: Decimal) -> None:
        if key not in self.items:
            self.inserted[group] = EXACT.add(self.inserted.get(group, Decimal(0)), value)
        self.items[key] = (group, value)

    def delete(self, key: tuple[str, str]) -> None:
        del self.items[key]

    def totals(self) -> dict[str, Decimal]:
        if not self.adjust:
            return dict(self.inserted)
        sums: dict[str, Decimal] = {}
        for group, value in self.items.values():
            sums[group] = EXACT.add(sums.get(group, Decimal(0)), value)
        return sums


class AggregateModel(StreamDelivery):
    def __init__(self) -> None:
        super().__init__()
        self.mock = mock_aws()
        self.mock.start()
        self.arithmetic = dynamodb_number_arithmetic()
        self.arithmetic.start()
        self.ready = False

    @initialize(variant=st.sampled_from(VARIANTS), room=st.sampled_from(RING_ROOM))
    def setup(self, variant: Variant, room: int) -> None:
        self.variant = variant
        self.room = mock.patch.object(aggregate_totals, "RING_BYTES", room)
        self.room.start()
        aggregate.RINGS.clear()
        self.clock = float(int(time.time()))
        self.env = _env(variant)
        self.reference = Reference(adjust=variant.on_change == "adjust")
        patterns = filter_patterns(aggregate_filters("PK", "SCORE", variant.on_change))
        self.lambda_filter = LambdaFilter(patterns)
        self.start_stream()
        self.expected: list[dict[str, Decimal]] = [{}]  # expected[i]: the totals once history[:i] is processed
        self.ready = True

    def teardown(self) -> None:
        CLIENTS.reset()
        if self.ready:
            self.room.stop()
        self.arithmetic.stop()
        self.mock.stop()

    # -- the world -------------------------------------------------------------------------------------------------

    @rule(score=st.sampled_from(SCORES), group=st.sampled_from(GROUPS), value=VALUES)
    def put(self, score: str, group: str, value: Any) -> None:
        """A score written (PutItem): new, or replacing the item with that key."""
        self._put(self._key(score, group), group, Decimal(value))

    @precondition(lambda self: self.ready and self.reference.items != {})
    @rule(data=st.data(), value=VALUES)
    def correct(self, data: st.DataObject, value: Any) -> None:
        """A score's value changed (UpdateItem)."""
        key = self._existing(data)
        self._update(key, "SET Score = :v", {":v": {"N": str(Decimal(value))}})
        self.reference.write(key, self.reference.items[key][0], Decimal(value))
        self._read()

    @precondition(lambda self: self.ready and self.variant.group_from == "owner" and self.reference.items != {})
    @rule(data=st.data(), group=st.sampled_from(GROUPS))
    def move(self, data: st.DataObject, group: str) -> None:
        """A score moved to another group (UpdateItem of the group attribute)."""
        key = self._existing(data)
        self._update(key, "SET #g = :g", {":g": {"S": group}}, {"#g": "owner"})
        self.reference.write(key, group, self.reference.items[key][1])
        self._read()

    @precondition(lambda self: self.ready and self.reference.items != {})
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        self._delete(self._existing(data))

    @precondition(lambda self: self.ready and self.reference.items != {})
    @rule(data=st.data())
    def reinsert(self, data: st.DataObject) -> None:
        """The user deletes a score and writes the same one again."""
        key = self._existing(data)
        group, value = self.reference.items[key]
        self._delete(key)
        self._put(key, group, value)

    @precondition(lambda self: self.ready and self.pending < len(self.history))
    @rule(limit=st.integers(1, 8), seed=st.integers(0, 2**16), rate=st.sampled_from([0.2, 0.5]))
    def lambda_delivers_through_faults(self, limit: int, seed: int, rate: float) -> None:
        """The next batch while a share of AWS calls throttle, fail or time out: Lambda retries from the first
        reported record (everything after it again), or the whole batch when the invocation fails."""
        records = copy.deepcopy(self.take_batch(limit))
        clients = FaultyClients(FaultInjector(rate=rate, seed=seed))
        self._replay(records, clients)

    @precondition(lambda self: self.ready and self.pending < len(self.history))
    @rule(limit=st.integers(1, 8), seed=st.integers(0, 2**16), rate=st.sampled_from([0.3, 0.7]))
    def lambda_delivers_through_lost_responses(self, limit: int, seed: int, rate: float) -> None:
        """The next batch while a share of the writes to DynamoDB succeed but their response never arrives (a
        timeout after DynamoDB acted): the handler sees a failure, Lambda retries, the records must not count again."""
        self._replay(copy.deepcopy(self.take_batch(limit)), LostResponses(rate, seed))

    @precondition(lambda self: self.ready)
    @rule(seconds=st.sampled_from([30, 250, 500, 800]))
    def time_passes(self, seconds: int) -> None:
        """Time goes on, though never past the maximum record age of a record Lambda has yet to deliver (it would
        discard that record, and the totals could not be exact): ids of buckets past the horizon leave the totals."""
        waiting = [_created(r) for r in self.history[self.pending :]]
        limit = min(waiting) + MAX_RECORD_AGE - self.clock if waiting else seconds
        self.clock += max(0, min(seconds, limit))

    @precondition(lambda self: self.ready)
    @rule()
    def container_recycled(self) -> None:
        """A new container: nothing known of the totals but what DynamoDB says."""
        aggregate.RINGS.clear()

    def _replay(self, records: list[dict[str, Any]], clients: Any) -> None:
        config = self.env.config

        def handle(event: dict[str, Any]) -> Any:
            return aggregate.handle_batch(event, config, clients=clients, now=self._now)

        replay(handle, records)
        self._check_totals()

    # -- the guarantee -----------------------------------------------------------------------------------------------

    def _check_totals(self) -> None:
        """After any delivery: the totals of everything processed so far, each record counted once."""
        expected = {g: v for g, v in self.expected[self.pending].items() if v != 0}
        actual = {g: v for g, v in self._totals().items() if v != 0}
        assert actual == expected, (
            f"totals after the first {self.pending} records: {_show(actual)}, expected {_show(expected)}"
        )
        assert self.env.messages(self.env.poison_url) == []

    def check_the_end(self) -> None:
        """Everything delivered, the whole stream again, then an old batch again: the exact totals of the items."""
        self.lambda_delivers(len(self.history))
        if self.pending:
            self.deliver(copy.deepcopy(self.history))
        expected = {g: v for g, v in self.reference.totals().items() if v != 0}
        actual = {g: v for g, v in self._totals().items() if v != 0}
        assert actual == expected, f"final totals {_show(actual)}, expected {_show(expected)}"

    # -- plumbing ----------------------------------------------------------------------------------------------------

    def _key(self, score: str, group: str) -> tuple[str, str]:
        return (score, group) if self.variant.group_from == "SK" else (score, "S")

    def _existing(self, data: st.DataObject) -> tuple[str, str]:
        return data.draw(st.sampled_from(sorted(self.reference.items)), label="score")

    def _put(self, key: tuple[str, str], group: str, value: Decimal) -> None:
        item: dict[str, Any] = {"PK": key[0], "SK": key[1], "Score": value}
        if self.variant.group_from == "owner":
            item["owner"] = group
        self.env.put(item)
        self.reference.write(key, group, value)
        self._read()

    def _delete(self, key: tuple[str, str]) -> None:
        self.env.delete(*key)
        self.reference.delete(key)
        self._read()

    def _update(
        self, key: tuple[str, str], expression: str, values: dict[str, Any], names: dict[str, str] | None = None
    ) -> None:
        self.env.ddb.update_item(
            TableName=self.env.table,
            Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}},
            UpdateExpression=expression,
            ExpressionAttributeValues=values,
            **({"ExpressionAttributeNames": names} if names else {}),
        )

    def _now(self) -> float:
        return self.clock

    def _read(self) -> None:
        """The stream's new records; each that reaches the function moves the expected totals to the world's now."""
        for record in self.lambda_filter(self.env.stream.read(at=datetime.fromtimestamp(self.clock, UTC))):
            self.history.append(record)
            self.expected.append(self.reference.totals())

    def deliver(self, records: list[dict[str, Any]]) -> None:
        # Lambda discards what is older than the maximum record age (every such record was delivered before)
        records = [r for r in records if self.clock - _created(r) <= MAX_RECORD_AGE]
        if not records:
            return
        response = aggregate.handle_batch({"Records": records}, self.env.config, now=self._now)
        assert response == {"batchItemFailures": []}
        self._check_totals()

    def _totals(self) -> dict[str, Decimal]:
        found = {}
        for group in GROUPS:
            key = {"PK": {"S": group}, "SK": {"S": "TOTAL"}}
            item = self.env.ddb.get_item(TableName=self.env.table, Key=key, ConsistentRead=True).get("Item")
            if item is not None:
                found[group] = Decimal(item["totalScore"]["N"])
        return found


def _created(record: dict[str, Any]) -> float:
    return float(record["dynamodb"]["ApproximateCreationDateTime"])


class LostResponses:
    """The handlers' client registry, where a share of DynamoDB writes are applied but answered with a timeout."""

    def __init__(self, rate: float, seed: int) -> None:
        import random

        self.random = random.Random(seed)
        self.rate = rate
        self.lock = threading.Lock()
        self._clients: dict[str, Any] = {}

    def get(self, service: str) -> Any:
        with self.lock:
            if service not in self._clients:
                client = boto3.client(service, config=Config(retries={"mode": "standard", "max_attempts": 3}))
                for operation in ("UpdateItem", "TransactWriteItems"):
                    client.meta.events.register(f"after-call.dynamodb.{operation}", self._lose)
                self._clients[service] = client
            return self._clients[service]

    def _lose(self, http_response: Any, **_: Any) -> None:
        with self.lock:
            lost = http_response.status_code == 200 and self.random.random() < self.rate
        if lost:
            raise ReadTimeoutError(endpoint_url="https://dynamodb/lost-response")


def _show(totals: dict[str, Decimal]) -> str:
    return "{" + ", ".join(f"{g}: {v}" for g, v in sorted(totals.items())) + "}"


def _env(variant: Variant) -> Env:
    return model_env().configure(
        mode="aggregate",
        group_from=variant.group_from,
        on_change=variant.on_change,
        maximum_record_age_seconds=MAX_RECORD_AGE,
    )


test_aggregate_model = model_test(AggregateModel)
