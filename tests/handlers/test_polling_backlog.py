"""polling under load, against moto: what a tick reads (DynamoDB's ScannedCount, what read capacity is billed on)
when ticks overlap, when a tick dies holding a shard, and when the backlog is more than a tick can take; what the
consistent read of a page keeps from being sent (an index that lags); and how a shard's items spread over the worker
pool."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import polling
import pytest
from polling import budget, drain
from st_core.clients import CLIENTS

from tests.conftest import REGION
from tests.handlers.conftest import Env, use_shards, with_due_index
from tests.handlers.test_polling import NOW, due_keys, item, matches, pending


@pytest.fixture
def polling_env(env: Env) -> Iterator[Env]:
    yield with_due_index(env)


class CountingClients:
    """The handlers' client registry, counting what the Queries read and keeping every Query's parameters; `on_send`
    runs before each item a SendMessage or SendMessageBatch sends (the moment an item is being dispatched)."""

    def __init__(self, on_send: Callable[[], None] | None = None) -> None:
        self.read = 0
        self.queries: list[dict[str, Any]] = []
        self.sends = 0
        self.on_send = on_send
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                client = boto3.client(service, region_name=REGION)
                client.meta.events.register("provide-client-params.dynamodb.Query", self._query)
                client.meta.events.register("after-call.dynamodb.Query", self._scanned)
                client.meta.events.register("before-parameter-build.sqs.SendMessage", self._send)
                client.meta.events.register("before-parameter-build.sqs.SendMessageBatch", self._send)
                self._clients[service] = client
            return self._clients[service]

    def _query(self, params: dict[str, Any], **_: Any) -> None:
        with self._lock:
            self.queries.append(dict(params))

    def _scanned(self, parsed: dict[str, Any], **_: Any) -> None:
        with self._lock:
            self.read += int(parsed.get("ScannedCount", 0))

    def _send(self, params: dict[str, Any], **_: Any) -> None:
        """Once for each due event sent, a batch's (SendMessageBatch) as for single ones."""
        for _entry in params.get("Entries", [params]):
            with self._lock:
                self.sends += 1
            if self.on_send is not None:
                self.on_send()


def tick(env: Env, clients: CountingClients, now: float = NOW, **kwargs: Any) -> Any:
    return polling.process(env.config, clients=clients, now=lambda: now, **kwargs)  # type: ignore[arg-type]


def _dies_holding(env: Env, shard: int, now: float) -> None:
    """A tick started at `now` took the shard (its lease: `now` + the Lambda timeout + 30 s) and its Lambda died."""
    env.ddb.put_item(
        TableName=env.config["polling"]["ledgerTable"],
        Item={"id": {"S": f"lease#shard#{shard}"}, "holder": {"S": "dead"}, "expiresAt": {"N": str(int(now) + 90)}},
    )


def test_two_overlapping_ticks_read_each_due_item_once(polling_env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "PACES", {})
    # GIVEN 60 due items, and tick B starting (a minute later) while tick A dispatches its first item
    polling_env.configure(max_workers=1)  # one thread: the interleaving is the same on every run
    for i in range(60):
        pending(polling_env, f"t{i}", NOW - 60 - i, shard=i % 8)
    second = CountingClients()
    others: list[Any] = []

    def start_the_second_tick() -> None:
        if not others:
            others.append(tick(polling_env, second, NOW + 60))

    first = CountingClients(on_send=start_the_second_tick)
    report = tick(polling_env, first)
    # THEN each item ran once, and the two ticks together read each item once, but for the one item of B's first
    # page of the shard A held (one worker, no pace learnt: a page of one), which told B the shard was due
    keys = due_keys(polling_env)
    assert len(keys) == 60 and len(set(keys)) == 60
    assert report.dispatched + others[0].dispatched == 60 and others[0].held_shards == 1
    assert first.read + second.read == 60 + 1


def test_a_shard_held_by_a_dead_tick_is_read_a_page_a_tick_until_its_lease_ends(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(budget, "PACES", {})  # a cold container: a first page of its share of the pool
    use_shards(polling_env, 1)
    for i in range(30):
        pending(polling_env, f"t{i}", NOW - 5 - i)
    _dies_holding(polling_env, 0, NOW)
    # WHEN ticks come within the lease, each reads one first page (to know the shard is due), sends nothing
    within = CountingClients()
    report = tick(polling_env, within, NOW + 60)
    assert (report.dispatched, report.held_shards) == (0, 1) and within.read == polling_env.config["maxWorkers"]
    # AND when the lease has ended every item runs once, as the occurrence it is
    after = CountingClients()
    assert tick(polling_env, after, NOW + 90).dispatched == 30
    keys = due_keys(polling_env)
    assert len(keys) == len(set(keys)) == 30
    assert tick(polling_env, CountingClients(), NOW + 3600).dispatched == 0


def test_an_item_the_lagging_index_still_shows_after_its_completion_is_not_sent_again(polling_env: Env) -> None:
    # GIVEN a tick ran the item, and the index (eventually consistent) still shows it as due at the next tick
    use_shards(polling_env, 1)
    pending(polling_env, "a", NOW - 5)
    stale = item(polling_env, "a")
    assert tick(polling_env, CountingClients()).dispatched == 1
    assert due_keys(polling_env) == ["a"]
    clients = CountingClients()

    def lagging(parsed: dict[str, Any], **_: Any) -> None:
        parsed["Items"] = [stale]
        parsed["Count"] = parsed["ScannedCount"] = 1

    clients.get("dynamodb").meta.events.register("after-call.dynamodb.Query", lagging)
    # WHEN the next tick reads it: the consistent read finds it done
    report = tick(polling_env, clients, NOW + 60)
    # THEN it is not sent again
    assert (report.dispatched, report.skipped) == (0, 1) and due_keys(polling_env) == []


def test_an_item_the_lagging_index_shows_at_its_old_time_after_a_move_is_not_sent_then(polling_env: Env) -> None:
    # GIVEN a waiting item its user moved to an hour later (the assigner indexed the move), and an index that still
    # shows it at its old time
    use_shards(polling_env, 1)
    pending(polling_env, "a", NOW - 5, dueAt=int(NOW) - 5)
    stale = item(polling_env, "a")
    polling_env.ddb.update_item(
        TableName=polling_env.table,
        Key={"PK": {"S": "a"}, "SK": {"S": "T"}},
        UpdateExpression="SET dueAt = :d, stDue = :d",
        ExpressionAttributeValues={":d": {"N": str(int(NOW) + 3600)}},
    )
    clients = CountingClients()
    clients.get("dynamodb").meta.events.register(
        "after-call.dynamodb.Query", lambda parsed, **_: parsed.update(Items=[stale], Count=1, ScannedCount=1)
    )
    # THEN the tick does not send it at its old time; the item runs at its new one
    assert tick(polling_env, clients).dispatched == 0 and due_keys(polling_env) == []
    assert tick(polling_env, CountingClients(), NOW + 3600).dispatched == 1


def test_a_backed_off_item_its_user_moved_runs_at_its_new_time(polling_env: Env) -> None:
    # GIVEN an item backed off after a failed dispatch (due again at NOW + 30 as the occurrence of NOW - 5), then
    # moved by its user to an hour later (an update of a backed-off item, which the assigner's filter does not pass:
    # it is not waiting as the user wrote it)
    pending(polling_env, "a", NOW + 30, dueAt=int(NOW) + 3600, stStatus="RETRY", stTaskDue=int(NOW) - 5, stAttempts=1)
    polling_env.event()  # the stream so far
    # WHEN the backoff has ended, it does not run at its old time, but at its new one
    assert tick(polling_env, CountingClients(), NOW + 30).dispatched == 0
    assert item(polling_env, "a")["stStatus"]["S"] == "PENDING"
    [reindexed] = polling_env.event()["Records"]
    assert not matches(reindexed)  # the processor's own write: the assigner's filter keeps it out (no loop)
    assert tick(polling_env, CountingClients(), NOW + 3599).dispatched == 0
    assert tick(polling_env, CountingClients(), NOW + 3600).dispatched == 1
    [message] = polling_env.messages(polling_env.due_queue_url)
    assert message["dueAt"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW + 3600))


def test_a_retried_dispatch_is_the_same_occurrence(polling_env: Env) -> None:
    from tests.handlers.test_polling import _break_target

    pending(polling_env, "a", NOW - 5)
    _break_target(polling_env)
    assert polling.process(polling_env.config, now=lambda: NOW).retried == 1
    CLIENTS.reset()  # the target works again
    assert polling.process(polling_env.config, now=lambda: NOW + 61).dispatched == 1
    [message] = polling_env.messages(polling_env.due_queue_url)
    assert message["dueAt"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 5))


@pytest.mark.slow  # volume: `make test` runs it, `make unit` does not
def test_a_backlog_is_read_once_and_never_counted(polling_env: Env) -> None:
    use_shards(polling_env, 1)
    polling_env.configure(max_workers=1)
    for i in range(250):
        pending(polling_env, f"t{i:03}", NOW - 1000 + i)
    # GIVEN a Lambda whose remaining time runs down by one second for each item sent
    first = CountingClients()
    report = tick(polling_env, first, time_left=lambda: 60.0 - first.sends)
    # THEN it stopped with its margin (10 s) left, read little more than it took (its last batches shrink to what
    # their completions fit: the rest of the page is left), and made no COUNT query
    assert report.out_of_time and 30 <= report.dispatched <= 60
    assert first.read == report.dispatched + report.backlog and report.backlog < 20, report
    assert all("Select" not in query for query in first.queries)
    assert report.backlogged_shards == 1
    # AND the next tick takes the rest, reading each of those once
    rest = CountingClients()
    assert tick(polling_env, rest).dispatched == 250 - report.dispatched and rest.read == 250 - report.dispatched
    assert all("Select" not in query for query in rest.queries)


def test_a_hot_shards_items_run_on_the_whole_pool(polling_env: Env) -> None:
    # GIVEN every due item on one shard, and a target that takes a while
    polling_env.configure(max_workers=6)
    for i in range(40):
        pending(polling_env, f"t{i}", NOW - 5, shard=3)
    running, most = [0], [0]
    lock = threading.Lock()

    def slow_send() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1

    # THEN they are dispatched side by side, never more at once than the pool's workers
    assert tick(polling_env, CountingClients(on_send=slow_send)).dispatched == 40
    assert 3 <= most[0] <= 6


def test_reads_throttled_past_every_try_are_reported_as_throttled_not_out_of_time(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import json

    for n in range(4):
        pending(polling_env, f"r{n}", NOW - 5)
    # GIVEN DynamoDB answering every try of the page's consistent BatchGetItem with r1 and r3 unprocessed (a hot
    # partition throttling reads), and plenty of time left
    monkeypatch.setattr(drain.time, "sleep", lambda _: None)

    def unprocess(parsed: dict[str, Any], **_: Any) -> None:
        for table, items in parsed.get("Responses", {}).items():
            kept = [i for i in items if i["PK"]["S"] not in ("r1", "r3")]
            keys = [{"PK": i["PK"], "SK": i["SK"]} for i in items if i["PK"]["S"] in ("r1", "r3")]
            parsed["Responses"][table] = kept
            if keys:
                parsed["UnprocessedKeys"] = {table: {"Keys": keys, "ConsistentRead": True}}

    CLIENTS.get("dynamodb").meta.events.register("after-call.dynamodb.BatchGetItem", unprocess)
    report = polling.process(polling_env.config, now=lambda: NOW, time_left=lambda: 600.0)
    # THEN the two read are sent, the two unread are reported as throttled (the shard stopped with them due), and
    # the tick does not say it ran out of time: in its report and in its metrics line
    assert (report.dispatched, report.throttled, report.backlog) == (2, 2, 0)
    assert not report.out_of_time and report.backlogged_shards == 1
    [metric] = [json.loads(r.getMessage()) for r in caplog.records if '"_aws"' in r.getMessage()]
    assert metric["Throttled"] == 2 and metric["outOfTime"] is False and metric["BackloggedShards"] == 1
    # AND the next tick, unthrottled, sends them, once
    CLIENTS.get("dynamodb").meta.events.unregister("after-call.dynamodb.BatchGetItem", unprocess)
    assert polling.process(polling_env.config, now=lambda: NOW).dispatched == 2
    assert due_keys(polling_env) == ["r0", "r1", "r2", "r3"]


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "ThrottlingException"])
def test_a_read_throttled_as_a_whole_leaves_its_items_to_the_next_tick_counted_as_throttled(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    from botocore.exceptions import ClientError

    use_shards(polling_env, 1)
    monkeypatch.setattr(budget, "PACES", {})  # a cold container: a first page of the pool's size, all three
    for n in range(3):
        pending(polling_env, f"r{n}", NOW - 5)
    # GIVEN DynamoDB refusing every try of the page's consistent BatchGetItem as a whole (it raises the throttle
    # instead of returning the keys unprocessed)
    slept: list[float] = []
    monkeypatch.setattr(drain.time, "sleep", slept.append)

    def throttle(**_: Any) -> None:
        raise ClientError({"Error": {"Code": code, "Message": "throttled"}}, "BatchGetItem")

    CLIENTS.get("dynamodb").meta.events.register("before-call.dynamodb.BatchGetItem", throttle)
    # THEN the tick does not fail: the items are reported as throttled (their shard stopped with them due), unsent
    report = polling.process(polling_env.config, now=lambda: NOW, time_left=lambda: 600.0)
    assert (report.dispatched, report.throttled, report.backlog, report.out_of_time) == (0, 3, 0, False)
    # AND it backed off between its tries, not after the last one
    assert len(slept) == polling.READ_ATTEMPTS - 1
    # AND the next tick, unthrottled, sends them, once
    CLIENTS.get("dynamodb").meta.events.unregister("before-call.dynamodb.BatchGetItem", throttle)
    assert polling.process(polling_env.config, now=lambda: NOW).dispatched == 3
    assert due_keys(polling_env) == ["r0", "r1", "r2"]
