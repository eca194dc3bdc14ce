"""AWS with the HTTP layer stubbed: the production clients (the handlers' own `Clients`, so their pool, retries and
timeouts) do all their work (validating, serialising, signing, parsing), but each request is answered in-process
with what AWS answers on the path measured, after an injected latency: a canned success for writes, and for reads
of the table (`BatchGetItem`, `GetItem`) the items the table holds (`StubbedClients(items=...)`), so a handler that
reads an item back before acting finds it. What is left is the client CPU a Lambda pays per call, without an
emulator's CPU on top; it is what bounds a handler on the fraction of a core Lambda gives it."""

from __future__ import annotations

import copy
import io
import json
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

# One call as its caller made it: (service, operation, parameters).
Call = tuple[str, str, dict[str, Any]]
# Canned bodies per operation (every other operation answers `{}`): what each call's parser needs to succeed.
BODIES = {
    "CreateSchedule": b'{"ScheduleArn": "arn:aws:scheduler:eu-west-1:123456789012:schedule/g/n"}',
    "UpdateSchedule": b'{"ScheduleArn": "arn:aws:scheduler:eu-west-1:123456789012:schedule/g/n"}',
    "BatchWriteItem": b'{"UnprocessedItems": {}}',
}
CONTENT_TYPES = {"dynamodb": "application/x-amz-json-1.0", "sqs": "application/x-amz-json-1.0"}


class _Raw(io.BytesIO):
    """The raw stream botocore reads a response body from."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.getvalue()


class StubbedClients:
    """A drop-in for the handlers' `Clients`: the production clients, every call answered after `latency` seconds
    and counted by operation."""

    def __init__(self, latency: float, items: Iterable[dict[str, Any]] = (), keys: Sequence[str] = ()) -> None:
        """`items`: the table's items (DynamoDB JSON), found by the names of its `keys` attributes."""
        from st_core.clients import Clients
        from st_core.stream import identity_of

        self.latency = latency
        self.keys = tuple(keys)
        self.items = {identity_of({k: item[k] for k in self.keys}): item for item in items}
        self.calls: Counter[str] = Counter()
        # With `recording` set, every call's (service, operation, parameters) as the caller gave them (`replay`).
        self.recording: list[Call] | None = None
        self._inner = Clients()
        self._hooked: set[str] = set()
        self._lock = threading.Lock()

    def get(self, service: str) -> Any:
        client = self._inner.get(service)
        with self._lock:
            if service not in self._hooked:
                client.meta.events.register("before-send", self._answer)
                client.meta.events.register("provide-client-params", self._record)
                self._hooked.add(service)
        return client

    def total(self) -> int:
        return sum(self.calls.values())

    def _record(self, params: dict[str, Any], event_name: str = "", **_: Any) -> None:
        if self.recording is not None:
            service, operation = event_name.split(".")[1:3]
            with self._lock:
                self.recording.append((service, operation, copy.deepcopy(params)))

    def _answer(self, request: Any, event_name: str = "", **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        service, operation = event_name.split(".")[1:3]
        with self._lock:
            self.calls[operation] += 1
        if self.latency:
            time.sleep(self.latency)
        headers = {"Content-Type": CONTENT_TYPES.get(service, "application/json"), "x-amzn-RequestId": "stub"}
        body = BODIES.get(operation, b"{}")
        if operation in ("BatchGetItem", "GetItem"):
            body = json.dumps(self._read(operation, json.loads(request.body))).encode()
        return AWSResponse(request.url, 200, headers, _Raw(body))

    def _read(self, operation: str, asked: dict[str, Any]) -> dict[str, Any]:
        """What DynamoDB answers a read of the table: every item asked for that it holds (none unprocessed)."""
        from st_core.stream import identity_of

        if operation == "GetItem":
            item = self.items.get(identity_of(asked["Key"]))
            return {} if item is None else {"Item": item}
        responses = {
            table: [self.items[i] for i in (identity_of(k) for k in wanted["Keys"]) if i in self.items]
            for table, wanted in asked["RequestItems"].items()
        }
        return {"Responses": responses, "UnprocessedKeys": {}}


READS = ("BatchGetItem", "GetItem")


def replay(clients: StubbedClients, calls: Sequence[Call], workers: int) -> float:
    """Wall seconds for `calls` (a `recording`) made again by nothing but a loop over the same clients, `workers` at
    a time: the reads first (a handler acting on what it read waits for them), then the rest. It is the floor of a
    handler making those calls with that concurrency: the same client CPU, the same latency, the same threads'
    cost, none of the handler's own work."""
    from botocore import xform_name
    from st_core.batch import in_parallel

    def call(entry: Call) -> None:
        service, operation, params = entry
        getattr(clients.get(service), xform_name(operation))(**params)

    started = time.perf_counter()
    for phase in ([c for c in calls if c[1] in READS], [c for c in calls if c[1] not in READS]):
        in_parallel(call, phase, workers)
    return time.perf_counter() - started
