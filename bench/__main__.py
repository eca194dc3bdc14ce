"""`make bench`: every benchmark, its table printed as it finishes (Markdown, ready for the README); with `--out`,
the report (tables, plots, every figure) written there and the plots in the docs site's `docs/assets/plots/`.

    python -m bench [--out bench/latest.md] [eventbridge polling aggregate coldstart scale backfill paths herd console]

Each benchmark checks that the work it times happened (a schedule per record that should make one, each due item
delivered once, totals exact, nothing parked) before it reports a time. `BENCH_SMALL=1` runs every one at a tiny
size (its figures mean nothing; its checks hold): what `make test` runs (tests/bench/test_benchmarks.py).

The handlers run with production settings: logging at INFO (the level a deployment gets unless `LOG_LEVEL` says
otherwise), their lines formatted as in Lambda but written to a file (`BENCH_LOG`, default a temp file) instead
of drowning the tables; clients with production's connection pool (see `harness.BenchClients`).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Every benchmark, in the order `make bench` runs them (tests/bench runs each at its small size).
BENCHMARKS = ("eventbridge", "polling", "aggregate", "coldstart", "scale", "backfill", "paths", "herd", "console")


@contextmanager
def handler_logs_to(path: str) -> Iterator[None]:
    """Send the handlers' log lines (the `scheduled_table` logger, stdout in Lambda) to `path` inside the block:
    every line is still built and written, so its CPU counts as it does in Lambda, but the terminal keeps the
    tables."""
    from st_core import log  # noqa: F401  (sets up the logger and its handler)

    handlers = [h for h in logging.getLogger("scheduled_table").handlers if isinstance(h, logging.StreamHandler)]
    with open(path, "w") as stream:
        previous = [h.setStream(stream) for h in handlers]
        try:
            yield
        finally:
            for handler, before in zip(handlers, previous, strict=True):
                handler.setStream(before or sys.stdout)


def main(argv: list[str] | None = None) -> int:
    sys.path[:0] = [str(REPO / "handlers"), str(REPO)]
    from . import (
        bench_aggregate,
        bench_backfill,
        bench_coldstart,
        bench_console,
        bench_eventbridge,
        bench_herd,
        bench_paths,
        bench_polling,
        bench_scale,
    )

    figures: dict[str, float] = {}
    runs: dict[str, Callable[[], tuple[str, dict[str, float]]]] = {
        "eventbridge": bench_eventbridge.run,
        "polling": bench_polling.run,
        "aggregate": bench_aggregate.run,
        "coldstart": bench_coldstart.run,
        "scale": lambda: bench_scale.run(figures),
        "backfill": bench_backfill.run,
        "paths": bench_paths.run,
        "herd": bench_herd.run,
        "console": bench_console.run,
    }
    chosen = {name: runs[name] for name in BENCHMARKS}
    args = list(argv if argv is not None else sys.argv[1:])
    out = None
    if "--out" in args:
        at = args.index("--out")
        out = Path(args[at + 1])
        del args[at : at + 2]
    unknown = [name for name in args if name not in chosen]
    if unknown:
        print(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(chosen)}", file=sys.stderr)
        return 2
    names = args or list(chosen)
    log_path = os.environ.get("BENCH_LOG") or str(Path(tempfile.gettempdir()) / "scheduled-table-bench.log")
    print(f"handler logs (level {os.environ.get('LOG_LEVEL', 'INFO')}) go to {log_path}", flush=True)
    began = time.perf_counter()
    report: list[str] = []
    with handler_logs_to(log_path):
        for name in names:
            started = time.perf_counter()
            text, found = chosen[name]()
            figures.update(found)
            report.append(f"{text}\n({name}: {time.perf_counter() - started:.0f} s)\n")
            print(report[-1], flush=True)
    report.append(f"all benchmarks: {time.perf_counter() - began:.0f} s")
    print(report[-1])
    if out is not None:
        from .report import PLOTS_DIR, write_report

        write_report(out, report, figures, PLOTS_DIR)
        print(f"report written: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
