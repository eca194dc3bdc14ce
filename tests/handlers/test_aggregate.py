"""aggregate handler against moto: scores written to a real table, their stream records read back, totals, the ids
kept on them and ledger markers checked in the tables themselves. Tests that move time give the handler a clock
(`now`) and stamp the records' ApproximateCreationDateTime with the same clock."""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal, Overflow
from typing import Any

import aggregate
import boto3
import pytest
from aggregate import RINGS, Totals, chunks, contributions
from aggregate import totals as aggregate_totals
from botocore.exceptions import ClientError, ReadTimeoutError
from st_core.clients import CLIENTS
from st_core.stream import BatchResponse

from components.filters import filter_patterns
from components.modes.aggregate import aggregate_filters
from tests.handlers.conftest import Env, as_lambda_record
from tests.support.patterns import LambdaFilter

# The component's default: maximum record age 3600 s + function timeout 60 s + a 300 s margin.
HORIZON = 3960
# A handler clock for tests that move time: a bucket boundary (records at T0 + t fall in bucket t // 900).
T0 = 2_000_000 * aggregate.BUCKET_SECONDS


@pytest.fixture
def agg_env(env: Env) -> Iterator[Env]:
    """The env as aggregate mode with the component's defaults: seed 003's layout, sums, inserts only."""
    env.configure(mode="aggregate")
    RINGS.clear()
    boto3.DEFAULT_SESSION.events.register("before-parameter-build.dynamodb.UpdateItem", _number_range)
    yield env
    RINGS.clear()


_NUMBERS = aggregate.DYNAMODB_NUMBERS


def _number_range(params: dict[str, Any], **_: Any) -> None:
    """DynamoDB refuses an UpdateItem whose ADD takes a number beyond its range (magnitude 1E+126); moto does not
    (tests/aws_rules.py has the rule for the Update of a transaction only)."""
    found = re.match(r"ADD (#\w+) (:\w+)", params.get("UpdateExpression", ""))
    delta = found and params.get("ExpressionAttributeValues", {}).get(found.group(2), {}).get("N")
    if not found or delta is None:
        return
    name = params["ExpressionAttributeNames"][found.group(1)]
    current = boto3.client("dynamodb").get_item(TableName=params["TableName"], Key=params["Key"]).get("Item", {})
    try:
        result = _NUMBERS.add(Decimal(current.get(name, {}).get("N", "0")), Decimal(delta))
        if result != 0 and abs(result) >= Decimal("1E+126"):
            raise Overflow
    except ArithmeticError:
        raise ClientError(
            {
                "Error": {
                    "Code": "ValidationException",
                    "Message": "Number overflow. Attempting to store a number with magnitude larger than supported "
                    "range",
                },
                "ResponseMetadata": {"HTTPStatusCode": 400},
            },
            "UpdateItem",
        ) from None


@pytest.fixture(params=["same container", "new container"])
def again(request: pytest.FixtureRequest) -> Callable[[], None]:
    """Called before a redelivery: Lambda's retry reaches the container of the first delivery (which remembers the
    ids it saw on the totals), or a new one (which only has DynamoDB's conditions to go by)."""
    return RINGS.clear if request.param == "new container" else lambda: None


def score(env: Env, n: int, user: str, value: Any) -> None:
    env.put({"PK": f"SCORE#{n}", "SK": f"USER#{user}", "Score": value})


def total(env: Env, user: str) -> Decimal | None:
    found = total_item(env, user)
    return Decimal(found["totalScore"]["N"]) if found else None


def total_item(env: Env, user: str) -> dict[str, Any]:
    key = {"PK": {"S": f"USER#{user}"}, "SK": {"S": "TOTAL"}}
    found: dict[str, Any] = env.ddb.get_item(TableName=env.table, Key=key, ConsistentRead=True).get("Item", {})
    return found


def ids_on(env: Env, user: str) -> dict[int, int]:
    """The total's id buckets: bucket -> ids held."""
    return aggregate.Ring.of(total_item(env, user)).buckets


def buckets_on(env: Env, user: str) -> dict[int, int]:
    """As ids_on, with buckets counted from T0."""
    return {b - T0 // aggregate.BUCKET_SECONDS: n for b, n in ids_on(env, user).items()}


def ledger_until(env: Env, user: str) -> int | None:
    found = total_item(env, user).get(aggregate.LEDGER_UNTIL)
    return int(found["N"]) - T0 if found else None


def markers(env: Env) -> int:
    return len(env.ddb.scan(TableName=env.config["aggregate"]["ledgerTable"])["Items"])


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


def deliver(env: Env, records: list[dict[str, Any]], now: float) -> BatchResponse:
    """Lambda delivers `records` (a copy) to a handler whose clock reads T0 + `now`."""
    return aggregate.handle_batch({"Records": copy.deepcopy(records)}, env.config, now=lambda: T0 + now)


def sources(env: Env, made: float) -> list[dict[str, Any]]:
    """The stream's new records that reach the function (the mapping's filter drops the totals' own), stamped as
    changes made at T0 + `made`."""
    return list(seed_filter_only(env.event(at=at(made)), env)["Records"])


def nothing_parked(env: Env) -> bool:
    return env.messages(env.poison_url) == []


def item_bytes(item: dict[str, Any]) -> int:
    """DynamoDB's item size: attribute names and values (numbers about 1 byte per 2 digits, plus 1)."""
    size = 0
    for name, value in item.items():
        ((tag, raw),) = value.items()
        size += len(name.encode())
        if tag == "S":
            size += len(raw.encode())
        elif tag == "N":
            size += 1 + (len(raw.lstrip("-").replace(".", "")) + 1) // 2
        elif tag == "BS":
            size += sum(len(b) for b in raw)
        else:
            raise AssertionError(f"unexpected {tag} on a total")
    return size


def seed_filter_only(event: Any, env: Env) -> Any:
    """What Lambda delivers: only the records the mapping's filter lets through."""
    patterns = filter_patterns(aggregate_filters("PK", "SCORE", env.config["aggregate"]["onChange"]))
    kept = LambdaFilter(patterns)(event["Records"])
    return {"Records": kept}


@pytest.mark.slow  # volume: `make test` runs it, `make unit` does not
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
        assert aggregate.handle_batch(seed_filter_only(agg_env.event(), agg_env), agg_env.config) == {
            "batchItemFailures": []
        }
    assert {u: total(agg_env, u) for u in expected} == {u: Decimal(v) for u, v in expected.items()}


def test_one_write_per_group_per_batch(agg_env: Env) -> None:
    for n in range(30):
        score(agg_env, n, f"u{n % 3}", 1)
    calls: list[str] = []
    for operation in ("UpdateItem", "TransactWriteItems", "PutItem"):
        CLIENTS.get("dynamodb").meta.events.register(
            f"before-call.dynamodb.{operation}", lambda model, **_: calls.append(model.name)
        )
    aggregate.handle_batch(agg_env.event(), agg_env.config)
    # One UpdateItem per group, no transaction and no ledger marker: the ids live on the totals
    assert calls == ["UpdateItem"] * 3 and total(agg_env, "u0") == 10
    assert markers(agg_env) == 0 and sum(ids_on(agg_env, "u0").values()) == 10


def test_a_batch_delivered_twice_counts_once(agg_env: Env, again: Callable[[], None]) -> None:
    for n in range(10):
        score(agg_env, n, "ada", 5)
    event = agg_env.event()
    aggregate.handle_batch(event, agg_env.config)
    again()
    aggregate.handle_batch(event, agg_env.config)
    assert total(agg_env, "ada") == 50


def test_a_retry_from_a_failed_sequence_number_counts_once(agg_env: Env, again: Callable[[], None]) -> None:
    for n in range(10):
        score(agg_env, n, "ada" if n % 2 else "bob", 1)
    event = agg_env.event()
    aggregate.handle_batch(event, agg_env.config)
    # Lambda redelivers from the middle of the batch (the records after a reported failure), re-split
    again()
    aggregate.handle_batch({"Records": event["Records"][4:7]}, agg_env.config)
    again()
    aggregate.handle_batch({"Records": event["Records"][6:]}, agg_env.config)
    assert (total(agg_env, "ada"), total(agg_env, "bob")) == (5, 5)


def _fail(operation: str, code: str, **extra: Any) -> Any:
    def fail(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": code, "Message": "injected"}, "ResponseMetadata": {"HTTPStatusCode": 400}, **extra},
            operation,
        )

    return fail


def test_a_failed_write_reports_its_groups_first_record_and_the_retry_is_exact(agg_env: Env) -> None:
    for n in range(4):
        score(agg_env, n, "ada", 1)
    event = agg_env.event()
    CLIENTS.get("dynamodb").meta.events.register(
        "before-call.dynamodb.UpdateItem", _fail("UpdateItem", "ProvisionedThroughputExceededException")
    )
    response = aggregate.handle_batch(event, agg_env.config)
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["dynamodb"]["SequenceNumber"]}]}
    CLIENTS.reset()
    assert aggregate.handle_batch(event, agg_env.config) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 4


def test_a_conflicting_ledger_transaction_reports_its_groups_first_record_and_the_retry_is_exact(
    agg_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aggregate_totals, "RING_BYTES", 0)  # no room for ids: every write takes the ledger path
    for n in range(4):
        score(agg_env, n, "ada", 1)
    event = agg_env.event()
    conflict = _fail(
        "TransactWriteItems", "TransactionCanceledException", CancellationReasons=[{"Code": "TransactionConflict"}]
    )
    CLIENTS.get("dynamodb").meta.events.register("before-call.dynamodb.TransactWriteItems", conflict)
    response = aggregate.handle_batch(event, agg_env.config)
    assert response == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["dynamodb"]["SequenceNumber"]}]}
    CLIENTS.reset()
    assert aggregate.handle_batch(event, agg_env.config) == {"batchItemFailures": []}
    assert aggregate.handle_batch(copy.deepcopy(event), agg_env.config) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 4 and markers(agg_env) == 4


def test_adjust_applies_corrections_moves_and_deletions(agg_env: Env) -> None:
    agg_env.configure(on_change="adjust")
    score(agg_env, 1, "ada", 10)
    score(agg_env, 2, "ada", 7)
    aggregate.handle_batch(agg_env.event(), agg_env.config)
    score(agg_env, 1, "ada", 4)  # corrected 10 -> 4
    agg_env.delete("SCORE#2", "USER#ada")  # removed
    score(agg_env, 3, "bob", 3)
    agg_env.ddb.update_item(  # moved from bob to ada
        TableName=agg_env.table,
        Key={"PK": {"S": "SCORE#3"}, "SK": {"S": "USER#bob"}},
        UpdateExpression="SET Score = :s",
        ExpressionAttributeValues={":s": {"N": "3"}},
    )
    aggregate.handle_batch(seed_filter_only(agg_env.event(), agg_env), agg_env.config)
    assert (total(agg_env, "ada"), total(agg_env, "bob")) == (4, 3)


def test_without_adjust_changes_and_deletions_do_not_reach_the_handler(agg_env: Env) -> None:
    score(agg_env, 1, "ada", 10)
    aggregate.handle_batch(agg_env.event(), agg_env.config)
    score(agg_env, 1, "ada", 4)
    agg_env.delete("SCORE#1", "USER#ada")
    assert seed_filter_only(agg_env.event(), agg_env) == {"Records": []}


def test_count_aggregation_counts_records(agg_env: Env) -> None:
    agg_env.configure(aggregation="count")
    for n in range(7):
        score(agg_env, n, "ada", "not even a number")
    aggregate.handle_batch(agg_env.event(), agg_env.config)
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
    assert aggregate.handle_batch(agg_env.event(), agg_env.config) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 15
    [poison] = agg_env.messages(agg_env.poison_url)
    assert reason in poison["reason"]


def test_the_modes_own_writes_never_match_its_filter(agg_env: Env) -> None:
    # GIVEN scores applied, in both filter settings
    score(agg_env, 1, "ada", 10)
    inserts = agg_env.event()
    aggregate.handle_batch(inserts, agg_env.config)
    score(agg_env, 2, "ada", 1)
    aggregate.handle_batch(agg_env.event(), agg_env.config)
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
        matched = [LambdaFilter(patterns).passes(r) for r in totals + scores]
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


# -- exactly once without a ledger: the ids on the total ---------------------------------------------------------


def test_a_retry_from_mid_batch_with_later_records_after_it_counts_each_once(
    agg_env: Env, again: Callable[[], None]
) -> None:
    for n in range(10):
        score(agg_env, n, "ada" if n % 2 else "bob", n)
    first = sources(agg_env, 0)
    deliver(agg_env, first, now=5)
    for n in range(10, 15):
        score(agg_env, n, "ada" if n % 2 else "bob", n)
    later = sources(agg_env, 10)
    # Lambda retries from the 5th record on, and the batch now runs on into records never delivered before
    again()
    assert deliver(agg_env, first[4:] + later, now=20) == {"batchItemFailures": []}
    assert (total(agg_env, "ada"), total(agg_env, "bob")) == (1 + 3 + 5 + 7 + 9 + 11 + 13, 2 + 4 + 6 + 8 + 10 + 12 + 14)
    assert nothing_parked(agg_env)


def test_a_bisected_batch_counts_once(agg_env: Env, again: Callable[[], None]) -> None:
    for n in range(8):
        score(agg_env, n, ["ada", "bob", "cy"][n % 3], 10 + n)
    records = sources(agg_env, 0)
    # bob's write fails: the whole batch is retried, then split in halves and quarters (BisectBatchOnFunctionError)
    CLIENTS.get("dynamodb").meta.events.register("before-parameter-build.dynamodb.UpdateItem", _fail_for("USER#bob"))
    assert deliver(agg_env, records, now=1)["batchItemFailures"]
    CLIENTS.reset()
    for part in (records[:4], records[4:], records[:2], records[2:4], records[4:6], records[6:], records):
        again()
        assert deliver(agg_env, part, now=2) == {"batchItemFailures": []}
    expected = {"ada": 10 + 13 + 16, "bob": 11 + 14 + 17, "cy": 12 + 15}
    assert {u: total(agg_env, u) for u in expected} == expected and nothing_parked(agg_env)


def _fail_for(group: str) -> Any:
    def fail(params: dict[str, Any], **_: Any) -> None:
        if params["Key"]["PK"] == {"S": group}:
            _fail("UpdateItem", "ThrottlingException")()

    return fail


def test_a_lost_response_is_not_counted_again(agg_env: Env) -> None:
    """The write happened but its response never came (a timeout after DynamoDB acted): the handler's own retry
    finds the ids on the total, and so does Lambda's redelivery in another container."""
    for n in range(6):
        score(agg_env, n, "ada", 7)
    records = sources(agg_env, 0)
    calls: list[str] = []

    def lose_first_response(**_: Any) -> None:
        calls.append("UpdateItem")
        if len(calls) == 1:
            raise ReadTimeoutError(endpoint_url="https://dynamodb/lost-response")

    CLIENTS.get("dynamodb").meta.events.register("after-call.dynamodb.UpdateItem", lose_first_response)
    assert deliver(agg_env, records, now=1) == {"batchItemFailures": []}
    assert len(calls) == 2 and total(agg_env, "ada") == 42  # the second write failed its condition
    RINGS.clear()
    assert deliver(agg_env, records, now=2) == {"batchItemFailures": []}
    assert len(calls) == 3 and total(agg_env, "ada") == 42 and nothing_parked(agg_env)


def test_a_redelivery_to_the_same_container_needs_no_write(agg_env: Env) -> None:
    for n in range(6):
        score(agg_env, n, ["ada", "bob"][n % 2], 1)
    records = sources(agg_env, 0)
    deliver(agg_env, records, now=1)
    calls: list[str] = []
    CLIENTS.get("dynamodb").meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    assert deliver(agg_env, records[1:], now=2) == {"batchItemFailures": []}
    assert calls == [] and (total(agg_env, "ada"), total(agg_env, "bob")) == (3, 3)


def test_a_redelivery_hours_later_within_the_horizon_counts_once(agg_env: Env, again: Callable[[], None]) -> None:
    # GIVEN a mapping that keeps records for up to 6 hours
    agg_env.configure(maximum_record_age_seconds=6 * 3600)
    for n in range(5):
        score(agg_env, n, "ada", 100)
    first = sources(agg_env, 0)
    deliver(agg_env, first, now=3)
    # AND an hour of scores after it, every hour (each write removes what is past the horizon)
    for hour in range(1, 6):
        score(agg_env, 100 + hour, "ada", 1)
        deliver(agg_env, sources(agg_env, hour * 3600), now=hour * 3600 + 2)
    # WHEN the first batch comes again 5 h 50 min after its records were made
    again()
    assert deliver(agg_env, first, now=5 * 3600 + 50 * 60) == {"batchItemFailures": []}
    # THEN it is not counted again, and all six buckets are still on the total
    assert total(agg_env, "ada") == 505
    assert buckets_on(agg_env, "ada") == {0: 5, 4: 1, 8: 1, 12: 1, 16: 1, 20: 1} and nothing_parked(agg_env)


def test_a_bucket_past_the_horizon_is_removed_and_a_record_within_it_never_counts_twice(
    agg_env: Env, again: Callable[[], None]
) -> None:
    score(agg_env, 1, "ada", 1)
    a = sources(agg_env, 0)
    deliver(agg_env, a, now=1)
    score(agg_env, 2, "ada", 10)
    b = sources(agg_env, 1000)
    deliver(agg_env, b, now=1001)
    assert buckets_on(agg_env, "ada") == {0: 1, 1: 1}
    # WHEN a write comes once every record of bucket 0 is past the horizon (900 + 3960 s), not yet bucket 1's
    score(agg_env, 3, "ada", 100)
    deliver(agg_env, sources(agg_env, 4861), now=4861)
    # THEN bucket 0 is gone, bucket 1 stays
    assert buckets_on(agg_env, "ada") == {1: 1, 5: 1}
    # AND b, redelivered at the last second of its horizon, counts once
    again()
    assert deliver(agg_env, b, now=1000 + HORIZON) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 111
    # AND a, older than the horizon (Lambda no longer delivers it), is parked with the reason, not counted
    assert deliver(agg_env, a, now=1000 + HORIZON) == {"batchItemFailures": []}
    (parked,) = agg_env.messages(agg_env.poison_url)
    assert "beyond the 3960 s horizon" in parked["reason"] and total(agg_env, "ada") == 111


@pytest.mark.slow  # volume: `make test` runs it, `make unit` does not
def test_the_total_stays_under_1_kb_and_off_the_ledger_under_steady_load(agg_env: Env) -> None:
    """A score a minute for three horizons: the ids of the last 66-81 minutes stay on the total, no more."""
    n = 0
    for minute in range(0, 3 * 66, 5):
        for _ in range(5):
            score(agg_env, n, "ada", 1)
            n += 1
        deliver(agg_env, sources(agg_env, minute * 60), now=minute * 60 + 1)
        item = total_item(agg_env, "ada")
        assert item_bytes(item) < 1024, (minute, item_bytes(item))
    assert total(agg_env, "ada") == n and markers(agg_env) == 0
    assert 66 <= sum(ids_on(agg_env, "ada").values()) <= 85 and nothing_parked(agg_env)


@pytest.mark.slow  # volume: `make test` runs it, `make unit` does not
def test_more_records_of_one_group_than_the_ids_hold_go_through_the_ledger_exactly_once(agg_env: Env) -> None:
    for n in range(1, 251):
        score(agg_env, n, "ada", n)
    records = sources(agg_env, 0)
    assert deliver(agg_env, records, now=1) == {"batchItemFailures": []}
    # 99 ids on the total (a write's worth, within its 800 bytes); the other 151 records have ledger markers
    assert sum(ids_on(agg_env, "ada").values()) == 99 and markers(agg_env) == 151
    assert ledger_until(agg_env, "ada") == 1 + HORIZON
    assert item_bytes(total_item(agg_env, "ada")) < 1024
    RINGS.clear()  # another container
    assert deliver(agg_env, records, now=2) == {"batchItemFailures": []}
    assert deliver(agg_env, records[120:130], now=3) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == sum(range(1, 251)) and nothing_parked(agg_env)


def test_a_full_total_falls_back_to_the_ledger_and_returns_to_ids_after_the_horizon(
    agg_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Room for 2 ids in two buckets, or 4 in one (each bucket's name takes 12 bytes, each id 6)
    monkeypatch.setattr(aggregate_totals, "RING_BYTES", 36)
    for n in range(3):
        score(agg_env, n, "ada", 1)
    a = sources(agg_env, 0)
    deliver(agg_env, a, now=1)
    assert buckets_on(agg_env, "ada") == {0: 3} and markers(agg_env) == 0 and ledger_until(agg_env, "ada") is None
    # WHEN the next records do not fit: the ledger path, marking the total for a horizon
    for n in range(3, 5):
        score(agg_env, n, "ada", 10)
    b = sources(agg_env, 3000)
    deliver(agg_env, b, now=3001)
    assert buckets_on(agg_env, "ada") == {0: 3} and markers(agg_env) == 2
    assert ledger_until(agg_env, "ada") == 3001 + HORIZON
    # THEN a record applied with its id (a) is found: in this container's memory of the total; by the ledger path's
    # condition in a container that knows the total is in ledger mode but not a's id (it saw the total before);
    # and by the failed write that tells a new container so
    assert deliver(agg_env, a, now=3100) == {"batchItemFailures": []}
    group = contributions(a[0], agg_env.config["aggregate"])[0].group  # type: ignore[arg-type]
    RINGS.put((agg_env.table, group), aggregate.Ring({}, T0 + 3001 + HORIZON))
    assert deliver(agg_env, a, now=3150) == {"batchItemFailures": []}
    RINGS.clear()  # each redelivery from here on in another container: only what is in DynamoDB can tell
    assert deliver(agg_env, a, now=3200) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 23 and markers(agg_env) == 2
    # AND once bucket 0 is past the horizon, a new record fits again but still goes through the ledger too (b's
    # records must stay checked against the ledger while they can come back)
    score(agg_env, 5, "ada", 100)
    e = sources(agg_env, 4900)
    deliver(agg_env, e, now=4900)
    assert buckets_on(agg_env, "ada") == {5: 1} and markers(agg_env) == 3
    assert ledger_until(agg_env, "ada") == 3001 + HORIZON  # not extended: e's id is on the total
    # AND records applied through the ledger (b) or with ids in ledger mode (e) come back and count once
    RINGS.clear()
    assert deliver(agg_env, b, now=5000) == {"batchItemFailures": []}
    RINGS.clear()
    assert deliver(agg_env, e, now=5100) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 123
    # AND once the guard has passed, writes carry ids again without a marker
    score(agg_env, 6, "ada", 1000)
    f = sources(agg_env, 7000)
    deliver(agg_env, f, now=7000)
    assert buckets_on(agg_env, "ada") == {5: 1, 7: 1} and markers(agg_env) == 3
    RINGS.clear()
    assert deliver(agg_env, f + e, now=7100) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 1123 and nothing_parked(agg_env)


def test_a_record_without_a_creation_time_is_counted_once_through_the_ledger(
    agg_env: Env, again: Callable[[], None]
) -> None:
    for n in range(3):
        score(agg_env, n, "ada", 2)
    records = sources(agg_env, 0)
    for record in records:
        record["dynamodb"].pop("ApproximateCreationDateTime", None)
    assert deliver(agg_env, records, now=1) == {"batchItemFailures": []}
    again()
    assert deliver(agg_env, records, now=2) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 6 and markers(agg_env) == 3 and ids_on(agg_env, "ada") == {}
    # AND in a write with records that have one: the write is a ledger transaction (markers for all three), the ids
    # of the two with a time go on the total as well, so no ledger mode is needed for them
    for n in range(3, 6):
        score(agg_env, n, "ada", 20)
    mixed = sources(agg_env, 10)
    mixed[0]["dynamodb"].pop("ApproximateCreationDateTime")
    assert deliver(agg_env, mixed, now=11) == {"batchItemFailures": []}
    again()
    assert deliver(agg_env, mixed[::-1], now=12) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 66 and markers(agg_env) == 6 and buckets_on(agg_env, "ada") == {0: 2}
    assert ledger_until(agg_env, "ada") is None
    assert nothing_parked(agg_env)


def test_a_record_twice_in_one_event_counts_once(agg_env: Env) -> None:
    score(agg_env, 1, "ada", 5)
    (record,) = sources(agg_env, 0)
    assert deliver(agg_env, [record, record], now=1) == {"batchItemFailures": []}
    assert total(agg_env, "ada") == 5 and nothing_parked(agg_env)


@pytest.mark.parametrize("spread", [1, 7, 10_000], ids=["one-bucket", "some-buckets", "a-bucket-each"])
def test_every_write_fits_dynamodbs_expression_limits(agg_env: Env, spread: int) -> None:
    """4 KB per expression and 300 operators or functions: the longest condition a chunk can get."""
    settings = agg_env.config["aggregate"]
    records = []
    for n in range(300):
        keys = {"PK": {"S": f"SCORE#{n}"}, "SK": {"S": "USER#ada"}}
        records.append(
            {
                "eventID": f"{n:032x}",
                "eventName": "INSERT",
                "dynamodb": {
                    "Keys": keys,
                    "NewImage": {**keys, "Score": {"N": "1"}},
                    "SequenceNumber": str(10**20 + n),
                    "ApproximateCreationDateTime": T0 + (n % spread) * aggregate.BUCKET_SECONDS,
                },
            }
        )
    items = [c for r in records for c in contributions(r, settings)]  # type: ignore[arg-type]
    totals = Totals(agg_env.config, CLIENTS, lambda: T0)
    written = 0
    for chunk in chunks(items):
        for ledger in (False, True):
            plan = aggregate.Plan(ledger=ledger, add_ids=True, set_until=ledger, expired=list(range(40)))
            request = totals.request("ada", chunk, plan, T0)
            for expression in (request["UpdateExpression"], request.get("ConditionExpression", "")):
                assert len(expression.encode()) <= 4096
                operators = re.findall(r"\b(?:AND|OR|NOT|contains|attribute_not_exists)\b|<", expression)
                assert len(operators) <= 300, len(operators)
        assert len(chunk) <= aggregate.RECORDS_PER_WRITE
        written += len(chunk)
    assert written == 300


def test_only_the_records_a_failed_write_did_not_apply_are_parked_as_unapplied(agg_env: Env) -> None:
    """100 scores of one group in a batch are two writes (99 and 1). The total is near DynamoDB's largest number:
    the 99's sum would leave the range (DynamoDB refuses the write), the 1's fits and is applied. Only the 99 are
    parked, each as not applied to the total (their replay adds them once the total is fixed); the applied one is
    not parked (a replay of it past the horizon would count it again)."""
    agg_env.put({"PK": "USER#ada", "SK": "TOTAL", "totalScore": Decimal("9.98E+125")})
    agg_env.stream.read()
    for n in range(100):
        score(agg_env, n, "ada", Decimal("1E+123"))

    assert deliver(agg_env, sources(agg_env, 0), now=1) == {"batchItemFailures": []}

    assert total(agg_env, "ada") == Decimal("9.99E+125")
    parked = agg_env.messages(agg_env.poison_url)
    assert len(parked) == 99 and all(m["record"][aggregate.UNAPPLIED] for m in parked)


def test_a_record_applied_before_its_total_became_unwritable_is_not_parked_as_unapplied(agg_env: Env) -> None:
    """A score is applied; its total is then set near DynamoDB's largest number; the batch comes again to a new
    container, whose write DynamoDB refuses (the sum leaves the range) before or after checking the ids. The total
    holds the score's id: it was applied, and it is not parked (parked as unapplied, its replay would count it a
    second time)."""
    score(agg_env, 1, "ada", 5)
    records = sources(agg_env, 0)
    assert deliver(agg_env, records, now=1) == {"batchItemFailures": []}
    agg_env.ddb.update_item(
        TableName=agg_env.table,
        Key={"PK": {"S": "USER#ada"}, "SK": {"S": "TOTAL"}},
        UpdateExpression="SET totalScore = :big",
        ExpressionAttributeValues={":big": {"N": "9.99999999999999999999999999999999999E+125"}},
    )
    RINGS.clear()

    assert deliver(agg_env, records, now=2) == {"batchItemFailures": []}

    assert nothing_parked(agg_env)
