"""Benchmark 1: an `eventbridge` batch of INSERT records, ours vs seed 000's scheduling Lambda (baseline)."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from .baselines import seed000
from .harness import ACCOUNT, LATENCY_SECONDS, REGION, BenchClients, aws, ratio, stream_record, table, timed

SIZES = (100, 1000)
WORKERS = 16


def records(count: int) -> list[dict[str, Any]]:
    """INSERT records as Lambda delivers them, each due tomorrow at a different second."""
    base = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    out = []
    for n in range(count):
        due = (base + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")
        keys = {"PK": {"S": f"user#{n}"}, "SK": {"S": "appt"}}
        out.append(stream_record(keys, {"dueAt": {"S": due}, "name": {"S": f"n{n}"}}, n))
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
    """Seed 000's Lambda on `event`: (wall seconds, API calls)."""
    with aws():
        clients = BenchClients(latency=latency)
        config = _setup(clients)
        clients.log.reset()
        scheduler = config["scheduler"]
        arn = config["target"]["arn"]
        elapsed, _ = timed(
            lambda: seed000.handler(
                event,
                clients=clients,
                group=scheduler["group"],
                role_arn=scheduler["roleArn"],
                target_arn=arn,
                dlq_arn=arn,
            )
        )
        return elapsed, clients.log.total()


def _ours(event: dict[str, Any]) -> tuple[float, int]:
    """Our scheduling handler on `event`: (wall seconds, API calls)."""
    from eventbridge import handle_batch

    with aws():
        clients = BenchClients()
        config = _setup(clients)
        clients.log.reset()
        elapsed, response = timed(lambda: handle_batch(event, config, clients=clients))  # type: ignore[arg-type]
        if response != {"batchItemFailures": []}:
            raise RuntimeError(f"the handler reported failures: {response}")
        return elapsed, clients.log.total()


def emulator_cpu_per_call(size: int = 200) -> float:
    """Seconds of moto CPU per CreateSchedule: the baseline's calls with no injected latency."""
    elapsed, calls = _baseline({"Records": records(size)}, latency=0)
    return elapsed / calls


def run() -> tuple[str, dict[str, float]]:
    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    for size in SIZES:
        event = {"Records": records(size)}
        ours_time, ours_calls = _ours(event)
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
        f"Injected latency {LATENCY_SECONDS * 1000:.0f} ms per AWS call; ours runs {WORKERS} items at a time "
        "(`max_workers`), the baseline one record after another. Floor = ceil(records / concurrency) x latency. "
        f"moto itself costs {cpu * 1000:.1f} ms of CPU per call here (measured with no injected latency), and it runs "
        "in this process under one interpreter lock, so concurrent calls cannot go below records x that: on AWS, "
        "where that work happens in the service, ours gets closer to the floor."
    )
    header = ["design", "records", "wall s", "API calls", "calls/s", "floor s", "x floor"]
    return table("1. eventbridge batch (INSERT -> one schedule per item)", header, rows, note), figures
