"""Benchmark 3: `aggregate`, 10,000 scores over 100 users in batches of 100, then 10% of the batches delivered again;
ours vs seed 003's aggregator (baseline, one UpdateItem ADD per score); and ours again through injected faults.

Write units are DynamoDB's own figures: every write of ours and of the baseline asks for ReturnConsumedCapacity=TOTAL
and the benchmark sums what the responses report (ministack bills like DynamoDB: ceil(item size / 1 KB) per write,
the larger of the item before and after, twice that in a transaction). A failed conditional write reports nothing
but is billed too: it is counted from the item DynamoDB returned with the failure (ReturnValuesOnConditionCheckFailure),
at least 1 unit, and a cancelled transaction at the full price of its actions (an upper bound)."""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tests.handlers.faults import replay

from .baselines import seed003
from .harness import LATENCY_SECONDS, REGION, BenchClients, expect, ministack, ratio, sized, stream_record, table, timed

SCORES = 10_000
USERS = 100
# A contrast: the same scores over 10 users, 1,000 each within the horizon: more ids than fit on a total (about 130),
# so most writes take the ledger path (a transaction with a marker per score, as before the ids).
HOT_USERS = 10
BATCH = 100
REDELIVERED = 0.10
# The fault run: a share of calls fail before reaching DynamoDB (throttled, 5xx, timed out), and a share of the
# writes that succeed lose their response (a timeout after DynamoDB acted: the hard case for exactly-once).
FAULT_RATE = 0.10
LOST_RESPONSE_RATE = 0.05
WRITES = frozenset({"UpdateItem", "PutItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})


@dataclass
class Capacity:
    """Write requests and write units of every DynamoDB write made through the clients it is attached to."""

    requests: int = 0
    units: float = 0.0
    failed: int = 0  # conditional writes and transactions that failed their condition (billed, counted here)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, client: Any) -> None:
        client.meta.events.register("after-call.dynamodb", self._after_call)

    def snapshot(self) -> tuple[int, float]:
        with self.lock:
            return self.requests, self.units

    def _after_call(self, model: Any, parsed: dict[str, Any], http_response: Any, **_: Any) -> None:
        if model.name not in WRITES:
            return
        code = parsed.get("Error", {}).get("Code") if http_response.status_code >= 300 else None
        if code is None:
            consumed = parsed.get("ConsumedCapacity")
            if consumed is None:
                raise AssertionError(f"{model.name} without ReturnConsumedCapacity: its units would go uncounted")
            entries = consumed if isinstance(consumed, list) else [consumed]
            units = sum(float(e.get("CapacityUnits", 0)) for e in entries)
        elif code == "ConditionalCheckFailedException":
            units = _write_units(parsed.get("Item"))
        elif code == "TransactionCanceledException":
            units = 2 * sum(_write_units(r.get("Item")) for r in parsed.get("CancellationReasons", []))
        else:
            units = 0.0  # throttled or refused: not billed
        with self.lock:
            self.requests += 1
            self.units += units
            self.failed += code in ("ConditionalCheckFailedException", "TransactionCanceledException")


def _write_units(item: dict[str, Any] | None) -> float:
    return float(max(1, math.ceil(item_bytes(item or {}) / 1024)))


def item_bytes(item: dict[str, Any]) -> int:
    """DynamoDB's item size: attribute names plus values (a number takes about 1 byte per 2 digits, plus 1)."""
    size = 0
    for name, value in item.items():
        ((tag, raw),) = value.items()
        size += len(name.encode())
        if tag in ("S", "B"):
            size += len(raw.encode() if isinstance(raw, str) else raw)
        elif tag == "N":
            size += 1 + (len(raw.lstrip("-").replace(".", "")) + 1) // 2
        elif tag in ("SS", "BS"):
            size += sum(len(v.encode() if isinstance(v, str) else v) for v in raw)
        else:
            size += 1
    return size


class Faults:
    """Fails `rate` of the calls before they reach DynamoDB, and loses the response of `lost` of the successful
    writes (seeded). Attach after a Capacity, so the lost writes are still counted."""

    def __init__(self, rate: float, lost: float, seed: int = 7) -> None:
        self.rate, self.lost = rate, lost
        self.random = random.Random(seed)
        self.injected: Counter[str] = Counter()
        self.lock = threading.Lock()

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call.dynamodb", self._before_call)
        client.meta.events.register("after-call.dynamodb", self._after_call)

    def _draw(self, rate: float) -> bool:
        with self.lock:
            return self.random.random() < rate

    def _before_call(self, model: Any, **_: Any) -> None:
        from botocore.exceptions import ClientError, ReadTimeoutError

        with self.lock:
            if self.random.random() >= self.rate:
                return
            kind = self.random.choice(["throttling", "5xx", "timeout"])
            self.injected[kind] += 1
        if kind == "timeout":
            raise ReadTimeoutError(endpoint_url=f"https://injected/{model.name}")
        status, code = (400, "ThrottlingException") if kind == "throttling" else (503, "ServiceUnavailable")
        error = {"Error": {"Code": code, "Message": "injected"}, "ResponseMetadata": {"HTTPStatusCode": status}}
        raise ClientError(error, model.name)

    def _after_call(self, model: Any, http_response: Any, **_: Any) -> None:
        from botocore.exceptions import ReadTimeoutError

        if model.name in WRITES and http_response.status_code == 200 and self._draw(self.lost):
            with self.lock:
                self.injected["lost response"] += 1
            raise ReadTimeoutError(endpoint_url=f"https://injected/{model.name}")


def batches(users: int = USERS, scores: int = SCORES) -> tuple[list[dict[str, Any]], dict[str, int]]:
    rng = random.Random(11)
    sums: Counter[str] = Counter()
    out: list[dict[str, Any]] = []
    made = int(time.time())
    for start in range(0, scores, BATCH):
        records = []
        for n in range(start, start + BATCH):
            user, score = f"USER#u{rng.randrange(users)}", rng.randrange(1, 100)
            sums[user] += score
            keys = {"PK": {"S": f"SCORE#{n:05}"}, "SK": {"S": user}}
            record = stream_record(keys, {"Score": {"N": str(score)}}, n)
            record["dynamodb"]["ApproximateCreationDateTime"] = made  # as Lambda delivers it: epoch seconds
            records.append(record)
        out.append({"Records": records})
    return out, dict(sums)


def _tables() -> tuple[str, str]:
    import boto3

    ddb = boto3.client("dynamodb", region_name=REGION)
    name = f"agg-{uuid.uuid4().hex[:8]}"
    for table_name, keys in ((name, ("PK", "SK")), (f"{name}-ledger", ("id",))):
        ddb.create_table(
            TableName=table_name,
            KeySchema=[{"AttributeName": k, "KeyType": t} for k, t in zip(keys, ("HASH", "RANGE"), strict=False)],
            AttributeDefinitions=[{"AttributeName": k, "AttributeType": "S"} for k in keys],
            BillingMode="PAY_PER_REQUEST",
        )
    queue = boto3.client("sqs", region_name=REGION).create_queue(QueueName=f"p-{name}")["QueueUrl"]
    return name, queue


def _config(name: str, queue: str) -> dict[str, Any]:
    """The aggregator's configuration as the component writes it with its defaults (seed 003's layout)."""
    from components import ScheduledTableArgs
    from components.runtime_config import Value
    from tests.support.handler_config import handler_config

    names = {Value.TABLE: name, Value.POISON_QUEUE_URL: queue, Value.LEDGER_TABLE: f"{name}-ledger"}
    return dict(handler_config(ScheduledTableArgs(mode="aggregate"), names))


def _totals(name: str) -> dict[str, int]:
    import boto3

    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=name)["Items"]
    return {i["PK"]["S"]: int(Decimal(i["totalScore"]["N"])) for i in items if i["SK"]["S"] == "TOTAL"}


def _double_counted(sums: dict[str, int], totals: dict[str, int]) -> int:
    return sum(max(0, totals.get(u, 0) - s) for u, s in sums.items())


def _missing(sums: dict[str, int], totals: dict[str, int]) -> int:
    return sum(max(0, s - totals.get(u, 0)) for u, s in sums.items())


def _ours(
    work: list[dict[str, Any]], again: list[dict[str, Any]], sums: dict[str, int], faults: Faults | None = None
) -> dict[str, Any]:
    from aggregate import RINGS, handle_batch

    RINGS.clear()  # a fresh container
    name, queue = _tables()
    config = _config(name, queue)
    clients = BenchClients()
    capacity = Capacity()
    capacity.attach(clients.get("dynamodb"))
    if faults is not None:
        faults.attach(clients.get("dynamodb"))

    def handle(batch: dict[str, Any]) -> Any:
        return handle_batch(batch, config, clients=clients)  # type: ignore[arg-type]

    deliveries = Counter[str]()
    elapsed, _ = timed(lambda: [deliveries.update({"first": replay(handle, b["Records"])}) for b in work])
    requests, units = capacity.snapshot()
    # The batches delivered again reach another container (nothing remembered of the totals: each group's
    # first write learns from DynamoDB, at the price of a failed conditional write).
    RINGS.clear()
    for batch in again:
        deliveries["again"] += replay(handle, batch["Records"])
    totals = _totals(name)
    # Exactly once, or the run measured something else: every score counted once, nothing parked.
    expect(f"aggregate ({len(sums)} users): totals", totals, sums)
    parked = boto3_sqs().get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])
    expect("aggregate: records parked", int(parked["Attributes"]["ApproximateNumberOfMessages"]), 0)
    injected = dict(faults.injected) if faults else {}
    return _result(elapsed, (requests, units), capacity, sum(deliveries.values()), sums, totals, injected)


def boto3_sqs() -> Any:
    import boto3

    return boto3.client("sqs", region_name=REGION)


def _each(batches: list[dict[str, Any]], handle: Any) -> None:
    for batch in batches:
        handle(batch)


def _baseline(work: list[dict[str, Any]], again: list[dict[str, Any]], sums: dict[str, int]) -> dict[str, Any]:
    name, _ = _tables()
    clients = BenchClients()
    capacity = Capacity()
    capacity.attach(clients.get("dynamodb"))
    elapsed, _ = timed(lambda: _each(work, lambda b: seed003.handler(b, clients=clients, table=name)))
    requests, units = capacity.snapshot()
    expect("seed 003: one UpdateItem per score", capacity.requests, sum(len(b["Records"]) for b in work))
    for batch in again:
        seed003.handler(batch, clients=clients, table=name)
    totals = _totals(name)
    return _result(elapsed, (requests, units), capacity, len(work) + len(again), sums, totals, {})


def _result(
    elapsed: float,
    first: tuple[Any, Any],
    capacity: Capacity,
    deliveries: int,
    sums: dict[str, int],
    totals: dict[str, int],
    injected: dict[str, Any],
) -> dict[str, Any]:
    """One design's run: the first deliveries' writes (`first`), everything's (from `capacity` now), and the totals
    checked against the true sums."""
    all_requests, all_units = capacity.snapshot()
    return {
        "time": elapsed,
        "requests": first[0],
        "units": first[1],
        "all_requests": all_requests,
        "all_units": all_units,
        "failed": capacity.failed,
        "deliveries": deliveries,
        "double": _double_counted(sums, totals),
        "missing": _missing(sums, totals),
        "injected": injected,
    }


def run() -> tuple[str, dict[str, float]]:
    scores, users, hot_users = sized(SCORES, 200), sized(USERS, 10), sized(HOT_USERS, 2)
    work, sums = batches(users, scores)
    again = random.Random(5).sample(work, max(1, int(len(work) * REDELIVERED)))
    hot_work, hot_sums = batches(hot_users, scores)
    with ministack():  # one local cloud for the four runs: each has tables of its own
        ours = _ours(work, again, sums)
        faulty = _ours(work, again, sums, Faults(FAULT_RATE, LOST_RESPONSE_RATE))
        hot = _ours(hot_work, random.Random(5).sample(hot_work, len(again)), hot_sums)
        base = _baseline(work, again, sums)
    rows: list[list[Any]] = []
    for label, r in (
        ("ours: coalesced, ids on the total", ours),
        ("ours, through injected faults", faulty),
        (f"ours, {hot_users} users (ids overflow to the ledger)", hot),
        ("seed 003: UpdateItem per score (baseline)", base),
    ):
        rows.append(
            [
                label,
                r["requests"],
                r["units"] / scores,
                r["all_requests"],
                r["all_units"] / scores,
                r["failed"],
                r["time"],
                r["double"],
                r["missing"],
            ]
        )
    rows.append(
        [
            "ours vs baseline",
            ratio(ours["requests"], base["requests"]),
            ratio(ours["units"], base["units"]),
            ratio(ours["all_requests"], base["all_requests"]),
            ratio(ours["all_units"], base["all_units"]),
            "",
            ratio(ours["time"], base["time"]),
            "",
            "",
        ]
    )
    injected = ", ".join(f"{n} {kind}" for kind, n in sorted(faulty["injected"].items()))
    note = (
        f"{scores:,} scores over {users} users in batches of {BATCH}, against ministack, injected latency "
        f"{LATENCY_SECONDS * 1000:.0f} ms per call. 'first': the first delivery of every batch; 'all' adds "
        f"{int(REDELIVERED * 100)}% of the batches delivered a second time, to a new container (which knows nothing "
        "of the totals). Write units are what DynamoDB reports (ReturnConsumedCapacity=TOTAL on every write of both "
        "sides), plus each failed conditional write counted from the item it returned (at least 1 unit: a batch "
        "delivered again costs one failed write per group, in a container that has not seen the totals). "
        f"The fault run delivers the same batches with Lambda's retries while {FAULT_RATE:.0%} of DynamoDB calls "
        f"fail before reaching it and {LOST_RESPONSE_RATE:.0%} of the successful writes lose their response "
        f"(injected: {injected}; {faulty['deliveries']} invocations for {len(work) + len(again)} batches). "
        f"The {hot_users}-user run puts {scores // hot_users:,} scores on each total within the horizon, more ids "
        "than a total keeps: those writes go through the ledger at its old price. 'double counted' and 'missing': "
        "the points the totals hold above and below the true sums at the end (ours: checked to be 0, with nothing "
        "parked)."
    )
    header = [
        "design",
        "write requests (first)",
        "WU / score (first)",
        "write requests (all)",
        "WU / score (all)",
        "failed conditions",
        "wall s (first)",
        "double counted",
        "missing",
    ]
    figures = {
        "aggregate_wu_per_score": ours["all_units"] / scores,
        "aggregate_wu_per_score_first": ours["units"] / scores,
        "aggregate_seed_wu_per_score": base["all_units"] / scores,
        "aggregate_double_counted": float(ours["double"] + faulty["double"] + hot["double"]),
        "aggregate_faults_wu_per_score": faulty["all_units"] / scores,
        "aggregate_faults_double_counted": float(faulty["double"]),
        "aggregate_hot_wu_per_score": hot["all_units"] / scores,
        "aggregate_requests_ratio": base["requests"] / ours["requests"],
        "aggregate_units_per_score_ours": ours["all_units"] / scores,
        "aggregate_speedup": base["time"] / ours["time"],
        "aggregate_double_baseline": float(base["double"]),
        "aggregate_double_ours": float(ours["double"]),
    }
    return table("3. aggregate (running totals, exactly once)", header, rows, note), figures
