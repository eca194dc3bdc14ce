"""A backfill or reconcile run's checkpoint file: each segment's LastEvaluatedKey, whether it is done, its tally and
aggregate's partial sums, written after every page (atomically), so an interrupted run resumes where it stopped."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .aws import RedriveError


@dataclass
class Checkpoint:
    """Per segment: the key to resume from, whether it is done, its tally, aggregate's partial sums."""

    path: Path | None
    table: str
    command: str
    segments: int
    started: float
    state: dict[int, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, path: Path | None, table: str, command: str, segments: int, now: float) -> Checkpoint:
        if path is not None and path.exists():
            data = json.loads(path.read_text())
            if (data.get("table"), data.get("command"), data.get("segments")) != (table, command, segments):
                raise RedriveError(
                    f"checkpoint {path} is for {data.get('command')} of {data.get('table')} with "
                    f"{data.get('segments')} segments: use the same --segments, or another --checkpoint file"
                )
            state = {int(k): v for k, v in (data.get("state") or {}).items()}
            return cls(path, table, command, segments, float(data["started"]), state)
        return cls(path, table, command, segments, now)

    def segment(self, index: int) -> dict[str, Any]:
        return self.state.setdefault(index, {"key": None, "done": False, "tally": {}, "partial": None})

    def save(self) -> None:
        if self.path is None:
            return
        with self._lock:
            text = json.dumps(
                {
                    "table": self.table,
                    "command": self.command,
                    "segments": self.segments,
                    "started": self.started,
                    "state": self.state,
                },
                default=str,
            )
            temporary = self.path.with_name(self.path.name + ".tmp")
            temporary.write_text(text)
            os.replace(temporary, self.path)  # atomic: a crash leaves the old checkpoint or the new one
