"""Benchmark 1: an `eventbridge` batch of INSERT records, ours vs seed 000's scheduling Lambda (baseline).

The table holds each record's item (its latest image), as it does when Lambda hands the batch over: our handler reads
the batch's items back before it schedules (a replayed record must not schedule a time its item has left), and a
table without them would time the path where every record is judged stale. Each run checks, before its time is
reported, that every record that should make a schedule made one and nothing was parked or delivered."""

from __future__ import annotations

import json
import math
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .baselines import seed000
from .harness import (
    ACCOUNT,
    LATENCY_SECONDS,
    REGION,
    BenchClients,
    aws,
    expect,
    ledger_table,
    ratio,
    sized,
    stream_record,
    table,
    timed,
)

if TYPE_CHECKING:
    from .stubbed import Call, StubbedClients

SIZES = (100, 1000)
WORKERS = 16  # the default `max_workers`
CHURN_ITEMS, CHURN_CHANGES = 200, 5
SWEEP_MS = (5, 10, 25, 50)
SWEEP_RECORDS = 400
STUB_RECORDS = 1000
STUB_TURNS = 9  # runs of ours and of its floor, turn about (the least of each is kept)
SEED_TURNS = 2  # of them, those that also time the seed
STUB_QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/q"
STUB_QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:q"
POOL = 64
TABLE = "bench"
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


def items_of(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table after the batch's writes: each item's latest image (DynamoDB JSON)."""
    latest: dict[str, dict[str, Any] | None] = {}
    for record in records:
        key = json.dumps(record["dynamodb"]["Keys"], sort_keys=True)
        latest[key] = record["dynamodb"].get("NewImage") if record["eventName"] != "REMOVE" else None
    return [item for item in latest.values() if item is not None]


def _setup(clients: BenchClients, records: list[dict[str, Any]]) -> dict[str, Any]:
    """A schedule group, a queue (target and poison queue), the ledger, and the table holding the records' items."""
    group = f"g-{uuid.uuid4().hex[:8]}"
    clients.get("scheduler").create_schedule_group(Name=group)
    queue = clients.get("sqs").create_queue(QueueName=f"q-{group}")["QueueUrl"]
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:q-{group}"
    ddb = clients.get("dynamodb")
    ledger = ledger_table(ddb, f"ledger-{group}")
    if TABLE not in ddb.list_tables()["TableNames"]:
        ddb.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("PK", "SK")],
            BillingMode="PAY_PER_REQUEST",
        )
    items = items_of(records)
    for start in range(0, len(items), 25):
        ddb.batch_write_item(RequestItems={TABLE: [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]})
    return config_for(group, queue, arn, ledger)


def _made(clients: Any, config: dict[str, Any], records: list[dict[str, Any]], who: str) -> int:
    """Check that the run did its work: a schedule for every item of the batch (each is due tomorrow) and nothing
    in the queue (no delivery, no record parked). Returns the schedules made."""
    group = config["scheduler"]["group"]
    left = sum(
        len(p["Schedules"]) for p in clients.get("scheduler").get_paginator("list_schedules").paginate(GroupName=group)
    )
    expect(f"{who}: schedules left for {len(items_of(records))} items", left, len(items_of(records)))
    queued = clients.get("sqs").get_queue_attributes(
        QueueUrl=config["poisonQueueUrl"], AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]["ApproximateNumberOfMessages"]
    expect(f"{who}: messages parked or delivered", int(queued), 0)
    return left


def config_for(group: str, queue: str, arn: str, ledger: str, release: tuple[str, str] | None = None) -> dict[str, Any]:
    """The scheduling function's configuration as the component writes it for a queue target (also the target's
    dead letters) and a poison queue; once per occurrence, each schedule is recorded in the idempotency ledger (one
    write per schedule). With `release` (a queue's ARN and URL), precision `second` through that release queue."""
    from components import ScheduledTableArgs
    from components.runtime_config import Value
    from components.targets import QueueTarget
    from tests.support.handler_config import handler_config

    args = ScheduledTableArgs(
        mode="eventbridge",
        target=QueueTarget(queue_arn=arn),
        max_workers=WORKERS,
        schedule_max_event_age_seconds=3600,
        schedule_retry_attempts=3,
        precision="minute" if release is None else "second",
    )
    names = {
        Value.TABLE: TABLE,
        Value.POISON_QUEUE_URL: queue,
        Value.SCHEDULE_GROUP: group,
        Value.SCHEDULER_ROLE_ARN: f"arn:aws:iam::{ACCOUNT}:role/s",
        Value.TARGET_DLQ_ARN: arn,
        Value.LEDGER_TABLE: ledger,
    }
    if release is not None:
        names |= {Value.RELEASE_QUEUE_ARN: release[0], Value.RELEASE_QUEUE_URL: release[1], Value.TARGET_DLQ_URL: queue}
    return dict(handler_config(args, names))


def _baseline(event: dict[str, Any], latency: float = LATENCY_SECONDS) -> tuple[float, int]:
    """Seed 000's Lambda on `event` against moto: (wall seconds, API calls)."""
    with aws():
        clients = BenchClients(latency=latency)
        config = _setup(clients, event["Records"])
        clients.log.reset()
        elapsed, _ = timed(lambda: _seed(event, config, clients))
        calls = clients.log.total()
        expect("seed 000: CreateSchedule calls", clients.log.calls["CreateSchedule"], len(event["Records"]))
        return elapsed, calls


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
        config = _setup(clients, event["Records"])
        clients.log.reset()
        elapsed, response = timed(lambda: handle_batch(event, config, clients=clients))  # type: ignore[arg-type]
        expect("ours: the handler's response", response, {"batchItemFailures": []})
        calls = clients.log.total()
        return elapsed, calls, _made(clients, config, event["Records"], "ours")


def emulator_cpu_per_call(size: int = 200) -> float:
    """Seconds of moto CPU per CreateSchedule: the baseline's calls with no injected latency."""
    elapsed, calls = _baseline({"Records": records(size)}, latency=0)
    return elapsed / calls


def bound_seconds(items: int, latency: float, calls_cpu: float) -> float:
    """A lower bound on a batch's wall time: its rounds of dependent calls (the batch's read of its items, one per
    `WORKERS` items, the last markers' write) at `latency` each, or its calls' client CPU (`calls_cpu`, on one
    core: botocore's work holds the GIL). No run reaches it: it prices the threads' cost at nothing."""
    rounds = math.ceil(items / WORKERS) + 2
    return max(rounds * latency, calls_cpu)


def _stubbed(
    event: dict[str, Any], latency: float, who: str, record: bool = False
) -> tuple[float, float, Counter[str], list[Call]]:
    """(wall s, process CPU s, calls by operation, the calls made if `record`) with the HTTP layer stubbed
    (bench/stubbed.py)."""
    from eventbridge import handle_batch

    clients = _stub_clients(event, latency)
    if record:
        clients.recording = []
    config = config_for("g", STUB_QUEUE_URL, STUB_QUEUE_ARN, "ledger")
    cpu, wall = time.process_time(), time.perf_counter()
    if who == "ours":
        response = handle_batch(event, config, clients=clients)  # type: ignore[arg-type]
        expect("ours (stubbed): the handler's response", response, {"batchItemFailures": []})
    else:
        _seed(event, config, clients)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    # Every item scheduled, none parked or delivered at once (the stub answers every call, so only the counts tell).
    expect(f"{who} (stubbed): CreateSchedule calls", clients.calls["CreateSchedule"], len(items_of(event["Records"])))
    expect(f"{who} (stubbed): messages sent (parked or delivered)", clients.calls["SendMessage"], 0)
    return wall, cpu, clients.calls, clients.recording or []


def _stub_clients(event: dict[str, Any], latency: float) -> StubbedClients:
    from .stubbed import StubbedClients

    clients = StubbedClients(latency, items=items_of(event["Records"]), keys=("PK", "SK"))
    for service in ("scheduler", "dynamodb", "sqs"):
        clients.get(service)  # made before timing, as a warm container's are
    return clients


def _moto_table() -> tuple[str, dict[str, float]]:
    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    for size in sized(SIZES, (16,)):
        event = {"Records": records(size)}
        ours_time, ours_calls, made = _ours(event)
        base_time, base_calls = _baseline(event)
        floor = (math.ceil(size / WORKERS) + 2) * LATENCY_SECONDS
        rows.append(
            [
                "ours",
                size,
                made,
                ours_time,
                ours_time / size * 1000,
                ours_calls,
                ours_calls / size,
                floor,
                ours_time / floor,
            ]
        )
        rows.append(
            [
                "seed 000 (baseline)",
                size,
                size,
                base_time,
                base_time / size * 1000,
                base_calls,
                base_calls / size,
                "",
                "",
            ]
        )
        rows.append(["speed-up", size, "", ratio(ours_time, base_time), "", "", "", "", ""])
        figures[f"eventbridge_speedup_{size}"] = base_time / ours_time
        figures[f"eventbridge_calls_per_record_{size}"] = ours_calls / size
        figures[f"eventbridge_ms_per_record_{size}"] = ours_time / size * 1000
    cpu = emulator_cpu_per_call(sized(200, 10))
    figures["emulator_cpu_ms_per_call"] = cpu * 1000
    note = (
        f"moto, {LATENCY_SECONDS * 1000:.0f} ms injected per AWS call; every item due tomorrow, the table holding "
        "each record's item (checked after each run: one schedule per item, nothing parked or delivered). Ours runs "
        f"{WORKERS} items at a time (`max_workers`) after one read of the batch's items (a BatchGetItem per 100, made "
        "together), the baseline one record after another. Floor = (ceil(records / concurrency) + 2) x latency: the "
        "batch read, the rounds of schedules, the last ledger markers' write. "
        f"moto itself costs {cpu * 1000:.2f} ms of CPU per call here (measured with no injected latency), in this "
        "process under one interpreter lock: on AWS that work is the service's (see the stubbed run below)."
    )
    header = [
        "design",
        "records",
        "schedules made",
        "wall s",
        "ms / record",
        "API calls",
        "calls / record",
        "floor s",
        "x floor",
    ]
    return table("1a. eventbridge batch (INSERT -> one schedule per item), moto", header, rows, note), figures


def _churn_table() -> tuple[str, dict[str, float]]:
    """A churny batch: 200 items, each inserted and moved four times (1,000 records)."""
    event = {"Records": records(sized(CHURN_ITEMS, 4) * CHURN_CHANGES, changes=CHURN_CHANGES)}
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
        f"{len(event['Records']) // CHURN_CHANGES} items x {CHURN_CHANGES} changes (an INSERT, then four moves of the "
        f"due time), moto, {LATENCY_SECONDS * 1000:.0f} ms per call. Ours acts on each item's net effect: one "
        "CreateSchedule for its final time, one DeleteSchedule per time it left (a previous run of the same batch "
        "may have made that schedule: the delete is what keeps it from firing; it finds nothing on a first run), one "
        "ledger write per 25 schedules, one read of the batch's items per 100. The seed makes a schedule per record: "
        "4 of each item's 5 fire for times the item no longer has."
    )
    header = ["design", "records", "wall s", "API calls", "calls/record", "schedules left"]
    figures = {"eventbridge_churn_calls_per_record": ours_calls / len(event["Records"])}
    return table("1b. eventbridge churny batch (5 changes per item)", header, rows, note), figures


def _sweep_table() -> tuple[str, dict[str, float]]:
    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    count = sized(SWEEP_RECORDS, 16)
    event = {"Records": records(count)}
    for ms in sized(SWEEP_MS, (5,)):
        latency = ms / 1000
        ours_time, _, _ = _ours(event, latency)
        base_time, _ = _baseline(event, latency)
        floor = (math.ceil(count / WORKERS) + 2) * latency
        rows.append([ms, ours_time, base_time, base_time / ours_time, ours_time / floor])
        figures[f"eventbridge_sweep_{ms}_speedup"] = base_time / ours_time
        figures[f"eventbridge_sweep_{ms}_x_floor"] = ours_time / floor
    figures["eventbridge_sweep_workers"] = WORKERS
    note = (
        f"{count} INSERTs, moto. As the per-call latency grows, moto's CPU per call matters less and the "
        f"speed-up tends to the worker count ({WORKERS}): ours waits on {WORKERS} calls at once, the seed on one."
    )
    header = ["latency ms", "ours s", "seed 000 s", "speed-up", "ours x floor"]
    return table("1c. eventbridge latency sweep (moto)", header, rows, note), figures


def _stub_table() -> tuple[str, dict[str, float]]:
    from .stubbed import replay

    figures: dict[str, float] = {}
    count = sized(STUB_RECORDS, 20)
    event = {"Records": records(count)}
    # Warm (the first run pays imports and botocore's model loading), recording the calls ours makes for its floor.
    *_, made = _stubbed(event, 0, "ours", record=True)
    _stubbed(event, 0, "seed")
    # A schedule per record, a read per 100 of them, a markers' write per 25.
    expected = count + math.ceil(count / 100) + math.ceil(count / 25)
    expect("ours (stubbed): the calls recorded for the floor", len(made), expected)

    def calls_cpu() -> float:
        """Process CPU of ours' calls made again one after another, no latency: the calls' own client CPU."""
        started = time.process_time()
        replay(_stub_clients(event, 0), made, 1)
        return time.process_time() - started

    def floor_wall() -> float:
        return replay(_stub_clients(event, LATENCY_SECONDS), made, WORKERS)

    # Every measure taken in each turn, the order reversed every other turn: taking turns in both orders gives each
    # the same share of this machine's noise.
    measures: dict[str, Callable[[], float]] = {
        "ours cpu": lambda: _stubbed(event, 0, "ours")[1],
        "seed cpu": lambda: _stubbed(event, 0, "seed")[1],
        "calls cpu": calls_cpu,
        "ours": lambda: _stubbed(event, LATENCY_SECONDS, "ours")[0],
        "floor": floor_wall,
        "seed": lambda: _stubbed(event, LATENCY_SECONDS, "seed")[0],
    }
    taken: dict[str, list[float]] = {name: [] for name in measures}
    for turn in range(sized(STUB_TURNS, 1)):
        for name in list(measures)[:: 1 if turn % 2 == 0 else -1]:
            if name != "seed" or turn < SEED_TURNS:  # the seed's 10 s a run: its noise is a small share of it
                taken[name].append(measures[name]())
    # CPU: the least of each (noise only adds CPU). Wall time: medians, and ours over its floor as the median of the
    # ratios of each turn's two runs, made one after the other: 16 threads under one interpreter lock give a wide
    # spread of wall times that drifts with the machine's state, which the pairs share.
    least = {name: min(values) for name, values in taken.items()}
    ours_time, floor, seed_time = (statistics.median(taken[name]) for name in ("ours", "floor", "seed"))
    x_floor = statistics.median(o / f for o, f in zip(taken["ours"], taken["floor"], strict=True))
    _, _, ours_counted, _ = _stubbed(event, 0, "ours")
    ours_calls = ours_counted.total()
    expect("ours (stubbed): the calls replayed for the floor", len(made), ours_calls)
    scheduler_calls = sum(n for op, n in ours_counted.items() if op.endswith("Schedule"))
    bound = bound_seconds(count, LATENCY_SECONDS, least["calls cpu"])
    cpu_per_call = least["seed cpu"] / count
    figures.update(
        eventbridge_client_cpu_ms_per_call=cpu_per_call * 1000,
        eventbridge_cpu_ms_per_record=least["ours cpu"] / count * 1000,
        eventbridge_calls_cpu_ms_per_record=least["calls cpu"] / count * 1000,
        eventbridge_stub_speedup=seed_time / ours_time,
        eventbridge_stub_x_floor=x_floor,
        eventbridge_stub_x_bound=ours_time / bound,
        eventbridge_stub_calls_per_record=ours_calls / count,
        eventbridge_stub_scheduler_calls_per_record=scheduler_calls / count,
    )
    ours_row = [ours_time, ours_calls, ours_calls / count, floor, x_floor, bound, ours_time / bound]
    rows = [
        ["ours", count, *ours_row, least["ours cpu"] / count * 1000],
        ["seed 000 (baseline)", count, seed_time, count, 1.0, "", "", "", "", least["seed cpu"] / count * 1000],
        ["speed-up", count, ratio(ours_time, seed_time), "", "", "", "", "", "", ""],
    ]
    turns = sized(STUB_TURNS, 1)
    note = (
        f"The production clients (pool {POOL}, standard retries, INFO logging) with the HTTP layer stubbed: each call "
        f"answered after {LATENCY_SECONDS * 1000:.0f} ms, no emulator, reads answered with the items the table holds "
        "(checked: a CreateSchedule per item, nothing sent). Floor = the very calls ours made (recorded), made again "
        f"by a bare loop over the same clients, {WORKERS} at a time, the reads first: the calls' client CPU "
        "(botocore's validation, serialisation, signing, parsing), their latency and the threads' cost, none of the "
        "handler's own work; x floor is what the handler itself adds. Bound = max(rounds of dependent calls x "
        f"latency, the client CPU of the same calls made one after another with no latency: "
        f"{least['calls cpu'] / count * 1000:.2f} ms per record): a bound no run reaches, as it prices the threads "
        f"at nothing. {turns} turns, each running every measure, in reverse order every other turn (the seed's "
        f"wall time in {min(turns, SEED_TURNS)} of them): wall times are medians, x floor the median of each turn's "
        "ours over its floor (run one after the other), CPU the least of each. CPU/record is the process CPU per "
        "record with no latency: everything a Lambda pays per record."
    )
    header = [
        "design",
        "records",
        "wall s",
        "API calls",
        "calls / record",
        "floor s",
        "x floor",
        "bound s",
        "x bound",
        "CPU ms/record",
    ]
    text = table("1d. eventbridge batch, HTTP stubbed (client CPU only)", header, rows, note)
    per_shard = _per_shard(least["ours cpu"] / count, figures)
    return text + "\n" + per_shard, figures


def _per_shard(cpu_per_record: float, figures: dict[str, float]) -> str:
    """Throughput per shard and Lambda cost per million records at a few memory sizes, from the measured CPU per
    record (Lambda gives a function CPU in proportion to its memory: one vCPU at 1,769 MB)."""
    rows: list[list[Any]] = []
    calls_per_record = figures["eventbridge_stub_scheduler_calls_per_record"]
    for memory in MEMORIES:
        vcpu = min(1.0, memory / 1769)  # Python runs one core's worth: the GIL
        batch = 100
        cpu_s = batch * cpu_per_record / vcpu
        wait_s = (math.ceil(batch / WORKERS) + 2) * AWS_LATENCY  # the batch read, the schedules, the markers
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
