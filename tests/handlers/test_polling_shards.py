"""polling when `shards` changes, against moto: the assigner indexes each new item on a shard below the current
count, and an entry stays on its shard until it leaves the index, so entries a higher count put above a lowered one
are drained by the processor until those shards are empty (the ledger keeps the highest count still in use); a
raised count takes every old entry as before. A stack's first tick, with no record of the count (made before the
record was kept), probes every shard a configuration may have."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import polling
import pytest
from st_core.pending import SHARD, shard_of
from st_core.stream import identity_of

from tests.handlers.conftest import Env, with_due_index
from tests.handlers.test_polling import NOW, assign, due_keys, item
from tests.handlers.test_polling_backlog import CountingClients

LEASE = 90  # the env's leaseSeconds


@pytest.fixture
def polling_env(env: Env) -> Iterator[Env]:
    yield with_due_index(env)


def keys_on(shard: int, shards: int, count: int, prefix: str) -> list[str]:
    """`count` partition keys the assigner puts on `shard` of `shards` (their SK is "T")."""
    found: list[str] = []
    n = 0
    while len(found) < count:
        pk = f"{prefix}{n}"
        if shard_of(identity_of({"PK": {"S": pk}, "SK": {"S": "T"}}), shards) == shard:
            found.append(pk)
        n += 1
    return found


def write(env: Env, pks: list[str], due: float) -> None:
    """Users write the items with their time; the assigner (with the env's config) indexes them."""
    for pk in pks:
        env.put({"PK": pk, "SK": "T", "dueAt": int(due)})
    assert assign(env) == {"batchItemFailures": []}


def record(env: Env) -> dict[str, Any]:
    found: dict[str, Any] = env.ddb.get_item(
        TableName=env.config["polling"]["ledgerTable"], Key=polling.SHARDS_RECORD, ConsistentRead=True
    ).get("Item", {})
    return {name: int(value["N"]) for name, value in found.items() if "N" in value}


def shards_queried(clients: CountingClients) -> set[int]:
    return {int(q["ExpressionAttributeValues"][":shard"]["N"]) for q in clients.queries}


def tick(env: Env, now: float, clients: CountingClients | None = None) -> Any:
    return polling.process(env.config, clients=clients or CountingClients(), now=lambda: now)  # type: ignore[arg-type]


def test_items_waiting_on_shard_7_are_all_delivered_after_shards_is_lowered_to_4(polling_env: Env) -> None:
    # GIVEN a stack with 8 shards whose assigner put items on shard 7, some due now and some in an hour
    now_due, later = keys_on(7, 8, 3, "now"), keys_on(7, 8, 2, "later")
    write(polling_env, now_due, NOW - 5)
    write(polling_env, later, NOW + 3600)
    assert {int(item(polling_env, pk)[SHARD]["N"]) for pk in now_due + later} == {7}
    # WHEN the user lowers shards to 4 (the deploy changes the config only: the entries stay on shard 7)
    polling_env.configure(shards=4)
    # THEN the next ticks still take shard 7: what is due now, then what is due in an hour
    assert tick(polling_env, NOW).dispatched == 3
    assert due_keys(polling_env) == sorted(now_due)
    assert record(polling_env)["shards"] == 8  # shard 7 still holds the later items
    assert tick(polling_env, NOW + 3600).dispatched == 2
    assert due_keys(polling_env) == sorted(later)
    # AND once every shard above 4 is empty (and an assigner of the old count can no longer be running), the
    # record comes down to 4 and ticks query shards 0-3 only
    assert tick(polling_env, NOW + 3600 + LEASE).dispatched == 0
    assert record(polling_env)["shards"] == 4
    quiet = CountingClients()
    tick(polling_env, NOW + 3700, quiet)
    assert shards_queried(quiet) == {0, 1, 2, 3}


def test_new_items_after_the_change_go_on_the_new_shards_and_old_ones_still_run(polling_env: Env) -> None:
    old = keys_on(6, 8, 2, "old")
    write(polling_env, old, NOW - 5)
    polling_env.configure(shards=4)
    new = keys_on(2, 4, 2, "new")
    write(polling_env, new, NOW - 5)
    assert {int(item(polling_env, pk)[SHARD]["N"]) for pk in new} == {2}
    assert tick(polling_env, NOW).dispatched == 4
    assert due_keys(polling_env) == sorted(old + new)


def test_an_entry_an_old_assigner_writes_within_a_lease_of_the_change_is_not_stranded(polling_env: Env) -> None:
    # GIVEN shards lowered from 8 to 4, shard 7 empty when the first tick of the new count looks
    polling_env.configure(shards=4)
    assert tick(polling_env, NOW).dispatched == 0
    assert record(polling_env) == {"shards": 8, "config": 4, "since": int(NOW)}
    # WHEN an assigner still running with the old count (its batch began before the deploy) indexes onto shard 7
    polling_env.configure(shards=8)
    late = keys_on(7, 8, 1, "late")
    write(polling_env, late, NOW + 30)
    polling_env.configure(shards=4)
    # THEN the record was not lowered meanwhile, and the entry runs
    assert tick(polling_env, NOW + 30).dispatched == 1
    assert due_keys(polling_env) == late


def test_a_first_tick_without_a_record_finds_entries_a_higher_count_left(polling_env: Env) -> None:
    # GIVEN a stack from before the record was kept, its entries on shards up to 11, then lowered to 4
    polling_env.configure(shards=12)
    high = keys_on(11, 12, 2, "high")
    write(polling_env, high, NOW - 5)
    polling_env.ddb.delete_item(TableName=polling_env.config["polling"]["ledgerTable"], Key=polling.SHARDS_RECORD)
    polling_env.configure(shards=4)
    # THEN its first tick probes every shard a configuration may have, and delivers them
    probing = CountingClients()
    assert tick(polling_env, NOW, probing).dispatched == 2
    assert shards_queried(probing) == set(range(polling.MAX_SHARDS))
    assert due_keys(polling_env) == sorted(high)
    assert record(polling_env)["shards"] == 12


def test_raising_shards_takes_the_old_entries_and_the_new_ones(polling_env: Env) -> None:
    polling_env.configure(shards=4)
    polling_env.ddb.delete_item(TableName=polling_env.config["polling"]["ledgerTable"], Key=polling.SHARDS_RECORD)
    old = keys_on(3, 4, 2, "old")
    write(polling_env, old, NOW + 60)
    assert tick(polling_env, NOW).dispatched == 0
    assert record(polling_env)["shards"] == 4
    # WHEN shards is raised to 8: new items spread over 8 shards, old ones stay on shard 3
    polling_env.configure(shards=8)
    new = keys_on(7, 8, 2, "new")
    write(polling_env, new, NOW + 60)
    assert tick(polling_env, NOW + 60).dispatched == 4
    assert due_keys(polling_env) == sorted(old + new)
    assert record(polling_env)["shards"] == 8


def test_a_fanned_out_tick_hands_out_the_old_shards_too(polling_env: Env) -> None:
    # GIVEN entries on shard 7 of 8, shards lowered to 4, fanned out over 2 groups
    high = keys_on(7, 8, 1, "high")
    write(polling_env, high, NOW - 5)
    polling_env.configure(shards=4, shard_groups=2)
    invoked: list[dict[str, Any]] = []

    class Invoker:
        def invoke(self, **kwargs: Any) -> None:
            invoked.append(kwargs)

    class Clients(CountingClients):
        def get(self, service: str) -> Any:
            return Invoker() if service == "lambda" else super().get(service)

    clients = Clients()
    fanned = polling.fan_out(polling_env.config, "processor", clients=clients, now=lambda: NOW)  # type: ignore[arg-type]
    assert fanned.due_shards == [7] and fanned.invoked == [[1, 3, 5, 7]]
    # AND the group's invocation takes shard 7
    group = polling.process(polling_env.config, now=lambda: NOW, shards=[1, 3, 5, 7])
    assert group.dispatched == 1 and due_keys(polling_env) == high
