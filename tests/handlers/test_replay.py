"""A cancel handled before its minute holds through Lambda's replays, as AWS replays: from a sequence number with
every record after it (a retry, a bisected batch's halves), possibly much later, even once the due time has passed.

Within a shard Lambda never moves past a batch until it succeeds, so an INSERT is never replayed without the REMOVE
that followed it; what it can do is replay the INSERT in one batch and the REMOVE in the next (a bisected batch, a
retry whose batch is cut short), and the REMOVE's batch may be handled only once the due minute has begun."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta
from typing import Any

import eventbridge
import pytest
from botocore.exceptions import ClientError
from st_core.clients import CLIENTS

from tests.handlers.conftest import Env, SchedulerClock
from tests.handlers.test_eventbridge import ON_THE_MINUTE, LastInstant, deliveries, iso

# When the replayed batches are handled, relative to the due minute: (the INSERT's batch, the REMOVE's batch).
REPLAYS = [
    pytest.param(-120, -115, id="both-before-the-minute"),
    pytest.param(-30, 5, id="insert-before-the-minute-remove-in-it"),
    pytest.param(-5, 5, id="insert-within-the-lead-remove-in-the-minute"),
    pytest.param(-30, 600, id="insert-before-the-minute-remove-after-the-due-time"),
    pytest.param(30, 35, id="both-after-the-due-time"),
    pytest.param(3600, 3605, id="both-an-hour-late"),
    # Stricter than AWS: the INSERT alone, its REMOVE never handled again (the local cloud's redelivery emulation).
    pytest.param(-30, None, id="insert-alone-before-the-minute"),
]


def cancelled_then_replayed(env: Env, insert_at: int, remove_at: int | None, *, one_batch: bool) -> None:
    """An item due on the minute, inserted and deleted minutes before (each batch handled at once, so the cancel
    is handled well before the minute), then the stream replayed from the INSERT: in one batch, or the INSERT in
    one and the REMOVE in the next, each handled at its own instant (seconds from the due minute)."""
    env.put({"PK": "p", "SK": "s", "dueAt": iso(ON_THE_MINUTE)})
    inserted_at = ON_THE_MINUTE - timedelta(minutes=3)
    insert = env.event(at=inserted_at)
    assert handle(insert, env, inserted_at) == {"batchItemFailures": []}
    env.delete("p", "s")
    removed_at = ON_THE_MINUTE - timedelta(minutes=2, seconds=50)
    remove = env.event(at=removed_at)
    assert handle(remove, env, removed_at) == {"batchItemFailures": []}
    assert env.schedules() == []
    first = ON_THE_MINUTE + timedelta(seconds=insert_at)
    if one_batch and remove_at is not None:
        assert handle({"Records": insert["Records"] + remove["Records"]}, env, first) == {"batchItemFailures": []}
        return
    assert handle(insert, env, first) == {"batchItemFailures": []}
    if remove_at is not None:
        assert handle(remove, env, ON_THE_MINUTE + timedelta(seconds=remove_at)) == {"batchItemFailures": []}


def handle(batch: dict[str, Any], env: Env, moment: datetime) -> Any:
    return eventbridge.handle_batch(copy.deepcopy(batch), env.config, now=lambda: moment)


@pytest.mark.parametrize("one_batch", [False, True], ids=["two-batches", "one-batch"])
@pytest.mark.parametrize(("insert_at", "remove_at"), REPLAYS)
@pytest.mark.parametrize("scheduler", [SchedulerClock, LastInstant], ids=["any-instant", "last-instant"])
def test_a_cancel_handled_before_its_minute_holds_when_the_stream_is_replayed(
    env: Env, scheduler: type[SchedulerClock], insert_at: int, remove_at: int | None, one_batch: bool
) -> None:
    clock = scheduler(env)
    cancelled_then_replayed(env, insert_at, remove_at, one_batch=one_batch)
    assert deliveries(env, clock) == []


@pytest.mark.parametrize(("insert_at", "remove_at"), REPLAYS)
def test_with_offsets_every_cancelled_reminder_stays_cancelled_under_replay(
    env: Env, insert_at: int, remove_at: int | None
) -> None:
    # An offset of 0 and one of a minute before: the earlier one's minute has begun by the INSERT's replay in some
    # of these timings, the other's not yet.
    config = copy.deepcopy(env.config)
    config["eventbridge"]["offsets"] = [-60, 0]
    env.config = config
    clock = LastInstant(env)
    cancelled_then_replayed(env, insert_at, remove_at, one_batch=False)
    assert deliveries(env, clock) == []


def item_reads(env: Env) -> list[tuple[str, dict[str, Any]]]:
    """Every read of the env's table the handler makes, as (operation, request), in order."""
    reads: list[tuple[str, dict[str, Any]]] = []

    def noted(params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name == "GetItem" and params.get("TableName") == env.table:
            reads.append((model.name, params))
        if model.name == "BatchGetItem" and env.table in params.get("RequestItems", {}):
            reads.append((model.name, params["RequestItems"][env.table]))

    CLIENTS.get("dynamodb").meta.events.register("before-parameter-build.dynamodb", noted)
    return reads


def test_a_live_item_is_still_scheduled_with_one_read_of_the_batchs_items(env: Env) -> None:
    # The cost of the check: one consistent BatchGetItem for the batch, of the items whose records schedule (none
    # for a record that makes no schedule), and no read per schedule.
    reads = item_reads(env)
    clock = SchedulerClock(env)
    for sk in ("a", "b", "c"):
        env.put({"PK": "p", "SK": sk, "dueAt": iso(ON_THE_MINUTE)})
    env.put({"PK": "p", "SK": "none", "note": "no due time"})
    moment = ON_THE_MINUTE - timedelta(minutes=10)
    assert handle(env.event(at=moment), env, moment) == {"batchItemFailures": []}
    ((operation, request),) = reads
    assert operation == "BatchGetItem" and request["ConsistentRead"] is True
    assert sorted(k["SK"]["S"] for k in request["Keys"]) == ["a", "b", "c"]
    assert deliveries(env, clock) == [ON_THE_MINUTE] * 3


def test_a_large_batch_reads_100_keys_a_call_and_asks_again_for_keys_left_unprocessed(env: Env) -> None:
    # DynamoDB takes at most 100 keys per BatchGetItem and may leave some unprocessed (a partition over its
    # throughput): those are asked for again, and every item is scheduled, none read on its own.
    reads = item_reads(env)
    left_out: list[int] = []

    def leave_some_unprocessed(parsed: dict[str, Any], **_: Any) -> None:
        found = parsed.get("Responses", {}).get(env.table, [])
        if not left_out and len(found) > 10:
            kept, unprocessed = found[:-10], found[-10:]
            parsed["Responses"][env.table] = kept
            keys = [{"PK": i["PK"], "SK": i["SK"]} for i in unprocessed]
            parsed["UnprocessedKeys"] = {env.table: {"Keys": keys, "ConsistentRead": True}}
            left_out.append(len(keys))

    CLIENTS.get("dynamodb").meta.events.register("after-call.dynamodb.BatchGetItem", leave_some_unprocessed)
    for n in range(210):
        env.put({"PK": "p", "SK": f"{n:03d}", "dueAt": iso(ON_THE_MINUTE)})
    moment = ON_THE_MINUTE - timedelta(minutes=10)
    assert handle(env.event(at=moment), env, moment) == {"batchItemFailures": []}
    assert left_out == [10]
    assert sorted(len(r["Keys"]) for op, r in reads) == [10, 10, 100, 100] and {op for op, _ in reads} == {
        "BatchGetItem"
    }
    assert len(env.schedules()) == 210


def test_an_item_the_batch_read_could_not_settle_is_read_on_its_own(env: Env) -> None:
    # The batch read throttled (its retries spent): the items are read one by one, each failure handled per item.
    def throttled(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}}, "BatchGetItem"
        )

    reads = item_reads(env)
    CLIENTS.get("dynamodb").meta.events.register("before-call.dynamodb.BatchGetItem", throttled)
    for sk in ("a", "b"):
        env.put({"PK": "p", "SK": sk, "dueAt": iso(ON_THE_MINUTE)})
    moment = ON_THE_MINUTE - timedelta(minutes=10)
    assert handle(env.event(at=moment), env, moment) == {"batchItemFailures": []}
    assert sorted(op for op, _ in reads) == ["BatchGetItem", "GetItem", "GetItem"]
    assert len(env.schedules()) == 2


@pytest.mark.parametrize("handled_before_the_newer_one", [False, True], ids=["after", "before"])
def test_an_old_batch_handled_again_never_puts_older_data_back_into_a_schedule(
    env: Env, handled_before_the_newer_one: bool
) -> None:
    # A newer write keeps the due time and changes the payload; the older batch comes again (Lambda retrying it, a
    # redrive): the schedule keeps the newer payload. With "before", the old batch's first run had not been
    # handled when the item changed (the newer record's batch is still to come).
    env.put({"PK": "p", "SK": "s", "dueAt": iso(ON_THE_MINUTE), "note": "older"})
    moment = ON_THE_MINUTE - timedelta(minutes=30)
    older = env.event(at=moment)
    if not handled_before_the_newer_one:
        assert handle(older, env, moment) == {"batchItemFailures": []}
    env.put({"PK": "p", "SK": "s", "dueAt": iso(ON_THE_MINUTE), "note": "newer"})
    newer = env.event(at=moment + timedelta(minutes=1))
    if handled_before_the_newer_one:
        assert handle(older, env, moment + timedelta(minutes=2)) == {"batchItemFailures": []}
    assert handle(newer, env, moment + timedelta(minutes=2)) == {"batchItemFailures": []}
    assert handle(older, env, moment + timedelta(minutes=3)) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert json.loads(schedule["Target"]["Input"])["item"]["note"] == "newer"
