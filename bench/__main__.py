"""`make bench`: every benchmark, its table printed as it finishes (Markdown, ready for the README)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    sys.path[:0] = [str(REPO / "handlers"), str(REPO)]
    # One JSON log line per action is right in Lambda; here it would be CPU spent printing, not scheduling.
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    from . import bench_aggregate, bench_coldstart, bench_eventbridge, bench_polling, bench_scale

    figures: dict[str, float] = {}
    chosen: dict[str, Callable[[], tuple[str, dict[str, float]]]] = {
        "eventbridge": bench_eventbridge.run,
        "polling": bench_polling.run,
        "aggregate": bench_aggregate.run,
        "coldstart": bench_coldstart.run,
        "scale": lambda: bench_scale.run(figures),
    }
    names = (argv if argv is not None else sys.argv[1:]) or list(chosen)
    began = time.perf_counter()
    for name in names:
        started = time.perf_counter()
        text, found = chosen[name]()
        figures.update(found)
        print(text)
        print(f"({name}: {time.perf_counter() - started:.0f} s)\n", flush=True)
    print(f"all benchmarks: {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
