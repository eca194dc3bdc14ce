"""Scheduler's minute, shared by every process of the local cloud: the run's seed and the instant an `at()` runs. A
leaf module (nothing of the local cloud imported), so ministack's patches (aws_behaviour), the emulators and the
recurring-schedule ticker all use it without importing one another."""

from __future__ import annotations

import hashlib
import os
import random
from datetime import UTC, datetime

__all__ = ["SEED_VARIABLE", "MinuteWindow", "seed"]

SEED_VARIABLE = "LOCALCLOUD_SEED"


def seed() -> int:
    """The run's seed: `LOCALCLOUD_SEED` if set, else a new one written back so child processes share it."""
    value = os.environ.get(SEED_VARIABLE)
    if value is None:
        value = str(random.SystemRandom().randrange(1_000_000))
        os.environ[SEED_VARIABLE] = value
    return int(value)


class MinuteWindow:
    """The instant an `at()` expression runs: anywhere in the minute its time falls in, drawn from the seed and the
    expression alone, so ministack's process and the emulators' agree on it without talking to each other."""

    def __init__(self, seed_value: int) -> None:
        self.seed = seed_value

    def instant(self, expression: str, named: float) -> float:
        minute = datetime.fromtimestamp(named, UTC).replace(second=0, microsecond=0).timestamp()
        digest = hashlib.sha256(f"{self.seed}:{expression}".encode()).digest()
        return minute + int.from_bytes(digest[:4], "big") / 2**32 * 59.999
