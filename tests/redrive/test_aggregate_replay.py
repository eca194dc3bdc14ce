"""A parked score redriven long after it was made (aggregate): a score whose total could not be written (not a
number) is parked with the groups it was not applied to; fixed and redriven a day later, it counts once, and a
second replay of the same message (its delete lost) counts nothing. A record that was applied and comes back after
the horizon is still never counted again.

Before: the replay a day later was beyond the handler's record-age horizon (maximum record age + timeout + margin,
66 minutes by default) and was parked again, for good."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import aggregate

from tests.handlers.conftest import Env
from tests.redrive.conftest import Function, bodies, run
from tests.redrive.test_stream_and_target import scores

DAY = 86400.0


def at(function: Function, clock: Callable[[], float]) -> None:
    """The consumer's clock from now on (its records keep the creation time the stream gave them)."""
    function.handle = lambda event, config: aggregate.handle_batch(event, config, now=clock)


def total(env: Env, user: str) -> Any:
    item = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": user}, "SK": {"S": "TOTAL"}}, ConsistentRead=True)
    return item["Item"]["totalScore"]


def broken_total(env: Env, user: str) -> None:
    """The user's total, written by hand as text (the aggregator cannot add to it); its stream record is not a score."""
    env.put({"PK": user, "SK": "TOTAL", "totalScore": "many"})
    env.stream.read()


def test_a_score_parked_unapplied_and_redriven_a_day_later_counts_once(env: Env) -> None:
    function = scores(env)
    broken_total(env, "USER#1")
    env.put({"PK": "SCORE#1", "SK": "USER#1", "Score": 5})
    made = time.time()
    records = env.event()["Records"]
    assert aggregate.handle_batch({"Records": records}, env.config, now=lambda: made + 2) == {"batchItemFailures": []}
    (parked,) = bodies(env, env.poison_url)
    env.put({"PK": "USER#1", "SK": "TOTAL", "totalScore": 0})  # fixed
    env.stream.read()

    at(function, lambda: made + DAY)
    status, lines = run("poison", function)

    assert status == 0, lines
    assert total(env, "USER#1") == {"N": "5"} and bodies(env, env.poison_url) == [], lines
    assert len(parked["record"][aggregate.UNAPPLIED]) == 1  # parked as not applied to USER#1

    # The same message again, two days on (the redrive's delete of it was lost): nothing is counted twice.
    env.sqs.send_message(QueueUrl=env.poison_url, MessageBody=json.dumps(parked))
    at(function, lambda: made + 2 * DAY)
    status, lines = run("poison", function)

    assert status == 0, lines
    assert total(env, "USER#1") == {"N": "5"} and bodies(env, env.poison_url) == [], lines


def test_a_parked_move_between_groups_replays_only_to_the_group_it_was_not_applied_to(env: Env) -> None:
    """`onChange="adjust"`: a score moves from USER#2 to USER#1, whose total cannot be written. USER#2's part is
    applied; the record is parked for USER#1 only, and its replay a day later adds to USER#1 and leaves USER#2."""
    from components.modes.aggregate import aggregate_filters

    function = scores(env)
    env.configure(on_change="adjust")
    env.configure(group_from="user")  # not a key: an item can move between groups
    function.filters = aggregate_filters("PK", "SCORE", "adjust")
    env.put({"PK": "SCORE#1", "SK": "S", "user": "USER#2", "Score": 5})
    made = time.time()
    aggregate.handle_batch(env.event(), env.config, now=lambda: made + 1)
    broken_total(env, "USER#1")
    env.put({"PK": "SCORE#1", "SK": "S", "user": "USER#1", "Score": 5})  # moved to USER#1
    assert aggregate.handle_batch(env.event(), env.config, now=lambda: made + 2) == {"batchItemFailures": []}
    assert total(env, "USER#2") == {"N": "0"}
    (parked,) = bodies(env, env.poison_url)
    env.put({"PK": "USER#1", "SK": "TOTAL", "totalScore": 0})
    env.stream.read()

    at(function, lambda: made + DAY)
    status, lines = run("poison", function)

    assert status == 0, lines
    assert (total(env, "USER#1"), total(env, "USER#2")) == ({"N": "5"}, {"N": "0"}), lines
    assert len(parked["record"][aggregate.UNAPPLIED]) == 1  # USER#1's part only


def test_a_score_applied_and_brought_back_after_the_horizon_is_still_not_counted_again(env: Env) -> None:
    """The other side: a record that was applied (its id on the total) and comes back after the horizon, where its
    id is gone (a stream DLQ range redriven late): it is parked with the reason, never counted a second time."""
    function = scores(env)
    env.put({"PK": "SCORE#1", "SK": "USER#1", "Score": 5})
    made = time.time()
    records = env.event()["Records"]
    aggregate.handle_batch({"Records": records}, env.config, now=lambda: made + 1)

    at(function, lambda: made + DAY)
    function.handle({"Records": records}, env.config)

    assert total(env, "USER#1") == {"N": "5"}
    (parked,) = bodies(env, env.poison_url)
    assert "horizon" in parked["reason"] and aggregate.UNAPPLIED not in parked["record"]
