"""Benchmark 1: an `eventbridge` batch of INSERT records, ours vs seed 000's scheduling Lambda (baseline)."""

from __future__ import annotations

import math
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from .baselines import seed000
from .harness import ACCOUNT, LATENCY_SECONDS, REGION, BenchClients, aws, ratio, stream_record, table, timed

SIZES = (100, 1000)
WORKERS = 16  # the default `max_workers`
CHURN_ITEMS, CHURN_CHANGES = 200, 5
SWEEP_MS = (5, 10, 25, 50)
SWEEP_RECORDS = 400
STUB_RECORDS = 1000
STUB_QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/q"
STUB_QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:q"
POOL = 64
MEMORIES = (256, 512, 1024, 1769)
AWS_LATENCY = 0.010
QUOTA = 5000  # Scheduler's default CreateSchedule rate per account and Region
LAMBDA_GB_SECOND = 0.0000133334


def records(count: int, changes: int = 1) -> list[dict[str, Any]]:
    """Records as Lambda delivers them, each item due tomorrow at a different second. With `changes` above 1 each
    item is inserted and then moved `changes - 1` times, its records spread over the batch (a churny table)."""
    base = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    items = max(1, count // changes)
    out = []
    for step in range(changes):
        for n in range(items):
            due = (base + timedelta(seconds=n, minutes=step)).strftime("%Y-%m-%dT%H:%M:%SZ")
            keys = {"PK": {"S": f"user#{n}"}, "SK": {"S": "appt"}}
            record = stream_record(keys, {"dueAt": {"S": due}, "name": {"S": f"n{n}"}}, step * items + n)
            if step:
                old = (base + timedelta(seconds=n, minutes=step - 1)).strftime("%Y-%m-%dT%H:%M:%SZ")
                record["eventName"] = "MODIFY"
                record["dynamodb"]["OldImage"] = {**keys, "dueAt": {"S": old}, "name": {"S": f"n{n}"}}
            out.append(record)
    return out


def _setup(clients: BenchClients) -> dict[str, Any]:
    group = f"g-{uuid.uuid4().hex[:8]}"
    clients.get("scheduler").create_schedule_group(Name=group)
    queue = clients.get("sqs").create_queue(QueueName=f"q-{group}")["QueueUrl"]
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:q-{group}"
    ledger = f"ledger-{group}"
    clients.get("dynamodb").create_table(
        TableName=ledger,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return config_for(group, queue, arn, ledger)


def config_for(group: str, queue: str, arn: str, ledger: str) -> dict[str, Any]:
    return {
        "mode": "eventbridge",
        "table": "bench",
        "partitionKey": "PK",
        "sortKey": "SK",
        "timeAttribute": "dueAt",
        "target": {"kind": "sqs", "arn": arn},
        "poisonQueueUrl": queue,
        "maxWorkers": WORKERS,
        "scheduler": {
            "group": group,
            "roleArn": f"arn:aws:iam::{ACCOUNT}:role/s",
            "deadLetterArn": arn,
            "maxEventAgeSeconds": 3600,
            "maxRetryAttempts": 3,
        },
        # Once per occurrence: each schedule is recorded in the idempotency ledger (one write per schedule).
        "eventbridge": {"ledgerTable": ledger, "leaseSeconds": 90, "windowSeconds": 172800},
    }


def _baseline(event: dict[str, Any], latency: float = LATENCY_SECONDS) -> tuple[float, int]:
    """Seed 000's Lambda on `event` against moto: (wall seconds, API calls)."""
    with aws():
        clients = BenchClients(latency=latency)
        config = _setup(clients)
        clients.log.reset()
        elapsed, _ = timed(lambda: _seed(event, config, clients))
        return elapsed, clients.log.total()


def _seed(event: dict[str, Any], config: dict[str, Any], clients: Any) -> None:
    scheduler, arn = config["scheduler"], config["target"]["arn"]
    seed000.handler(
        event, clients=clients, group=scheduler["group"], role_arn=scheduler["roleArn"], target_arn=arn, dlq_arn=arn
    )


def _ours(event: dict[str, Any], latency: float = LATENCY_SECONDS) -> tuple[float, int, int]:
    """Our scheduling handler on `event` against moto: (wall seconds, API calls, schedules left)."""
    from eventbridge import handle_batch

    with aws():
        clients = BenchClients(latency=latency)
        config = _setup(clients)
        clients.log.reset()
        elapsed, response = timed(lambda: handle_batch(event, config, clients=clients))  # type: ignore[arg-type]
        if response != {"batchItemFailures": []}:
            raise RuntimeError(f"the handler reported failures: {response}")
        calls = clients.log.total()
        group = config["scheduler"]["group"]
        left = sum(
            len(p["Schedules"])
            for p in clients.get("scheduler").get_paginator("list_schedules").paginate(GroupName=group)
        )
        return elapsed, calls, left


def emulator_cpu_per_call(size: int = 200) -> float:
    """Seconds of moto CPU per CreateSchedule: the baseline's calls with no injected latency."""
    elapsed, calls = _baseline({"Records": records(size)}, latency=0)
    return elapsed / calls


def floor_seconds(items: int, latency: float, calls: int, cpu_per_call: float, cores: int = 1) -> float:
    """The least wall time a batch can take: its rounds of dependent calls (one per `WORKERS` items, plus the last
    markers' write) at `latency` each, or its calls' client CPU on `cores` (1 here: botocore's work holds the GIL)."""
    rounds = math.ceil(items / WORKERS) + 1
    return max(rounds * latency, calls * cpu_per_call / cores)


def _stubbed(event: dict[str, Any], latency: float, who: str) -> tuple[float, float, int]:
    """(wall s, process CPU s, calls) with the HTTP layer stubbed (bench/stubbed.py)."""
    from eventbridge import handle_batch

    from .stubbed import StubbedClients

    clients = StubbedClients(latency)
    for service in ("scheduler", "dynamodb", "sqs"):
        clients.get(service)  # made before timing, as a warm container's are
    config = config_for("g", STUB_QUEUE_URL, STUB_QUEUE_ARN, "ledger")
    cpu, wall = time.process_time(), time.perf_counter()
    if who == "ours":
        response = handle_batch(event, config, clients=clients)  # type: ignore[arg-type]
        if response != {"batchItemFailures": []}:
            raise RuntimeError(f"the handler reported failures: {response}")
    else:
        _seed(event, config, clients)
    return time.perf_counter() - wall, time.process_time() - cpu, clients.total()


def _moto_table() -> tuple[str, dict[str, float]]:
    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    for size in SIZES:
        event = {"Records": records(size)}
        ours_time, ours_calls, _ = _ours(event)
        base_time, base_calls = _baseline(event)
        floor = math.ceil(size / WORKERS) * LATENCY_SECONDS
        rows.append(["ours", size, ours_time, ours_calls, ours_calls / ours_time, floor, ours_time / floor])
        rows.append(["seed 000 (baseline)", size, base_time, base_calls, base_calls / base_time, "", ""])
        rows.append(["speed-up", size, ratio(ours_time, base_time), "", "", "", ""])
        figures[f"eventbridge_speedup_{size}"] = base_time / ours_time
        figures[f"eventbridge_calls_per_record_{size}"] = ours_calls / size
    cpu = emulator_cpu_per_call()
    figures["emulator_cpu_ms_per_call"] = cpu * 1000
    note = (
        f"moto, {LATENCY_SECONDS * 1000:.0f} ms injected per AWS call; ours runs {WORKERS} items at a time "
        "(`max_workers`), the baseline one record after another. Floor = ceil(records / concurrency) x latency. "
        f"moto itself costs {cpu * 1000:.2f} ms of CPU per call here (measured with no injected latency), in this "
        "process under one interpreter lock: on AWS that work is the service's (see the stubbed run below)."
    )
    header = ["design", "records", "wall s", "API calls", "calls/s", "floor s", "x floor"]
    return table("1a. eventbridge batch (INSERT -> one schedule per item), moto", header, rows, note), figures


def _churn_table() -> tuple[str, dict[str, float]]:
    """A churny batch: 200 items, each inserted and moved four times (1,000 records)."""
    event = {"Records": records(CHURN_ITEMS * CHURN_CHANGES, changes=CHURN_CHANGES)}
    ours_time, ours_calls, ours_left = _ours(event)
    base_time, base_calls = _baseline(event)
    rows = [
        ["ours", len(event["Records"]), ours_time, ours_calls, ours_calls / len(event["Records"]), ours_left],
        [
            "seed 000 (baseline)",
            len(event["Records"]),
            base_time,
            base_calls,
            base_calls / len(event["Records"]),
            base_calls,
        ],
    ]
    note = (
        f"{CHURN_ITEMS} items x {CHURN_CHANGES} changes (an INSERT, then four moves of the due time), moto, "
        f"{LATENCY_SECONDS * 1000:.0f} ms per call. Ours acts on each item's net effect: one CreateSchedule for its "
        "final time, one DeleteSchedule per time it left (a previous run of the same batch may have made that "
        "schedule: the delete is what keeps it from firing; it finds nothing on a first run), one ledger write per 25 "
        "schedules. The seed makes a schedule per record: 4 of each item's 5 fire for times the item no longer has."
    )
    header = ["design", "records", "wall s", "API calls", "calls/record", "schedules left"]
    figures = {"eventbridge_churn_calls_per_record": ours_calls / len(event["Records"])}
    return table("1b. eventbridge churny batch (5 changes per item)", header, rows, note), figures


def _sweep_table() -> tuple[str, dict[str, float]]:
    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    event = {"Records": records(SWEEP_RECORDS)}
    for ms in SWEEP_MS:
        latency = ms / 1000
        ours_time, _, _ = _ours(event, latency)
        base_time, _ = _baseline(event, latency)
        floor = (math.ceil(SWEEP_RECORDS / WORKERS) + 1) * latency
        rows.append([ms, ours_time, base_time, base_time / ours_time, ours_time / floor])
        figures[f"eventbridge_sweep_{ms}_speedup"] = base_time / ours_time
        figures[f"eventbridge_sweep_{ms}_x_floor"] = ours_time / floor
    figures["eventbridge_sweep_workers"] = WORKERS
    note = (
        f"{SWEEP_RECORDS} INSERTs, moto. As the per-call latency grows, moto's CPU per call matters less and the "
        f"speed-up tends to the worker count ({WORKERS}): ours waits on {WORKERS} calls at once, the seed on one."
    )
    header = ["latency ms", "ours s", "seed 000 s", "speed-up", "ours x floor"]
    return table("1c. eventbridge latency sweep (moto)", header, rows, note), figures


def _stub_table() -> tuple[str, dict[str, float]]:
    figures: dict[str, float] = {}
    event = {"Records": records(STUB_RECORDS)}
    _stubbed(event, 0, "ours")  # warm: the first run pays imports and botocore's model loading
    _, seed_cpu, seed_calls = _stubbed(event, 0, "seed")
    cpu_per_call = seed_cpu / seed_calls
    _, ours_cpu0, _ = _stubbed(event, 0, "ours")
    ours_time, _, ours_calls = _stubbed(event, LATENCY_SECONDS, "ours")
    seed_time, _, _ = _stubbed(event, LATENCY_SECONDS, "seed")
    floor = floor_seconds(STUB_RECORDS, LATENCY_SECONDS, ours_calls, cpu_per_call)
    figures.update(
        eventbridge_client_cpu_ms_per_call=cpu_per_call * 1000,
        eventbridge_cpu_ms_per_record=ours_cpu0 / STUB_RECORDS * 1000,
        eventbridge_stub_speedup=seed_time / ours_time,
        eventbridge_stub_x_floor=ours_time / floor,
    )
    rows = [
        ["ours", STUB_RECORDS, ours_time, ours_calls, floor, ours_time / floor, ours_cpu0 / STUB_RECORDS * 1000],
        ["seed 000 (baseline)", STUB_RECORDS, seed_time, seed_calls, "", "", seed_cpu / STUB_RECORDS * 1000],
        ["speed-up", STUB_RECORDS, ratio(ours_time, seed_time), "", "", "", ""],
    ]
    note = (
        f"The production clients (pool {POOL}, standard retries, INFO logging) with the HTTP layer stubbed: each call "
        f"answered after {LATENCY_SECONDS * 1000:.0f} ms, no emulator. Client CPU per call (botocore's validation, "
        f"serialisation, signing, parsing; the seed's calls, no latency): {cpu_per_call * 1000:.2f} ms. Floor = max("
        f"rounds of dependent calls x latency, calls x client CPU per call / 1 core). CPU/record is ours or the "
        "seed's process CPU per record with no latency: everything a Lambda pays per record."
    )
    header = ["design", "records", "wall s", "API calls", "floor s", "x floor", "CPU ms/record"]
    text = table("1d. eventbridge batch, HTTP stubbed (client CPU only)", header, rows, note)
    per_shard = _per_shard(ours_cpu0 / STUB_RECORDS, figures)
    return text + "\n" + per_shard, figures


def _per_shard(cpu_per_record: float, figures: dict[str, float]) -> str:
    """Throughput per shard and Lambda cost per million records at a few memory sizes, from the measured CPU per
    record (Lambda gives a function CPU in proportion to its memory: one vCPU at 1,769 MB)."""
    rows: list[list[Any]] = []
    calls_per_record = figures.get("eventbridge_calls_per_record_1000", 1.04)
    for memory in MEMORIES:
        vcpu = min(1.0, memory / 1769)  # Python runs one core's worth: the GIL
        batch = 100
        cpu_s = batch * cpu_per_record / vcpu
        wait_s = (math.ceil(batch / WORKERS) + 1) * AWS_LATENCY
        seconds = max(cpu_s, wait_s)
        rate = batch / seconds
        cost = 1e6 / batch * seconds * memory / 1024 * LAMBDA_GB_SECOND
        rows.append([memory, f"{vcpu:.2f}", rate, rate * 10, math.ceil(QUOTA / (rate * calls_per_record)), cost])
        figures[f"eventbridge_per_shard_{memory}"] = rate
    note = (
        f"Modelled from the measured CPU per record ({cpu_per_record * 1000:.2f} ms on this machine's core) and "
        f"{AWS_LATENCY * 1000:.0f} ms per call in-region, batches of 100, {WORKERS} workers: a batch takes the longer "
        "of its CPU time on the function's share of a core and its rounds of calls. Shards to quota: how many shards "
        f"at parallelization factor 1 reach Scheduler's default {QUOTA:,} CreateSchedule calls/s per account and "
        "Region (at factor 10, a tenth as many). Cost: Lambda compute only (arm64, $0.0000133334 per GB-s); where "
        "CPU bounds the batch, more memory costs the same per record and finishes sooner."
    )
    header = ["memory MB", "vCPU", "records/s per shard", "at factor 10", "shards to quota", "Lambda $ per 1M"]
    return table("1e. eventbridge throughput per shard (model from 1d)", header, rows, note)


def run() -> tuple[str, dict[str, float]]:
    texts: list[str] = []
    figures: dict[str, float] = {}
    for part in (_moto_table, _churn_table, _sweep_table, _stub_table):
        text, found = part()
        texts.append(text)
        figures.update(found)
    return "\n".join(texts), figures
