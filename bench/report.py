"""The benchmark report: a Markdown file with every table, the plots embedded, and every figure listed; and the
plots themselves (PNG), drawn from the figures alone so they can be redrawn without re-running anything.

`make bench` calls `write_report` at the end of a run; `python -m bench.report [bench/latest.json]` redraws the
plots and rewrites the report from the figures a previous run saved. A plot whose figures are missing (a subset
run, a benchmark that no longer reports them) is skipped with a message, never an error: the report lists what it
has.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SWEEP_KEY = re.compile(r"^eventbridge_sweep_(\d+)_x_floor$")
POLLING_KEY = re.compile(r"^polling_reads_per_item_(\d+)_(normal|overlap|backlog)$")
# The docs site serves the plots (docs/performance.md embeds them); the report links to the same files.
PLOTS_DIR = Path(__file__).resolve().parent.parent / "docs" / "assets" / "plots"
POLLING_BASELINE_KEY = re.compile(r"^polling_baseline_reads_per_item_(\d+)_(.+)$")
POLLING_SIZES = (10_000, 100_000)
# `make soak` writes its section into the report between these lines; `make bench` rewrites the rest and keeps it.
SOAK_BEGIN = "<!-- soak: written by make soak, kept by make bench -->"
SOAK_END = "<!-- end of soak -->"
POLLING_SCENARIOS = ("normal", "overlap", "backlog")


@dataclass(frozen=True)
class Plot:
    """One picture: where it was written and what it shows (its alt text and caption in the report)."""

    path: Path
    title: str


def make_plots(figures: dict[str, float], directory: Path) -> list[Plot]:
    """Draw every plot whose figures are present into `directory` (created if needed); print why any is skipped.
    matplotlib is imported here, with the Agg backend (no display), so a run without it still writes its report."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # fails here, not halfway through a plot, when it cannot load
    except ImportError as exc:
        print(f"plots skipped: matplotlib is not installed ({exc}); `pip install -e '.[dev]'` brings it")
        return []
    directory.mkdir(parents=True, exist_ok=True)
    plots: list[Plot] = []
    drawers: list[Callable[[dict[str, float], Path], Plot | str]] = [eventbridge_sweep_plot, polling_reads_plot]
    for draw in drawers:
        outcome = draw(figures, directory)
        if isinstance(outcome, Plot):
            plots.append(outcome)
            print(f"plot written: {outcome.path}")
        else:
            print(f"plot skipped: {outcome}")
    return plots


def eventbridge_sweep_plot(figures: dict[str, float], directory: Path) -> Plot | str:
    """Wall time over the latency floor for each injected latency (keys `eventbridge_sweep_{ms}_x_floor`), and
    beside it the speed-up over seed 000 (`eventbridge_sweep_{ms}_speedup`, if present) with the worker count it
    tends to (`eventbridge_sweep_workers` or `eventbridge_sweep_{ms}_workers`)."""
    points = sorted((int(m.group(1)), value) for key, value in figures.items() if (m := SWEEP_KEY.match(key)))
    if not points:
        return (
            "eventbridge latency sweep: no eventbridge_sweep_{ms}_x_floor figures (run `python -m bench eventbridge`)"
        )
    import matplotlib.pyplot as plt

    latencies = [ms for ms, _ in points]
    speedups = [figures.get(f"eventbridge_sweep_{ms}_speedup") for ms in latencies]
    workers = [
        figures.get(f"eventbridge_sweep_{ms}_workers", figures.get("eventbridge_sweep_workers")) for ms in latencies
    ]
    with_speedup = all(value is not None for value in speedups)
    fig, axes = plt.subplots(1, 2 if with_speedup else 1, figsize=(10 if with_speedup else 5.5, 4), squeeze=False)
    ax = axes[0][0]
    ax.plot(latencies, [value for _, value in points], marker="o", color="tab:blue", label="ours")
    for ms, value in points:
        ax.annotate(f"{value:.2f}x", (ms, value), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="floor (every round of calls at the latency)")
    _latency_axis(ax, latencies)
    ax.set_ylabel("wall time / latency floor")
    ax.set_ylim(bottom=0)
    ax.set_title("eventbridge batch: time over its floor")
    ax.legend(fontsize=8)
    if with_speedup:
        ax = axes[0][1]
        values = [float(value) for value in speedups if value is not None]
        ax.plot(latencies, values, marker="o", color="tab:green", label="ours vs seed 000")
        for ms, value in zip(latencies, values, strict=True):
            ax.annotate(
                f"{value:.1f}x", (ms, value), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8
            )
        if all(count is not None for count in workers):
            label = "worker count" if len(set(workers)) > 1 else f"worker count ({workers[0]:g})"
            ax.plot(latencies, workers, color="grey", linestyle="--", linewidth=1, label=label)
        _latency_axis(ax, latencies)
        ax.set_ylabel("speed-up (seed's wall time / ours)")
        ax.set_ylim(bottom=0)
        ax.set_title("eventbridge batch: speed-up over the seed")
        ax.legend(fontsize=8)
    return _save(fig, directory / "eventbridge_latency_sweep.png", "eventbridge latency sweep (moto)")


def _latency_axis(ax: Any, latencies: list[int]) -> None:
    """A log axis labelled at the measured latencies only (5, 10, 25, 50), not at matplotlib's minor ticks."""
    ax.set_xscale("log")
    ax.set_xticks(latencies, [str(ms) for ms in latencies])
    from matplotlib.ticker import NullLocator

    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("injected latency per AWS call (ms)")


def polling_reads_plot(figures: dict[str, float], directory: Path) -> Plot | str:
    """Items read per dispatched item, ours per scenario (keys `polling_reads_per_item_{size}_{scenario}`) beside
    the baselines (`polling_baseline_reads_per_item_{size}_{name}`: a name ending in a scenario is drawn in that
    scenario's group, any other as a dashed line across the panel), one panel per table size."""
    ours: dict[tuple[int, str], float] = {}
    grouped: dict[tuple[int, str, str], float] = {}  # (size, baseline, scenario)
    lines: dict[tuple[int, str], float] = {}  # (size, baseline) without a scenario
    for key, value in figures.items():
        if m := POLLING_KEY.match(key):
            ours[(int(m.group(1)), m.group(2))] = value
        elif m := POLLING_BASELINE_KEY.match(key):
            size, name = int(m.group(1)), m.group(2)
            scenario = next((s for s in POLLING_SCENARIOS if name.endswith(f"_{s}")), None)
            if scenario is None:
                lines[(size, name)] = value
            else:
                grouped[(size, name.removesuffix(f"_{scenario}"), scenario)] = value
    sizes = [size for size in POLLING_SIZES if any(s == size for s, _ in ours)]
    if not sizes:
        return (
            "polling reads per item: no polling_reads_per_item_{size}_{scenario} figures "
            "(run `python -m bench polling`)"
        )
    import matplotlib.pyplot as plt

    baselines = sorted({name for _, name, _ in grouped})
    series = ["ours", *baselines]
    values = [*ours.values(), *grouped.values(), *lines.values()]
    positive = [v for v in values if v > 0]
    log_scale = bool(positive) and max(positive) / min(positive) > 20
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.5 * len(sizes), 4.2), squeeze=False, sharey=True)
    width = 0.8 / len(series)
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = [*series, *sorted({name for _, name in lines})]
    colour = {name: palette[index % len(palette)] for index, name in enumerate(names)}  # the same in every panel
    for ax, size in zip(axes[0], sizes, strict=True):
        for index, name in enumerate(series):
            xs: list[float] = []
            ys: list[float] = []
            for position, scenario in enumerate(POLLING_SCENARIOS):
                found = ours.get((size, scenario)) if name == "ours" else grouped.get((size, name, scenario))
                if found is not None:
                    xs.append(position + (index - (len(series) - 1) / 2) * width)
                    ys.append(found)
            label = name if name == "ours" else f"{name.replace('_', ' ')} (baseline)"
            bars = ax.bar(xs, ys, width, label=label, color=colour[name])
            ax.bar_label(bars, labels=[_short(y) for y in ys], fontsize=7, padding=2)
        for (line_size, name), value in sorted(lines.items()):
            if line_size == size:
                label = f"{name.replace('_', ' ')} (baseline): {_short(value)}"
                ax.axhline(value, linestyle="--", linewidth=1, color=colour[name], label=label)
        ax.axhline(1.0, color="grey", linestyle=":", linewidth=1)
        ax.set_xticks(range(len(POLLING_SCENARIOS)), POLLING_SCENARIOS)
        ax.set_title(f"{size:,} items")
        ax.set_xlabel("scenario")
        if log_scale:
            ax.set_yscale("log")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("items read per dispatched item")
    fig.suptitle("polling: reads per dispatched item (1.0 = each item read once)")
    return _save(fig, directory / "polling_reads_per_item.png", "polling reads per dispatched item")


def _short(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _save(fig: Any, path: Path, title: str) -> Plot:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    # No software version or date in the file: a re-run with the same figures writes the same bytes.
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return Plot(path, title)


def render(sections: Sequence[str], figures: dict[str, float], plots: Sequence[Plot], report_dir: Path) -> str:
    """The Markdown report: how it was made, the plots (linked relative to `report_dir`), every section as the
    benchmarks printed it, then every figure."""
    lines = [
        "# Benchmark report",
        "",
        f"Written by `make bench` (`python -m bench --out ...`) at {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on "
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"{os.environ.get('BENCH_LATENCY_MS', '10')} ms injected per AWS call, handlers logging at "
        f"{os.environ.get('LOG_LEVEL', 'INFO')}. Ratios compare ours with a baseline in the same run.",
        "",
    ]
    if plots:
        lines += ["## Plots", ""]
        for plot in plots:
            link = Path(os.path.relpath(plot.path, report_dir)).as_posix()
            lines += [f"![{plot.title}]({link})", ""]
    lines += ["## Results", ""]
    lines += [section.rstrip() + "\n" for section in sections]
    lines += ["## Figures", "", "Every figure the benchmarks reported (what the plots and the README quote).", ""]
    lines += ["| figure | value |", "| --- | --- |"]
    lines += [f"| `{key}` | {_figure(value)} |" for key, value in sorted(figures.items())]
    return "\n".join(lines) + "\n"


def _figure(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.4g}"


def write_report(
    out: Path, sections: Sequence[str], figures: dict[str, float], plots_dir: Path | None = None
) -> list[Plot]:
    """Write the plots (into `plots_dir`, default `plots/` beside the report; `make bench` passes `PLOTS_DIR`), the
    report at `out`, and the sections and figures as JSON beside it (`out` with `.json`), from which
    `python -m bench.report` redraws."""
    plots = make_plots(figures, plots_dir or out.parent / "plots")
    out.parent.mkdir(parents=True, exist_ok=True)
    kept = soak_section(out.read_text()) if out.exists() else ""
    out.write_text(render(sections, figures, plots, out.parent) + (f"\n{kept}" if kept else ""))
    out.with_suffix(".json").write_text(
        json.dumps({"sections": list(sections), "figures": figures}, indent=1, sort_keys=True) + "\n"
    )
    return plots


def soak_section(text: str) -> str:
    """The soak's section of a report, markers included ("" if it has none)."""
    begin, end = text.find(SOAK_BEGIN), text.find(SOAK_END)
    return text[begin : end + len(SOAK_END)] + "\n" if 0 <= begin < end else ""


def replace_soak_section(text: str, section: str) -> str:
    """`text` with its soak section replaced by `section` (appended if it had none)."""
    block = f"{SOAK_BEGIN}\n{section.rstrip()}\n{SOAK_END}\n"
    old = soak_section(text)
    return text.replace(old, block) if old else text.rstrip() + "\n\n" + block


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.report [bench/latest.json]`: redraw the plots and rewrite the report beside the JSON."""
    args = list(argv if argv is not None else sys.argv[1:])
    source = Path(args[0] if args else Path(__file__).parent / "latest.json")
    saved = json.loads(source.read_text())
    write_report(source.with_suffix(".md"), saved["sections"], saved["figures"], PLOTS_DIR)
    print(f"report written: {source.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
