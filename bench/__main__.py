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
    args = list(argv if argv is not None else sys.argv[1:])
    out = None
    if "--out" in args:
        at = args.index("--out")
        out = Path(args[at + 1])
        del args[at : at + 2]
    names = args or list(chosen)
    began = time.perf_counter()
    report: list[str] = []
    for name in names:
        started = time.perf_counter()
        text, found = chosen[name]()
        figures.update(found)
        report.append(f"{text}\n({name}: {time.perf_counter() - started:.0f} s)\n")
        print(report[-1], flush=True)
    report.append(f"all benchmarks: {time.perf_counter() - began:.0f} s")
    print(report[-1])
    if out is not None:
        out.write_text("\n".join(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
