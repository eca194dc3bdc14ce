"""What a backfill or reconcile run did, counted: the tally each part of a run notes into, carried in checkpoints
and in the backfill function's answers (JSON), merged across segments and invocations, printed at the end."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The AWS actions this module's own calls need (checked by tests/iam): none.
AWS_ACTIONS: tuple[str, ...] = ()


@dataclass
class Tally:
    """What a run did, by outcome (scanned, acted, skipped, failed) and by kind, with a few examples of each kind."""

    scanned: int = 0
    acted: int = 0
    skipped: int = 0
    failed: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    EXAMPLES = 3

    def note(self, outcome: str, kind: str, example: str = "") -> None:
        """One thing done; `outcome` "" counts the kind only (aggregate's source items: the acts are per group)."""
        if outcome:
            setattr(self, outcome, getattr(self, outcome) + 1)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        if example and len(self.examples.setdefault(kind, [])) < self.EXAMPLES:
            self.examples[kind].append(example[:200])

    def merge(self, other: Tally) -> None:
        for name in ("scanned", "acted", "skipped", "failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for kind, count in other.kinds.items():
            self.kinds[kind] = self.kinds.get(kind, 0) + count
        for kind, found in other.examples.items():
            mine = self.examples.setdefault(kind, [])
            mine.extend(found[: max(0, self.EXAMPLES - len(mine))])

    def to_json(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "acted": self.acted,
            "skipped": self.skipped,
            "failed": self.failed,
            "kinds": dict(self.kinds),
            "examples": {k: list(v) for k, v in self.examples.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Tally:
        data = data or {}
        return cls(
            int(data.get("scanned", 0)),
            int(data.get("acted", 0)),
            int(data.get("skipped", 0)),
            int(data.get("failed", 0)),
            {str(k): int(v) for k, v in (data.get("kinds") or {}).items()},
            {str(k): [str(e) for e in v] for k, v in (data.get("examples") or {}).items()},
        )
