"""Benchmark 3: `aggregate`, 10,000 scores over 100 users in batches of 100, then 10% of the batches delivered
again; ours vs seed 003's aggregator (baseline, one UpdateItem ADD per score)."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from decimal import Decimal
from typing import Any

from .baselines import seed003
from .harness import LATENCY_SECONDS, REGION, BenchClients, ministack, ratio, stream_record, table, timed

SCORES = 10_000
USERS = 100
BATCH = 100
REDELIVERED = 0.10


def batches() -> tuple[list[dict[str, Any]], dict[str, int]]:
    rng = random.Random(11)
    sums: Counter[str] = Counter()
    out: list[dict[str, Any]] = []
    for start in range(0, SCORES, BATCH):
        records = []
        for n in range(start, start + BATCH):
            user, score = f"USER#u{rng.randrange(USERS)}", rng.randrange(1, 100)
            sums[user] += score
            keys = {"PK": {"S": f"SCORE#{n:05}"}, "SK": {"S": user}}
            records.append(stream_record(keys, {"Score": {"N": str(score)}}, n))
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
    return {
        "mode": "aggregate",
        "table": name,
        "partitionKey": "PK",
        "sortKey": "SK",
        "timeAttribute": "dueAt",
        "target": {"kind": "none", "arn": ""},
        "poisonQueueUrl": queue,
        "maxWorkers": 16,
        "aggregate": {
            "sourcePrefix": "SCORE",
            "valueAttribute": "Score",
            "groupFrom": "SK",
            "totalSortKey": "TOTAL",
            "totalAttribute": "totalScore",
            "aggregation": "sum",
            "onChange": "ignore",
            "ledgerTable": f"{name}-ledger",
            "windowSeconds": 3600,
        },
    }


def _totals(name: str) -> dict[str, int]:
    import boto3

    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=name)["Items"]
    return {i["PK"]["S"]: int(Decimal(i["totalScore"]["N"])) for i in items if i["SK"]["S"] == "TOTAL"}


def _double_counted(sums: dict[str, int], totals: dict[str, int]) -> int:
    return sum(max(0, totals.get(u, 0) - s) for u, s in sums.items())


def _ours(work: list[dict[str, Any]], again: list[dict[str, Any]], sums: dict[str, int]) -> dict[str, Any]:
    from aggregate import handle_batch

    with ministack():
        name, queue = _tables()
        config = _config(name, queue)
        clients = BenchClients()
        elapsed, _ = timed(lambda: [handle_batch(b, config, clients=clients) for b in work])  # type: ignore[arg-type]
        transactions = clients.log.calls["TransactWriteItems"]
        for batch in again:
            handle_batch(batch, config, clients=clients)  # type: ignore[arg-type]
        totals = _totals(name)
    # A transaction bills 2 write units per item in it: the total's update plus one marker per score.
    units = 2 * (transactions + SCORES)
    return {"time": elapsed, "requests": transactions, "units": units, "double": _double_counted(sums, totals)}


def _each(batches: list[dict[str, Any]], handle: Any) -> None:
    for batch in batches:
        handle(batch)


def _baseline(work: list[dict[str, Any]], again: list[dict[str, Any]], sums: dict[str, int]) -> dict[str, Any]:
    with ministack():
        name, _ = _tables()
        clients = BenchClients()
        elapsed, _ = timed(lambda: _each(work, lambda b: seed003.handler(b, clients=clients, table=name)))
        requests = clients.log.calls["UpdateItem"]
        for batch in again:
            seed003.handler(batch, clients=clients, table=name)
        totals = _totals(name)
    return {"time": elapsed, "requests": requests, "units": requests, "double": _double_counted(sums, totals)}


def run() -> tuple[str, dict[str, float]]:
    work, sums = batches()
    again = random.Random(5).sample(work, int(len(work) * REDELIVERED))
    ours, base = _ours(work, again, sums), _baseline(work, again, sums)
    rows: list[list[Any]] = []
    for label, r in (
        ("ours: coalesced + ledger transaction", ours),
        ("seed 003: UpdateItem per score (baseline)", base),
    ):
        rows.append([label, SCORES, r["requests"], r["requests"] / SCORES, r["units"] / SCORES, r["time"], r["double"]])
    rows.append(
        [
            "ours vs baseline",
            "",
            "",
            ratio(ours["requests"], base["requests"]),
            ratio(ours["units"], base["units"]),
            ratio(ours["time"], base["time"]),
            "",
        ]
    )
    note = (
        f"{SCORES:,} scores over {USERS} users in batches of {BATCH}, against ministack (moto deep-copies whole "
        f"tables inside transactions), injected latency {LATENCY_SECONDS * 1000:.0f} ms per call; then "
        f"{int(REDELIVERED * 100)}% of the batches delivered a second time. Write units are DynamoDB's billing "
        "units: a transaction costs 2 per item in it (the total and one marker per score), an UpdateItem 1. "
        "'double counted' is the sum of the totals above the true sums after the redelivery. Ours makes fewer "
        "requests and is faster (groups run concurrently) but spends more write units per score: that is the price "
        "of exactly-once; the baseline is cheaper per score and wrong after any redelivery."
    )
    header = [
        "design",
        "scores",
        "write requests",
        "requests / score",
        "write units / score",
        "wall s",
        "double counted",
    ]
    figures = {
        "aggregate_requests_ratio": base["requests"] / ours["requests"],
        "aggregate_units_per_score_ours": ours["units"] / SCORES,
        "aggregate_speedup": base["time"] / ours["time"],
        "aggregate_double_baseline": float(base["double"]),
        "aggregate_double_ours": float(ours["double"]),
    }
    return table("3. aggregate (running totals, exactly once)", header, rows, note), figures
