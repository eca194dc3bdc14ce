"""What every benchmark shares: moto in-process with a fixed latency injected per AWS call, call counting, timing,
CPU accounting (`cpu_split`: how much of a run's CPU the emulator spent, how much botocore) and printing tables.
moto answers in-process with no round trip; the injected latency is what makes concurrency show what it would in
Lambda, where each call is a network round trip."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

LATENCY_SECONDS = float(os.environ.get("BENCH_LATENCY_MS", "10")) / 1000
REGION = "eu-west-1"
ACCOUNT = "123456789012"
# `BENCH_SMALL=1`: every benchmark at a tiny size (seconds in all), its checks unchanged: what tests/bench runs in
# `make test`, so a benchmark that crashes or measures nothing breaks the build. Its figures mean nothing.
SMALL_VARIABLE = "BENCH_SMALL"
T = TypeVar("T")


def small() -> bool:
    """True when the benchmarks run at their tiny size (`SMALL_VARIABLE`)."""
    return os.environ.get(SMALL_VARIABLE) == "1"


def sized(full: T, tiny: T) -> T:
    """`full` for a real run, `tiny` for the small one."""
    return tiny if small() else full


class NothingMeasured(AssertionError):
    """A benchmark's run did not do the work its figure claims (fewer schedules than records that should make one,
    deliveries missing or doubled, a record parked): its time would measure something else, so nothing is
    reported."""


def expect(what: str, found: object, wanted: object) -> None:
    """Check, before a time is reported, that the work it times happened: `found` must equal `wanted`."""
    if found != wanted:
        raise NothingMeasured(f"{what}: {found!r}, expected {wanted!r}")


@dataclass
class CallLog:
    """API calls made through the instrumented clients, by operation."""

    calls: Counter[str] = field(default_factory=Counter)
    items_read: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, operation: str) -> None:
        with self.lock:
            self.calls[operation] += 1

    def read(self, count: int) -> None:
        with self.lock:
            self.items_read += count

    def total(self) -> int:
        return sum(self.calls.values())

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.items_read = 0


class BenchClients:
    """A drop-in for the handlers' `Clients` registry: boto3 clients whose every call waits `latency` first and is
    counted. Baselines use the same clients, so both sides pay the same per-call price.

    Configured as production configures its clients (`st_core.clients`): the same connection pool size, so workers
    beyond botocore's default of 10 do not queue for a connection here when they would not in Lambda, and the same
    retry mode; but with retries off (one attempt in all: botocore's `max_attempts` counts retries, so the
    `max_attempts: 1` used before allowed one), so an injected fault or a throttle shows as itself instead of as
    latency. Every client is instrumented for `cpu_split`."""

    def __init__(self, latency: float = LATENCY_SECONDS) -> None:
        self.latency = latency
        self.log = CallLog()
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                import boto3
                from botocore.config import Config
                from st_core.clients import POOL_CONNECTIONS

                config = Config(
                    max_pool_connections=POOL_CONNECTIONS, retries={"mode": "standard", "total_max_attempts": 1}
                )
                client = boto3.client(service, region_name=REGION, config=config)
                instrument(client)
                client.meta.events.register("before-call", self._before_call)
                client.meta.events.register("after-call", self._after_call)
                self._clients[service] = client
            return self._clients[service]

    def _before_call(self, model: Any, **_: Any) -> None:
        self.log.record(model.name)
        if self.latency:
            time.sleep(self.latency)

    def _after_call(self, parsed: dict[str, Any], **_: Any) -> None:
        # Items a Query or Scan read (before any filter): what DynamoDB bills read capacity for.
        if isinstance(parsed, dict) and "ScannedCount" in parsed:
            self.log.read(int(parsed["ScannedCount"]))


class _CpuAccount:
    """Thread CPU spent inside instrumented clients' API calls, and inside the emulator's part of them, summed over
    every thread since the process started (`cpu_split` takes differences). Each thread marks where it entered a
    call and where it entered the send; a lock guards only the sums."""

    def __init__(self) -> None:
        self.in_calls = 0.0
        self.in_emulator = 0.0
        self.calls = 0
        self._lock = threading.Lock()
        self._marks = threading.local()

    def call_started(self, **_: Any) -> None:
        self._marks.call = time.thread_time()

    def call_ended(self, **_: Any) -> None:
        started = getattr(self._marks, "call", None)
        if started is None:
            return
        self._marks.call = None
        spent = time.thread_time() - started
        with self._lock:
            self.in_calls += spent
            self.calls += 1

    def send_started(self, **_: Any) -> None:
        self._marks.send = time.thread_time()

    def send_ended(self, **_: Any) -> None:
        started = getattr(self._marks, "send", None)
        if started is None:
            return
        self._marks.send = None
        spent = time.thread_time() - started
        with self._lock:
            self.in_emulator += spent

    def snapshot(self) -> tuple[float, float, int]:
        with self._lock:
            return self.in_calls, self.in_emulator, self.calls


_CPU = _CpuAccount()


def instrument(client: Any) -> Any:
    """Make `client`'s API calls count in `cpu_split` (BenchClients does this to every client it makes; call it
    on any other client a benchmark creates). Returns the client.

    A call is timed from its first event (`provide-client-params`) to its last (`after-call`, or `after-call-error`
    when the HTTP layer raised). The emulator's part is the `before-send` event: moto answers inside a handler of
    it, so hooks registered first and last around it enclose exactly moto's work. With a real endpoint (ministack,
    AWS) or a Stubber (which answers at `before-call`), nothing runs between them: the send happens after the event
    and counts as the client's."""
    events = client.meta.events
    events.register_first("provide-client-params", _CPU.call_started, unique_id="bench-cpu-call-start")
    events.register_last("after-call", _CPU.call_ended, unique_id="bench-cpu-call-end")
    events.register_last("after-call-error", _CPU.call_ended, unique_id="bench-cpu-call-error")
    events.register_first("before-send", _CPU.send_started, unique_id="bench-cpu-send-start")
    events.register_last("before-send", _CPU.send_ended, unique_id="bench-cpu-send-end")
    return client


@dataclass
class CpuSplit:
    """CPU seconds of one window (see `cpu_split`), split by who spent them; total = emulator + client + rest.

    - `total`: this process's CPU (every thread, user and system) plus its child processes'.
    - `emulator`: AWS's side, which Lambda does not pay for: moto inside this process (the `before-send` event of
      instrumented clients) plus every child process (ministack and its workers; a benchmark that starts other
      subprocesses inside the window would have them counted here too).
    - `client`: botocore inside instrumented clients' API calls, the emulator's part taken out: building,
      serialising and signing requests, the HTTP layer, parsing responses. Lambda pays this.
    - `rest`: everything else in this process: the handler's own code, the benchmark's, thread scheduling, the
      garbage collector.
    - `calls`: API calls made by instrumented clients that got a response (a call that raises before one, such as
      a fault injected at `before-call`, is not counted, and its CPU falls into `rest`); `wall`: elapsed seconds."""

    wall: float = 0.0
    total: float = 0.0
    emulator: float = 0.0
    client: float = 0.0
    calls: int = 0
    emulator_processes: float = 0.0  # the part of `emulator` spent in child processes

    @property
    def rest(self) -> float:
        return self.total - self.emulator - self.client

    @property
    def client_per_call(self) -> float:
        """botocore CPU seconds per API call (0 when no call was made)."""
        return self.client / self.calls if self.calls else 0.0

    @property
    def emulator_per_call(self) -> float:
        return self.emulator / self.calls if self.calls else 0.0

    def figures(self, prefix: str) -> dict[str, float]:
        """The split as report figures, e.g. `{prefix}_cpu_emulator_s`."""
        return {
            f"{prefix}_cpu_total_s": self.total,
            f"{prefix}_cpu_emulator_s": self.emulator,
            f"{prefix}_cpu_client_s": self.client,
            f"{prefix}_cpu_rest_s": self.rest,
            f"{prefix}_cpu_client_ms_per_call": self.client_per_call * 1000,
        }

    def describe(self) -> str:
        """One line for a table's note: `CPU 2.61 s = emulator 1.95 + client 0.52 (0.26 ms a call) + rest 0.14`."""
        return (
            f"CPU {self.total:.2f} s = emulator {self.emulator:.2f} + client {self.client:.2f} "
            f"({self.client_per_call * 1000:.2f} ms a call, {self.calls:,} calls) + rest {self.rest:.2f}"
        )


@contextmanager
def cpu_split() -> Iterator[CpuSplit]:
    """Measure the CPU spent inside the block, split between the emulator and botocore (see `CpuSplit`). The
    yielded object is filled in when the block ends:

        with cpu_split() as cpu:
            handler(event, None)
        print(cpu.describe())  # or cpu.total, cpu.emulator, cpu.client, cpu.rest, cpu.client_per_call

    Only clients made by `BenchClients` (or passed to `instrument`) are split; calls of other clients count in
    `rest`. Windows may nest or overlap (each takes differences of running sums), but other threads' calls made
    meanwhile count in every open window, so measure one run at a time."""
    split = CpuSplit()
    wall, process, children = time.perf_counter(), time.process_time(), _children_cpu()
    in_calls, in_emulator, calls = _CPU.snapshot()
    try:
        yield split
    finally:
        end_in_calls, end_in_emulator, end_calls = _CPU.snapshot()
        split.wall = time.perf_counter() - wall
        split.emulator_processes = max(0.0, _children_cpu() - children)
        moto = end_in_emulator - in_emulator
        split.total = time.process_time() - process + split.emulator_processes
        split.emulator = moto + split.emulator_processes
        split.client = (end_in_calls - in_calls) - moto
        split.calls = end_calls - calls


def _children_cpu() -> float:
    """CPU seconds (user + system) of this process's live descendants, and of the children they have reaped, read
    from /proc (0 where there is none). A descendant that exits inside a window takes its CPU with it, unless this
    process reaps it: that is counted by `resource`'s RUSAGE_CHILDREN."""
    import resource

    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = reaped.ru_utime + reaped.ru_stime
    proc = Path("/proc")
    if not proc.is_dir():
        return total
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        spent[pid] = sum(int(v) for v in fields[11:15]) / tick  # utime, stime, cutime, cstime
    me = os.getpid()
    for pid in spent:
        ancestor, hops = parents.get(pid), 0
        while ancestor is not None and hops < 64:
            if ancestor == me:
                total += spent[pid]
                break
            if ancestor <= 1:
                break
            ancestor, hops = parents.get(ancestor), hops + 1
    return total


@contextmanager
def aws() -> Iterator[None]:
    """moto for everything inside, with fake credentials in an explicit region."""
    from moto import mock_aws

    for key, value in {
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
    }.items():
        os.environ[key] = value
    os.environ.pop("AWS_ENDPOINT_URL", None)
    from tests.moto_locks import serialize_moto_transactions

    serialize_moto_transactions()
    with mock_aws():
        yield


def ledger_table(ddb: Any, name: str) -> str:
    """A ledger table as the component makes one (`id`, a string, its only key), empty: where the handlers keep
    their markers, claims and (`polling`) shard leases. Returns its name."""
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


@contextmanager
def ministack() -> Iterator[str]:
    """A fresh ministack for the benchmark inside: every boto3 client created meanwhile talks to it. Used where
    moto's own costs would swamp what is measured (moto deep-copies a whole table for every item of a transaction,
    so transactions against a growing table get slower and slower; DynamoDB and ministack do not)."""
    from localcloud.provision import CREDENTIALS
    from localcloud.server import Ministack

    names = (
        "AWS_ENDPOINT_URL",
        "AWS_DEFAULT_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    )
    saved = {k: os.environ.get(k) for k in names}
    with Ministack() as server:
        # The local cloud enforces IAM as AWS does: its own account's root credentials (what it deploys with), which
        # every call of the benchmark's setup and of the handlers it times may make.
        os.environ.pop("AWS_SESSION_TOKEN", None)
        _forget_default_session()  # boto3's default session keeps the credentials it found first
        os.environ.update(
            AWS_ENDPOINT_URL=server.endpoint,
            AWS_DEFAULT_REGION=REGION,
            AWS_ACCESS_KEY_ID=CREDENTIALS["aws_access_key_id"],
            AWS_SECRET_ACCESS_KEY=CREDENTIALS["aws_secret_access_key"],
        )
        try:
            yield server.endpoint
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            _forget_default_session()


def _forget_default_session() -> None:
    """Make `boto3.client` build its default session again, from the environment as it is now: the session caches
    the credentials it resolved first (a moto run's fake keys, which the local cloud refuses)."""
    import boto3

    boto3.DEFAULT_SESSION = None


def stream_record(keys: dict[str, Any], image: dict[str, Any], sequence: int) -> dict[str, Any]:
    """An INSERT record as Lambda delivers it from a DynamoDB stream."""
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": "INSERT",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": {
            "Keys": keys,
            "NewImage": {**keys, **image},
            "SequenceNumber": str(10**20 + sequence),
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = run()
    return time.perf_counter() - start, result


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]], note: str = "") -> str:
    """A plain-text table, numbers right-aligned (also valid Markdown when pasted into the README)."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(header)]
    lines = [f"### {title}", ""]
    lines.append("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        lines.append("| " + " | ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)) + " |")
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 100:
            return f"{value:,.0f}"
        if abs(value) >= 1:
            return f"{value:.2f}"
        return f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ratio(ours: float, theirs: float) -> str:
    """How many times better ours is (theirs / ours), for costs and times where lower is better."""
    if ours == 0:
        return "n/a" if theirs == 0 else "inf"
    return f"{theirs / ours:.1f}x"
