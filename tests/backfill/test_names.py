"""One name per occurrence, whichever path names it and whichever order a stream record lists the keys in (AWS's
records may list the sort key first; the handler tests' records do): the live function, backfill and reconcile name
an occurrence alike, its readable part in the table's key order. And an upgrade from the versions that named it
after the record's order neither orphans nor doubles what they made: their schedules and ledger entries are still
found by cancels, moves, payload updates, deliveries and reconcile."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import eventbridge
from st_core.naming import schedule_name
from st_core.stream import identity_of
from st_core.timeparse import format_due

from tests.backfill.conftest import command, consumer
from tests.handlers.conftest import Env

NOW = datetime.now(UTC).replace(microsecond=0)
DUE = (NOW + timedelta(days=2)).replace(second=0)


def typed(pk: str) -> dict[str, Any]:
    return {"SK": {"S": "A"}, "PK": {"S": pk}}  # as AWS's records list them: the sort key first


def earlier_name(pk: str, due: datetime) -> str:
    """The name earlier versions gave the occurrence from an AWS record: the key values in the record's order (sort
    key first), the same hash of the canonical keys and due time (their `naming.occurrence_id`, written out)."""
    return schedule_name(f"{identity_of(typed(pk))}\x1f{format_due(due)}", f"A-{pk}")


def names(env: Env) -> set[str]:
    return {s["Name"] for s in env.schedules()}


def live(env: Env, now: datetime | None = None) -> None:
    """The live function on the stream's new records (changes made at `now`, its clock, when given)."""
    clock = (lambda: now) if now is not None else (lambda: datetime.now(UTC))
    assert eventbridge.handle_batch(env.event(at=now), env.config, now=clock) == {"batchItemFailures": []}


def left_by_an_earlier_version(env: Env, pk: str, due: datetime) -> str:
    """The item's schedule and ledger marker as an earlier version left them: under `earlier_name`, its due event
    carrying that name as its occurrenceId. (What the live function made is renamed so.)"""
    old = earlier_name(pk, due)
    (schedule,) = [s for s in env.schedules() if json.loads(s["Target"]["Input"])["keys"]["PK"] == pk]
    ledger = env.config["eventbridge"]["ledgerTable"]
    if schedule["Name"] != old:
        target = dict(schedule["Target"])
        target["Input"] = json.dumps({**json.loads(target["Input"]), "occurrenceId": old})
        keep = ("ScheduleExpression", "ScheduleExpressionTimezone", "FlexibleTimeWindow", "ActionAfterCompletion")
        env.scheduler.create_schedule(
            Name=old, GroupName=env.group, Target=target, **{k: schedule[k] for k in keep if k in schedule}
        )
        env.scheduler.delete_schedule(Name=schedule["Name"], GroupName=env.group)
        marker = env.ddb.get_item(TableName=ledger, Key={"id": {"S": schedule["Name"]}})["Item"]
        env.ddb.delete_item(TableName=ledger, Key={"id": {"S": schedule["Name"]}})
        env.ddb.put_item(TableName=ledger, Item={**marker, "id": {"S": old}})
    return old


def test_the_live_function_backfill_and_reconcile_give_an_occurrence_one_name(env: Env) -> None:
    """The live function names the occurrence from an AWS record (sort key first); a later backfill and reconcile
    find its schedule and make no second one under another name (which would fire the occurrence twice)."""
    env.put({"PK": "user-1", "SK": "A", "dueAt": format_due(DUE)})
    live(env)
    (made,) = names(env)
    assert made.startswith("user-1-A-")  # the readable part in the table's key order, whatever the record's
    function = consumer(env)
    for run in ("backfill", "reconcile"):
        status, lines = command(function, run)
        assert status == 0, lines
        assert names(env) == {made}, (run, lines)


def test_schedules_an_earlier_version_made_are_found_by_cancels_moves_and_updates(env: Env) -> None:
    moved = DUE + timedelta(hours=1)
    for pk in ("removed", "moved", "rewritten", "kept"):
        env.put({"PK": pk, "SK": "A", "dueAt": format_due(DUE), "note": "v1"})
    live(env)
    old = {pk: left_by_an_earlier_version(env, pk, DUE) for pk in ("removed", "moved", "rewritten", "kept")}
    assert names(env) == set(old.values())

    env.delete("removed", "A")
    env.put({"PK": "moved", "SK": "A", "dueAt": format_due(moved), "note": "v1"})
    env.put({"PK": "rewritten", "SK": "A", "dueAt": format_due(DUE), "note": "v2"})  # same time, new payload
    live(env)

    by_item = {json.loads(s["Target"]["Input"])["keys"]["PK"]: s for s in env.schedules()}
    assert sorted(by_item) == ["kept", "moved", "rewritten"] and len(env.schedules()) == 3  # none doubled
    assert by_item["kept"]["Name"] == old["kept"]  # untouched: found, not renamed
    assert by_item["moved"]["ScheduleExpression"] == f"at({format_due(moved)[:-1]})"
    assert json.loads(by_item["rewritten"]["Target"]["Input"])["item"]["note"] == "v2"
    ledger = env.config["eventbridge"]["ledgerTable"]
    markers = {i["id"]["S"] for i in env.ddb.scan(TableName=ledger)["Items"] if i["status"]["S"] == "SCHEDULED"}
    assert markers == {s["Name"] for s in env.schedules()}  # the cancelled and replaced ones' markers went too


def test_reconcile_keeps_an_earlier_versions_schedule_and_removes_a_second_copy(env: Env) -> None:
    for pk in ("single", "doubled"):
        env.put({"PK": pk, "SK": "A", "dueAt": format_due(DUE)})
    live(env)
    single = left_by_an_earlier_version(env, "single", DUE)
    doubled = left_by_an_earlier_version(env, "doubled", DUE)
    # An earlier version's batch handed again to this one (Lambda redelivers a batch whole, at any later time):
    # the occurrence was scheduled again under its own name.
    records = [r for r in env.stream.since(0) if r["dynamodb"]["NewImage"]["PK"]["S"] == "doubled"]
    assert eventbridge.handle_batch({"Records": records}, env.config) == {"batchItemFailures": []}
    assert len(names(env)) == 3
    function = consumer(env)

    status, lines = command(function, "reconcile")

    assert status == 0, lines
    after = names(env)
    assert single in after and doubled not in after and len(after) == 2, lines
    assert any("second copy" in line for line in lines), lines
    status, lines = command(function, "reconcile")
    assert status == 0 and names(env) == after and any("0 acted on" in line for line in lines), lines


def test_an_occurrence_an_earlier_versions_schedule_delivered_is_not_delivered_again(env: Env) -> None:
    """The item's earlier-version schedule fired (its marker stays in the ledger); the item then moves, after the
    time came: the move settles the old time, which its schedule delivered, so nothing is sent again."""
    # Three minutes from the test's own start (the module's NOW may be minutes old in a full run: then the time
    # would already have come and nothing be scheduled).
    now = datetime.now(UTC).replace(microsecond=0)
    due = (now + timedelta(minutes=3)).replace(second=0)
    env.put({"PK": "fired", "SK": "A", "dueAt": format_due(due)})
    live(env, now=now)
    left_by_an_earlier_version(env, "fired", due)
    env.scheduler.delete_schedule(Name=earlier_name("fired", due), GroupName=env.group)  # fired, deleted itself
    env.put({"PK": "fired", "SK": "A", "dueAt": format_due(due + timedelta(days=1))})
    live(env, now=due + timedelta(minutes=5))
    assert env.messages(env.due_queue_url) == []
    assert len(env.schedules()) == 1


def test_precise_ttl_an_earlier_versions_schedule_is_found_by_reconcile_moves_and_deletes(env: Env) -> None:
    """Precise ttl's one schedule per item, named by an earlier version from an AWS record (sort key first):
    reconcile keeps it as the item's, a move replaces it (one schedule, the new time), a delete removes it."""
    import ttl

    from tests.backfill.conftest import ttl_config

    ttl_config(env, precise=True)
    ahead = int((NOW + timedelta(days=1)).timestamp())
    items = ("kept", "moved", "removed")
    for pk in items:
        env.put({"PK": pk, "SK": "A", "dueAt": ahead})
    assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    keep = ("ScheduleExpression", "ScheduleExpressionTimezone", "FlexibleTimeWindow", "ActionAfterCompletion", "Target")
    old = {}
    for schedule in env.schedules():
        pk = json.loads(schedule["Target"]["Input"])["Key"]["PK"]["S"]
        old[pk] = schedule_name(identity_of(typed(pk)), f"A-{pk}")  # an earlier version's name for the item
        if schedule["Name"] != old[pk]:
            env.scheduler.create_schedule(Name=old[pk], GroupName=env.group, **{k: schedule[k] for k in keep})
            env.scheduler.delete_schedule(Name=schedule["Name"], GroupName=env.group)
    assert names(env) == set(old.values())

    status, lines = command(consumer(env), "reconcile")
    assert status == 0, lines
    assert names(env) == set(old.values()), lines  # found, not made again under another name

    env.put({"PK": "moved", "SK": "A", "dueAt": ahead + 3600})
    env.delete("removed", "A")
    assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    held = {json.loads(s["Target"]["Input"])["Key"]["PK"]["S"]: s for s in env.schedules()}
    assert sorted(held) == ["kept", "moved"] and len(env.schedules()) == 2
    assert held["kept"]["Name"] == old["kept"]
    assert json.loads(held["moved"]["Target"]["Input"])["ExpressionAttributeValues"][":due"]["N"] == str(ahead + 3600)
