"""The benchmark harness's own machinery: production client settings, and where `cpu_split` draws its lines (what
it counts, never how much: no test asserts a timing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber
from st_core.clients import POOL_CONNECTIONS

from bench import bench_coldstart, coldstart_ab
from bench.harness import _CPU, BenchClients, cpu_split, instrument

ARN = "arn:aws:scheduler:eu-west-1:123456789012:schedule/default/x"
REQUEST = {
    "Name": "n",
    "ScheduleExpression": "at(2030-01-01T00:00:00)",
    "FlexibleTimeWindow": {"Mode": "OFF"},
    "Target": {"Arn": "arn:aws:sqs:eu-west-1:123456789012:q", "RoleArn": "arn:aws:iam::123456789012:role/r"},
}


def test_bench_clients_have_production_pool_and_no_retries() -> None:
    config = BenchClients(latency=0).get("scheduler").meta.config

    assert config.max_pool_connections == POOL_CONNECTIONS
    assert config.retries == {"mode": "standard", "total_max_attempts": 1}


def test_calls_answered_before_the_send_cost_the_emulator_nothing() -> None:
    client = instrument(boto3.client("scheduler", region_name="eu-west-1"))
    with Stubber(client) as stub:
        for _ in range(3):
            stub.add_response("create_schedule", {"ScheduleArn": ARN})
        with cpu_split() as cpu:
            for _ in range(3):
                client.create_schedule(**REQUEST)

    assert cpu.calls == 3
    assert cpu.emulator == cpu.emulator_processes  # nothing ran inside before-send
    assert cpu.total == pytest.approx(cpu.emulator + cpu.client + cpu.rest)


def test_the_emulator_window_encloses_an_in_process_emulator() -> None:
    """moto answers from a before-send handler registered in the middle: cpu_split's marks must open before it
    runs and close after it."""
    client = instrument(boto3.client("scheduler", region_name="eu-west-1"))
    seen: list[bool] = []

    def emulator(request: Any, **_: Any) -> AWSResponse:
        seen.append(getattr(_CPU._marks, "send", None) is not None)
        raw: Any = type("Raw", (), {"stream": lambda self, **_: iter([b""])})()
        return AWSResponse(request.url, 200, {}, raw)

    client.meta.events.register("before-send", emulator)
    client.meta.events.register("after-call", lambda **_: seen.append(getattr(_CPU._marks, "send", None) is None))
    with cpu_split() as cpu:
        client.create_schedule(**REQUEST)

    assert seen == [True, True]
    assert cpu.calls == 1


@pytest.mark.slow  # starts interpreters of its own: `make test` runs it, `make unit` does not
def test_coldstart_children_compile_from_source(tmp_path: Path) -> None:
    env = bench_coldstart.child_env()
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "AWS_ENDPOINT_URL" not in env
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "mod.py").write_text("X = 1\n")

    bench_coldstart.no_bytecode(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", "import mod, sys; print(mod.__cached__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    assert out.strip().endswith(".pyc")
    assert not (tmp_path / "__pycache__").exists()
    assert set(bench_coldstart.compile_times(tmp_path)) == {"mod"}


@pytest.mark.slow  # starts interpreters of its own: `make test` runs it, `make unit` does not
def test_coldstart_probes_check_that_the_shipped_archive_is_timed_from_its_bytecode(tmp_path: Path) -> None:
    """The two archives the benchmark sets side by side: each probe checks where every module it timed came from,
    so a "shipped bytecode" figure cannot silently be a compiled-from-source one."""
    from components.packaging import bytecode_runtime

    shipped, source = tmp_path / "shipped", tmp_path / "source"
    bench_coldstart.our_package(shipped, bytecode_runtime())
    bench_coldstart.our_package(source, None)
    assert (shipped / "__pycache__").is_dir() and not (source / "__pycache__").exists()

    assert bench_coldstart.probe(shipped, "ours", "dynamodb", "ttl", shipped=True).settled_cpu > 0
    with pytest.raises(subprocess.CalledProcessError):
        bench_coldstart.probe(source, "ours", "dynamodb", "ttl", shipped=True)


def test_importtime_lines_are_parsed() -> None:
    line = "import time:       583 |        583 |   st_core.log"

    match = bench_coldstart.IMPORTTIME_LINE.search(line)

    assert match is not None and match.groups() == ("583", "st_core.log")


def test_the_before_after_change_is_the_median_of_paired_differences() -> None:
    """Paired rounds: the change is the median of the per-round differences (-1, +11, -1: -1), not the difference
    of the two medians (29 - 20: +9), which one noisy round moves."""
    assert coldstart_ab.summary([10.0, 20.0, 30.0], [9.0, 31.0, 29.0]) == (20.0, 29.0, -1.0)


def test_the_before_after_cases_cover_every_entry_point() -> None:
    assert set(coldstart_ab.IMPORTS) == set(bench_coldstart.HANDLERS)
    assert coldstart_ab.IMPORTS["polling_assign"] == "polling_assign"
