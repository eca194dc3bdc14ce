"""What every benchmark shares: moto in-process with a fixed latency injected per AWS call, call counting, timing,
and printing tables. moto answers in-process with no round trip; the injected latency is what makes concurrency
show what it would in Lambda, where each call is a network round trip."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

LATENCY_SECONDS = float(os.environ.get("BENCH_LATENCY_MS", "10")) / 1000
REGION = "eu-west-1"
ACCOUNT = "123456789012"


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
    counted. Baselines use the same clients, so both sides pay the same per-call price."""

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

                client = boto3.client(
                    service, region_name=REGION, config=Config(max_pool_connections=64, retries={"max_attempts": 1})
                )
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


@contextmanager
def ministack() -> Iterator[str]:
    """A fresh ministack for the benchmark inside: every boto3 client created meanwhile talks to it. Used where
    moto's own costs would swamp what is measured (moto deep-copies a whole table for every item of a transaction,
    so transactions against a growing table get slower and slower; DynamoDB and ministack do not)."""
    from localcloud.server import Ministack

    saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID")}
    with Ministack() as server:
        os.environ.update(
            AWS_ENDPOINT_URL=server.endpoint,
            AWS_DEFAULT_REGION=REGION,
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
        )
        try:
            yield server.endpoint
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


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
