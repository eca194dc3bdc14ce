"""Backfill and reconcile against moto: the handlers' moto env (a real table, stream, schedule group, queues and
ledger), the redrive tests' stand-in for the deployed consumer (it runs the real handler in-process when invoked,
exactly as the redrive's `replay` invokes it), and a fake clock whose time moves only when the run sleeps, so the
ceilings are proven on the run's own timeline, never on wall time."""

from __future__ import annotations

import json
import time as wall
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from components.cli import backfill
from components.cli.command import main
from tests.handlers.conftest import Env, with_due_index
from tests.handlers.conftest import env as env  # the moto env fixture, shared with the handler tests
from tests.redrive.conftest import Function, aws

Records = list[dict[str, Any]]


@dataclass
class FakeTime:
    """Monotonic time that moves only when someone sleeps (the throttles' sleeps)."""

    now: float = 1000.0
    slept: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.slept.append(seconds)
        self.now += seconds


def ttl_config(env: Env, *, precise: bool) -> Env:
    return env.configure(mode="ttl", precise=precise)


def aggregate_config(env: Env, on_change: str = "adjust") -> Env:
    import aggregate

    env.configure(mode="aggregate", on_change=on_change)
    aggregate.RINGS.clear()
    return env


def polling_config(env: Env) -> Env:
    return with_due_index(env)


def consumer(env: Env) -> Function:
    """The deployed consumer of the env's mode (its stream handler)."""
    mode = env.config["mode"]
    if mode == "eventbridge":
        import eventbridge

        return Function(env, eventbridge.handle_batch, [])
    if mode == "ttl":
        import ttl

        return Function(env, ttl.handle_batch, [])
    if mode == "polling":
        import polling_assign

        return Function(env, polling_assign.handle_assign_batch, [])
    import aggregate

    return Function(env, aggregate.handle_batch, [])


def fed(function: Function) -> Records:
    """Every record the run invoked the consumer with."""
    return [record for batch in function.invoked for record in batch]


def run(
    env: Env,
    function: Function,
    *,
    command: str = "backfill",
    checkpoint: Path | None = None,
    segments: int = 2,
    page_items: int = 100,
    dry_run: bool = False,
    reads: float | None = None,
    calls: float | None = None,
    time: FakeTime | None = None,
    stop: Callable[[], bool] = lambda: False,
    client: Any = None,
    now: Callable[[], float] | None = None,
) -> tuple[Any, bool, list[str]]:
    """One run through `components.backfill.run`, as the command makes it; its tally, whether it finished, and the
    progress lines. `now`: the run's wall clock (epoch seconds; the real one when not given)."""
    fake = time or FakeTime()
    lines: list[str] = []
    aws_client = client or aws(function)
    from components.cli.redrive.discovery import discover

    stack = discover(aws_client, function.name)
    plan = backfill.Plan(
        command=command,
        segments=segments,
        read_units_per_second=reads,
        scheduler_calls_per_second=calls,
        dry_run=dry_run,
        checkpoint=checkpoint,
        page_items=page_items,
    )
    tally, finished = backfill.run(
        aws_client,
        stack,
        plan,
        progress=lines.append,
        clock=fake.clock,
        sleep=fake.sleep,
        stop=stop,
        now=now or wall.time,
    )
    return tally, finished, lines


def command(function: Function, *args: str, client: Any = None) -> tuple[int, list[str]]:
    """The command line, as an operator runs it: exit status and output lines."""
    lines: list[str] = []
    status = main([*args, "--function", function.name], client=client or aws(function), emit=lines.append)
    return status, lines


def schedules(env: Env) -> dict[str, str]:
    """Every schedule of the group: name -> its expression and input (what a fresh write would have made)."""
    return {s["Name"]: json.dumps([s["ScheduleExpression"], s["Target"]["Input"]]) for s in env.schedules()}


@pytest.fixture(autouse=True)
def _no_settle_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The aggregate settle wait goes through the injected sleep; keep it at zero unless a test sets it."""
    import backfill.totals

    monkeypatch.setattr(backfill.totals, "SETTLE_SECONDS", 0.0)


@pytest.fixture(autouse=True)
def _fresh_function_config() -> Any:
    """The backfill function reads its configuration once per container (`load_config` is cached): each test is a
    new container."""
    from st_core.config import load_config

    load_config.cache_clear()
    yield
    load_config.cache_clear()
