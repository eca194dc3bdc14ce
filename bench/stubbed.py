"""AWS with the HTTP layer stubbed: the production clients (the handlers' own `Clients`, so their pool, retries and
timeouts) do all their work (validating, serialising, signing, parsing), but each request is answered in-process
with a canned success after an injected latency. What is left is the client CPU a Lambda pays per call, without an
emulator's CPU on top; it is what bounds a handler on the fraction of a core Lambda gives it."""

from __future__ import annotations

import io
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

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

    def __init__(self, latency: float) -> None:
        from st_core.clients import Clients

        self.latency = latency
        self.calls: Counter[str] = Counter()
        self._inner = Clients()
        self._hooked: set[str] = set()
        self._lock = threading.Lock()

    def get(self, service: str) -> Any:
        client = self._inner.get(service)
        with self._lock:
            if service not in self._hooked:
                client.meta.events.register("before-send", self._answer)
                self._hooked.add(service)
        return client

    def total(self) -> int:
        return sum(self.calls.values())

    def _answer(self, request: Any, event_name: str = "", **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        service, operation = event_name.split(".")[1:3]
        with self._lock:
            self.calls[operation] += 1
        if self.latency:
            time.sleep(self.latency)
        headers = {"Content-Type": CONTENT_TYPES.get(service, "application/json"), "x-amzn-RequestId": "stub"}
        return AWSResponse(request.url, 200, headers, _Raw(BODIES.get(operation, b"{}")))
