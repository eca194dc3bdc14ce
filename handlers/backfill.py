"""Backfill and reconcile: make every existing item what a fresh write would have made, and repair drift.

A stream carries only changes made after it exists, so items already in the table when the stack attaches
(`existing_table`), items written while the stream was off or longer ago than its 24-hour retention, and items of
a table whose mode changed have no schedule, index entry or total. A run scans the table and hands each item to the
deployed mode's own code as the stream record a fresh write would produce; no mode is implemented a second time.

This module is the entry point and the map; each concern is a module of its own, readable alone:
- `backfill_scan`: one page of one segment of a parallel scan, resumable, under read and Scheduler ceilings;
- `backfill_records`: items and synthetic stream records in Lambda's shape;
- `backfill_feed`: what a run shares (`Run`), feeding the mode's code and following live writes, parking;
- `backfill_timed`, `backfill_sweep`, `backfill_index`, `backfill_totals`: what each mode checks (eventbridge and
  ttl items, reconcile's pass over schedules, polling's index, aggregate's totals);
- `backfill_report`: the tally of what a run did.

Also the Lambda entry point (`backfill.handler`) of the optional backfill function: one segment slice per
invocation within the time budget, returning the checkpoint to resume from. Standard library + boto3 only; the
mode modules are imported lazily.
"""

from __future__ import annotations

import math
import time
from typing import Any

import backfill_index
import backfill_timed
from backfill_feed import Options, Run, in_process, no_feed
from backfill_records import Feed, Record, kind_of
from backfill_report import Tally
from backfill_scan import MARGIN_SECONDS, PAGE_ITEMS, Clock, Sleep, Throttle, rate, run_slice, scan_page
from backfill_sweep import Sweep
from backfill_totals import Sums
from st_core.clients import CLIENTS, Clients
from st_core.config import HandlerConfig

# The AWS actions this module's own calls need (checked by tests/iam): none; each part declares its own, and the
# backfill function's role needs the union over the modules this one imports.
AWS_ACTIONS: tuple[str, ...] = ()


class Engine:
    """Acts on scan pages for one table, by its mode: feeds what the mode must do to `feed`, counts in `tally`."""

    def __init__(
        self,
        config: HandlerConfig,
        feed: Feed,
        *,
        clients: Clients = CLIENTS,
        options: Options | None = None,
        reads: Throttle | None = None,
        calls: Throttle | None = None,
        now: Clock = time.time,
    ) -> None:
        self.run = Run(
            config, feed, clients, options or Options(), reads or Throttle(None), calls or Throttle(None), now
        )
        self.kind = kind_of(config)
        self.sums = Sums(self.run)

    @property
    def tally(self) -> Tally:
        return self.run.tally

    def tally_now(self) -> Tally:
        """A copy of the tally as of now (the segment's threads go on counting meanwhile)."""
        return self.run.tally_now()

    def scan_page(self, segment: int, segments: int, start: Record | None, limit: int = PAGE_ITEMS) -> Record | None:
        """Read one page of one segment (paced), act on it; the key to go on from, None when the segment is done."""
        run = self.run
        items, following = scan_page(run.config, run.clients, run.reads, segment, segments, start, limit)
        self.act(items)
        return following

    def act(self, items: list[Record]) -> None:
        """One page of items (Lambda-shaped), by the table's mode."""
        with self.run.lock:
            self.run.tally.scanned += len(items)
        if self.kind in ("eventbridge", "ttl-precise"):
            backfill_timed.act(self.run, self.kind, items)
        elif self.kind == "ttl":
            backfill_timed.plain_ttl(self.run, items)
        elif self.kind == "polling":
            backfill_index.act(self.run, items)
        else:
            self.sums.act(items)

    def sweep_schedules(self) -> None:
        """Reconcile, after the item pass: delete the schedules no item asks for (eventbridge, precise ttl)."""
        Sweep(self.run, self.kind).all()

    def backfilled(self) -> bool:
        """Whether a backfill of this table has finished before (its ledger marker; eventbridge only)."""
        return self.kind != "eventbridge" or backfill_timed.backfilled(self.run)

    def mark_backfilled(self) -> None:
        if self.kind == "eventbridge":
            backfill_timed.mark_backfilled(self.run)

    def partial(self) -> dict[str, Any]:
        """Aggregate's state to carry in a checkpoint: the sums so far and the totals seen."""
        return self.sums.partial()

    def absorb(self, partial: dict[str, Any] | None) -> None:
        self.sums.absorb(partial)

    def settle_totals(self, sleep: Sleep = time.sleep) -> None:
        """Aggregate, after every segment: replace each total that differs from its items' sum."""
        self.sums.settle(sleep)


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Lambda entry point (`backfill.handler`) of the optional backfill function: one slice of one segment within
    the invocation's time budget. Event: {"segment", "segments", "startKey" (or null), "dryRun", "reconcile",
    "readUnitsPerSecond", "schedulerCallsPerSecond", "started", "partial", "pageItems", "fresh", "deliverPastDue"}.
    Answer: {"segment", "startKey" (where to resume), "done", "tally", "partial" (aggregate's sums so far)}; the
    caller invokes again until done."""
    from st_core.config import load_config

    config = load_config()
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
