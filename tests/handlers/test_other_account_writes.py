"""polling and aggregate on another account's table, against moto: the handlers name the table by its ARN (as the
component configures them for such a table), the ledger stays in the deploying account, and DynamoDB's rule that a
transaction's items are in one account and one Region is enforced (tests/aws_rules.py). Each record still acts
exactly once when its delivery crashes between two of its writes, and when Lambda delivers it again at any later
time: after the item ran, after a consumer wrote it back, after a user wrote it again in between."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import aggregate
import boto3
import polling
import polling_assign
import pytest
from aggregate import totals as aggregate_totals
from botocore.exceptions import ClientError, ReadTimeoutError

from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT, Env, with_due_index
from tests.handlers.test_aggregate import T0, nothing_parked, score, sources, total, total_item
from tests.handlers.test_aggregate import agg_env as agg_env  # the fixture, for `foreign_totals`
from tests.handlers.test_polling import NOW, item

OTHER = "210987654321"


class Crash:
    """The handlers' clients, whose DynamoDB call `operation` (on a table whose name contains `table`) crashes the
    invocation on its `nth` occurrence: `before` the call is made (the writes before it stand, none after), or
    after it (the call is applied, its answer lost: a timeout once DynamoDB acted). Every call after the crash
    fails too: the invocation is over, whatever retries the handler would make within it."""

    def __init__(self, operation: str, table: str, *, before: bool, nth: int = 1) -> None:
        self.operation, self.table, self.before, self.nth = operation, table, before, nth
        self.seen = 0
        self.crashed = False
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                client = boto3.client(service, region_name=REGION)
                client.meta.events.register("before-parameter-build", self._params)
                client.meta.events.register("before-call", self._before)
                client.meta.events.register("after-call", self._after)
                self._clients[service] = client
            return self._clients[service]

    def _hit(self, model: Any, params: dict[str, Any]) -> bool:
        named = " ".join([str(params.get("TableName", "")), *params.get("RequestItems", {})])
        if self.crashed or model.name != self.operation or self.table not in named:
            return False
        self.seen += 1
        if self.seen < self.nth:
            return False
        self.crashed = True
        return True

    def _params(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["crash_params"] = dict(params)

    def _before(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        if self.crashed:
            raise ReadTimeoutError(endpoint_url=f"https://after-the-crash/{model.name}")
        if self.before and self._hit(model, context.get("crash_params") or {}):
            raise ReadTimeoutError(endpoint_url=f"https://crashed-before/{model.name}")

    def _after(self, model: Any, context: dict[str, Any], **_: Any) -> None:
        if not self.before and self._hit(model, context.get("crash_params") or {}):
            raise ReadTimeoutError(endpoint_url=f"https://crashed-after/{model.name}")


def as_other_accounts(env: Env) -> Env:
    """The env's table made another account's: the handlers name it by that account's ARN, and its stream's records
    come from that account's stream (the mappings read it there)."""
    env.config["table"] = env.rules.other_accounts_table(env.table, OTHER)
    read = env.event

    def event(*, at: datetime | None = None) -> Any:
        found = read(at=at)
        for record in found["Records"]:
            record["eventSourceARN"] = record["eventSourceARN"].replace(f":{ACCOUNT}:table/", f":{OTHER}:table/")
        return found

    env.event = event  # type: ignore[method-assign]
    return env


@pytest.fixture
def foreign_polling(env: Env) -> Iterator[Env]:
    """The polling env, its table another account's."""
    yield as_other_accounts(with_due_index(env))


def assign(env: Env, records: list[dict[str, Any]], clients: Any = None) -> Any:
    extra = {} if clients is None else {"clients": clients}
    return polling_assign.handle_assign_batch({"Records": records}, env.config, **extra)


def run(env: Env, at: float) -> int:
    """A tick at `at`; how many items it sent."""
    sent: int = polling.process(env.config, now=lambda: at).dispatched
    return sent


def sent_keys(env: Env) -> list[str]:
    return sorted(m["keys"]["PK"] for m in env.messages(env.due_queue_url))


def test_a_transaction_across_the_deploying_accounts_ledger_and_another_accounts_table_is_refused(
    foreign_polling: Env,
) -> None:
    # GIVEN a transaction with an update of the other account's table and a put into the deploying account's ledger
    env = foreign_polling
    env.put({"PK": "a", "SK": "T", "dueAt": int(NOW)})
    update = {
        "TableName": env.config["table"],
        "Key": {"PK": {"S": "a"}, "SK": {"S": "T"}},
        "UpdateExpression": "SET x = :x",
        "ExpressionAttributeValues": {":x": {"N": "1"}},
    }
    marker = {"TableName": env.config["polling"]["ledgerTable"], "Item": {"id": {"S": "m"}}}
    # THEN DynamoDB refuses it, and neither write happens
    with pytest.raises(ClientError, match="different AWS accounts or Regions") as refused:
        env.ddb.transact_write_items(TransactItems=[{"Update": update}, {"Put": marker}])
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    with pytest.raises(ClientError, match="different AWS accounts or Regions"):
        gets = [(update["TableName"], update["Key"]), (marker["TableName"], marker["Item"])]
        env.ddb.transact_get_items(TransactItems=[{"Get": {"TableName": t, "Key": k}} for t, k in gets])
    ledger = env.ddb.get_item(TableName=marker["TableName"], Key=marker["Item"]).get("Item")
    assert "x" not in item(env, "a") and ledger is None
    # AND one wholly in the other account's table goes through (served by ARN)
    env.ddb.transact_write_items(TransactItems=[{"Update": update}])
    assert item(env, "a")["x"] == {"N": "1"}


def test_a_new_item_on_another_accounts_table_is_indexed_and_runs_once(foreign_polling: Env) -> None:
    env = foreign_polling
    env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    [written] = env.event()["Records"]
    assert assign(env, [written]) == {"batchItemFailures": []}
    assert env.messages(env.poison_url) == []
    indexed = item(env, "a")
    assert indexed["stStatus"] == {"S": "PENDING"} and "stShard" in indexed and "stStaged" not in indexed
    assert run(env, NOW) == 1 and sent_keys(env) == ["a"]
    # WHEN a consumer writes the item back as it was (its bookkeeping gone) and Lambda delivers both records again
    env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    records = env.event()["Records"]
    assert assign(env, records) == {"batchItemFailures": []}
    assert assign(env, [written, *records]) == {"batchItemFailures": []}
    # THEN nothing runs it again
    assert "stShard" not in item(env, "a") and run(env, NOW + 120) == 0


CRASHES = {
    # (operation, table, before): where the first delivery of the record stops
    "before the marker is read": ("GetItem", "ledger", True),
    "after the item is staged": ("PutItem", "ledger", True),
    "after the marker is put": ("UpdateItem", "polling", True),
    "after the item is indexed": ("UpdateItem", "polling", False),
}


def _crash(where: str) -> Crash:
    operation, table, before = CRASHES[where]
    # the index update is the second UpdateItem of the item (the first stages it)
    nth = 2 if operation == "UpdateItem" else 1
    return Crash(operation, table, before=before, nth=nth)


@pytest.mark.parametrize("where", sorted(CRASHES))
def test_a_crash_between_the_assigners_writes_then_a_run_and_a_write_back_leave_one_delivery(
    foreign_polling: Env, where: str
) -> None:
    env = foreign_polling
    env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    [written] = env.event()["Records"]
    crash = _crash(where)
    # GIVEN the record's first delivery crashed at that point
    assert assign(env, [written], crash)["batchItemFailures"], "the crash fails the record"
    assert crash.crashed
    # AND the processor ticked meanwhile, and a consumer wrote the item back as it was (if it ran)
    ran = run(env, NOW)
    if ran:
        env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    # WHEN Lambda delivers the record again, then what follows it in the stream
    assert assign(env, [written]) == {"batchItemFailures": []}
    assert assign(env, env.event()["Records"]) == {"batchItemFailures": []}
    # THEN the item has run exactly once over all ticks, and nothing is left in the index or parked
    ran += run(env, NOW + 120) + run(env, NOW + 300)
    assert ran == 1 and sent_keys(env) == ["a"]
    assert "stStaged" not in item(env, "a") and env.messages(env.poison_url) == []


@pytest.mark.parametrize("marked", [False, True], ids=["before its marker", "after its marker"])
def test_a_users_write_over_a_staged_item_leaves_one_delivery(foreign_polling: Env, marked: bool) -> None:
    env = foreign_polling
    env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    [written] = env.event()["Records"]
    # GIVEN the record's first delivery staged the item and crashed, before or after putting its marker
    crash = _crash("after the marker is put" if marked else "after the item is staged")
    assert assign(env, [written], crash)["batchItemFailures"]
    assert "stStaged" in item(env, "a") and run(env, NOW) == 0  # staged: out of the due index
    # WHEN the user writes the item again as it was (the staging wiped), and Lambda redelivers from the record on
    env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    rewrite = env.event()["Records"]
    assert assign(env, [written, *rewrite]) == {"batchItemFailures": []}
    # AND it runs, a consumer writes it back, and the user's write comes once more
    assert run(env, NOW + 60) == 1
    env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    assert assign(env, rewrite + env.event()["Records"]) == {"batchItemFailures": []}
    # THEN it ran once
    assert run(env, NOW + 180) == 0 and sent_keys(env) == ["a"]


def test_a_users_move_of_a_staged_item_runs_it_at_its_new_time_only(foreign_polling: Env) -> None:
    env = foreign_polling
    env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    [written] = env.event()["Records"]
    assert assign(env, [written], _crash("after the marker is put"))["batchItemFailures"]
    # WHEN the user moves the staged item an hour on (an update: the staging stays), then both records come
    env.ddb.update_item(
        TableName=env.table,
        Key={"PK": {"S": "a"}, "SK": {"S": "T"}},
        UpdateExpression="SET dueAt = :d",
        ExpressionAttributeValues={":d": {"N": str(int(NOW) + 3600)}},
    )
    assert assign(env, [written, *env.event()["Records"]]) == {"batchItemFailures": []}
    # THEN it waits for its new time, and runs once then
    assert item(env, "a")["stDue"] == {"N": str(int(NOW) + 3600)}
    assert run(env, NOW + 60) == 0 and run(env, NOW + 3600) == 1


# -- aggregate: the ledger path ------------------------------------------------------------------------------------


@pytest.fixture
def foreign_totals(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    """The aggregate env, its table another account's, and no room for ids on a total: every write takes the
    ledger path (as a group with more recent records than its ids hold does)."""
    monkeypatch.setattr(aggregate_totals, "RING_BYTES", 0)
    yield as_other_accounts(request.getfixturevalue("agg_env"))


def deliver(env: Env, records: list[dict[str, Any]], now: float, clients: Any = None) -> Any:
    extra = {} if clients is None else {"clients": clients}
    return aggregate.handle_batch({"Records": records}, env.config, now=lambda: T0 + now, **extra)


def test_totals_on_another_accounts_table_take_the_ledger_path_without_a_transaction(foreign_totals: Env) -> None:
    env = foreign_totals
    for n in range(1, 6):
        score(env, n, "ada", n)
    records = sources(env, 0)
    assert deliver(env, records, now=1) == {"batchItemFailures": []}
    assert total(env, "ada") == 15 and nothing_parked(env)
    assert aggregate.JOURNAL not in total_item(env, "ada")
    # AND delivered again, to a new container, then from the third record on: counted once
    aggregate.RINGS.clear()
    assert deliver(env, records, now=2) == {"batchItemFailures": []}
    assert deliver(env, records[2:], now=3) == {"batchItemFailures": []}
    assert total(env, "ada") == 15 and nothing_parked(env)


AGGREGATE_CRASHES = {
    # (operation, table, before, nth): where the first delivery stops
    "before the markers are read": ("BatchGetItem", "ledger", True, 1),
    "after the total's update": ("UpdateItem", "items", False, 1),
    "before the markers are put": ("BatchWriteItem", "ledger", True, 1),
    "before the journal is removed": ("UpdateItem", "items", True, 2),
}


@pytest.mark.parametrize("next_batch", ["the same batch again", "other records first"])
@pytest.mark.parametrize("where", sorted(AGGREGATE_CRASHES))
def test_a_crash_between_the_ledger_paths_writes_counts_each_record_once(
    foreign_totals: Env, where: str, next_batch: str
) -> None:
    env = foreign_totals
    for n in range(1, 4):
        score(env, n, "ada", n)
    records = sources(env, 0)
    operation, table, before, nth = AGGREGATE_CRASHES[where]
    crash = Crash(operation, table, before=before, nth=nth)
    # GIVEN the batch's delivery crashed at that point (its retries within the invocation included)
    assert deliver(env, records, now=1, clients=crash)["batchItemFailures"]
    assert crash.crashed
    aggregate.RINGS.clear()  # the retry reaches a new container
    if next_batch == "other records first":
        # WHEN scores of another item of the same user come first (another shard's batch)
        score(env, 10, "ada", 100)
        assert deliver(env, sources(env, 5), now=6) == {"batchItemFailures": []}
    # AND Lambda delivers the batch again, and again from its second record
    assert deliver(env, records, now=10) == {"batchItemFailures": []}
    assert deliver(env, records[1:], now=11) == {"batchItemFailures": []}
    # THEN each record counted once, nothing parked
    expected = 6 + (100 if next_batch == "other records first" else 0)
    assert total(env, "ada") == expected and nothing_parked(env)
    # AND a journal left behind (its markers all put) is gone with the total's next ledger write
    score(env, 20, "ada", 1000)
    assert deliver(env, sources(env, 20), now=21) == {"batchItemFailures": []}
    assert total(env, "ada") == expected + 1000 and aggregate.JOURNAL not in total_item(env, "ada")
