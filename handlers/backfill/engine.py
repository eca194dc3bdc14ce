"""The engine of a backfill or reconcile run: scan pages of one table, each acted on by the table's mode (the
checks in backfill.timed, backfill.index and backfill.totals), reconcile's sweep of schedules, aggregate's totals.
Shared by the operator's command (components/cli/backfill.py), the backfill function's entry point (`backfill.handler`)
and `reconcile_every` (backfill.every)."""

from __future__ import annotations

import time
from typing import Any

from st_core.clients import CLIENTS, Clients
from st_core.config import HandlerConfig

import backfill.index
import backfill.timed
from backfill.feed import Options, Run
from backfill.records import Feed, Record, kind_of
from backfill.report import Tally
from backfill.scan import PAGE_ITEMS, Clock, Sleep, Throttle, scan_page
from backfill.sweep import Sweep
from backfill.totals import Sums

# The AWS actions this module's own calls need (checked by tests/iam): none; each part declares its own.
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
        confirmed: set[str] | None = None,
    ) -> None:
        self.run = Run(
            config, feed, clients, options or Options(), reads or Throttle(None), calls or Throttle(None), now
        )
        if confirmed is not None:
            self.run.confirmed = confirmed  # shared with the run's other engines (see backfill.feed.Run)
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
            backfill.timed.act(self.run, self.kind, items)
        elif self.kind == "ttl":
            backfill.timed.plain_ttl(self.run, items)
        elif self.kind == "polling":
            backfill.index.act(self.run, items)
        else:
            self.sums.act(items)

    def sweep_schedules(self) -> None:
        """Reconcile, after the item pass: delete the schedules no item asks for (eventbridge, precise ttl)."""
        Sweep(self.run, self.kind).all()

    def backfilled(self) -> bool:
        """Whether a backfill of this table has finished before (its ledger marker; eventbridge only)."""
        return self.kind != "eventbridge" or backfill.timed.backfilled(self.run)

    def mark_backfilled(self) -> None:
        if self.kind == "eventbridge":
            backfill.timed.mark_backfilled(self.run)

    def partial(self) -> dict[str, Any]:
        """Aggregate's state to carry in a checkpoint: the sums so far and the totals seen."""
        return self.sums.partial()

    def absorb(self, partial: dict[str, Any] | None) -> None:
        self.sums.absorb(partial)

    def settle_totals(self, sleep: Sleep = time.sleep) -> None:
        """Aggregate, after every segment: replace each total that differs from its items' sum."""
        self.sums.settle(sleep)
