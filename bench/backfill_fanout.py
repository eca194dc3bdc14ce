"""Benchmark: `backfill --in-lambda` in the local cloud, its segments fanned out over the deployed backfill function.

ministack runs on this machine with IAM enforced; each concurrent invocation of a function gets a worker process of
its own (as Lambda gives each concurrent request an execution environment), so N segments are N chains of
invocations at once. A one-table `eventbridge` stack is deployed onto a table filled before its stream was enabled
(`localcloud.backlog.table_before_stream`), and the items, due a day ahead, are backfilled with 1, 2 and 4 segments,
every schedule deleted between runs so each run does a first attach's work (each of the item's schedule names looked
up, then the consumer's CreateSchedule). No ceilings (`--read-units`, `--scheduler-calls`): the machinery's own rate.

Measured: items/s and items/s per segment. Modelled for 100 million items on AWS: the per-segment rate times the
segments run at once (100, well inside Lambda's default 1,000 concurrent executions per Region, which the live
functions share), capped by Scheduler's default quotas (GetSchedule 1,000/s, CreateSchedule 5,000/s) over the
Scheduler calls an item costs. Those are the calls the engine really made per item in the moto run of the same items
(bench_backfill; `--fresh` skips the GetSchedule lookups). Every
service and worker here shares this machine's cores, so the per-segment rate is a floor for AWS's, where each
segment has its own environment and calls take milliseconds."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from localcloud.backlog import operator, table_before_stream
from localcloud.component import discover, scan_commands
from localcloud.deploy import up
from localcloud.scenarios import iso
from localcloud.server import Ministack

from .harness import expect, sized, table, timed

ITEMS = 800
SEGMENTS = (1, 2, 4)
REGION = "eu-west-1"
TABLE = "fanout"
TARGET_ITEMS = 100_000_000
FAN_OUT = 100  # segments at once on AWS
LAMBDA_CONCURRENCY = 1_000  # the default per account and Region
QUOTA_GET_SCHEDULE = 1_000.0
QUOTA_CREATE_SCHEDULE = 5_000.0
STACK_FILE = f"""config:
  aws:region: {REGION}
  scheduled-table:deletionProtection: "false"
  scheduled-table:logRetentionDays: "1"
  scheduled-table:tables:
    - name: {TABLE}
      mode: eventbridge
      existingTable:
        name: {TABLE}
      backfillFunction: true
"""


def _clear(client: Any, group: str) -> int:
    """Delete every schedule of the group (the next run then attaches afresh). The first page is listed again until
    none is left: deleting while paging on would shift the later pages."""
    scheduler = client("scheduler")
    deleted = 0
    while names := [s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]]:
        for name in names:
            scheduler.delete_schedule(Name=name, GroupName=group)
        deleted += len(names)
    return deleted


def measure(count: int, segment_counts: tuple[int, ...]) -> list[tuple[int, float]]:
    """(segments, seconds) for one backfill of `count` items per segment count."""
    due = datetime.now(UTC) + timedelta(days=1)
    items = [
        {"PK": f"item#{n}", "SK": "A", "dueAt": iso((due + timedelta(seconds=n)).timestamp())} for n in range(count)
    ]
    results: list[tuple[int, float]] = []
    with tempfile.TemporaryDirectory() as folder, Ministack() as cloud:
        stack_file = Path(folder) / "Pulumi.bench.yaml"
        stack_file.write_text(STACK_FILE)
        table_before_stream(cloud.endpoint, REGION, TABLE, items)
        outputs = up(cloud.endpoint, "bench", config_file=stack_file).outputs[TABLE]
        client = operator(cloud.endpoint, REGION)
        stack = discover(client, outputs["function_name"])
        group = outputs["schedule_group_name"]

        def backfill(segments: int, dry_run: bool = False) -> Any:
            plan = scan_commands.Plan(
                segments=segments,
                read_units_per_second=None,
                scheduler_calls_per_second=None,
                dry_run=dry_run,
                in_lambda=outputs["backfill_function_name"],
            )
            tally, finished = scan_commands.run(client, stack, plan, progress=lambda line: None)
            assert finished and tally.failed == 0, tally.to_json()
            return tally

        backfill(max(segment_counts), dry_run=True)  # every worker started once: the runs below measure warm ones
        for segments in segment_counts:
            _clear(client, group)
            time.sleep(1.0)
            seconds, tally = timed(lambda s=segments: backfill(s))  # type: ignore[misc]
            expect(f"backfill --in-lambda, {segments} segments: items acted on", tally.acted, count)
            listed = client("scheduler").get_paginator("list_schedules").paginate(GroupName=group)
            expect("backfill --in-lambda: schedules made", sum(len(p["Schedules"]) for p in listed), count)
            results.append((segments, seconds))
    return results


def run(calls_per_item: Mapping[str, float]) -> tuple[str, dict[str, float]]:
    """The measured fan-out and its model; `calls_per_item`: the API calls per item by operation that a backfill of
    these items made (bench_backfill's moto run of its eventbridge table, whose items are named as these are)."""
    count = sized(ITEMS, 20)
    measured = measure(count, sized(SEGMENTS, (1,)))
    figures: dict[str, float] = {}
    rows = []
    for segments, seconds in measured:
        rate = count / seconds
        figures[f"backfill_lambda_items_per_s_{segments}seg"] = rate
        rows.append([segments, f"{count:,}", f"{seconds:.1f} s", rate, rate / segments])
    per_segment = count / measured[0][1]
    lookups, creations = calls_per_item.get("GetSchedule", 0.0), calls_per_item.get("CreateSchedule", 0.0)
    expect("backfill: schedules made per item (the moto run)", creations, 1.0)
    figures["backfill_lambda_scheduler_calls_per_item"] = lookups + creations
    model = []
    # The command's --scheduler-calls ceiling counts every Scheduler call, so it is set at the quota of the call that
    # binds first: GetSchedule's 1,000/s covers an item's lookups and its creation; with --fresh the only call is
    # CreateSchedule (5,000/s).
    for label, calls, per_item, quota in (
        (
            f"default (GetSchedule {lookups:.2f} + CreateSchedule {creations:.2f} per item)",
            "GetSchedule 1,000/s",
            lookups + creations,
            QUOTA_GET_SCHEDULE,
        ),
        ("--fresh (CreateSchedule only)", "CreateSchedule 5,000/s", creations, QUOTA_CREATE_SCHEDULE),
    ):
        rate = min(per_segment * FAN_OUT, quota / per_item)
        hours = TARGET_ITEMS / rate / 3600
        fanned = f"{FAN_OUT} x {per_segment:,.1f} = {per_segment * FAN_OUT:,.0f}"
        model.append([label, per_segment, fanned, f"{calls} / {per_item:.2f} per item", rate, f"{hours:,.1f} h"])
        figures[f"backfill_lambda_100M_hours_{'fresh' if label.startswith('--fresh') else 'default'}"] = hours
    text = table(
        f"Backfill --in-lambda in the local cloud ({count:,} eventbridge items, ministack's Lambda on this machine)",
        ["segments", "items", "time", "items/s", "items/s per segment"],
        rows,
        note="Each segment is a chain of invocations of the backfill function; ministack gives each concurrent "
        "invocation its own worker process. All of them, ministack and this process share this machine's cores, so "
        "segments beyond its cores add little here.",
    )
    text += "\n" + table(
        f"Modelled: 100 million items on AWS with {FAN_OUT} segments (the local cloud's 1-segment rate)",
        ["pace", "per segment, items/s", "segments x rate", "Scheduler quota", "items/s", "time"],
        model,
        note=f"items/s = min({FAN_OUT} segments x the per-segment rate measured here with 1 segment, the Scheduler "
        "quota / the Scheduler calls per item, as the moto run of these items made them): the command's "
        "--scheduler-calls ceiling counts every Scheduler call, "
        f"so it is set at the quota of the call that binds first. {FAN_OUT} concurrent executions fit Lambda's "
        f"default {LAMBDA_CONCURRENCY:,} per Region (shared with the live functions). The per-segment rate here is "
        "a floor: every call crosses ministack on this machine. An eventbridge table of 100 million items also "
        "needs the account's schedule quota (10 million per Region by default) raised.",
    )
    return text, figures
