"""Benchmark 5: how each mode's cost grows from 1 to 1,000,000 items, computed from the per-item figures the other
benchmarks measured in this run, and what a million actions cost at published AWS prices."""

from __future__ import annotations

from typing import Any

from .harness import table
from .herd_model import TODAY_WRITES, polling_usage
from .prices import PRICE_NOTE, PRICES

BATCH = 100
MEMORY_GB = 1.0  # the default lambda_memory_mb (1024)
SECONDS_PER_BATCH = 0.25  # a batch of 100 at 1024 MB (bench 1e models about 0.12 s for eventbridge)
SIZES = (1, 100, 10_000, 1_000_000)


def per_action(figures: dict[str, float]) -> dict[str, dict[str, float]]:
    """Per action (a due item acted on, or a score counted): requests and units of each billed kind."""
    lambda_share = 1 / BATCH
    eventbridge = {
        # the schedule, its share of the batch's read of its items (a replayed record must not remake a cancelled
        # item's schedule) and of a BatchWriteItem of ledger markers (measured), the firing
        "api_calls": figures.get("eventbridge_calls_per_record_1000", 2.04) + 1,
        "writes": 1.0,  # the ledger marker that makes a batch redelivered after the firing deliver nothing
        "reads": 1.0,  # that consistent read: one read unit per item up to 4 KB (BatchGetItem bills each item)
        "scheduler": 1.0,
        "sqs": 1.0,
        "lambda": lambda_share,
    }
    ttl = {"api_calls": 3.0, "writes": 2.0, "reads": 0.0, "scheduler": 0.0, "sqs": 1.0, "lambda": lambda_share}
    # precise: the executor's consistent read that the item still holds its due time (a replayed record must not
    # remake an old time's schedule), its schedule, Scheduler's UpdateItem that fires the item, the executor's delete
    # of it, the ledger's claim and complete (tests/handlers/test_ttl.py measures the calls and records per item)
    ttl_precise = {**ttl, "api_calls": 7.0, "writes": 4.0, "reads": 1.0, "scheduler": 1.0}
    # assign (a transaction with the record's ledger marker) and completion, each also written to the index; no
    # claim per item (a lease per shard and tick, `polling_leases_per_month`); a consistent read of each page's items
    # before they are sent; the due events sent ten a call (herd_model.TODAY_WRITES, polling_usage)
    polling = polling_usage(TODAY_WRITES, figures.get("polling_reads_per_due_100000", 1.0))
    aggregate = {
        "api_calls": figures.get("aggregate_requests_ratio", 1.6) ** -1,
        "writes": figures.get("aggregate_wu_per_score", figures.get("aggregate_units_per_score_ours", 0.64)),
        "reads": 0.0,
        "scheduler": 0.0,
        "sqs": 0.0,
        "lambda": lambda_share,
    }
    seed003 = {"api_calls": 1.0, "writes": 1.0, "reads": 0.0, "scheduler": 0.0, "sqs": 0.0, "lambda": lambda_share}
    return {
        "eventbridge": eventbridge,
        "ttl": ttl,
        "ttl precise": ttl_precise,
        "polling": polling,
        "aggregate": aggregate,
        "seed 003 aggregator (baseline)": seed003,
    }


def cost_per_million(usage: dict[str, float], seconds_per_batch: float = SECONDS_PER_BATCH) -> float:
    p = PRICES
    per = (
        usage["writes"] * p["dynamodb_write_unit"]
        + usage["reads"] * p["dynamodb_read_unit"]
        + usage["scheduler"] * p["scheduler_invocation"]
        + usage["sqs"] * p["sqs_request"]
        + usage["lambda"] * (p["lambda_request"] + seconds_per_batch * MEMORY_GB * p["lambda_gb_second_arm64"])
    )
    return per * 1e6


def polling_fixed_per_month(shards: int = 8, interval_minutes: int = 1) -> float:
    """What polling costs with nothing due: a processor invocation and one small query per shard each tick."""
    ticks = 30 * 24 * 60 / interval_minutes
    p = PRICES
    return ticks * (
        p["lambda_request"] + 0.2 * MEMORY_GB * p["lambda_gb_second_arm64"] + shards * 0.5 * p["dynamodb_read_unit"]
    )


def polling_leases_per_month(shards: int = 8, interval_minutes: int = 1) -> float:
    """The most polling's shard leases cost: a lease taken and released (`herd_model.TODAY_WRITES.shard_lease`
    ledger write units) for every shard every tick, as when every shard has something due every tick. Nothing for
    a shard with nothing due."""
    ticks = 30 * 24 * 60 / interval_minutes
    return ticks * shards * TODAY_WRITES.shard_lease * PRICES["dynamodb_write_unit"]


def run(figures: dict[str, float]) -> tuple[str, dict[str, float]]:
    usage = per_action(figures)
    rows: list[list[Any]] = []
    for mode, u in usage.items():
        row: list[Any] = [mode]
        for size in SIZES:
            row.append(f"{u['api_calls'] * size:,.0f} / {u['reads'] * size:,.0f} / {u['writes'] * size:,.0f}")
        row.append(f"${cost_per_million(u):.2f}")
        rows.append(row)
    scan_reads = figures.get("polling_scan_read_ratio_100000", 100.0)
    rows.append(
        [
            "full-scan cron (baseline), 1% due",
            *[f"reads {scan_reads * 0.5 * s:,.0f}" for s in SIZES],
            f"${cost_per_million({**usage['polling'], 'reads': 0.5 * scan_reads}):.2f}",
        ]
    )
    header = ["mode", *[f"{s:,} actions: calls / read u / write u" for s in SIZES], "per 1M actions"]
    note = (
        "Each cell: AWS API calls / DynamoDB read units / write units for that many actions, from the per-item "
        "figures measured above (eventbridge calls per record, polling reads per due item, aggregate write units "
        "per score) and each mode's design (ttl: ledger claim and completion; polling: assign, with the record's "
        "ledger marker, and completion, each also written to the index, a consistent read of each item before it "
        "is sent, the due events sent ten a call). "
        f"Lambda at {int(MEMORY_GB * 1024)} MB, batches of {BATCH}, {SECONDS_PER_BATCH} s a batch. "
        f"Polling also costs ${polling_fixed_per_month():.2f} a month with nothing due (1-minute rule, 8 shards), "
        f"and its shard leases up to ${polling_leases_per_month():.2f} a month more (a lease taken and released, "
        f"{TODAY_WRITES.shard_lease:g} write units, for each shard with something due, every tick). " + PRICE_NOTE
    )
    result = {f"cost_per_million_{m.split()[0]}": cost_per_million(u) for m, u in usage.items()}
    return table("5. scale: growth with items, and cost per million actions", header, rows, note), result
