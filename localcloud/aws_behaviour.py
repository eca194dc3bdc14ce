"""AWS behaviours that break event-driven code and that ministack does not reproduce, put into it.

- Scheduler's minute: AWS runs a one-time `at()` schedule anywhere within the minute it names (seconds ignored):
  `at(12:00:45)` may run at 12:00:03 or at 12:00:59. ministack fires after the named second, which hides every
  early-delivery bug. Here each `at()` runs at an instant drawn within its minute from a seeded generator; the seed
  is printed (`LOCALCLOUD_SEED` replays it). Used by ministack's Scheduler and by the universal-target emulator.
- Lambda's at-least-once stream delivery: with `LOCALCLOUD_REDELIVER=<fraction>`, that fraction of the stream
  batches ministack hands a function is delivered again a few seconds later: whole (as after a function timeout),
  or from a record in the middle with everything after it (as a retry from a reported sequence number). Counts
  per function go to the file named by `LOCALCLOUD_REDELIVERY_LOG`.

`python -m localcloud.aws_behaviour` patches ministack in its own process, then runs it.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
from datetime import UTC, datetime

SEED_VARIABLE = "LOCALCLOUD_SEED"
REDELIVER_VARIABLE = "LOCALCLOUD_REDELIVER"
REDELIVERY_LOG_VARIABLE = "LOCALCLOUD_REDELIVERY_LOG"
REDELIVERY_DELAY_SECONDS = (1.0, 8.0)
# ministack sweeps its schedules every 10 s; a 1 s sweep keeps the drawn instant meaningful.
TICK_SECONDS = 1


def seed() -> int:
    """The run's seed: `LOCALCLOUD_SEED` if set, else a new one written back so child processes share it."""
    value = os.environ.get(SEED_VARIABLE)
    if value is None:
        value = str(random.SystemRandom().randrange(1_000_000))
        os.environ[SEED_VARIABLE] = value
    return int(value)


class MinuteWindow:
    """Draws, once per key, the instant a schedule runs: anywhere in the minute its time falls in."""

    def __init__(self, seed_value: int) -> None:
        self.random = random.Random(seed_value)
        self.drawn: dict[object, float] = {}
        self.lock = threading.Lock()

    def instant(self, key: object, named: float) -> float:
        with self.lock:
            if key not in self.drawn:
                minute = datetime.fromtimestamp(named, UTC).replace(second=0, microsecond=0).timestamp()
                self.drawn[key] = minute + self.random.uniform(0.0, 59.999)
            return self.drawn[key]


def patch_ministack(window: MinuteWindow) -> None:
    """ministack's Scheduler fires `at()` once its second has passed: make it fire at the drawn instant instead."""
    from ministack.services import scheduler

    named_epoch = scheduler._at_time_epoch

    def drawn_epoch(expression: str) -> float | None:
        named = named_epoch(expression)
        return None if named is None else window.instant(expression, named)

    scheduler._at_time_epoch = drawn_epoch
    scheduler._SCHEDULE_TICK_INTERVAL = TICK_SECONDS


def patch_stream_delivery(fraction: float, rng: random.Random, log_path: str | None) -> None:
    """Deliver `fraction` of DynamoDB stream batches again, later, whole or from a record with all after it."""
    import copy
    import json
    from collections import Counter

    from ministack.services import lambda_svc

    execute = lambda_svc._execute_function
    counts: Counter[str] = Counter()
    depth = threading.local()

    def write_counts() -> None:
        if log_path:
            with open(log_path, "w") as out:
                json.dump(dict(counts), out)

    def redeliver(func: dict, event: dict) -> None:
        with contextlib.suppress(Exception):  # a failing redelivery is the function's business, as on AWS
            execute(func, event)

    def with_redelivery(func: dict, event: dict) -> dict:
        outer = not getattr(depth, "inside", False)
        depth.inside = True
        try:
            result: dict = execute(func, event)
        finally:
            if outer:
                depth.inside = False
        records = event.get("Records") if isinstance(event, dict) else None
        is_stream = bool(records) and all(
            isinstance(r, dict) and r.get("eventSource") == "aws:dynamodb" for r in records or []
        )
        if outer and is_stream and records and rng.random() < fraction:
            start = 0 if rng.random() < 0.5 else rng.randrange(len(records))
            again = {**event, "Records": copy.deepcopy(records[start:])}
            name = str((func.get("config") or func).get("FunctionName", "?"))
            counts[name] += 1
            write_counts()
            timer = threading.Timer(rng.uniform(*REDELIVERY_DELAY_SECONDS), redeliver, (func, again))
            timer.daemon = True
            timer.start()
        return result

    lambda_svc._execute_function = with_redelivery


def main() -> None:
    patch_ministack(MinuteWindow(seed()))
    fraction = float(os.environ.get(REDELIVER_VARIABLE, "0") or 0)
    if fraction > 0:
        rng = random.Random(seed() + 1)
        patch_stream_delivery(fraction, rng, os.environ.get(REDELIVERY_LOG_VARIABLE))
    from ministack.app import main as ministack_main

    ministack_main()


if __name__ == "__main__":
    main()
