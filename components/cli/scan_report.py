"""What an operator sees of a backfill or reconcile: progress on stderr while it runs, the summary at the end."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .aws import Emit


class Progress:
    """Items scanned, acted on, skipped, failed; the rate and the ETA from the table's item count; to stderr at
    most once a second (and once at the end)."""

    def __init__(self, total: int | None, emit: Emit, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.emit = emit
        self.clock = clock
        self.began = clock()
        self.last = 0.0

    def show(self, tally: Any, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self.last < 1.0:
            return
        self.last = now
        spent = max(now - self.began, 1e-9)
        rate = tally.scanned / spent
        eta = ""
        if self.total and rate > 0 and tally.scanned < self.total:
            left = (self.total - tally.scanned) / rate
            eta = f", ETA {int(left // 60)}m{int(left % 60):02d}s"
        self.emit(
            f"{tally.scanned} scanned, {tally.acted} acted on, {tally.skipped} skipped, {tally.failed} failed; "
            f"{rate:.0f} items/s{eta}"
        )


def summary(command: str, tally: Any, finished: bool, dry_run: bool) -> list[str]:
    """The lines printed at the end: the counts, each kind with its count and examples."""
    lines = [
        ("dry run, nothing changed. " if dry_run else "")
        + f"{command}: {tally.scanned} scanned, {tally.acted} acted on, {tally.skipped} skipped, {tally.failed} failed"
        + ("" if finished else " (interrupted: run again with the same --checkpoint to resume)")
    ]
    for kind, count in sorted(tally.kinds.items()):
        examples = tally.examples.get(kind) or []
        lines.append(f"  {count:>8} {kind}" + (f"  e.g. {'; '.join(examples)}" if examples else ""))
    return lines
