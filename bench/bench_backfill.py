"""Benchmark: backfill (`handlers/backfill/`) on one machine, and the modelled time for 100 million items on AWS
with the Lambda fan-out; then the fan-out itself, measured in the local cloud (`backfill_fanout`).

moto in-process with the harness's per-call latency (10 ms unless `BENCH_LATENCY_MS` says otherwise: what a call
costs from Lambda), production client settings. Each mode's table is filled with items written before any stream
consumer existed, and the engine runs as the backfill function runs it: scan pages of one segment, each page fed to
the mode's own handler in-process, then read back. Measured: items/s with 1 and 4 segments (threads), and the API
calls per item by operation. The model for 100 million items multiplies the per-segment rate by the segments run
at once (one Lambda invocation chain each), capped by the run's ceilings (Scheduler calls/s, read units/s) and by
the account's default quotas; it assumes every call costs what it costs here (the latency), which AWS's typical
single-digit-millisecond DynamoDB and ~10-20 ms Scheduler calls make a fair middle."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from . import backfill_fanout
from .harness import LATENCY_SECONDS, BenchClients, aws, expect, sized, table, timed

SIZES = {"eventbridge": 400, "polling": 400, "aggregate": 2000}
SEGMENTS = (1, 4)
TARGET_ITEMS = 100_000_000
FAN_OUT = 100  # segments, one Lambda invocation chain each
# Ceilings: the command's defaults, and the account's default quotas (eu-west-1, us-east-1: CreateSchedule 5,000/s,
# GetSchedule 1,000/s; an on-demand table reads up to 40,000 read units/s by default).
DEFAULT_SCHEDULER_CALLS = 200.0
DEFAULT_READ_UNITS = 500.0
QUOTA_GET_SCHEDULE = 1_000.0
QUOTA_CREATE_SCHEDULE = 5_000.0
QUOTA_READ_UNITS = 40_000.0
LAMBDA_GB = 1.0
LAMBDA_GB_SECOND_USD = 0.0000166667
READ_UNIT_USD = 0.125 / 1_000_000  # on-demand read request unit (us-east-1, after the November 2024 price cut)


def _env(mode: str) -> Any:
    from tests.handlers.conftest import build_env, with_due_index

    env = build_env()
    if mode == "polling":
        with_due_index(env)
    elif mode == "aggregate":
        env.configure(mode="aggregate")
    return env


def _fill(env: Any, mode: str, count: int) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    for start in range(0, count, 25):
        batch = []
        for n in range(start, min(start + 25, count)):
            if mode == "aggregate":
                item = {"PK": {"S": f"SCORE#{n}"}, "SK": {"S": f"user{n % 50}"}, "Score": {"N": str(n)}}
            else:
                due = now + timedelta(days=1, seconds=n)
                item = {"PK": {"S": f"item#{n}"}, "SK": {"S": "A"}, "dueAt": {"S": due.strftime("%Y-%m-%dT%H:%M:%SZ")}}
            batch.append({"PutRequest": {"Item": item}})
        env.ddb.batch_write_item(RequestItems={env.table: batch})


def _run(mode: str, segments: int) -> tuple[float, int, Counter[str]]:
    """One backfill of a fresh table: seconds, items, calls by operation."""
    import backfill
    import backfill.feed
    import backfill.scan

    with aws():
        env = _env(mode)
        count = _sizes()[mode]
        _fill(env, mode, count)
        clients = BenchClients(LATENCY_SECONDS)
        feed = backfill.feed.in_process(env.config, clients) if mode != "aggregate" else backfill.feed.no_feed  # type: ignore[arg-type]
        engine = backfill.Engine(env.config, feed, clients=clients)  # type: ignore[arg-type]

        def segment(index: int) -> None:
            backfill.scan.run_slice(engine, index, segments, None)

        def everything() -> None:
            threads = [threading.Thread(target=segment, args=(i,)) for i in range(segments)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if mode == "aggregate":
                engine.settle_totals(lambda _: None)

        seconds, _ = timed(everything)
        tally = engine.tally
        expect(f"backfill {mode}: items scanned, failed", (tally.scanned, tally.failed), (count, 0))
        if mode == "eventbridge":  # every item due tomorrow: one schedule each
            listed = env.scheduler.get_paginator("list_schedules").paginate(GroupName=env.group)
            expect("backfill eventbridge: schedules made", sum(len(p["Schedules"]) for p in listed), count)
        if mode == "polling":  # every item indexed
            expect("backfill polling: items acted on", tally.acted, count)
        if mode == "aggregate":  # every group's total exact (a group whose scores sum to 0 may have none)
            sums: Counter[str] = Counter()
            for n in range(count):
                sums[f"user{n % 50}"] += n
            items = env.ddb.scan(TableName=env.table)["Items"]
            totals = {i["PK"]["S"]: int(i["totalScore"]["N"]) for i in items if i["SK"]["S"] == "TOTAL"}
            expect(
                "backfill aggregate: totals",
                {u: t for u, t in totals.items() if t},
                {u: t for u, t in sums.items() if t},
            )
        return seconds, count, Counter(clients.log.calls)


def _sizes() -> dict[str, int]:
    return sized(SIZES, {"eventbridge": 20, "polling": 20, "aggregate": 40})


def run() -> tuple[str, dict[str, float]]:
    import backfill.totals

    backfill.totals.SETTLE_SECONDS = 0.0  # the settle wait is the operator's safety margin, not work
    rows: list[list[Any]] = []
    model: list[list[Any]] = []
    figures: dict[str, float] = {}
    segments_run = sized(SEGMENTS, (1, 2))
    eventbridge_calls: dict[str, float] = {}
    for mode in _sizes():
        rates = {}
        calls: Counter[str] = Counter()
        for segments in segments_run:
            seconds, count, calls = _run(mode, segments)
            rates[segments] = count / seconds
            figures[f"backfill_{mode}_items_per_s_{segments}seg"] = rates[segments]
        per_item = {op: n / count for op, n in sorted(calls.items())}
        if mode == "eventbridge":
            eventbridge_calls = per_item
        scheduler = sum(n for op, n in per_item.items() if "Schedule" in op)
        rows.append(
            [
                mode,
                f"{count:,}",
                rates[1],
                rates[segments_run[-1]],
                ", ".join(f"{op} {n:.2f}" for op, n in per_item.items()),
            ]
        )
        segment_rate = rates[1]
        reads = 0.5 + (1.0 if mode != "aggregate" else 0.0)  # the scan + the consistent read-back of what was fed
        paces = [
            ("default ceilings", DEFAULT_SCHEDULER_CALLS, DEFAULT_READ_UNITS, scheduler),
            ("ceilings at the default quotas", QUOTA_GET_SCHEDULE, QUOTA_READ_UNITS, scheduler),
        ]
        if scheduler:  # --fresh: no GetSchedule, only the creations (CreateSchedule's quota binds)
            fresh = scheduler - per_item.get("GetSchedule", 0.0)
            paces.append(("--fresh, ceilings at the default quotas", QUOTA_CREATE_SCHEDULE, QUOTA_READ_UNITS, fresh))
        for label, scheduler_cap, read_cap, calls_per_item in paces:
            rate = segment_rate * FAN_OUT
            if calls_per_item:
                rate = min(rate, scheduler_cap / calls_per_item)
            rate = min(rate, read_cap / reads)
            hours = TARGET_ITEMS / rate / 3600
            lambda_seconds = TARGET_ITEMS / segment_rate
            cost = lambda_seconds * LAMBDA_GB * LAMBDA_GB_SECOND_USD + TARGET_ITEMS * reads * READ_UNIT_USD
            model.append([mode, label, rate, f"{hours:,.1f} h", f"${cost:,.0f}"])
            tag = "default" if label == "default ceilings" else "fresh" if label.startswith("--fresh") else "quota"
            figures[f"backfill_{mode}_100M_hours_{tag}"] = hours
    text = table(
        f"Backfill on one machine (moto, {LATENCY_SECONDS * 1000:.0f} ms per call)",
        ["mode", "items", "items/s, 1 segment", f"items/s, {segments_run[-1]} segments", "calls per item"],
        rows,
    )
    text += "\n" + table(
        f"Modelled: 100 million items on AWS, {FAN_OUT} segments over the backfill function",
        ["mode", "pace", "items/s", "time", "Lambda + reads"],
        model,
        note=(
            "items/s = the measured 1-segment rate x the segments, capped by the Scheduler calls per item against the "
            "Scheduler ceiling (GetSchedule's default quota, 1,000/s, binds before CreateSchedule's 5,000/s; with "
            "--fresh only CreateSchedule is called) and by "
            "read units (0.5 per scanned item of up to 4 KB, 1 per consistent read-back). Lambda at 1 GB for the "
            "summed segment time; reads on demand. eventbridge also needs the account's schedule quota (10 million "
            "per Region by default) raised for 100 million items. polling's measured rate is moto's: each of its "
            "transactions copies the table in moto (TransactWriteItems takes ~10 ms on AWS), so its model is a floor."
        ),
    )
    fanned, fanned_figures = backfill_fanout.run(eventbridge_calls)  # the fan-out's items are named as these
    figures.update(fanned_figures)
    return text + "\n" + fanned, figures
