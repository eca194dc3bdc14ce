"""Benchmark 2: `polling`. What our processor reads per item it dispatches (DynamoDB's ScannedCount: what read
capacity is billed on) at 10,000 and 100,000 items, 1% of them due, in three scenarios: a normal tick; two
overlapping ticks (the rule ticks again while a tick still runs: the second finds the first one's shards held by
their leases and leaves them to it); and a backlog larger than one tick can take (ticks with a short time budget,
until it is drained). Beside it a cron-style full scan, and seed 002 ported as
its article requires (each task's time written on the rule's grid) in a sequence of 1-minute ticks with one tick
skipped, compared on what really differs: lateness, the skipped tick's tasks, and how many items one index key
serves per tick."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .baselines import seed002
from .harness import (
    ACCOUNT,
    LATENCY_SECONDS,
    REGION,
    BenchClients,
    aws,
    cpu_split,
    expect,
    ledger_table,
    sized,
    table,
    timed,
)

# Table sizes (items; 1% due). `BENCH_POLLING_SIZES=100000` runs one; the seed 002 sequence runs only at 10,000.
SIZES = tuple(int(n) for n in os.environ.get("BENCH_POLLING_SIZES", "10000,100000").split(","))
DUE_FRACTION = 0.01
SHARDS = 8
WORKERS = 16
INTERVAL = 60  # the rule's rate, seconds
WINDOW = 600  # due items are due at random whole seconds over the last ten minutes
MARGIN = 10  # the processor's budget margin: it stops taking items this long before its Lambda's timeout
OVERLAP_AFTER = 1 / 3  # the second tick starts when the first has dispatched this share of the due items
BACKLOG_SHARE = 1 / 3  # a backlog tick gets this share of the time a normal tick took
SEQUENCE_SIZE = 10_000  # the seed 002 comparison (its figures do not depend on the table's size)
SKIPPED_TICK = 3  # the tick of the sequence that does not run


@dataclass
class Loaded:
    """A table with both indexes (ours and seed 002's) and its due items as loaded, to put them back between runs;
    and the ledger its processor holds shards in."""

    name: str
    ledger: str
    now: float
    due: list[dict[str, Any]]
    others: int
    ddb: Any = None

    def reset(self) -> None:
        """Every due item back as it was loaded: waiting in both indexes (the runs mark them done)."""
        for start in range(0, len(self.due), 25):
            batch = [{"PutRequest": {"Item": item}} for item in self.due[start : start + 25]]
            self.ddb.batch_write_item(RequestItems={self.name: batch})

    def queue(self) -> str:
        """A fresh target queue (its ARN), so a run's messages are its own."""
        import boto3

        name = f"q-{uuid.uuid4().hex[:8]}"
        boto3.client("sqs", region_name=REGION).create_queue(QueueName=name)
        return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


def _load(size: int, now: float) -> Loaded:
    """`size` pending items in both indexes, 1% due at random whole seconds over the last ten minutes, the rest over
    the next day (from two minutes on: no tick here reaches them). Seed 002's `taskDateTime` is each item's time
    rounded up to the rule's grid, as its article requires. Loaded without injected latency (setup is not
    measured)."""
    import boto3
    from st_core.pending import INDEX_NAME, pending_attributes
    from st_core.stream import identity_of

    ddb = boto3.client("dynamodb", region_name=REGION)
    name = f"poll-{uuid.uuid4().hex[:8]}"
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": a, "AttributeType": t}
            for a, t in (("PK", "S"), ("SK", "S"), ("stShard", "N"), ("stDue", "N"), (seed002.BUCKET_ATTRIBUTE, "S"))
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": INDEX_NAME,
                "KeySchema": [
                    {"AttributeName": "stShard", "KeyType": "HASH"},
                    {"AttributeName": "stDue", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": seed002.BUCKET_INDEX,
                "KeySchema": [{"AttributeName": seed002.BUCKET_ATTRIBUTE, "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"},
            },
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    rng = random.Random(size)
    loaded = Loaded(name, ledger_table(ddb, f"{name}-ledger"), now, [], 0, ddb)
    batch: list[dict[str, Any]] = []
    for n in range(size):
        keys = {"PK": {"S": f"task#{n}"}, "SK": {"S": "T"}}
        is_due = rng.random() < DUE_FRACTION
        due = int(now) - rng.randrange(WINDOW) if is_due else int(now) + rng.randrange(120, 86_400)
        attributes = pending_attributes(identity_of(keys), _as_datetime(due), SHARDS)
        item = {
            **keys,
            "stShard": {"N": str(attributes["stShard"])},
            "stDue": {"N": str(attributes["stDue"])},
            "stStatus": {"S": "PENDING"},
            "dueEpoch": {"N": str(due)},
            seed002.BUCKET_ATTRIBUTE: {"S": seed002.bucket_of(due, INTERVAL)},
        }
        if is_due:
            loaded.due.append(item)
        else:
            loaded.others += 1
        batch.append({"PutRequest": {"Item": item}})
        if len(batch) == 25:
            ddb.batch_write_item(RequestItems={name: batch})
            batch = []
    if batch:
        ddb.batch_write_item(RequestItems={name: batch})
    return loaded


def _as_datetime(epoch: float) -> Any:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC)


def polling_config(
    table_name: str, ledger: str, target_arn: str, shards: int = SHARDS, groups: int = 1
) -> dict[str, Any]:
    """The processor's configuration as the component writes it, for a table, its ledger and an SQS target (no
    poison queue or dead-letter queue: a run parks nothing). Its budget margin is `MARGIN` (the default 60 s
    Lambda timeout's)."""
    from components import ScheduledTableArgs
    from components.runtime_config import Value
    from components.targets import QueueTarget
    from tests.support.handler_config import handler_config

    args = ScheduledTableArgs(
        mode="polling",
        target=QueueTarget(queue_arn=target_arn),
        max_workers=WORKERS,
        shards=shards,
        shard_groups=groups,
        max_attempts=3,
    )
    names = {Value.TABLE: table_name, Value.POISON_QUEUE_URL: "", Value.TARGET_DLQ_URL: "", Value.LEDGER_TABLE: ledger}
    config: dict[str, Any] = dict(handler_config(args, names))
    assert config["polling"]["budgetMarginSeconds"] == MARGIN, "MARGIN is the component's budget margin"
    return config


class _Budget:
    """A Lambda context (`get_remaining_time_in_millis`) whose invocation has `seconds` left before the processor's
    margin: the processor reads it as the handler does."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + MARGIN + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self.deadline - time.monotonic()) * 1000)

    def seconds_left(self) -> float:
        """What `polling.handler` gives the processor as its time left."""
        return self.get_remaining_time_in_millis() / 1000


@dataclass
class Run:
    """One scenario: what our ticks read and dispatched together."""

    scenario: str
    due: int
    target: str = ""  # the ARN of the queue the run's due items go to
    ticks: int = 0
    dispatched: int = 0
    read: int = 0
    queries: int = 0
    counts: int = 0  # Select=COUNT queries
    seconds: float = 0.0
    detail: str = ""
    reports: list[Any] = field(default_factory=list)

    def add(self, clients: BenchClients, report: Any) -> None:
        self.ticks += 1
        self.dispatched += report.dispatched
        self.read += clients.log.items_read
        self.queries += clients.log.calls["Query"]
        self.reports.append(report)

    @property
    def per_item(self) -> float:
        return self.read / self.dispatched if self.dispatched else float("nan")


def _sent(clients: BenchClients) -> int:
    """About how many due events `clients` has sent: the processor sends up to 10 a SendMessageBatch."""
    return clients.log.calls["SendMessage"] + 10 * clients.log.calls["SendMessageBatch"]


def _counting(clients: BenchClients, run: Run) -> BenchClients:
    """Count the COUNT queries `clients` makes into `run` (the old backlog metric made one per backlogged shard)."""

    def seen(params: dict[str, Any], **_: Any) -> None:
        run.counts += params.get("Select") == "COUNT"

    clients.get("dynamodb").meta.events.register("provide-client-params.dynamodb.Query", seen)
    return clients


def _tick(config: dict[str, Any], now: float, run: Run, time_left: Callable[[], float] | None = None) -> Any:
    from polling import process

    clients = _counting(BenchClients(), run)
    kwargs = {} if time_left is None else {"time_left": time_left}
    report = process(config, clients=clients, now=lambda: now, **kwargs)  # type: ignore[arg-type]
    run.add(clients, report)
    return report


def _normal(loaded: Loaded) -> Run:
    run = Run("normal", len(loaded.due), target=loaded.queue())
    config = polling_config(loaded.name, loaded.ledger, run.target)
    run.seconds, _ = timed(lambda: _tick(config, loaded.now, run))
    return run


def _overlap(loaded: Loaded) -> Run:
    """Tick A starts; when it has dispatched a third of the due items, tick B (the rule's next tick, a minute
    later, within A's leases) starts beside it; both run to the end. B finds each shard A still holds held (the
    page it read to see something due is all it reads there) and takes only shards A has released."""
    from polling import process

    run = Run("overlap", len(loaded.due), target=loaded.queue())
    config = polling_config(loaded.name, loaded.ledger, run.target)
    clients = {"A": _counting(BenchClients(), run), "B": _counting(BenchClients(), run)}
    reports: dict[str, Any] = {}
    errors: list[BaseException] = []

    def tick(which: str, now: float) -> None:
        try:
            reports[which] = process(config, clients=clients[which], now=lambda: now)  # type: ignore[arg-type]
        except BaseException as exc:  # re-raised below, in the benchmark's thread
            errors.append(exc)

    started = time.perf_counter()
    first = threading.Thread(target=tick, args=("A", loaded.now))
    first.start()
    while _sent(clients["A"]) < OVERLAP_AFTER * len(loaded.due) and first.is_alive():
        time.sleep(0.002)
    second = threading.Thread(target=tick, args=("B", loaded.now + INTERVAL))
    second.start()
    first.join()
    second.join()
    run.seconds = time.perf_counter() - started
    if errors:
        raise errors[0]
    for which in ("A", "B"):
        run.add(clients[which], reports[which])
    a, b = reports["A"], reports["B"]
    run.detail = (
        f"A {a.dispatched} + B {b.dispatched} dispatched; B found {b.held_shards} of {SHARDS} shards held by A "
        f"(A {a.held_shards} by B); read again and not sent (changed since the index showed them) "
        f"{a.skipped + b.skipped}"
    )
    return run


def _backlog(loaded: Loaded, normal_seconds: float) -> Run:
    """Ticks whose Lambda has a third of the time a normal tick took, one after another until one leaves nothing."""
    run = Run("backlog", len(loaded.due), target=loaded.queue())
    config = polling_config(loaded.name, loaded.ledger, run.target)
    budget = max(0.2, normal_seconds * BACKLOG_SHARE)
    started = time.perf_counter()
    for _ in range(30):
        report = _tick(config, loaded.now, run, _Budget(budget).seconds_left)
        if not report.out_of_time and not report.backlogged_shards:
            break
    run.seconds = time.perf_counter() - started
    first = run.reports[0]
    run.detail = (
        f"{budget:.2f} s a tick; first tick {first.dispatched} dispatched, {first.backlogged_shards} shards "
        f"backlogged, {first.backlog} read and left"
    )
    return run


def _full_scan(loaded: Loaded) -> tuple[float, float]:
    """The full scan's items read per due item, and its seconds."""
    clients = BenchClients()
    elapsed, (found, read) = timed(lambda: seed002.full_scan(clients, loaded.name, loaded.now))
    assert len(found) == len(loaded.due), (len(found), len(loaded.due))
    return read / len(loaded.due), elapsed


@dataclass
class Sequence:
    """One design over a sequence of ticks: which due items ran at which tick."""

    design: str
    due: int
    lateness: list[float] = field(default_factory=list)  # tasks of the ticks that ran: seconds after their time
    late_skipped: list[float] = field(default_factory=list)  # the same, of the skipped tick's tasks that ran
    read: int = 0
    hottest_key: int = 0  # the most items one index partition key gave one tick
    keys_per_tick: float = 0.0  # index partition keys a tick reads

    @property
    def ran(self) -> int:
        return len(self.lateness) + len(self.late_skipped)

    def ran_at(self, tick: float, due: float, skipped: float) -> None:
        if seed002.grid_time(due, INTERVAL) == skipped:
            self.late_skipped.append(tick - due)
        else:
            self.lateness.append(tick - due)


def _sequence(loaded: Loaded) -> tuple[Sequence, Sequence, int, int]:
    """Ticks on the rule's 1-minute grid over the ten minutes the due items fall in, one of them skipped, for ours
    and for seed 002's processor (its tasks on the grid). Returns both, the skipped tick's due items and the
    number of ticks."""
    from polling import process

    times = [float(seed002.grid_time(int(item["dueEpoch"]["N"]), INTERVAL)) for item in loaded.due]
    ticks = [float(t) for t in range(int(min(times)), int(max(times)) + 1, INTERVAL)]
    skipped = ticks[SKIPPED_TICK]
    ours, seed = Sequence("ours: due index, stDue <= now", len(loaded.due)), Sequence("seed 002", len(loaded.due))
    target = loaded.queue()
    config = polling_config(loaded.name, loaded.ledger, target)
    import boto3

    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.get_queue_url(QueueName=target.rsplit(":", 1)[-1])["QueueUrl"]
    for tick in ticks:
        if tick == skipped:
            continue  # the rule did not invoke the processor (or the invocation failed): for both designs
        clients = BenchClients()
        report = process(config, clients=clients, now=functools.partial(float, tick))  # type: ignore[arg-type]
        ours.read += clients.log.items_read
        ours.hottest_key = max(ours.hottest_key, *report.shards.values())
        for due in _received(sqs, url):
            ours.ran_at(tick, due, skipped)
        clients = BenchClients()
        found, read = seed002.exact_bucket(clients, loaded.name, tick)
        seed.read += read
        seed.hottest_key = max(seed.hottest_key, len(found))
        for item in found:
            seed.ran_at(tick, int(item["dueEpoch"]["N"]), skipped)
    ours.keys_per_tick, seed.keys_per_tick = float(SHARDS), 1.0
    expect("polling sequence: ours, due items run once each", ours.ran, ours.due)
    return ours, seed, sum(1 for t in times if t == skipped), len(ticks)


def _received(sqs: Any, url: str) -> Iterator[float]:
    """The due time of every message the queue holds (taken off it)."""
    from datetime import datetime

    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return
        for message in messages:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            body = json.loads(message["Body"])
            yield datetime.fromisoformat(body["dueAt"].replace("Z", "+00:00")).timestamp()


@contextlib.contextmanager
def _index_queries_without_the_whole_table() -> Iterator[None]:
    """moto answers a Query on an index by sorting every item of the table and comparing each one's keys, with
    Python objects (about 1 s a Query at 100,000 items, all emulator CPU; DynamoDB reads only the key's partition,
    up to the end of the range). For the length of the benchmark, moto's Query on an index is handed only what it
    would look at to answer: the items of the partition asked for, and of those (read forward with a `<` or `<=`
    range) the ones in the range plus the next one (moto needs it to decide on LastEvaluatedKey). Keys are compared
    as moto compares them (numbers as decimals, strings as strings), and moto does everything else itself (the
    order, the start key, the range, Limit, LastEvaluatedKey, ScannedCount), so its answers are the same, sooner."""
    from moto.dynamodb.models.table import Table

    original = Table.query

    @functools.lru_cache(maxsize=1 << 16)
    def number(text: str) -> Decimal:
        return Decimal(text)

    def value(stored: Any) -> Any:
        return number(stored.value) if stored.type == "N" else stored.value

    def same(stored: Any, asked: Any) -> bool:
        return bool(stored.value == asked.value or value(stored) == value(asked))

    def query(
        self: Any,
        hash_key: Any,
        comparison: str | None,
        bounds: list[Any],
        limit: int,
        start: Any,
        forward: bool,
        projection: Any,
        index_name: str | None = None,
        *rest: Any,
        **kwargs: Any,
    ) -> Any:
        answer = functools.partial(
            original, self, hash_key, comparison, bounds, limit, start, forward, projection, index_name, *rest, **kwargs
        )
        conditions = kwargs.get("hash_key_conditions")
        if not (index_name and conditions):
            return answer()
        index = next(i for i in self.all_indexes() if i.name == index_name)
        hashes = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"]
        ranges = [k["AttributeName"] for k in index.schema if k["KeyType"] == "RANGE"]
        items = [i for group in self.items.values() for i in (group.values() if self.range_key_attr else [group])]
        for attribute, asked in conditions:
            items = [i for i in items if (a := i.attrs.get(attribute)) and a.type == asked.type and same(a, asked)]
        items = [i for i in items if all(i.attrs.get(r) for r in ranges)]
        order = self._generate_attr_to_sort_by([*hashes, self.hash_key_attr], [*ranges, self.range_key_attr])
        items.sort(key=lambda i: tuple(value(i.attrs[a]) for a in order))
        if len(ranges) == 1 and forward is not False and comparison in ("<", "<=") and len(bounds) == 1:
            bound = value(bounds[0])
            inside = sum(
                1
                for i in items
                if value(i.attrs[ranges[0]]) < bound or (comparison == "<=" and value(i.attrs[ranges[0]]) == bound)
            )
            items = items[: inside + 1]  # sorted on the range key within the partition: the range is a prefix
        self.all_items = lambda: items  # moto's DynamoDB calls are serialized (harness.aws): no other query sees it
        try:
            return answer()
        finally:
            del self.all_items

    Table.query = query  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        Table.query = original  # type: ignore[method-assign]


def _delivered(target_arn: str) -> int:
    """Messages the run's target queue holds: one per due item dispatched."""
    import boto3

    sqs = boto3.client("sqs", region_name=REGION)
    url = sqs.get_queue_url(QueueName=target_arn.rsplit(":", 1)[-1])["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def _measure(
    size: int, with_sequence: bool
) -> tuple[list[list[Any]], dict[str, float], list[Run], tuple[Sequence, Sequence, int, int] | None]:
    loaded = _load(size, float(int(time.time())))
    scan_per_due, scan_seconds = _full_scan(loaded)
    normal = _normal(loaded)
    loaded.reset()
    overlap = _overlap(loaded)
    loaded.reset()
    backlog = _backlog(loaded, normal.seconds)
    sequence = None
    if with_sequence:
        loaded.reset()
        sequence = _sequence(loaded)
    runs = [normal, overlap, backlog]
    rows: list[list[Any]] = []
    for run in runs:
        # Each due item delivered once (the target's queue holds one message per due item, no more), before a time
        # is reported.
        expect(f"polling {run.scenario} at {size:,}: dispatched", run.dispatched, run.due)
        expect(f"polling {run.scenario} at {size:,}: messages delivered", _delivered(run.target), run.due)
        rows.append(
            [
                f"ours: {run.scenario}",
                size,
                run.due,
                run.ticks,
                run.dispatched,
                run.read,
                run.per_item,
                run.queries,
                run.counts,
                run.seconds,
            ]
        )
    rows.append(["full scan (baseline)", size, len(loaded.due), 1, "", "", scan_per_due, "", 0, scan_seconds])
    minutes = Counter(item[seed002.BUCKET_ATTRIBUTE]["S"] for item in loaded.due)
    minute_shards = Counter((item[seed002.BUCKET_ATTRIBUTE]["S"], item["stShard"]["N"]) for item in loaded.due)
    figures = {f"polling_reads_per_item_{size}_{run.scenario}": run.per_item for run in runs}
    figures.update(
        {
            f"polling_reads_per_due_{size}": normal.per_item,
            f"polling_scan_read_ratio_{size}": scan_per_due / normal.per_item,
            f"polling_baseline_reads_per_item_{size}_full_scan": scan_per_due,
            f"polling_backlog_ticks_{size}": float(backlog.ticks),
            f"polling_count_queries_{size}": float(sum(run.counts for run in runs)),
            # a minute's tasks on one index partition key, at most: seed 002's minute key, our (shard) key
            f"polling_hot_key_items_{size}_seed002": float(max(minutes.values())),
            f"polling_hot_key_items_{size}_ours": float(max(minute_shards.values())),
        }
    )
    return rows, figures, runs, sequence


def _sequence_table(ours: Sequence, seed: Sequence, skipped: int, ticks: int) -> tuple[str, dict[str, float]]:
    rows = []
    for design in (seed, ours):
        rows.append(
            [
                design.design,
                design.due,
                design.ran,
                design.due - design.ran,
                statistics.mean(design.lateness),
                max(design.lateness),
                f"{len(design.late_skipped)} of {skipped}"
                + (
                    f", {min(design.late_skipped):.0f}-{max(design.late_skipped):.0f} s late"
                    if design.late_skipped
                    else ""
                ),
                design.read / design.ran,
                design.keys_per_tick,
                design.hottest_key,
            ]
        )
    header = [
        "design",
        "due",
        "ran",
        "never ran",
        "late, mean s",
        "late, max s",
        "skipped tick's tasks: ran",
        "read / ran",
        "index keys a tick",
        "most items from one key a tick",
    ]
    note = (
        f"{SEQUENCE_SIZE:,} items, 1% due at random whole seconds over ten minutes; the rule ticks on the minute, "
        f"and tick {SKIPPED_TICK + 1} of {ticks} does not run (a failed or throttled invocation, a deployment): "
        f"{skipped} tasks carry its time. Seed 002 as its article requires: each task's time is written on the "
        "rule's grid (rounded up to the minute: never early), and a tick asks its index for its own minute. Both "
        "run a task at the first tick at or after its time: the same lateness, up to one interval (the late "
        "columns: tasks of the ticks that ran). What differs: the skipped tick's tasks, which seed 002 never asks "
        "for again and ours takes at the next tick; and where a tick's tasks come from: one index partition key in "
        "seed 002 (every task of a minute has the same key: its reads, and its index writes as tasks are scheduled, "
        f"land on one partition), {SHARDS} in ours. Both read each task once."
    )
    figures = {
        "polling_seed002_never_ran": float(seed.due - seed.ran),
        "polling_seed002_never_ran_fraction": (seed.due - seed.ran) / seed.due,
        "polling_sequence_never_ran": float(ours.due - ours.ran),
        "polling_seed002_late_mean_s": statistics.mean(seed.lateness),
        "polling_seed002_late_max_s": max(seed.lateness),
        "polling_sequence_late_mean_s": statistics.mean(ours.lateness),
        "polling_sequence_late_max_s": max(ours.lateness),
        "polling_sequence_skipped_tick_late_max_s": max(ours.late_skipped, default=0.0),
        "polling_seed002_hottest_key_items": float(seed.hottest_key),
        "polling_sequence_hottest_key_items": float(ours.hottest_key),
        f"polling_baseline_reads_per_item_{SEQUENCE_SIZE}_seed002": seed.read / seed.ran,
    }
    title = "2b. polling vs seed 002 on its grid: a sequence of 1-minute ticks, one skipped"
    return table(title, header, rows, note), figures


def run() -> tuple[str, dict[str, float]]:
    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    details: list[str] = []
    sequence: tuple[Sequence, Sequence, int, int] | None = None
    with cpu_split() as cpu:
        sizes = sized(SIZES, (1000,))
        for size in sizes:
            with aws(), _index_queries_without_the_whole_table():
                found_rows, found_figures, runs, found_sequence = _measure(size, size == sized(SEQUENCE_SIZE, 1000))
            rows += found_rows
            figures.update(found_figures)
            details += [f"{run.scenario} at {size:,}: {run.detail}" for run in runs if run.detail]
            sequence = sequence or found_sequence
    note = (
        f"Injected latency {LATENCY_SECONDS * 1000:.0f} ms per call; {SHARDS} shards, {WORKERS} workers; 1% of the "
        "table due at random seconds over the last ten minutes. Items read = DynamoDB's ScannedCount summed over "
        "every Query of the scenario's ticks; read / item = that over the items dispatched (each exactly once, "
        "checked). normal: one tick. overlap: a second tick (a minute later, within the first one's shard leases) "
        f"starts when the first has dispatched {OVERLAP_AFTER:.0%} of the due items, both run to the end (the "
        "second reads a page of each shard the first holds, finds it held and leaves it). backlog: ticks "
        f"whose Lambda has {BACKLOG_SHARE:.0%} of the time the normal tick took (the processor reads its context's "
        "remaining time and stops its margin before it), one after another until one leaves nothing. COUNT = "
        "Select=COUNT queries (the old backlog metric's). The full scan reads every item each tick. "
        + " ".join(f"{d}." for d in details)
        + f" Seconds are mostly moto's work; {cpu.describe()}."
    )
    header = ["design", "items", "due", "ticks", "dispatched", "items read", "read / item", "queries", "COUNT", "s"]
    text = table("2. polling: items read per item dispatched", header, rows, note)
    if sequence is not None:
        seq_text, seq_figures = _sequence_table(*sequence)
        hot = ", ".join(
            f"at {size:,} items a minute's tasks are {figures[f'polling_hot_key_items_{size}_seed002']:.0f} on seed "
            f"002's one key, at most {figures[f'polling_hot_key_items_{size}_ours']:.0f} on one of ours"
            for size in sizes
        )
        text += "\n" + seq_text.rstrip("\n") + f" From the items' keys: {hot}.\n"
        figures.update(seq_figures)
    return text, figures
