"""`scheduled-table backfill` and `reconcile`: the operator's side of `handlers/backfill/`.

The engine (scan pages, synthetic stream records, following live writes, aggregate sums) is the handlers' module,
so the same code runs here and in the optional backfill function. This side adds what an operator run needs: the
stack found from its consumer function (`redrive.discovery.discover`), the records fed through the deployed
consumer itself (`redrive.replay.replay`: a RequestResponse invoke with Lambda's partial-batch answer, so a
backfilled item meets the same code, ledger and permissions as a live write), a parallel scan over `segments`
threads, ceilings on read capacity and Scheduler calls per second, a checkpoint file (each segment's
LastEvaluatedKey, written after every page, so an interrupted run resumes where it stopped), progress on stderr,
and `--in-lambda`: each segment a chain of invocations of the backfill function, each resuming from the last one's
checkpoint.

The parts: `checkpoint` (the file), `fanout` (`--in-lambda`), `scan_report` (progress and the summary), `engine`
(loading the handlers' engine).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .. import modes
from ..packaging import error_code
from .aws import Client, Clients, Emit, RedriveError
from .checkpoint import Checkpoint
from .engine import engine
from .fanout import in_lambda
from .plan import Plan
from .redrive.discovery import Stack, check_backfill_function
from .redrive.replay import replay
from .scan_report import Progress

# Exit statuses (documented in the command's help).
DONE, UNRESOLVED, CANNOT_START, INTERRUPTED = 0, 1, 2, 3


def consumer_feed(client: Client, function: str) -> Callable[[list[dict[str, Any]]], list[tuple[Any, str]]]:
    """Records through the deployed consumer, with redrive's replay (Lambda's partial-batch contract)."""

    def feed(records: list[dict[str, Any]]) -> list[tuple[Any, str]]:
        return list(replay(client, function, records).failed)

    return feed


def item_count(client: Client, stack: Stack) -> int | None:
    """The table's approximate item count (the ETA); None when it cannot be read. RedriveError when the table does
    not exist: the run could never succeed, so it does not start."""
    table = stack.config["table"]
    try:
        return int(client("dynamodb").describe_table(TableName=table)["Table"].get("ItemCount") or 0) or None
    except Exception as error:  # the ETA is a nicety; a role without DescribeTable still runs
        if error_code(error) == "ResourceNotFoundException":
            raise RedriveError(
                f"table {table!r}, which function {stack.function!r} names, does not exist here: check --region and "
                "--endpoint-url, or deploy the stack again (pulumi up) if the table was deleted"
            ) from error
        return None


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
    `stop` is asked after every page (an interruption). RedriveError when it cannot start (a table that does not
    exist, a wrong --in-lambda function): running again would not help."""
    core = engine()
    config = stack.config
    checkpoint = Checkpoint.load(plan.checkpoint, config["table"], plan.command, plan.segments, now())
    reads = core.Throttle(plan.read_units_per_second, clock, sleep)
    calls = core.Throttle(plan.scheduler_calls_per_second, clock, sleep)
    total = item_count(client, stack)
    if plan.in_lambda:
        check_backfill_function(client, plan.in_lambda)
    if feed is None:
        feed = consumer_feed(client, stack.function)
    ledger = core.Engine(config, feed, clients=Clients(client), now=now)
    try:
        first = plan.command == "backfill" and not ledger.backfilled()
        # Only a table that predates the stack holds items the live function never saw due: in one the component
        # made, a past occurrence the ledger forgot was delivered live (or is delivered when the operator asks).
        predates = bool(config.get("eventbridge", {}).get("existingTable"))
    except Exception as error:
        raise RedriveError(
            f"the ledger table {config.get('eventbridge', {}).get('ledgerTable')!r} could not be read "
            f"({error_code(error)}: {str(error)[:200]}): backfill needs dynamodb:GetItem and PutItem on it"
        ) from error
    past_due = plan.deliver_past_due or (first and predates)
    options = core.Options(plan.dry_run, plan.command == "reconcile", checkpoint.started, plan.fresh, past_due)
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
    keeps_totals = modes.operated(config).totals
    engines: list[Any] = []
    confirmed: set[str] = set()  # schedules the item pass found as wanted: the sweep does not read them again

    def made() -> Any:
        """An engine of this run (one per segment, one for the sweep)."""
        clients = Clients(client)
        return core.Engine(
            config, feed, clients=clients, options=options, reads=reads, calls=calls, now=now, confirmed=confirmed
        )

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
                return in_lambda(client, plan, options, checkpoint, index, remote, current, lock, shown, stop)
            except Exception as error:  # the function failed, or could not be invoked: resume from the checkpoint
                progress(f"segment {index} stopped: {error_code(error)}: {str(error)[:300]}")
                return False
        local = made()
        if keeps_totals:
            local.absorb(state.get("partial"))
        engines.append(local)
        base = core.Tally.from_json(state.get("tally"))

        def saved(key: Any, done: bool) -> None:
            with lock:
                grown = core.Tally.from_json(base.to_json())
                grown.merge(snapshot(local))
                state.update(key=key, done=done, tally=grown.to_json())
                if keeps_totals:
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
    if finished and plan.command == "reconcile" and not keeps_totals:
        sweep = made()
        sweep.sweep_schedules()
        engines.append(sweep)
    if finished and keeps_totals:
        totals = core.Engine(config, feed, clients=Clients(client), options=options, reads=reads, now=now)
        for state in checkpoint.state.values():
            totals.absorb(state.get("partial"))
        totals.settle_totals(sleep)
        engines.append(totals)
    if finished and first and not plan.dry_run:
        ledger.mark_backfilled()  # later runs deliver what the ledger has forgotten only when asked
    overall = current()
    shown.show(overall, force=True)
    return overall, finished
