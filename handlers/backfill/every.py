"""`reconcile_every`: reconcile run by itself, from a schedule, through the backfill function.

Each firing of the component's rule invokes `backfill.handler` with `{"scheduledReconcile": true}`. One invocation
runs one slice (pages until its time budget's margin), and the pass goes on at the next firing from a checkpoint
kept in the ledger (`scheduled-table#reconcile`, no expiry: DynamoDB's TTL never deletes it): the position, the
tally and aggregate's sums so far. A firing that finds another invocation's lease on the checkpoint leaves (a slice
can outlast the rule's period). Once the scan is done, reconcile's own last steps run (the sweep of schedules, the
totals replaced), and what the pass found is published as CloudWatch metrics in Embedded Metric Format (no API
call): `ReconcileMissing`, `ReconcileStray`, `ReconcileWrongTotals`, `ReconcileRepaired` and their drift sum
`ReconcileDrift` (namespace `ScheduledTable`, dimension `Table`), which the component's alarm watches."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

from st_core.clients import CLIENTS, Clients
from st_core.config import HandlerConfig

from backfill.report import Tally
from backfill.resources import CHECKPOINT, flat
from backfill.scan import PAGE_ITEMS

# The AWS actions this module's own calls need, by resource (handlers/backfill/resources.py; checked by tests/iam):
# the checkpoint item in the ledger.
AWS_ACTIONS_ON = {CHECKPOINT: ("dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:UpdateItem")}
AWS_ACTIONS = flat(AWS_ACTIONS_ON)

CHECKPOINT = "scheduled-table#reconcile"
NAMESPACE = "ScheduledTable"
# What a pass found, by metric: the tally's kinds that count toward it ("would ..." in a dry run).
FOUND = {
    "ReconcileMissing": (
        "fed as a fresh write",
        "indexed",
        "re-indexed",
        "would schedule",
        "would reschedule",
        "would deliver",
        "would delete now",
        "would index",
        "would re-index",
    ),
    "ReconcileStray": ("deleted schedule", "would delete schedule"),
    "ReconcileWrongTotals": ("total replaced", "would replace total"),
}


def found(tally: Tally) -> dict[str, int]:
    """The metrics of a finished pass: each kind of drift, what was repaired, and the drift in all."""
    counts = {
        metric: sum(n for kind, n in tally.kinds.items() if kind.startswith(kinds)) for metric, kinds in FOUND.items()
    }
    counts["ReconcileRepaired"] = tally.acted
    counts["ReconcileDrift"] = sum(counts[m] for m in FOUND)
    return counts


def ledger_table(config: HandlerConfig) -> str:
    section: Any = config.get(config["mode"])  # every mode's section names its ledger
    return str(section["ledgerTable"])


def run(
    config: HandlerConfig,
    budget: Callable[[], float],
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], float] = time.time,
    lease_seconds: float = 960.0,
    page_items: int = PAGE_ITEMS,
) -> dict[str, Any]:
    """One firing: one slice of the pass in progress (or of a new one); the pass's metrics when it ends.
    `budget()`: seconds left in the invocation."""
    from st_core.errors import error_code

    from backfill.engine import Engine
    from backfill.feed import Options, in_process, no_feed
    from backfill.scan import MARGIN_SECONDS, run_slice

    ddb = clients.get("dynamodb")
    table = ledger_table(config)
    key = {"id": {"S": CHECKPOINT}}
    moment = now()
    try:
        held = ddb.update_item(
            TableName=table,
            Key=key,
            UpdateExpression="SET leaseUntil = :until",
            ConditionExpression="attribute_not_exists(leaseUntil) OR leaseUntil < :now",
            ExpressionAttributeValues={
                ":until": {"N": str(int(moment + lease_seconds))},
                ":now": {"N": str(int(moment))},
            },
            ReturnValues="ALL_NEW",
        )["Attributes"]
    except Exception as exc:
        if error_code(exc) != "ConditionalCheckFailedException":
            raise
        return {"running": True}  # another invocation holds the pass
    state: dict[str, Any] = json.loads(held["state"]["S"]) if "state" in held else {"started": moment}
    options = Options(False, True, float(state["started"]))
    feed = in_process(config, clients) if config["mode"] != "aggregate" else no_feed
    engine = Engine(config, feed, clients=clients, options=options, now=now)
    engine.absorb(state.get("partial"))
    start, done = run_slice(
        engine, 0, 1, state.get("startKey"), keep_going=lambda: budget() > MARGIN_SECONDS, limit=page_items
    )
    tally = Tally.from_json(state.get("tally"))
    tally.merge(engine.tally)
    if not done:
        saved = {"startKey": start, "started": state["started"], "tally": tally.to_json(), "partial": engine.partial()}
        ddb.put_item(TableName=table, Item={**key, "state": {"S": json.dumps(saved)}})  # the lease ends with it
        return {"done": False, "tally": tally.to_json()}
    last = Engine(config, feed, clients=clients, options=options, now=now)
    if config["mode"] == "aggregate":
        last.absorb(engine.partial())
        last.settle_totals()
    else:
        last.sweep_schedules()
    tally.merge(last.tally)
    metrics = found(tally)
    from st_core import log

    log.metrics(NAMESPACE, {"Table": config["table"]}, properties={"reconcile": tally.to_json()}, **metrics)
    ddb.delete_item(TableName=table, Key=key)
    return {"done": True, "tally": tally.to_json(), "metrics": metrics}


def remaining(context: Any) -> Callable[[], float]:
    """Seconds left in the invocation, from Lambda's context (unbounded without one)."""
    return lambda: context.get_remaining_time_in_millis() / 1000 if context is not None else math.inf
