"""aggregate handler against moto: scores written to a real table, their stream records read back, totals and
ledger markers checked in the tables themselves."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from aggregate import contributions, handle_batch
from moto.events.models import EventPattern
from st_core.clients import CLIENTS
from st_core.config import HandlerConfig

from components.filters import aggregate_filters, filter_patterns
from tests.handlers.conftest import Env, as_lambda_record


@pytest.fixture
def agg_env(env: Env) -> Iterator[Env]:
    ledger = env.ledger()
    config: HandlerConfig = copy.deepcopy(env.config)
    config["mode"] = "aggregate"
    config.pop("scheduler")
    config["aggregate"] = {
        "sourcePrefix": "SCORE",
        "valueAttribute": "Score",
        "groupFrom": "SK",
        "totalSortKey": "TOTAL",
        "totalAttribute": "totalScore",
        "aggregation": "sum",
        "onChange": "ignore",
        "ledgerTable": ledger,
        "windowSeconds": 3600,
    }
    env.config = config
    yield env


def score(env: Env, n: int, user: str, value: Any) -> None:
    env.put({"PK": f"SCORE#{n}", "SK": f"USER#{user}", "Score": value})


def total(env: Env, user: str) -> Decimal | None:
    found = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": f"USER#{user}"}, "SK": {"S": "TOTAL"}})
    return Decimal(found["Item"]["totalScore"]["N"]) if "Item" in found else None


def seed_filter_only(event: Any, env: Env) -> Any:
    """What Lambda delivers: only the records the mapping's filter lets through."""
    patterns = filter_patterns(aggregate_filters("PK", "SCORE", env.config["aggregate"]["onChange"]))
    kept = [r for r in event["Records"] if any(EventPattern.load(p).matches_event(r) for p in patterns)]
    return {"Records": kept}


def test_totals_are_right_for_many_users_over_many_batches(agg_env: Env) -> None:
    rng = random.Random(7)
    expected: dict[str, int] = {}
    n = 0
    for _batch in range(3):
        for _ in range(40):
            user, value = f"u{rng.randrange(6)}", rng.randrange(1, 100)
            score(agg_env, n, user, value)
            expected[user] = expected.get(user, 0) + value
            n += 1
        assert handle_batch(seed_filter_only(agg_env.event(), agg_env), agg_env.config) == {"batchItemFailures": []}
    assert {u: total(agg_env, u) for u in expected} == {u: Decimal(v) for u, v in expected.items()}


def test_one_write_per_group_per_batch(agg_env: Env) -> None:
    for n in range(30):
        score(agg_env, n, f"u{n % 3}", 1)
    calls: list[str] = []
    CLIENTS.get("dynamodb").meta.events.register(
        "before-call.dynamodb.TransactWriteItems", lambda **_: calls.append("transact")
    )
    handle_batch(agg_env.event(), agg_env.config)
    assert len(calls) == 3 and total(agg_env, "u0") == 10


def test_a_batch_delivered_twice_counts_once(agg_env: Env) -> None:
    for n in range(10):
        score(agg_env, n, "ada", 5)
    event = agg_env.event()
    handle_batch(event, agg_env.config)
    handle_batch(event, agg_env.config)
    assert total(agg_env, "ada") == 50


def test_a_retry_from_a_failed_sequence_number_counts_once(agg_env: Env) -> None:
    for n in range(10):
        score(agg_env, n, "ada" if n % 2 else "bob", 1)
    event = agg_env.event()
    handle_batch(event, agg_env.config)
    # Lambda redelivers from the middle of the batch (the records after a reported failure), re-split
    handle_batch({"Records": event["Records"][4:7]}, agg_env.config)
    handle_batch({"Records": event["Records"][6:]}, agg_env.config)
    assert (total(agg_env, "ada"), total(agg_env, "bob")) == (5, 5)


def test_a_conflicting_transaction_reports_its_groups_first_record_and_the_retry_is_exact(agg_env: Env) -> None:
    for n in range(4):
        score(agg_env, n, "ada", 1)
    event = agg_env.event()
    from botocore.exceptions import ClientError

    def conflict(**_: Any) -> None:
        raise ClientError(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                "CancellationReasons": [{"Code": "TransactionConflict"}],
                "ResponseMetadata": {"HTTPStatusCode": 400},
            },
            "TransactWriteItems",
        )

    CLIENTS.get("dynamodb").meta.events.register("before-call.dynamodb.TransactWriteItems", conflict)
    response = handle_batch(event, agg_env.config)
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["dynamodb"]["SequenceNumber"]}]}
    CLIENTS.reset()
    assert handle_batch(event, agg_env.config) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 4


def test_adjust_applies_corrections_moves_and_deletions(agg_env: Env) -> None:
    agg_env.config["aggregate"]["onChange"] = "adjust"
    score(agg_env, 1, "ada", 10)
    score(agg_env, 2, "ada", 7)
    handle_batch(agg_env.event(), agg_env.config)
    score(agg_env, 1, "ada", 4)  # corrected 10 -> 4
    agg_env.delete("SCORE#2", "USER#ada")  # removed
    score(agg_env, 3, "bob", 3)
    agg_env.ddb.update_item(  # moved from bob to ada
        TableName=agg_env.table,
        Key={"PK": {"S": "SCORE#3"}, "SK": {"S": "USER#bob"}},
        UpdateExpression="SET Score = :s",
        ExpressionAttributeValues={":s": {"N": "3"}},
    )
    handle_batch(seed_filter_only(agg_env.event(), agg_env), agg_env.config)
    assert (total(agg_env, "ada"), total(agg_env, "bob")) == (4, 3)


def test_without_adjust_changes_and_deletions_do_not_reach_the_handler(agg_env: Env) -> None:
    score(agg_env, 1, "ada", 10)
    handle_batch(agg_env.event(), agg_env.config)
    score(agg_env, 1, "ada", 4)
    agg_env.delete("SCORE#1", "USER#ada")
    assert seed_filter_only(agg_env.event(), agg_env) == {"Records": []}


def test_count_aggregation_counts_records(agg_env: Env) -> None:
    agg_env.config["aggregate"]["aggregation"] = "count"
    for n in range(7):
        score(agg_env, n, "ada", "not even a number")
    handle_batch(agg_env.event(), agg_env.config)
    assert total(agg_env, "ada") == 7


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        ({"PK": "SCORE#9", "SK": "USER#ada", "Score": "ten"}, "value attribute 'Score' is str 'ten', not a number"),
        ({"PK": "SCORE#9", "SK": "USER#ada"}, "value attribute 'Score' is NoneType"),
        ({"PK": "SCORE#9", "SK": "SCORE#x", "Score": 1}, "starts with the source prefix"),
    ],
)
def test_bad_scores_go_to_poison_and_the_rest_of_the_batch_counts(
    agg_env: Env, item: dict[str, Any], reason: str
) -> None:
    score(agg_env, 1, "ada", 10)
    agg_env.put(item)
    score(agg_env, 2, "ada", 5)
    assert handle_batch(agg_env.event(), agg_env.config) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 15
    [poison] = agg_env.messages(agg_env.poison_url)
    assert reason in poison["reason"]


def test_the_modes_own_writes_never_match_its_filter(agg_env: Env) -> None:
    # GIVEN scores applied, in both filter settings
    score(agg_env, 1, "ada", 10)
    inserts = agg_env.event()
    handle_batch(inserts, agg_env.config)
    score(agg_env, 2, "ada", 1)
    handle_batch(agg_env.event(), agg_env.config)
    # THEN the stream's records of the total (its INSERT, then MODIFY) match neither filter; the scores do
    all_records = agg_env.stream.client.get_records(
        ShardIterator=agg_env.stream.client.get_shard_iterator(
            StreamArn=agg_env.stream.arn,
            ShardId=agg_env.stream.client.describe_stream(StreamArn=agg_env.stream.arn)["StreamDescription"]["Shards"][
                0
            ]["ShardId"],
            ShardIteratorType="TRIM_HORIZON",
        )["ShardIterator"]
    )["Records"]
    all_records = [as_lambda_record(r, agg_env.stream.arn) for r in all_records]
    totals = [r for r in all_records if r["dynamodb"]["Keys"]["SK"]["S"] == "TOTAL"]
    scores = [r for r in all_records if r["dynamodb"]["Keys"]["PK"]["S"].startswith("SCORE")]
    assert len(totals) >= 2 and {r["eventName"] for r in totals} == {"INSERT", "MODIFY"}
    for on_change in ("ignore", "adjust"):
        patterns = filter_patterns(aggregate_filters("PK", "SCORE", on_change))
        matched = [any(EventPattern.load(p).matches_event(r) for p in patterns) for r in totals + scores]
        assert matched == [False] * len(totals) + [True] * len(scores)
    # AND the ledger's markers are in a table without a stream
    ledger = agg_env.ddb.describe_table(TableName=agg_env.config["aggregate"]["ledgerTable"])["Table"]
    assert "StreamSpecification" not in ledger or not ledger["StreamSpecification"].get("StreamEnabled")


def test_contributions_are_pure_and_coalesce_a_move(agg_env: Env) -> None:
    settings: Any = {**agg_env.config["aggregate"], "onChange": "adjust"}
    agg_env.put({"PK": "SCORE#1", "SK": "USER#a", "Score": 5})
    agg_env.event()
    agg_env.put({"PK": "SCORE#1", "SK": "USER#a", "Score": 5, "note": "same score, same group"})
    (record,) = agg_env.event()["Records"]
    assert record["eventName"] == "MODIFY"
    assert contributions(record, settings) == []
