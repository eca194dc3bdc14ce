"""Every handler under injected faults (20% of its AWS calls throttled, 5xx or timed out) with Lambda's replay:
every action happens exactly once and nothing is lost."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial

import aggregate
import eventbridge
import polling
import pytest
import ttl
from st_core.timeparse import minute_at_or_after

from tests.handlers.conftest import Env
from tests.handlers.faults import REPORTS, FaultInjector, FaultReport, FaultyClients, replay
from tests.handlers.test_aggregate import agg_env  # noqa: F401  (fixtures)
from tests.handlers.test_polling import polling_env  # noqa: F401
from tests.handlers.test_ttl import TTL_IDENTITY, ttl_env  # noqa: F401

RATE = 0.2
ITEMS = int(__import__("os").environ.get("FAULT_ITEMS", "40"))
# Volume under faults: `make test` runs these, `make unit` (the fast part) does not.
pytestmark = pytest.mark.slow


def _report(
    handler: str, injector: FaultInjector, records: int, actions: Counter[str], expected: set[str], deliveries: int
) -> FaultReport:
    report = FaultReport(
        handler=handler,
        calls=injector.calls,
        faults=sum(injector.faults.values()),
        records=records,
        actions=sum(actions.values()),
        duplicates=sum(n - 1 for n in actions.values() if n > 1),
        losses=len(expected - set(actions)),
        deliveries=deliveries,
    )
    REPORTS.append(report)
    return report


def test_eventbridge_schedules_each_item_exactly_once_under_faults(env: Env) -> None:
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(days=1)
    for n in range(ITEMS):
        env.put({"PK": f"item#{n}", "SK": "S", "dueAt": (due + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")})
    for n in range(0, ITEMS, 10):  # some move, some are cancelled
        env.put({"PK": f"item#{n}", "SK": "S", "dueAt": (due + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")})
        env.delete(f"item#{n + 1}", "S")
    records = env.event()["Records"]
    injector = FaultInjector(RATE)
    clients = FaultyClients(injector)
    deliveries = replay(lambda e: eventbridge.handle_batch(e, env.config, clients=clients), records)  # type: ignore[arg-type]
    schedules = env.schedules()
    actions = Counter(s["Name"].split("-")[1] for s in schedules)
    expected = {str(n) for n in range(ITEMS) if n % 10 != 1}
    report = _report("eventbridge", injector, len(records), actions, expected, deliveries)
    assert report.faults > 0 and report.duplicates == 0 and report.losses == 0
    assert set(actions) == expected
    moved = next(s for s in schedules if s["Name"].startswith("item-0-"))
    fire = minute_at_or_after(due + timedelta(hours=1))
    assert moved["ScheduleExpression"] == f"at({fire.strftime('%Y-%m-%dT%H:%M:%S')})"


def test_ttl_acts_on_each_expiry_exactly_once_under_faults(ttl_env: Env) -> None:  # noqa: F811
    for n in range(ITEMS):
        ttl_env.put({"PK": f"session#{n}", "SK": "S", "dueAt": int(time.time()) - n})
    ttl_env.event()
    for n in range(ITEMS):
        ttl_env.delete(f"session#{n}", "S")
    records = [{**r, "userIdentity": TTL_IDENTITY} for r in ttl_env.event()["Records"]]
    injector = FaultInjector(RATE)
    clients = FaultyClients(injector)
    deliveries = replay(lambda e: ttl.handle_batch(e, ttl_env.config, clients=clients), records)  # type: ignore[arg-type]
    actions = Counter(m["keys"]["PK"] for m in ttl_env.messages(ttl_env.due_queue_url))
    report = _report("ttl", injector, len(records), actions, {f"session#{n}" for n in range(ITEMS)}, deliveries)
    assert report.faults > 0 and report.duplicates == 0 and report.losses == 0
    assert ttl_env.messages(ttl_env.poison_url) == []


def test_polling_runs_each_due_item_exactly_once_under_faults(polling_env: Env) -> None:  # noqa: F811
    polling_env.configure(max_attempts=50)
    polling_env.configure(retry_backoff_seconds=1)
    now = float(int(time.time()))
    for n in range(ITEMS):
        polling_env.put({"PK": f"job#{n}", "SK": "T", "stShard": n % 8, "stDue": int(now) - n, "stStatus": "PENDING"})
    injector = FaultInjector(RATE)
    clients = FaultyClients(injector)
    ticks = 0
    for tick in range(200):
        ticks += 1
        try:
            # Each tick a little later, so backed-off items come due again and expired leases are taken over.
            polling.process(polling_env.config, clients=clients, now=partial(float.__add__, now, 200.0 * tick))  # type: ignore[arg-type]
        except Exception:
            continue  # a failed tick: the next one picks up where it left off
        pending = polling_env.ddb.scan(
            TableName=polling_env.table, FilterExpression="attribute_exists(stShard)", Select="COUNT"
        )["Count"]
        if pending == 0:
            break
    actions = Counter(m["keys"]["PK"] for m in polling_env.messages(polling_env.due_queue_url))
    report = _report("polling", injector, ITEMS, actions, {f"job#{n}" for n in range(ITEMS)}, ticks)
    assert report.faults > 0 and report.duplicates == 0 and report.losses == 0


def test_aggregate_counts_each_score_exactly_once_under_faults(agg_env: Env) -> None:  # noqa: F811
    sums: Counter[str] = Counter()
    for n in range(ITEMS * 3):
        user = f"u{n % 7}"
        agg_env.put({"PK": f"SCORE#{n}", "SK": f"USER#{user}", "Score": n})
        sums[user] += n
    records = agg_env.event()["Records"]
    injector = FaultInjector(RATE)
    clients = FaultyClients(injector)
    deliveries = replay(lambda e: aggregate.handle_batch(e, agg_env.config, clients=clients), records)  # type: ignore[arg-type]
    totals: dict[str, int] = {}
    for user in sums:
        item = agg_env.ddb.get_item(
            TableName=agg_env.table, Key={"PK": {"S": f"USER#{user}"}, "SK": {"S": "TOTAL"}}
        ).get("Item")
        totals[user] = int(Decimal(item["totalScore"]["N"])) if item else 0
    counted = Counter({u: 1 for u in sums if totals[u] >= sums[u]})
    over = sum(1 for u in sums if totals[u] > sums[u])
    report = _report("aggregate", injector, len(records), counted, set(sums), deliveries)
    report.duplicates = over
    REPORTS[-1] = report
    assert report.faults > 0 and totals == dict(sums), json.dumps({"totals": totals, "sums": sums})
