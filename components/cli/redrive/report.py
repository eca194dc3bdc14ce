"""What the operator asked a redrive to take (`Selection`) and what it tells them (`Report`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from ..aws import Emit


@dataclass(frozen=True)
class Selection:
    """Which messages a redrive takes, and whether it only says what it would do."""

    reason: re.Pattern[str] | None = None  # only messages whose reason matches
    limit: int | None = None  # at most this many
    dry_run: bool = False
    wait_seconds: int = 1  # long polling of each receive


EVERYTHING = Selection()


@dataclass
class Report:
    """Counts by outcome, and the lines printed, one per message (or record) plus the summary."""

    emit: Emit
    counts: dict[str, int] = field(default_factory=dict)
    # Outcomes that mean something in scope could not be redriven: the command exits non-zero.
    unresolved: tuple[str, ...] = (
        "failed",
        "parked again",
        "expired",
        "cannot replay",
        "cannot resend",
        "item to fix",
    )

    def line(self, outcome: str, what: str, detail: str = "") -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        self.emit(f"{outcome:<14} {what}" + (f"  {detail}" if detail else ""))

    def summary(self, queue: str) -> str:
        parts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.counts.items())) or "nothing to do"
        return f"{queue}: {parts}"

    @property
    def ok(self) -> bool:
        return not any(self.counts.get(outcome) for outcome in self.unresolved)


def short(value: object, limit: int = 200) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."
