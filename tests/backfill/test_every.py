"""`reconcile_every`: the backfill function, fired by the component's rule, reconciles the table by itself in
slices (a checkpoint in the ledger between firings), repairs what drifted and publishes what it found as metrics."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import backfill
import backfill.every
import eventbridge
import pytest

from tests.backfill.conftest import schedules
from tests.backfill.test_eventbridge import expected_name, iso
from tests.handlers.conftest import Env

NOW = datetime.now(UTC).replace(microsecond=0)


def checkpoint(env: Env) -> dict[str, Any] | None:
    ledger = env.config["eventbridge"]["ledgerTable"]
    found = env.ddb.get_item(TableName=ledger, Key={"id": {"S": backfill.every.CHECKPOINT}}, ConsistentRead=True)
    return found.get("Item")


def test_a_scheduled_reconcile_repairs_drift_in_slices_and_publishes_what_it_found(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    due = NOW + timedelta(days=2)
    for n in range(5):
        env.put({"PK": f"job{n}", "SK": "A", "dueAt": iso(due)})
    env.put({"PK": "gone", "SK": "A", "dueAt": iso(due)})
    eventbridge.handle_batch(env.event(), env.config)
    # Drift while the stream was off: an item deleted (its schedule stray), a schedule lost.
    env.delete("gone", "A")
    env.scheduler.delete_schedule(Name=expected_name(env, "job3", due), GroupName=env.group)
    env.stream.read()

    answers = []
    with caplog.at_level(logging.INFO):
        for _ in range(10):  # firings of the rule; each runs out of time after one page of two items
            answers.append(backfill.every.run(env.config, lambda: 0.0, page_items=2))
            if answers[-1].get("done"):
                break

    assert [a["done"] for a in answers] == [False, False, True], answers
    assert checkpoint(env) is None  # the pass is over: the next firing starts a new one
    assert set(schedules(env)) == {expected_name(env, f"job{n}", due) for n in range(5)}
    assert answers[-1]["metrics"] == {
        "ReconcileDrift": 2,
        "ReconcileMissing": 1,
        "ReconcileRepaired": 2,
        "ReconcileStray": 1,
        "ReconcileWrongTotals": 0,
    }
    (line,) = [json.loads(r.getMessage()) for r in caplog.records if "ReconcileDrift" in r.getMessage()]
    assert line["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ScheduledTable"
    assert line["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Table"]]
    assert (line["Table"], line["ReconcileDrift"]) == (env.table, 2)

    quiet = backfill.every.run(env.config, lambda: 900.0)
    assert quiet["done"] and quiet["metrics"]["ReconcileDrift"] == 0


def test_a_firing_while_a_slice_runs_leaves_it_alone(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    env.put({"PK": "job", "SK": "A", "dueAt": iso(NOW + timedelta(days=1))})
    env.stream.read()
    ledger = env.config["eventbridge"]["ledgerTable"]
    lease = str(int(NOW.timestamp()) + 600)
    env.ddb.put_item(TableName=ledger, Item={"id": {"S": backfill.every.CHECKPOINT}, "leaseUntil": {"N": lease}})

    assert backfill.every.run(env.config, lambda: 900.0) == {"running": True}
    assert schedules(env) == {}

    monkeypatch.setenv("SCHEDULED_TABLE_CONFIG", json.dumps(env.config))

    class Context:
        def get_remaining_time_in_millis(self) -> int:
            return 900_000

    later = backfill.every.run(env.config, lambda: 900.0, now=lambda: NOW.timestamp() + 601)
    assert later["done"]  # the lease ran out: the pass goes on
    assert backfill.handler({"scheduledReconcile": True}, Context())["done"]  # the rule's event, via the entry point
    assert len(schedules(env)) == 1
