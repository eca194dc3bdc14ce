"""Backfill and reconcile: make every existing item what a fresh write would have made, and repair drift.

A stream carries only changes made after it exists, so items already in the table when the stack attaches
(`existing_table`), items written while the stream was off or longer ago than its 24-hour retention, and items of
a table whose mode changed have no schedule, index entry or total. A run scans the table and hands each item to the
deployed mode's own code as the stream record a fresh write would produce; no mode is implemented a second time.

This package's `__init__` is the entry point and the map; each concern is a module of the package, readable alone:
- `backfill.engine`: `Engine`, which acts on scan pages for one table by its mode, from the parts below;
- `backfill.scan`: one page of one segment of a parallel scan, resumable, under read and Scheduler ceilings;
- `backfill.records`: items and synthetic stream records in Lambda's shape;
- `backfill.feed`: what a run shares (`Run`), feeding the mode's code and following live writes, parking;
- `backfill.timed`, `backfill.sweep`, `backfill.index`, `backfill.totals`: what each mode checks (eventbridge and
  ttl items, reconcile's pass over schedules, polling's index, aggregate's totals);
- `backfill.report`: the tally of what a run did;
- `backfill.every`: `reconcile_every`, reconcile run by itself from a schedule, in slices, publishing metrics.

Also the Lambda entry point (`backfill.handler`) of the optional backfill function: one segment slice per
invocation within the time budget, returning the checkpoint to resume from. Standard library + boto3 only; the
mode modules are imported lazily.
"""

from __future__ import annotations

import math
import time
from typing import Any

from backfill.engine import Engine
from backfill.feed import Options, in_process, no_feed
from backfill.report import Tally as Tally  # for the operator's side (components/cli), with the names above
from backfill.scan import MARGIN_SECONDS, PAGE_ITEMS, Throttle, rate, run_slice

# The AWS actions this module's own calls need (checked by tests/iam): none; each part declares its own, and the
# backfill function's role needs the union over the modules this one imports.
AWS_ACTIONS: tuple[str, ...] = ()


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Lambda entry point (`backfill.handler`) of the optional backfill function: one slice of one segment within
    the invocation's time budget. Event: {"segment", "segments", "startKey" (or null), "dryRun", "reconcile",
    "readUnitsPerSecond", "schedulerCallsPerSecond", "started", "partial", "pageItems", "fresh", "deliverPastDue"}.
    Answer: {"segment", "startKey" (where to resume), "done", "tally", "partial" (aggregate's sums so far)}; the
    caller invokes again until done."""
    from st_core import log
    from st_core.config import load_config

    log.invoked(context)
    config = load_config()
    if event.get("scheduledReconcile"):  # reconcile_every's rule (backfill.every)
        from backfill import every

        return every.run(config, every.remaining(context))
    options = Options(
        bool(event.get("dryRun")),
        bool(event.get("reconcile")),
        float(event.get("started") or time.time()),
        bool(event.get("fresh")),
        bool(event.get("deliverPastDue")),
    )
    reads = Throttle(rate(event.get("readUnitsPerSecond")))
    calls = Throttle(rate(event.get("schedulerCallsPerSecond")))
    feed = in_process(config) if config["mode"] != "aggregate" else no_feed
    engine = Engine(config, feed, options=options, reads=reads, calls=calls)
    if config["mode"] == "aggregate":
        engine.absorb(event.get("partial"))

    def keep_going() -> bool:
        left = context.get_remaining_time_in_millis() / 1000 if context is not None else math.inf
        return bool(left > MARGIN_SECONDS)

    key, done = run_slice(
        engine,
        int(event["segment"]),
        int(event["segments"]),
        event.get("startKey"),
        keep_going=keep_going,
        limit=int(event.get("pageItems") or PAGE_ITEMS),
    )
    answer: dict[str, Any] = {
        "segment": int(event["segment"]),
        "startKey": key,
        "done": done,
        "tally": engine.tally.to_json(),
    }
    if config["mode"] == "aggregate":
        answer["partial"] = engine.partial()
    return answer
