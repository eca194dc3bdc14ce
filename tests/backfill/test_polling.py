"""Backfill of a polling table: items without the mode's status get their due index entry through the assigner
(the same conditional write a fresh write gets); twice changes nothing; a live write racing the run wins (a deleted
item is not brought back, a moved one keeps its new time); reconcile re-indexes a waiting item whose entry
disagrees with its time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import polling_assign
from st_core.pending import DUE, SHARD, STATUS, shard_of
from st_core.stream import identity_of

from tests.backfill.conftest import command, consumer, polling_config, run
from tests.handlers.conftest import Env

NOW = datetime.now(UTC).replace(microsecond=0)


def epoch(moment: datetime) -> int:
    return int(moment.timestamp())


def item(env: Env, pk: str) -> dict[str, Any] | None:
    found = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": pk}, "SK": {"S": "T"}}, ConsistentRead=True)
    return found.get("Item")


def indexed(env: Env, pk: str, due: int) -> bool:
    found = item(env, pk) or {}
    shard = shard_of(identity_of({"PK": {"S": pk}, "SK": {"S": "T"}}), env.config["polling"]["shards"])
    return (
        found.get(STATUS) == {"S": "PENDING"}
        and found.get(DUE) == {"N": str(due)}
        and found.get(SHARD) == {"N": str(shard)}
    )


def test_existing_items_are_indexed_once_through_the_assigner(env: Env) -> None:
    polling_config(env)
    due = epoch(NOW + timedelta(hours=1))
    for n in range(5):
        env.put({"PK": f"task#{n}", "SK": "T", "dueAt": due + n})
    env.put({"PK": "late#1", "SK": "T", "dueAt": epoch(NOW - timedelta(days=1))})
    env.stream.read()
    function = consumer(env)

    tally, finished, _ = run(env, function)

    assert finished and tally.failed == 0 and tally.acted == 6
    assert all(indexed(env, f"task#{n}", due + n) for n in range(5))
    assert indexed(env, "late#1", epoch(NOW - timedelta(days=1)))  # past due: the next tick runs it

    again, finished, _ = run(env, function)
    assert finished and (again.acted, again.skipped) == (0, 6)


def test_a_live_delete_or_move_racing_the_run_wins(env: Env) -> None:
    polling_config(env)
    due = epoch(NOW + timedelta(hours=1))
    for n in range(3):
        env.put({"PK": f"task#{n}", "SK": "T", "dueAt": due})
    env.stream.read()
    function = consumer(env)
    handle = function.handle
    live = env.config

    def racing(event: Any, config: Any) -> Any:
        env.delete("task#0", "T")
        env.put({"PK": "task#1", "SK": "T", "dueAt": due + 900})
        polling_assign.handle_assign_batch(env.event(), live)
        return handle(event, config)

    function.handle = racing
    tally, finished, _ = run(env, function, segments=1)

    assert finished and tally.failed == 0
    assert item(env, "task#0") is None  # not brought back as a phantom
    assert indexed(env, "task#1", due + 900)
    assert indexed(env, "task#2", due)


def test_reconcile_reindexes_a_waiting_item_whose_entry_disagrees(env: Env) -> None:
    polling_config(env)
    due = epoch(NOW + timedelta(hours=1))
    env.put({"PK": "task#1", "SK": "T", "dueAt": due})
    env.put({"PK": "task#2", "SK": "T", "dueAt": due})
    polling_assign.handle_assign_batch(env.event(), env.config)
    env.ddb.update_item(
        TableName=env.table,
        Key={"PK": {"S": "task#1"}, "SK": {"S": "T"}},
        UpdateExpression="SET #due = :wrong",
        ExpressionAttributeNames={"#due": DUE},
        ExpressionAttributeValues={":wrong": {"N": str(due + 86400)}},
    )
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "reconcile", "--dry-run")
    assert status == 0 and any("1 would re-index" in line and "task#1" in line for line in lines), lines
    assert not indexed(env, "task#1", due)

    status, lines = command(function, "reconcile")
    assert status == 0, lines
    assert indexed(env, "task#1", due) and indexed(env, "task#2", due)
    assert any("1 re-indexed" in line for line in lines), lines


def test_an_interrupted_run_resumes_and_indexes_each_item_once(env: Env, tmp_path: Any) -> None:
    polling_config(env)
    due = epoch(NOW + timedelta(hours=1))
    for n in range(30):
        env.put({"PK": f"task#{n}", "SK": "T", "dueAt": due})
    env.stream.read()
    function = consumer(env)
    checkpoint = tmp_path / "cp.json"
    pages = {"n": 0}

    def stop() -> bool:
        pages["n"] += 1
        return pages["n"] >= 2

    _, finished, _ = run(env, function, checkpoint=checkpoint, page_items=5, stop=stop)
    assert not finished
    tally, finished, _ = run(env, function, checkpoint=checkpoint, page_items=5)

    assert finished and tally.scanned == 30 and tally.acted == 30
    fed_keys = [r["dynamodb"]["Keys"]["PK"]["S"] for batch in function.invoked for r in batch]
    assert sorted(fed_keys) == sorted(f"task#{n}" for n in range(30))  # each exactly once
    assert all(indexed(env, f"task#{n}", due) for n in range(30))


def test_the_read_ceiling_holds_on_the_runs_timeline(env: Env) -> None:
    from tests.backfill.conftest import FakeTime
    from tests.redrive.conftest import aws

    polling_config(env)
    for n in range(40):
        env.put({"PK": f"task#{n}", "SK": "T", "dueAt": epoch(NOW + timedelta(hours=1))})
    env.stream.read()
    function = consumer(env)
    fake = FakeTime()
    scans: list[tuple[float, float]] = []  # (moment, units) of each scan page
    real = aws(function)

    class Counted:
        def __init__(self, client: Any) -> None:
            self.client = client

        def __getattr__(self, name: str) -> Any:
            return getattr(self.client, name)

        def scan(self, **request: Any) -> Any:
            moment = fake.now
            page = self.client.scan(**request)
            units = float((page.get("ConsumedCapacity") or {}).get("CapacityUnits") or request["Limit"] * 0.5)
            scans.append((moment, units))
            return page

    def client(service: str) -> Any:
        return Counted(real(service)) if service == "dynamodb" else real(service)

    rate = 2.0
    tally, finished, _ = run(env, function, segments=1, page_items=4, reads=rate, time=fake, client=client)

    assert finished and tally.acted == 40
    used = 0.0
    for moment, units in scans:
        assert used <= rate * (moment - 1000.0) + rate + 1e-6  # what was read before each page fits the ceiling
        used += units
    assert fake.now - 1000.0 >= (used - 2 * rate) / rate


def test_an_item_the_assigner_parks_is_reported_failed(env: Env) -> None:
    polling_config(env)
    env.put({"PK": "task#1", "SK": "T", "dueAt": epoch(NOW + timedelta(hours=1))})
    env.put({"PK": "task#2", "SK": "T", "note": "no time, no delay"})
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "backfill")

    assert status == 1, lines
    assert any("1 not indexed (the assigner parked it" in line and "task#2" in line for line in lines), lines
    assert [m["record"]["dynamodb"]["Keys"]["PK"]["S"] for m in env.messages(env.poison_url)] == ["task#2"]


def test_an_item_replaced_between_scan_and_feed_while_the_live_function_is_behind_is_not_reported_parked(
    env: Env,
) -> None:
    """The scan reads the item; a live write replaces it before the feed; the live function has not reached that
    write's record yet. The assigner's condition refuses the scanned version, so the item is briefly without a
    status: not a failure (the poison queue is empty), and once the live function runs, the index is right."""
    polling_config(env)
    due = epoch(NOW + timedelta(hours=1))
    env.put({"PK": "task#1", "SK": "T", "dueAt": due})
    env.stream.read()
    function = consumer(env)
    handle = function.handle
    live = env.config

    def racing(event: Any, config: Any) -> Any:
        env.put({"PK": "task#1", "SK": "T", "dueAt": due + 600})  # its record waits in the stream
        return handle(event, config)

    function.handle = racing
    status, lines = command(function, "backfill")

    assert status == 0, lines
    assert not any("parked" in line for line in lines), lines
    assert any("1 replaced meanwhile" in line for line in lines), lines
    assert env.messages(env.poison_url) == []
    polling_assign.handle_assign_batch(env.event(), live)  # the live function catches up
    assert indexed(env, "task#1", due + 600)
