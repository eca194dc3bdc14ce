"""The report and its plots are written from a figures dict alone: every plot whose figures are there, a message
(never an error) for one whose figures are missing, and a report that links what was drawn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.report import Plot, main, make_plots, render, write_report

PNG = b"\x89PNG\r\n\x1a\n"


def fake_figures() -> dict[str, float]:
    figures: dict[str, float] = {"eventbridge_sweep_workers": 16, "coldstart_ms_eventbridge": 12.5}
    for ms, x_floor in ((5, 2.4), (10, 1.8), (25, 1.3), (50, 1.1)):
        figures[f"eventbridge_sweep_{ms}_x_floor"] = x_floor
        figures[f"eventbridge_sweep_{ms}_speedup"] = 16 / x_floor
    for size in (10_000, 100_000):
        for scenario, reads in (("normal", 1.0), ("overlap", 1.02), ("backlog", 1.1)):
            figures[f"polling_reads_per_item_{size}_{scenario}"] = reads
            figures[f"polling_baseline_reads_per_item_{size}_seed002_{scenario}"] = 1.0 + reads
        figures[f"polling_baseline_reads_per_item_{size}_full_scan"] = 101.0
    return figures


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Plot]]:
    """One full report, drawn once for the tests that read it (drawing is the slow part)."""
    out = tmp_path_factory.mktemp("report") / "bench" / "latest.md"
    return out, write_report(out, ["### 1. a table\n\n| a |\n|---|\n| 1 |\n"], fake_figures())


@pytest.mark.slow  # volume: `make test` runs it, `make unit` does not
def test_every_plot_is_drawn_and_linked_from_the_report(written: tuple[Path, list[Plot]]) -> None:
    out, plots = written

    names = sorted(plot.path.name for plot in plots)
    assert names == ["eventbridge_latency_sweep.png", "polling_reads_per_item.png"]
    for plot in plots:
        assert plot.path.parent == out.parent / "plots"
        assert plot.path.read_bytes().startswith(PNG)
    text = out.read_text()
    assert "](plots/eventbridge_latency_sweep.png)" in text
    assert "](plots/polling_reads_per_item.png)" in text
    assert "### 1. a table" in text
    assert "| `polling_reads_per_item_100000_backlog` | 1.1 |" in text
    assert "| `eventbridge_sweep_workers` | 16 |" in text
    saved = json.loads(out.with_suffix(".json").read_text())
    assert saved["figures"] == fake_figures()


def test_the_report_is_rewritten_from_its_saved_json(tmp_path: Path) -> None:
    out = tmp_path / "latest.md"
    write_report(out, ["### 5. scale"], {"cost_per_million_ttl": 1.67})
    out.unlink()

    assert main([str(out.with_suffix(".json"))]) == 0

    text = out.read_text()
    assert "### 5. scale" in text
    assert "| `cost_per_million_ttl` | 1.67 |" in text


def test_a_plot_without_its_figures_is_skipped_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only_sweep = {k: v for k, v in fake_figures().items() if k.startswith("eventbridge_sweep_10_")}

    plots = make_plots(only_sweep, tmp_path)

    assert [plot.path.name for plot in plots] == ["eventbridge_latency_sweep.png"]
    assert "plot skipped: polling reads per item" in capsys.readouterr().out
    assert not (tmp_path / "polling_reads_per_item.png").exists()


def test_a_run_with_no_plottable_figures_still_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "latest.md"

    assert write_report(out, ["### 4. cold start"], {"coldstart_ms_ttl": 11.0}) == []

    text = out.read_text()
    assert "## Plots" not in text
    assert "### 4. cold start" in text
    assert "| `coldstart_ms_ttl` | 11 |" in text


def test_links_are_relative_to_the_report(tmp_path: Path) -> None:
    plot = Plot(tmp_path / "elsewhere" / "plots" / "eventbridge_latency_sweep.png", "sweep")

    text = render([], {}, [plot], tmp_path / "bench")

    assert "![sweep](../elsewhere/plots/eventbridge_latency_sweep.png)" in text
