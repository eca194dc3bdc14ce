"""polling under load, against moto: what a tick reads (DynamoDB's ScannedCount, what read capacity is billed on)
when ticks overlap, when a claim is never completed, and when the backlog is more than a tick can take; and how a
shard's items spread over the worker pool."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import polling
import pytest
from polling import Processor
from st_core.clients import CLIENTS

from tests.conftest import REGION
from tests.handlers.conftest import Env, with_due_index
from tests.handlers.test_polling import NOW, due_keys, item, matches, pending
from tests.iam.enforce import acting


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


def _claim_as(env: Env, now: float, pks: list[str], *, done: bool = False) -> None:
    """A tick started at `now` claims these items (those still in the index) with its lease (`now` + 90 s), and
    with `done` dispatches and completes them too."""
    other = Processor(env.config, CLIENTS, lambda: now, lambda: 900.0)
    with acting("processor", env.config):
        _claim_all(env, other, now, pks, done=done)


def _claim_all(env: Env, other: Processor, now: float, pks: list[str], *, done: bool) -> None:
    for pk in pks:
        raw = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": pk}, "SK": {"S": "T"}})["Item"]
        if "stDue" in raw:
            key = {"PK": raw["PK"], "SK": raw["SK"]}
            assert other._claim(key, int(raw["stDue"]["N"]), int(now) + 90, raw)
            if done:
                other._done(key, int(now) + 90)


def _dies_after_claiming(env: Env, pk: str) -> None:
    """A tick (at NOW) claims the item, and its Lambda dies before dispatching it."""
    _claim_as(env, NOW, [pk])


def test_two_overlapping_ticks_read_each_due_item_once(polling_env: Env) -> None:
    # GIVEN 60 due items, and tick B starting (a minute later) while tick A dispatches its first item
    polling_env.config["maxWorkers"] = 1  # one thread: the interleaving is the same on every run
    for i in range(60):
        pending(polling_env, f"t{i}", NOW - 60 - i, shard=i % 8)
    second = CountingClients()
    others: list[Any] = []

    def start_the_second_tick() -> None:
        if not others:
            others.append(tick(polling_env, second, NOW + 60))

    first = CountingClients(on_send=start_the_second_tick)
    report = tick(polling_env, first)
    # THEN each item ran once, and the two ticks together read each item once: B did not read what A had claimed
    keys = due_keys(polling_env)
    assert len(keys) == 60 and len(set(keys)) == 60
    assert report.dispatched + others[0].dispatched == 60
    assert first.read + second.read == 60


def test_a_claim_moves_the_item_out_of_the_due_range_until_its_lease_ends(polling_env: Env) -> None:
    # GIVEN a processor that claimed an item and died before dispatching it
    pending(polling_env, "a", NOW - 5)
    _dies_after_claiming(polling_env, "a")
    assert item(polling_env, "a")["stDue"]["N"] == str(int(NOW) + 90)
    # WHEN ticks come within the lease, they do not even read it
    within = CountingClients()
    assert tick(polling_env, within, NOW + 60).dispatched == 0 and within.read == 0
    # AND when the lease has ended it runs once, as the occurrence it is (its own due time, not the lease's end)
    after = CountingClients()
    assert tick(polling_env, after, NOW + 90).dispatched == 1 and after.read == 1
    [message] = polling_env.messages(polling_env.due_queue_url)
    assert message["dueAt"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(NOW - 5))
    assert tick(polling_env, CountingClients(), NOW + 3600).dispatched == 0


def test_a_claimed_item_moved_before_its_lease_ended_runs_at_its_new_time(polling_env: Env) -> None:
    # GIVEN an item claimed by a processor that died, then moved by its user to an hour later (an update of a
    # claimed item, which the assigner's filter does not pass: it is not waiting in the index)
    pending(polling_env, "a", NOW - 5, dueAt=int(NOW) - 5)
    _dies_after_claiming(polling_env, "a")
    polling_env.ddb.update_item(
        TableName=polling_env.table,
        Key={"PK": {"S": "a"}, "SK": {"S": "T"}},
        UpdateExpression="SET dueAt = :d",
        ExpressionAttributeValues={":d": {"N": str(int(NOW) + 3600)}},
    )
    polling_env.event()  # the stream so far
    # WHEN the lease has ended, it does not run at its old time, but at its new one
    assert tick(polling_env, CountingClients(), NOW + 90).dispatched == 0
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
    polling_env.config["polling"]["shards"] = 1
    for i in range(250):
        pending(polling_env, f"t{i:03}", NOW - 1000 + i)
    # GIVEN a Lambda whose remaining time runs down by one second at each look (before a page, before a claim)
    left = iter(range(60, 0, -1))
    first = CountingClients()
    report = tick(polling_env, first, time_left=lambda: float(next(left, 0)))
    # THEN it stopped with its margin (10 s) left, read only what it took, and made no COUNT query
    assert report.out_of_time and 40 <= report.dispatched <= 51
    assert all("Select" not in query for query in first.queries) and first.read == report.dispatched
    assert report.backlogged_shards == 1
    # AND the next tick takes the rest, reading each of those once
    rest = CountingClients()
    assert tick(polling_env, rest).dispatched == 250 - report.dispatched and rest.read == 250 - report.dispatched
    assert all("Select" not in query for query in rest.queries)


def test_a_hot_shards_items_run_on_the_whole_pool(polling_env: Env) -> None:
    # GIVEN every due item on one shard, and a target that takes a while
    polling_env.config["maxWorkers"] = 6
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


def _racing(env: Env, other_started: float, *, done: bool = False) -> Callable[[], float]:
    """A time-left clock for a tick of 2 workers that, at its first claim, finds that another tick (started at
    `other_started`) has just taken the 2 items of its first page (it read them before the other's claims)."""
    looks = [0]
    lock = threading.Lock()

    def time_left() -> float:
        with lock:  # both workers wait until the other tick has claimed
            looks[0] += 1
            if looks[0] == 2:
                _claim_as(env, other_started, ["t0", "t1"], done=done)
        return 900.0

    return time_left


@pytest.mark.parametrize("done", [False, True], ids=["claimed", "claimed-and-done"])
def test_the_older_of_two_ticks_reading_the_same_items_leaves_the_shard_to_the_younger(
    polling_env: Env, done: bool
) -> None:
    polling_env.config["polling"]["shards"], polling_env.config["maxWorkers"] = 1, 2
    for i in range(10):
        pending(polling_env, f"t{i}", NOW - 100 + i)
    # WHEN a tick finds its first page taken by a tick that started a minute after it
    older = CountingClients()
    report = tick(polling_env, older, NOW, time_left=_racing(polling_env, NOW + 60, done=done))
    # THEN it reads no more of that shard: reading on would read what the younger one is about to claim, and the
    # younger one has more time left
    assert (report.dispatched, older.read) == (0, 2) and report.yielded_shards == 1


def test_the_younger_of_two_ticks_reading_the_same_items_goes_on(polling_env: Env) -> None:
    polling_env.config["polling"]["shards"], polling_env.config["maxWorkers"] = 1, 2
    for i in range(10):
        pending(polling_env, f"t{i}", NOW - 100 + i)
    younger = CountingClients()
    report = tick(polling_env, younger, NOW + 60, time_left=_racing(polling_env, NOW))
    assert (report.dispatched, report.skipped, younger.read) == (8, 2, 10) and report.yielded_shards == 0


def test_a_younger_tick_behind_an_older_one_reads_the_shard_from_the_other_end(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two overlapping ticks reading one shard in the same order read the same pages: the older one claims what both
    read, and the younger reads on behind it, each item twice. Refused by an older tick's claim, the younger reads
    the shard from its latest due items down instead, and stops where it meets the older one: every item is read
    once, but for the younger's first page and the page where they meet."""
    monkeypatch.setattr(polling, "_PACE", {})  # no pace learnt by an earlier test: a first page of one item
    polling_env.config["polling"]["shards"], polling_env.config["maxWorkers"] = 1, 1
    pks = [f"t{i:03}" for i in range(40)]
    for i, pk in enumerate(pks):
        pending(polling_env, pk, NOW - 100 + i)
    # GIVEN an older tick (started a minute before) taking the shard's items in due order, one before each of the
    # younger's claims: it reads each item it claims once, as if its pages were never larger than that
    older_claimed: list[str] = []
    position = [0]

    def time_left() -> float:
        while position[0] < len(pks):
            pk = pks[position[0]]
            position[0] += 1
            raw = item(polling_env, pk)
            if raw.get("stStatus", {}).get("S") == "PENDING":
                _claim_as(polling_env, NOW - 60, [pk])
                older_claimed.append(pk)
                break
        return 900.0

    younger = CountingClients()
    monkeypatch.setattr(polling, "PAGE_SIZE", 5)  # pages small beside the shard, as at volume
    report = tick(polling_env, younger, NOW, time_left=time_left)
    # THEN each item is taken once, by one tick or the other, and the two read 40 items plus at most the younger's
    # first page (1) and the page where they met (5)
    assert sorted(older_claimed + due_keys(polling_env)) == pks
    assert report.dispatched > 0
    assert younger.read + len(older_claimed) <= len(pks) + 1 + 5


def test_a_page_read_while_other_shards_dispatch_is_claimed_before_more_is_dispatched(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An item a tick has read but not claimed is in sight of an overlapping tick, which reads it again and may win
    it (a refused claim, a write, for the first; the measured extra reads of two overlapping ticks). A shard's page
    read while the pool holds other shards' dispatches is claimed before them, not after."""
    polling_env.config["polling"]["shards"], polling_env.config["maxWorkers"] = 2, 2  # a reader and a worker each
    # every shard's items in one page (a warm container's pace)
    monkeypatch.setattr(polling, "_PACE", {(polling_env.table, shard): 100.0 for shard in (0, 1)})
    for shard in (0, 1):
        for i in range(6):
            pending(polling_env, f"s{shard}-{i}", NOW - 100 + i, shard=shard)
    events: list[str] = []
    lock = threading.Lock()
    shard_0_claiming = threading.Event()

    def log(event: str) -> None:
        with lock:
            events.append(event)
            if events.count("claim s0") == 6:
                shard_0_claiming.set()

    def query(params: dict[str, Any], **_: Any) -> None:
        if params["ExpressionAttributeValues"][":shard"]["N"] == "1":
            # GIVEN shard 1 read once shard 0's claims have all begun: its dispatches wait for the workers
            assert shard_0_claiming.wait(10)

    submit = polling.ClaimsFirst.submit

    def queued(pool: polling.ClaimsFirst, fn: Any, *args: Any, first: bool = False) -> Any:
        raw = args[0] if args else None
        if first and isinstance(raw, dict) and raw.get("stShard", {}).get("N") == "1":
            log("queued s1")
        return submit(pool, fn, *args, first=first)

    monkeypatch.setattr(polling.ClaimsFirst, "submit", queued)

    def claim(params: dict[str, Any], **_: Any) -> None:
        if ":claimed" in params.get("ExpressionAttributeValues", {}):
            log(f"claim {params['Key']['PK']['S'][:2]}")

    clients = CountingClients()
    for operation in ("SendMessage", "SendMessageBatch"):  # one "send" a dispatch: a batch is one call, one worker
        clients.get("sqs").meta.events.register(f"before-parameter-build.sqs.{operation}", lambda **_: log("send"))
    ddb = clients.get("dynamodb")
    ddb.meta.events.register("provide-client-params.dynamodb.Query", query)
    ddb.meta.events.register("provide-client-params.dynamodb.UpdateItem", claim)
    assert tick(polling_env, clients).dispatched == 12
    # THEN shard 1's items were claimed as soon as a worker was free: once its page was in the pool, no dispatch
    # began before its claims; only the dispatches already running (one a worker) could send in between. (Counted
    # from the page's last claim handed to the pool, not from the read: how long the reader takes to get there is
    # the machine's, and a loaded one lets the workers start more dispatches meanwhile.)
    in_pool = events[max(i for i, event in enumerate(events) if event == "queued s1") :]
    last_claim = max(i for i, event in enumerate(in_pool) if event == "claim s1")
    assert in_pool[:last_claim].count("send") <= 2, events
