"""`--in-lambda`: each segment of a backfill or reconcile as a chain of invocations of the stack's backfill function
(`handlers/backfill.handler`), each resuming from the last one's checkpoint."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from .aws import Client, RedriveError
from .checkpoint import Checkpoint
from .engine import engine
from .plan import Plan
from .scan_report import Progress


def in_lambda(
    client: Client,
    plan: Plan,
    options: Any,
    checkpoint: Checkpoint,
    index: int,
    remote: Any,
    current: Callable[[], Any],
    lock: threading.Lock,
    shown: Progress,
    stop: Callable[[], bool],
) -> bool:
    """One segment as a chain of invocations of the backfill function, each from the last one's checkpoint; the
    ceilings are shared out evenly between the segments; `options` as the run decided them (backfill.feed)."""
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
            "deliverPastDue": options.deliver_past_due,
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
