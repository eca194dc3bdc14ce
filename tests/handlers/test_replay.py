"""A cancel handled before its minute holds through Lambda's replays, as AWS replays: from a sequence number with
every record after it (a retry, a bisected batch's halves), possibly much later, even once the due time has passed.

Within a shard Lambda never moves past a batch until it succeeds, so an INSERT is never replayed without the REMOVE
that followed it; what it can do is replay the INSERT in one batch and the REMOVE in the next (a bisected batch, a
retry whose batch is cut short), and the REMOVE's batch may be handled only once the due minute has begun."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

import eventbridge
import pytest
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


def test_a_live_item_is_still_scheduled_with_one_read_of_it_per_schedule_made(env: Env) -> None:
    # The cost of the check: one consistent GetItem of the item (its due time only) per schedule made, none for a
    # record that makes no schedule.
    reads: list[dict[str, Any]] = []
    CLIENTS.get("dynamodb").meta.events.register(
        "before-parameter-build.dynamodb.GetItem", lambda params, **_: reads.append(params)
    )
    clock = SchedulerClock(env)
    for sk in ("a", "b", "c"):
        env.put({"PK": "p", "SK": sk, "dueAt": iso(ON_THE_MINUTE)})
    env.put({"PK": "p", "SK": "none", "note": "no due time"})
    moment = ON_THE_MINUTE - timedelta(minutes=10)
    assert handle(env.event(at=moment), env, moment) == {"batchItemFailures": []}
    item_reads = [r for r in reads if r["TableName"] == env.table]
    assert len(item_reads) == 3 and all(r["ConsistentRead"] for r in item_reads)
    assert deliveries(env, clock) == [ON_THE_MINUTE] * 3
