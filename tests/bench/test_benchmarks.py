"""Every benchmark `make bench` runs, at its tiny size (`BENCH_SMALL=1`): it must run to the end and pass the checks it
makes before reporting a time (the work happened: a schedule per record that should make one, each due item
delivered once, totals exact, nothing parked). So a benchmark that crashes, or that times a path doing nothing (as
the eventbridge runs once timed records judged stale or parked), fails the build. No test reads a figure: a time
on this shared machine says nothing."""

from __future__ import annotations

import contextlib
import copy
from collections import Counter
from typing import Any

import pytest

from bench import __main__ as bench_main
from bench import bench_eventbridge
from bench.harness import SMALL_VARIABLE, NothingMeasured
from bench.stubbed import StubbedClients, replay

pytestmark = pytest.mark.slow  # starts local clouds and interpreters of its own: `make test`, not `make unit`

BENCHMARKS = ["eventbridge", "polling", "aggregate", "coldstart", "scale", "backfill", "paths", "herd"]


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SMALL_VARIABLE, "1")
    # The handlers' log lines stay with pytest's capture (moving the logger's stream to a file and back would hand
    # the next test a stream pytest has closed).
    monkeypatch.setattr(bench_main, "handler_logs_to", lambda path: contextlib.nullcontext())


def test_every_benchmark_make_bench_runs_is_run_here() -> None:
    assert sorted(bench_main.BENCHMARKS) == sorted(BENCHMARKS)


@pytest.mark.parametrize("name", BENCHMARKS)
@pytest.mark.usefixtures("small")
def test_a_small_run_of_the_benchmark_does_its_work(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main.main([name]) == 0
    assert f"({name}: " in capsys.readouterr().out


@pytest.mark.usefixtures("small")
def test_the_stubbed_eventbridge_run_refuses_to_time_records_judged_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    # The stub as it was: every read answered `{}` (no item), so the handler schedules nothing.
    monkeypatch.setattr(StubbedClients, "_read", lambda self, operation, asked: {})
    with pytest.raises(NothingMeasured, match="CreateSchedule calls: 0"):
        bench_eventbridge._stub_table()


@pytest.mark.usefixtures("small")
def test_the_moto_eventbridge_run_refuses_to_time_records_parked(monkeypatch: pytest.MonkeyPatch) -> None:
    # The setup as it was: the handler reads a table that does not exist, so every record is parked.
    made = bench_eventbridge.config_for

    def without_the_table(*args: Any) -> dict[str, Any]:
        config = copy.deepcopy(made(*args))
        config["table"] = "no-such-table"
        return config

    monkeypatch.setattr(bench_eventbridge, "config_for", without_the_table)
    with pytest.raises(NothingMeasured, match="schedules left"):
        bench_eventbridge._ours({"Records": bench_eventbridge.records(4)})


@pytest.mark.usefixtures("small")
def test_the_stubbed_floor_makes_again_exactly_the_calls_ours_made_reads_first() -> None:
    event = {"Records": bench_eventbridge.records(30)}
    *_, made = bench_eventbridge._stubbed(event, 0, "ours", record=True)
    ours = Counter(operation for _, operation, _ in made)
    assert ours == {"BatchGetItem": 1, "CreateSchedule": 30, "BatchWriteItem": 2}
    clients = bench_eventbridge._stub_clients(event, 0)
    order: list[str] = []
    clients.get("dynamodb").meta.events.register("before-send", lambda event_name, **_: order.append(event_name))
    replay(clients, made, 4)
    assert clients.calls == ours
    assert order == ["before-send.dynamodb.BatchGetItem"] + ["before-send.dynamodb.BatchWriteItem"] * 2
