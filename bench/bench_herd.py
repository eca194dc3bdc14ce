"""Benchmark: a herd, every item of a `polling` table due in the same minute, drained by the processor as deployed
today (one tick invocation over every shard) and fanned out (`shard_groups`: the rule's invocation invokes one
processor per group of shards, each with its own worker pool). Measured: the drain rate per invocation and per
shard, under moto with the harness's latency injected per AWS call; every due item is checked delivered exactly
once (and every item marked done) before any time is reported. Then `herd_model` takes the measured rates to
100,000 and 1,000,000 items due in a minute and 100,000,000 pending, against AWS's default quotas.

    make bench BENCH=herd          # BENCH_HERD_ITEMS (default 1,600) sets the herd measured here
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from . import herd_model
from .harness import (
    ACCOUNT,
    LATENCY_SECONDS,
    REGION,
    BenchClients,
    NothingMeasured,
    aws,
    cpu_split,
    ledger_table,
    sized,
    table,
)

ITEMS = int(os.environ.get("BENCH_HERD_ITEMS", "1600"))
SHARDS = 8  # today's default
WORKERS = 16  # today's default max_workers
# The fanned-out design the model takes to AWS scale: the most shards (one index partition each) and one
# invocation per shard.
MODEL_SHARDS = 100
MODEL_GROUPS = 100


@dataclass
class Drain:
    """One drain of a herd: `items` due items taken by `invocations` processor invocations over `shards` shards."""

    design: str
    invocations: int
    shards: int
    items: int
    seconds: float
    calls: int
    cpu: str = ""
    cpu_seconds: float = 0.0  # the handler's and botocore's CPU (the emulator's excluded)

    @property
    def rate(self) -> float:
        return self.items / self.seconds

    @property
    def per_invocation(self) -> float:
        return self.rate / self.invocations

    @property
    def per_shard(self) -> float:
        return self.rate / self.shards


class Herd:
    """A table with the due index and `items` items due over the last minute, spread over `shards` shards, its
    ledger (where the processor holds its shards) and a fresh target queue. Loaded without latency (setup is not
    measured)."""

    def __init__(self, items: int, shards: int, now: float) -> None:
        import boto3
        from st_core.pending import DUE, INDEX_NAME, SHARD, pending_attributes
        from st_core.stream import identity_of

        self.ddb = boto3.client("dynamodb", region_name=REGION)
        self.sqs = boto3.client("sqs", region_name=REGION)
        self.name = f"herd-{uuid.uuid4().hex[:8]}"
        self.now = now
        key = [("PK", "HASH"), ("SK", "RANGE")]
        index_key = [(SHARD, "HASH"), (DUE, "RANGE")]
        self.ddb.create_table(
            TableName=self.name,
            KeySchema=[{"AttributeName": n, "KeyType": t} for n, t in key],
            AttributeDefinitions=[
                {"AttributeName": n, "AttributeType": t}
                for n, t in (("PK", "S"), ("SK", "S"), (SHARD, "N"), (DUE, "N"))
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": INDEX_NAME,
                    "KeySchema": [{"AttributeName": n, "KeyType": t} for n, t in index_key],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        self.ledger = ledger_table(self.ddb, f"{self.name}-ledger")
        queue = f"herd-{uuid.uuid4().hex[:8]}"
        self.queue_url = self.sqs.create_queue(QueueName=queue)["QueueUrl"]
        self.queue_arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}"
        self.keys = [f"r#{n}" for n in range(items)]
        batch: list[dict[str, Any]] = []
        for n, pk in enumerate(self.keys):
            keys = {"PK": {"S": pk}, "SK": {"S": "T"}}
            due = int(now) - 60 + n % 60  # every second of the minute before the tick
            attributes = pending_attributes(identity_of(keys), datetime.fromtimestamp(due, UTC), shards)
            item = {
                **keys,
                "stShard": {"N": str(attributes["stShard"])},
                "stDue": {"N": str(attributes["stDue"])},
                "stStatus": {"S": "PENDING"},
                "dueAt": {"N": str(due)},
            }
            batch.append({"PutRequest": {"Item": item}})
            if len(batch) == 25:
                self.ddb.batch_write_item(RequestItems={self.name: batch})
                batch = []
        if batch:
            self.ddb.batch_write_item(RequestItems={self.name: batch})

    def config(self, shards: int, groups: int = 1) -> dict[str, Any]:
        from .bench_polling import polling_config

        return polling_config(self.name, self.ledger, self.queue_arn, shards, groups)

    def check_delivered(self) -> None:
        """Every item delivered exactly once, none early (sent at or after its due second, by the tick's clock),
        and every item marked done: what a drain must have done before its time means anything."""
        received: Counter[str] = Counter()
        while True:
            messages = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10).get("Messages", [])
            if not messages:
                break
            for message in messages:
                body = json.loads(message["Body"])
                due = datetime.fromisoformat(body["dueAt"].replace("Z", "+00:00")).timestamp()
                if due > self.now:
                    raise NothingMeasured(f"{body['keys']['PK']} delivered early: due {due}, tick at {self.now}")
                received[body["keys"]["PK"]] += 1
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
            )
        missing = [pk for pk in self.keys if pk not in received]
        twice = sorted(pk for pk, n in received.items() if n > 1)
        unknown = sorted(set(received) - set(self.keys))
        if missing or twice or unknown:
            raise NothingMeasured(
                f"herd not delivered once each: {len(missing)} missing (e.g. {missing[:3]}), {len(twice)} twice "
                f"(e.g. {twice[:3]}), {len(unknown)} unknown"
            )
        statuses: Counter[str] = Counter()
        pages = self.ddb.get_paginator("scan").paginate(TableName=self.name, ProjectionExpression="stStatus")
        for page in pages:
            statuses.update(i["stStatus"]["S"] for i in page["Items"])
        if statuses != Counter({"DONE": len(self.keys)}):
            raise NothingMeasured(f"not every item marked done: {dict(statuses)}")


class LocalLambda:
    """Lambda's asynchronous invoke of the processor, here: after the call's latency, the invocation runs in a
    thread of its own (its own clients, as a separate execution environment has), as Lambda runs them at once."""

    def __init__(self, run: Any, latency: float) -> None:
        self.run = run
        self.latency = latency
        self.threads: list[threading.Thread] = []

    def invoke(self, *, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:
        time.sleep(self.latency)
        thread = threading.Thread(target=self.run, args=(json.loads(Payload)["shards"],))
        thread.start()
        self.threads.append(thread)
        return {"StatusCode": 202}


class FanOutClients(BenchClients):
    """The rule's invocation's clients: the harness's, with `LocalLambda` for the invoke."""

    def __init__(self, local: LocalLambda) -> None:
        super().__init__()
        self.local = local

    def get(self, service: str) -> Any:
        return self.local if service == "lambda" else super().get(service)


@contextmanager
def sends_per_call(entries: int | None) -> Iterator[None]:
    """The processor sending at most `entries` due events a call (None: as built, the target's batch of 10): the
    benchmark's before-and-after of batched sends, one run with each."""
    from polling import drain

    built = drain.batch_entries
    if entries is not None:
        drain.batch_entries = lambda target: entries
    try:
        yield
    finally:
        drain.batch_entries = built


def drain(items: int, shards: int, groups: int, latency: float = LATENCY_SECONDS, per_call: int | None = None) -> Drain:
    """Load a herd, drain it with one tick (`groups` 1) or fanned out, check it, and report the time. `per_call`
    1: the processor sends one due event a call (as it did before batched sends)."""
    from polling import fan_out, process

    now = float(int(time.time()))
    herd = Herd(items, shards, now)
    config = herd.config(shards, groups)
    calls: list[int] = []
    lock = threading.Lock()

    def tick(group: list[int] | None) -> None:
        clients = BenchClients(latency)
        report = process(config, clients=clients, now=lambda: now, shards=group)  # type: ignore[arg-type]
        if report.failed or report.retried:
            raise AssertionError(f"a herd tick failed items: {report}")
        with lock:
            calls.append(clients.log.total())

    with cpu_split() as cpu, sends_per_call(per_call):
        started = time.perf_counter()
        if groups == 1:
            tick(None)
        else:
            local = LocalLambda(tick, latency)
            clients = FanOutClients(local)
            fan_out(config, "processor", clients=clients, now=lambda: now)  # type: ignore[arg-type]
            for thread in local.threads:
                thread.join()
            calls.append(clients.log.total() + len(local.threads))
        seconds = time.perf_counter() - started
    herd.check_delivered()
    design = "one tick" if groups == 1 else f"fanned out, {groups} groups"
    design += ", one send a call (before)" if per_call == 1 else ""
    invocations = 1 if groups == 1 else min(groups, shards)
    return Drain(design, invocations, shards, items, seconds, sum(calls), cpu.describe(), cpu.client + cpu.rest)


def measure(items: int = ITEMS, latency: float = LATENCY_SECONDS) -> list[Drain]:
    """The single tick over 8 shards sending one due event a call (before batched sends) and ten (as built); one
    invocation over one shard (the per-invocation and per-shard rate of the fan-out); the fan-out over 8 shards in
    8 groups, all at once."""
    return [
        drain(items, SHARDS, 1, latency, per_call=1),
        drain(items, SHARDS, 1, latency),
        drain(max(1, items // SHARDS), 1, 1, latency),
        drain(items, SHARDS, SHARDS, latency),
    ]


def designs(measured: list[Drain], latency: float = LATENCY_SECONDS) -> list[herd_model.Design]:
    """The designs the model compares: the single tick (8 shards) before and after batched sends, the fan-out at
    `MODEL_SHARDS` shards in `MODEL_GROUPS` groups as built (items the assigner indexed, and items their writers
    index: the herd measured here is loaded that way), the same with a claim per item as the processor took items
    before its lease per shard (`herd_model.CLAIM_PER_ITEM_WRITES`), and due entries apart from the items, costed
    on paper (`herd_model.ENTRIES_WRITES`). An invocation's rate on AWS is modelled from what the runs measured per
    item (calls, and the handler's and botocore's CPU: a shared machine's wall time says little, its CPU per item
    more); the fan-out's is from the fanned-out run, its own queries, invokes and shard leases included; another
    design's from the same run, with its own DynamoDB calls per item in place of the built design's (its CPU per
    item taken as measured)."""
    before, today, fanned = measured[0], measured[1], measured[-1]

    def rate(drain: Drain, writes: herd_model.ItemWrites = herd_model.TODAY_WRITES) -> float:
        calls = drain.calls / drain.items - herd_model.TODAY_WRITES.drain_calls() + writes.drain_calls()
        return herd_model.invocation_rate(calls, drain.cpu_seconds / drain.items, WORKERS, latency)

    def fanned_out(label: str, writes: herd_model.ItemWrites) -> herd_model.Design:
        name = f"polling fanned out{label} ({MODEL_GROUPS} groups, {MODEL_SHARDS} shards)"
        return herd_model.Design(name, MODEL_GROUPS, MODEL_SHARDS, rate(fanned, writes), writes=writes)

    return [
        herd_model.Design(
            "polling, 1 tick, 8 shards, one send a call (before)", 1, SHARDS, rate(before), sends_per_call=1
        ),
        herd_model.Design("polling, 1 tick, 8 shards", 1, SHARDS, rate(today)),
        fanned_out("", herd_model.TODAY_WRITES),
        fanned_out(", writers index their items", herd_model.PRE_INDEXED_TODAY_WRITES),
        fanned_out(", a claim per item (before)", herd_model.CLAIM_PER_ITEM_WRITES),
        fanned_out(" (paper): due entries apart from the items", herd_model.ENTRIES_WRITES),
    ]


def model_rows(models: list[herd_model.Design], eventbridge_cost: float, reads_per_due: float = 1.0) -> str:
    """The herd model's table: each design at 100,000 and 1,000,000 items due in a minute, with its cost per million
    (`bench_scale`'s prices on `herd_model.polling_usage`, the shard leases and the fan-out's invocations added)."""
    from .bench_scale import cost_per_million

    rows: list[list[Any]] = []
    goal = GOAL_COST_RATIO * eventbridge_cost
    for items in (100_000, 1_000_000):
        herd = herd_model.eventbridge_herd(items)
        rows.append(_row(herd, eventbridge_cost, goal))
        for design in models:
            herd = herd_model.polling_herd(design, items)
            usage = herd_model.polling_usage(design.writes, reads_per_due, design.sends_per_call)
            rows.append(_row(herd, herd_model.cost_per_million(cost_per_million(usage), herd, design), goal))
    pending = 100_000_000
    note = (
        f"Pending {pending:,}: eventbridge {herd_model.eventbridge_pending(pending).detail} (needs an increase); "
        f"polling fanned out {herd_model.polling_pending(models[2], pending).detail}. Write units per item (table and "
        "ledger + due index: assign, claim, completion): as built (a lease per shard key, no claim per item) "
        f"{_units(herd_model.TODAY_WRITES)}; as built, writers indexing their items "
        f"{_units(herd_model.PRE_INDEXED_TODAY_WRITES)}; a claim per item (before) "
        f"{_units(herd_model.CLAIM_PER_ITEM_WRITES)}; the same, writers indexing their items "
        f"{_units(herd_model.PRE_INDEXED_CLAIM_PER_ITEM_WRITES)}; due entries apart "
        f"{_units(herd_model.ENTRIES_WRITES)}. Each shard key is one partition (1,000 WCU/s); on-demand table-level "
        "quota 40,000 WCU/s; Lambda concurrency 1,000 shared; Scheduler's invocation throttle 1,000/s and "
        "10,000,000 schedules a Region. Cost per million: the design's per-item usage at `bench scale`'s prices "
        "plus, for every tick the drain spans, the shard leases (ledger write units for each shard key) and the "
        f"fan-out's invocations; the goal is at most {GOAL_COST_RATIO}x eventbridge's (${goal:.2f}). "
        "`(paper)` designs are costed, not built."
    )
    header = ["due in a minute", "design", "drain rate (what sets it)", "drain", "latest", "concurrency", "per 1M"]
    return table("herd model: at AWS's default quotas, from the measured rates", header, rows, note)


# The herd goal's cost: at most 20% above eventbridge's per million.
GOAL_COST_RATIO = 1.2


def _row(herd: herd_model.Herd, cost: float, goal: float) -> list[Any]:
    return [
        f"{herd.items:,}",
        herd.design,
        f"{herd.rate:,.0f}/s ({herd.limit})",
        f"{herd.drain_seconds:,.0f} s",
        f"{herd.last_late_seconds:,.0f} s",
        herd.concurrency,
        f"${cost:.2f}" + (" (over the goal)" if cost > goal else ""),
    ]


def _units(writes: herd_model.ItemWrites) -> str:
    steps = " + ".join(f"{t:g}/{i:g}" for t, i in (writes.assign, writes.claim, writes.completion))
    return (
        f"{steps} = {writes.total():g}"
        + (f", {writes.consistent_reads:g} consistent read unit(s)" if writes.consistent_reads else "")
        + (f", {writes.shard_lease:g} ledger units a shard key and tick" if writes.shard_lease else "")
    )


def run() -> tuple[str, dict[str, float]]:
    from .bench_scale import cost_per_million, per_action

    with aws():
        measured = measure(sized(ITEMS, 48))
    rows = [
        [
            d.design,
            d.shards,
            d.items,
            f"{d.seconds:.2f}",
            d.rate,
            d.per_invocation,
            d.per_shard,
            d.calls / d.items,
            f"{d.cpu_seconds / d.items * 1000:.2f}",
        ]
        for d in measured
    ]
    note = (
        f"moto in-process, {LATENCY_SECONDS * 1000:.0f} ms injected per AWS call, {WORKERS} workers an invocation; "
        "every item checked delivered once, none early, all marked done. The fanned-out run's invocations share "
        "this machine's 2 cores (moto's CPU is in them), so its total is a floor, not what separate Lambdas give. "
        + " | ".join(f"{d.design}: {d.cpu}" for d in measured)
    )
    header = [
        "design",
        "shards",
        "items",
        "seconds",
        "items/s",
        "per invocation",
        "per shard",
        "calls/item",
        "CPU ms/item",
    ]
    text = table("herd: drain rate per invocation and per shard (measured)", header, rows, note)
    usage = per_action({})
    models = designs(measured)
    text += (
        f"\nModelled per invocation on AWS (1,024 MB, about {herd_model.VCPU_AT_DEFAULT_MEMORY:.2f} vCPU; "
        f"{WORKERS} workers; {LATENCY_SECONDS * 1000:.0f} ms a call): "
        + "; ".join(f"{d.name} {d.per_invocation:,.0f} items/s" for d in models)
        + ".\n"
    )
    text += "\n" + model_rows(models, cost_per_million(usage["eventbridge"]))
    fanned = models[2]
    figures = {
        "herd_before_items_per_s": measured[0].rate,
        "herd_today_items_per_s": measured[1].rate,
        "herd_group_items_per_s": measured[2].rate,
        "herd_model_invocation_items_per_s": fanned.per_invocation,
        "herd_fanned_items_per_s": measured[3].rate,
        "herd_before_calls_per_item": measured[0].calls / measured[0].items,
        "herd_today_calls_per_item": measured[1].calls / measured[1].items,
        "herd_model_fanned_1m_drain_s": herd_model.polling_herd(fanned, 1_000_000).drain_seconds,
        "herd_model_today_1m_drain_s": herd_model.polling_herd(models[1], 1_000_000).drain_seconds,
    }
    return text, figures
