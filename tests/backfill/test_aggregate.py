"""Backfill of an aggregate table: totals recomputed from the items with the handler's own rules, exactly (38
digits); a drifted total replaced by one conditional write; twice changes nothing; a score write applied while the
run replaces its total is never lost (the group is reported busy); reconcile with onChange=ignore only reports."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import aggregate

from tests.backfill.conftest import aggregate_config, command, consumer, run
from tests.handlers.conftest import Env
from tests.redrive.conftest import aws


def total(env: Env, user: str) -> Decimal | None:
    found = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": user}, "SK": {"S": "TOTAL"}}, ConsistentRead=True)
    value = found.get("Item", {}).get("totalScore", {}).get("N")
    return Decimal(value) if value is not None else None


def score(env: Env, n: int, user: str, value: str) -> None:
    env.ddb.put_item(
        TableName=env.table,
        Item={"PK": {"S": f"SCORE#{n}"}, "SK": {"S": user}, "Score": {"N": value}},
    )


def test_totals_are_recomputed_exactly_and_a_drifted_one_replaced(env: Env) -> None:
    aggregate_config(env)
    big = "1234567890123456789012345678901234567"  # 37 digits: beyond Python's default 28-digit context
    score(env, 1, "ada", big)
    score(env, 2, "ada", "0.1")
    score(env, 3, "ada", "-7")
    score(env, 4, "bob", "5")
    env.put({"PK": "bob", "SK": "TOTAL", "totalScore": 999})  # drifted (its items say 5)
    env.put({"PK": "eve", "SK": "TOTAL", "totalScore": 3})  # no items left (adjust: 0)
    env.stream.read()
    function = consumer(env)

    tally, finished, _ = run(env, function)

    assert finished and tally.failed == 0
    assert str(total(env, "ada")) == "1234567890123456789012345678901234560.1"
    assert (total(env, "bob"), total(env, "eve")) == (5, 0)
    assert tally.kinds["total replaced"] == 3
    assert function.invoked == []  # totals are written by the run itself, never by feeding records

    again, finished, _ = run(env, function)
    assert finished and (again.acted, again.failed) == (0, 0)


def test_a_score_applied_while_the_total_is_replaced_is_never_lost(env: Env) -> None:
    aggregate_config(env)
    score(env, 1, "ada", "10")
    env.put({"PK": "ada", "SK": "TOTAL", "totalScore": 4})  # drifted: its items say 10
    env.stream.read()
    function = consumer(env)
    real = aws(function)

    class Racing:
        def __init__(self, client: Any) -> None:
            self.client = client

        def __getattr__(self, name: str) -> Any:
            return getattr(self.client, name)

        def update_item(self, **request: Any) -> Any:
            if request.get("UpdateExpression") == "SET #total = :sum":
                score(env, 2, "ada", "3")  # a live score write, applied by the live function first
                aggregate.handle_batch(env.event(), env.config)
            return self.client.update_item(**request)

    def client(service: str) -> Any:
        return Racing(real(service)) if service == "dynamodb" else real(service)

    tally, finished, _ = run(env, function, client=client)

    assert finished
    assert total(env, "ada") == 7  # 4 + 3: the increment stands, the replacement did not overwrite it
    assert tally.kinds == {**tally.kinds, "busy: written during the run (run again when quiet)": 1}
    assert tally.failed == 1


def test_reconcile_with_on_change_ignore_reports_and_does_not_replace(env: Env) -> None:
    aggregate_config(env, on_change="ignore")
    score(env, 1, "ada", "10")
    env.put({"PK": "ada", "SK": "TOTAL", "totalScore": 14})  # items since changed or deleted: legitimate here
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "reconcile")

    assert status == 0
    assert total(env, "ada") == 14
    assert any("1 would replace total" in line and "ada" in line for line in lines), lines


def with_an_unusable_score(env: Env) -> Any:
    """An aggregate table with a usable score of ada's (10) and one that is not a number (SCORE#2); its consumer."""
    aggregate_config(env)
    score(env, 1, "ada", "10")
    env.ddb.put_item(
        TableName=env.table, Item={"PK": {"S": "SCORE#2"}, "SK": {"S": "ada"}, "Score": {"S": "lots"}}
    )  # fmt: skip
    env.stream.read()
    function = consumer(env)
    return function


def test_an_unusable_source_item_is_parked_with_the_reason_and_the_rest_counts(env: Env) -> None:
    function = with_an_unusable_score(env)

    status, lines = command(function, "backfill")

    assert status == 1, lines
    assert total(env, "ada") == 10
    parked = env.messages(env.poison_url)
    assert [m["record"]["dynamodb"]["Keys"]["PK"]["S"] for m in parked] == ["SCORE#2"]
    assert "not a number" in parked[0]["reason"]


def test_a_dry_run_reports_an_unusable_source_item_and_parks_nothing(env: Env) -> None:
    """`reconcile --dry-run` (also what the console's Drift view runs) changes nothing: the item a real run would
    park is reported, not sent to the poison queue."""
    function = with_an_unusable_score(env)

    status, lines = command(function, "reconcile", "--dry-run")

    assert status == 1, lines  # a real run could not count it
    assert any("1 unusable item (a run parks it)" in line and "SCORE#2" in line for line in lines), lines
    assert env.messages(env.poison_url) == []


def test_an_interrupted_run_resumes_and_counts_each_item_once(env: Env, tmp_path: Any) -> None:
    aggregate_config(env)
    for n in range(40):
        score(env, n, f"user{n % 3}", str(n))
    env.stream.read()
    function = consumer(env)
    checkpoint = tmp_path / "cp.json"
    pages = {"n": 0}

    def stop() -> bool:
        pages["n"] += 1
        return pages["n"] >= 3

    _, finished, _ = run(env, function, checkpoint=checkpoint, page_items=5, stop=stop)
    assert not finished
    assert total(env, "user0") is None  # totals are only written once every segment is done

    tally, finished, _ = run(env, function, checkpoint=checkpoint, page_items=5)

    assert finished and tally.scanned == 40
    for group in range(3):
        assert total(env, f"user{group}") == sum(n for n in range(40) if n % 3 == group)


def test_in_lambda_carries_the_sums_in_the_segments_checkpoints(env: Env, monkeypatch: Any) -> None:
    """--in-lambda with aggregate: each invocation returns its segment's sums so far, the next one carries them on,
    and the command replaces the totals once every segment is done."""
    import io
    import json

    import backfill as engine

    from tests.backfill.test_eventbridge import _Either

    aggregate_config(env)
    big = "9" * 37
    for n in range(30):
        score(env, n, f"user{n % 2}", big if n == 0 else str(n))
    env.stream.read()
    monkeypatch.setenv("SCHEDULED_TABLE_CONFIG", json.dumps(env.config))
    function = consumer(env)
    calls = {"n": 0}

    class Budget:
        def get_remaining_time_in_millis(self) -> int:
            return 1_000  # one page per invocation: every page resumes from a checkpoint

    class BackfillFunction:
        def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:
            calls["n"] += 1
            answer = engine.handler(json.loads(Payload), Budget())
            return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}

    real = aws(function)

    def client(service: str) -> Any:
        return _Either(function, BackfillFunction()) if service == "lambda" else real(service)

    status, lines = command(
        function, "backfill", "--segments", "2", "--page-items", "4", "--in-lambda", "items-backfill", client=client
    )

    assert status == 0, lines
    assert calls["n"] > 4
    assert str(total(env, "user0")) == "1" + "0" * 34 + "209"  # 10^37 - 1 + 210, all 38 digits
    assert total(env, "user1") == sum(range(1, 30, 2))
