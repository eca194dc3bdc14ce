"""Backfill of a ttl table. Precise: each existing item gets its delete schedule (holding its TTL value), a past-due
one is deleted now and its action runs once; a live change of the TTL during the run wins; reconcile repairs a
schedule that holds another time. Plain: nothing to make; items past their TTL that TTL has not deleted are
reported."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import ttl

from tests.backfill.conftest import command, consumer, run, ttl_config
from tests.handlers.conftest import Env

NOW = datetime.now(UTC).replace(microsecond=0)


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def held_values(env: Env) -> dict[str, str]:
    """Each delete schedule's item key and the TTL value its conditional delete holds."""
    found = {}
    for schedule in env.schedules():
        request = json.loads(schedule["Target"]["Input"])
        found[request["Key"]["PK"]["S"]] = request["ExpressionAttributeValues"][":due"]["N"]
    return found


def test_precise_existing_items_get_their_delete_schedules_and_past_due_ones_act_once(env: Env) -> None:
    ttl_config(env, precise=True)
    ahead = NOW + timedelta(days=1)
    for n in range(3):
        env.put({"PK": f"session#{n}", "SK": "S", "dueAt": epoch(ahead) + n})
    env.put({"PK": "late#1", "SK": "S", "dueAt": epoch(NOW - timedelta(hours=2))})
    env.stream.read()
    function = consumer(env)

    tally, finished, _ = run(env, function)

    assert finished and tally.failed == 0
    assert held_values(env) == {f"session#{n}": str(epoch(ahead) + n) for n in range(3)}
    assert "Item" not in env.ddb.get_item(TableName=env.table, Key={"PK": {"S": "late#1"}, "SK": {"S": "S"}})
    # The run followed its own delete (the item is gone) with the REMOVE the stream carries: the action ran once;
    # the live function then gets the real REMOVE, and the ledger keeps it at once.
    assert [m["keys"]["PK"] for m in env.messages(env.due_queue_url)] == ["late#1"]
    ttl.handle_batch(env.event(), env.config)
    assert env.messages(env.due_queue_url) == []

    again, finished, _ = run(env, function)
    assert finished and (again.acted, again.failed) == (0, 0)
    assert env.messages(env.due_queue_url) == []


def test_precise_a_live_change_of_the_ttl_during_the_run_wins(env: Env) -> None:
    ttl_config(env, precise=True)
    ahead = NOW + timedelta(days=1)
    env.put({"PK": "session#1", "SK": "S", "dueAt": epoch(ahead)})
    env.stream.read()
    function = consumer(env)
    handle = function.handle
    live = env.config
    calls = {"n": 0}

    def racing(event: Any, config: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            env.put({"PK": "session#1", "SK": "S", "dueAt": epoch(ahead) + 3600})
            ttl.handle_batch(env.event(), live)  # the live function makes the new time's schedule first
        return handle(event, config)  # then the run's stale INSERT overwrites it, until the run follows the item

    function.handle = racing
    tally, finished, _ = run(env, function, segments=1)

    assert finished and tally.failed == 0
    assert held_values(env) == {"session#1": str(epoch(ahead) + 3600)}


def test_reconcile_repairs_a_schedule_that_holds_another_time(env: Env) -> None:
    ttl_config(env, precise=True)
    ahead = NOW + timedelta(days=1)
    env.put({"PK": "session#1", "SK": "S", "dueAt": epoch(ahead)})
    ttl.handle_batch(env.event(), env.config)
    # Drift: the item's TTL changed while the stream was down.
    env.put({"PK": "session#1", "SK": "S", "dueAt": epoch(ahead) + 600})
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "reconcile", "--dry-run")
    assert status == 0 and any("reschedule" in line for line in lines), lines
    assert held_values(env) == {"session#1": str(epoch(ahead))}

    status, lines = command(function, "reconcile")
    assert status == 0, lines
    assert held_values(env) == {"session#1": str(epoch(ahead) + 600)}


def test_plain_ttl_makes_nothing_and_reports_items_past_their_ttl(env: Env) -> None:
    ttl_config(env, precise=False)
    env.put({"PK": "old#1", "SK": "S", "dueAt": epoch(NOW - timedelta(days=3))})
    env.put({"PK": "new#1", "SK": "S", "dueAt": epoch(NOW + timedelta(days=3))})
    env.put({"PK": "none#1", "SK": "S"})
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "backfill")

    assert status == 0
    assert function.invoked == []
    assert any("1 past its TTL, not deleted yet" in line and "old#1" in line for line in lines), lines
