"""Every benchmark `make bench` runs, at its tiny size (`BENCH_SMALL=1`): it must run to the end and pass the checks it
makes before reporting a time (the work happened: a schedule per record that should make one, each due item
delivered once, totals exact, nothing parked). So a benchmark that crashes, or that times a path doing nothing (as
the eventbridge runs once timed records judged stale or parked), fails the build. No test reads a figure: a time
on this shared machine says nothing."""

from __future__ import annotations

import contextlib
import copy
import json
from collections import Counter
from typing import Any

import pytest
from eventbridge import handle_batch

from bench import __main__ as bench_main
from bench import bench_eventbridge
from bench.harness import SMALL_VARIABLE, NothingMeasured
from bench.stubbed import StubbedClients, replay

pytestmark = pytest.mark.slow  # starts local clouds and interpreters of its own: `make test`, not `make unit`

BENCHMARKS = ["eventbridge", "polling", "aggregate", "coldstart", "scale", "backfill", "paths", "herd", "console"]


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


def _bodies(clients: StubbedClients) -> list[str]:
    """Every request body the clients send from now on, in order, without the token botocore makes up per call."""
    sent: list[str] = []

    def keep(request: Any, **_: Any) -> None:
        body = json.loads(request.body)
        body.pop("ClientToken", None)
        sent.append(json.dumps(body, sort_keys=True))

    for service in ("scheduler", "dynamodb"):
        clients.get(service).meta.events.register_first("before-send", keep)
    return sent


@pytest.mark.usefixtures("small")
def test_the_stubbed_floor_makes_again_exactly_the_requests_ours_sent_reads_first() -> None:
    event = {"Records": bench_eventbridge.records(30)}
    ours = bench_eventbridge._stub_clients(event, 0)
    ours.recording = []
    ours_sent = _bodies(ours)
    config = bench_eventbridge.config_for("g", "q", bench_eventbridge.STUB_QUEUE_ARN, "ledger")
    response = handle_batch(event, config, clients=ours)  # type: ignore[arg-type]
    assert response == {"batchItemFailures": []}
    made = ours.recording
    assert Counter(operation for _, operation, _ in made) == {
        "BatchGetItem": 1,
        "CreateSchedule": 30,
        "BatchWriteItem": 2,
    }
    # The read handed over last is still made first.
    floor = bench_eventbridge._stub_clients(event, 0)
    floor_sent = _bodies(floor)
    replay(floor, made[1:] + made[:1], 4)
    assert floor.calls == ours.calls
    assert sorted(floor_sent) == sorted(ours_sent)
    assert json.loads(floor_sent[0]).keys() == {"RequestItems"} and "Keys" in floor_sent[0]
