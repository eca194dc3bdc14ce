"""`scheduled-table backfill` and `reconcile`: the operator's side of `handlers/backfill.py`.

The engine (scan pages, synthetic stream records, following live writes, aggregate sums) is the handlers' module,
so the same code runs here and in the optional backfill function. This side adds what an operator run needs: the
stack found from its consumer function (`redrive.discovery.discover`), the records fed through the deployed
consumer itself (`redrive.replay.replay`: a RequestResponse invoke with Lambda's partial-batch answer, so a
backfilled item meets the same code, ledger and permissions as a live write), a parallel scan over `segments`
threads, ceilings on read capacity and Scheduler calls per second, a checkpoint file (each segment's
LastEvaluatedKey, written after every page, so an interrupted run resumes where it stopped), progress on stderr,
and `--in-lambda`: each segment a chain of invocations of the backfill function, each resuming from the last one's
checkpoint.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..packaging import error_code
from .aws import Client, Clients, Emit
from .redrive.discovery import RedriveError, Stack
from .redrive.replay import replay

# Exit statuses (documented in the command's help).
DONE, UNRESOLVED, CANNOT_START, INTERRUPTED = 0, 1, 2, 3


def engine() -> ModuleType:
    """`handlers/backfill.py`, the shipped engine (its `st_core` imports need the handlers folder on the path)."""
    from ..packaging import handlers_dir

    folder = handlers_dir()
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
    module = importlib.import_module("backfill")
    if Path(str(module.__file__)).resolve() != (folder / "backfill.py").resolve():
        raise RedriveError(
            f"another module named backfill ({module.__file__}) shadows scheduled-table's: run the command from "
            "another directory or environment"
        )
    return module


@dataclass
class Plan:
    """One run: what, how fast, where its checkpoint lives."""

    command: str = "backfill"  # or "reconcile"
    segments: int = 4
    read_units_per_second: float | None = 500.0
    scheduler_calls_per_second: float | None = 200.0
    dry_run: bool = False
    checkpoint: Path | None = None
    page_items: int = 100
    in_lambda: str | None = None  # the backfill function's name
    fresh: bool = False  # a first attach: existing schedules are not looked up (see handlers/backfill.Options)


@dataclass
class Checkpoint:
    """Per segment: the key to resume from, whether it is done, its tally, aggregate's partial sums."""

    path: Path | None
    table: str
    command: str
    segments: int
    started: float
    state: dict[int, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, path: Path | None, table: str, command: str, segments: int, now: float) -> Checkpoint:
        if path is not None and path.exists():
            data = json.loads(path.read_text())
            if (data.get("table"), data.get("command"), data.get("segments")) != (table, command, segments):
                raise RedriveError(
                    f"checkpoint {path} is for {data.get('command')} of {data.get('table')} with "
                    f"{data.get('segments')} segments: use the same --segments, or another --checkpoint file"
                )
            state = {int(k): v for k, v in (data.get("state") or {}).items()}
            return cls(path, table, command, segments, float(data["started"]), state)
        return cls(path, table, command, segments, now)

    def segment(self, index: int) -> dict[str, Any]:
        return self.state.setdefault(index, {"key": None, "done": False, "tally": {}, "partial": None})

    def save(self) -> None:
        if self.path is None:
            return
        with self._lock:
            text = json.dumps(
                {
                    "table": self.table,
                    "command": self.command,
                    "segments": self.segments,
                    "started": self.started,
                    "state": self.state,
                },
                default=str,
            )
            temporary = self.path.with_name(self.path.name + ".tmp")
            temporary.write_text(text)
            os.replace(temporary, self.path)  # atomic: a crash leaves the old checkpoint or the new one


class Progress:
    """Items scanned, acted on, skipped, failed; the rate and the ETA from the table's item count; to stderr at
    most once a second (and once at the end)."""

    def __init__(self, total: int | None, emit: Emit, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.emit = emit
        self.clock = clock
        self.began = clock()
        self.last = 0.0

    def show(self, tally: Any, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self.last < 1.0:
            return
        self.last = now
        spent = max(now - self.began, 1e-9)
        rate = tally.scanned / spent
        eta = ""
        if self.total and rate > 0 and tally.scanned < self.total:
            left = (self.total - tally.scanned) / rate
            eta = f", ETA {int(left // 60)}m{int(left % 60):02d}s"
        self.emit(
            f"{tally.scanned} scanned, {tally.acted} acted on, {tally.skipped} skipped, {tally.failed} failed; "
            f"{rate:.0f} items/s{eta}"
        )


def consumer_feed(client: Client, function: str) -> Callable[[list[dict[str, Any]]], list[tuple[Any, str]]]:
    """Records through the deployed consumer, with redrive's replay (Lambda's partial-batch contract)."""

    def feed(records: list[dict[str, Any]]) -> list[tuple[Any, str]]:
        return list(replay(client, function, records).failed)

    return feed


def run(
    client: Client,
    stack: Stack,
    plan: Plan,
    *,
    progress: Emit = lambda line: print(line, file=sys.stderr),
    feed: Callable[[list[dict[str, Any]]], list[tuple[Any, str]]] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], float] = time.time,
    stop: Callable[[], bool] = lambda: False,
) -> tuple[Any, bool]:
    """One backfill or reconcile of the stack's table. Returns the tally and whether every segment is done (False:
    stopped, resume with the same checkpoint). `feed` replaces the consumer (tests run the handler in-process);
    `stop` is asked after every page (an interruption)."""
    core = engine()
    config = stack.config
    checkpoint = Checkpoint.load(plan.checkpoint, config["table"], plan.command, plan.segments, now())
    options = core.Options(plan.dry_run, plan.command == "reconcile", checkpoint.started, plan.fresh)
    reads = core.Throttle(plan.read_units_per_second, clock, sleep)
    calls = core.Throttle(plan.scheduler_calls_per_second, clock, sleep)
    total = None
    try:
        total = int(client("dynamodb").describe_table(TableName=config["table"])["Table"].get("ItemCount") or 0) or None
    except Exception:  # the ETA is a nicety; a role without DescribeTable still runs
        total = None
    shown = Progress(total, progress, clock)
    for index in range(plan.segments):
        checkpoint.segment(index)  # every segment's state exists before the threads write into them
    if checkpoint.state and all(checkpoint.segment(i)["done"] for i in range(plan.segments)):
        progress(f"checkpoint {plan.checkpoint} is of a finished run: nothing left to scan (delete it to run again)")
    before = core.Tally()
    for state in checkpoint.state.values():
        before.merge(core.Tally.from_json(state.get("tally")))
    remote = core.Tally()  # what the backfill function's invocations reported
    lock = threading.Lock()
    aggregate = config["mode"] == "aggregate"
    if feed is None:
        feed = consumer_feed(client, stack.function)
    engines: list[Any] = []

    def snapshot(local: Any) -> Any:
        """An engine's tally as of now (its segment's threads go on counting meanwhile)."""
        return local.tally_now()

    def current() -> Any:
        seen = core.Tally.from_json(before.to_json())
        seen.merge(remote)
        for local in list(engines):
            seen.merge(snapshot(local))
        return seen

    def segment(index: int) -> bool:
        state = checkpoint.segment(index)
        if state["done"]:
            return True
        if plan.in_lambda:
            try:
                return _in_lambda(client, plan, checkpoint, index, remote, current, lock, shown, stop)
            except Exception as error:  # the function failed, or could not be invoked: resume from the checkpoint
                progress(f"segment {index} stopped: {error_code(error)}: {str(error)[:300]}")
                return False
        local = core.Engine(config, feed, clients=Clients(client), options=options, reads=reads, calls=calls, now=now)
        if aggregate:
            local.absorb(state.get("partial"))
        engines.append(local)
        base = core.Tally.from_json(state.get("tally"))

        def saved(key: Any, done: bool) -> None:
            with lock:
                grown = core.Tally.from_json(base.to_json())
                grown.merge(snapshot(local))
                state.update(key=key, done=done, tally=grown.to_json())
                if aggregate:
                    state["partial"] = local.partial()
                shown.show(current())
                checkpoint.save()  # under the lock: a whole state, never one segment's half-updated one

        try:
            _, done = core.run_slice(
                local,
                index,
                plan.segments,
                state["key"],
                keep_going=lambda: not stop(),
                saved=saved,
                limit=plan.page_items,
            )
        except Exception as error:  # a throttle that outlasted the SDK's retries, a permission missing
            # The checkpoint holds the last page done: the run stops here and resumes from it.
            progress(f"segment {index} stopped: {error_code(error)}: {str(error)[:300]}")
            return False
        return bool(done)

    with ThreadPoolExecutor(max_workers=plan.segments) as pool:
        finished = all(list(pool.map(segment, range(plan.segments))))
    if finished and plan.command == "reconcile" and not aggregate:
        sweep = core.Engine(config, feed, clients=Clients(client), options=options, reads=reads, calls=calls, now=now)
        sweep.sweep_schedules()
        engines.append(sweep)
    if finished and aggregate:
        totals = core.Engine(config, feed, clients=Clients(client), options=options, reads=reads, now=now)
        for state in checkpoint.state.values():
            totals.absorb(state.get("partial"))
        totals.settle_totals(sleep)
        engines.append(totals)
    overall = current()
    shown.show(overall, force=True)
    return overall, finished


def _in_lambda(
    client: Client,
    plan: Plan,
    checkpoint: Checkpoint,
    index: int,
    remote: Any,
    current: Callable[[], Any],
    lock: threading.Lock,
    shown: Progress,
    stop: Callable[[], bool],
) -> bool:
    """One segment as a chain of invocations of the backfill function, each from the last one's checkpoint; the
    ceilings are shared out evenly between the segments."""
    core = engine()
    state = checkpoint.segment(index)
    share = max(plan.segments, 1)
    while not state["done"] and not stop():
        event = {
            "segment": index,
            "segments": plan.segments,
            "startKey": state["key"],
            "dryRun": plan.dry_run,
            "reconcile": plan.command == "reconcile",
            "readUnitsPerSecond": (plan.read_units_per_second or 0) / share,
            "schedulerCallsPerSecond": (plan.scheduler_calls_per_second or 0) / share,
            "started": checkpoint.started,
            "partial": state.get("partial"),
            "pageItems": plan.page_items,
            "fresh": plan.fresh,
        }
        answer = client("lambda").invoke(
            FunctionName=plan.in_lambda, InvocationType="RequestResponse", Payload=json.dumps(event).encode()
        )
        body = answer["Payload"].read()
        if answer.get("FunctionError"):
            raise RedriveError(f"the backfill function failed on segment {index}: {body[:300]!r}")
        result = json.loads(body)
        tally = core.Tally.from_json(result.get("tally"))
        with lock:
            remote.merge(tally)
            previous = core.Tally.from_json(state.get("tally"))
            previous.merge(tally)
            state.update(key=result.get("startKey"), done=bool(result.get("done")), tally=previous.to_json())
            if "partial" in result:
                state["partial"] = result["partial"]
            shown.show(current())
            checkpoint.save()
    return bool(state["done"])


def summary(command: str, tally: Any, finished: bool, dry_run: bool) -> list[str]:
    """The lines printed at the end: the counts, each kind with its count and examples."""
    lines = [
        ("dry run, nothing changed. " if dry_run else "")
        + f"{command}: {tally.scanned} scanned, {tally.acted} acted on, {tally.skipped} skipped, {tally.failed} failed"
        + ("" if finished else " (interrupted: run again with the same --checkpoint to resume)")
    ]
    for kind, count in sorted(tally.kinds.items()):
        examples = tally.examples.get(kind) or []
        lines.append(f"  {count:>8} {kind}" + (f"  e.g. {'; '.join(examples)}" if examples else ""))
    return lines
