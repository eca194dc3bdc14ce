"""What one backfill or reconcile run is asked to do (`Plan`): read by the run in this process (`cli.backfill`) and
by its fan-out into the backfill function (`cli.fanout`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Plan:
    """One run: what, how fast, where its checkpoint lives."""

    command: str = "backfill"  # or "reconcile"
    segments: int = 4
    read_units_per_second: float | None = 500.0
    scheduler_calls_per_second: float | None = 200.0
    dry_run: bool = False
    checkpoint: Path | None = None
    page_items: int = 100
    in_lambda: str | None = None  # the backfill function's name
    fresh: bool = False  # a first attach: existing schedules are not looked up (see backfill.feed.Options)
    # Deliver past occurrences the ledger no longer remembers delivering (a backfill's first run does it anyway).
    deliver_past_due: bool = False
