"""Fault injection for handler tests: a share of AWS calls fail with throttling, a 5xx or a timeout before they reach
the service, and Lambda's replay of a stream batch (retry from the reported sequence number until none fail).

Faults are raised at `before-call`, so the request is never made: what the handler sees is what is left after the
SDK's own retries gave up. (A `before-send` fault does not work with moto, which applies the request anyway, and
it would model a different failure: a timeout *after* the service acted. That one makes any sender of a
non-idempotent request, SQS SendMessage say, deliver twice; it is why every due event carries `keys` and `dueAt`
for the consumer to dedupe on, and why Step Functions targets get a deterministic execution name.)"""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError

FAULTS = {
    "throttling": (400, "ThrottlingException"),
    "5xx": (503, "ServiceUnavailable"),
}


@dataclass
class FaultInjector:
    """Fails `rate` of all calls (seeded, so a failing run can be replayed)."""

    rate: float
    seed: int = 7
    calls: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def attach(self, client: Any) -> Any:
        client.meta.events.register("before-call", self._before_call)
        return client

    def _before_call(self, model: Any, **_: Any) -> None:
        with self._lock:
            self.calls += 1
            if self._rng.random() >= self.rate:
                return
            kind = self._rng.choice([*FAULTS, "timeout"])
            self.faults[kind] += 1
        if kind == "timeout":
            raise ReadTimeoutError(endpoint_url=f"https://injected/{model.name}")
        status, code = FAULTS[kind]
        raise ClientError(
            {"Error": {"Code": code, "Message": "injected fault"}, "ResponseMetadata": {"HTTPStatusCode": status}},
            model.name,
        )


class FaultyClients:
    """The handlers' client registry, every client behind the injector (tests read state with their own)."""

    def __init__(self, injector: FaultInjector) -> None:
        self.injector = injector
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, service: str) -> Any:
        import boto3
        from botocore.config import Config

        with self._lock:
            if service not in self._clients:
                config = Config(retries={"mode": "standard", "max_attempts": 3})
                self._clients[service] = self.injector.attach(boto3.client(service, config=config))
            return self._clients[service]


def replay(handle: Callable[[dict[str, Any]], Any], records: list[dict[str, Any]], max_rounds: int = 500) -> int:
    """Deliver `records` like Lambda: on a partial failure, again from the first failed sequence number; on an
    exception, the whole batch again. Returns the number of invocations it took."""
    remaining = list(records)
    rounds = 0
    while remaining:
        rounds += 1
        if rounds > max_rounds:
            raise AssertionError(f"still failing after {max_rounds} deliveries")
        try:
            response = handle({"Records": remaining})
        except Exception:
            continue
        failures = [int(f["itemIdentifier"]) for f in response["batchItemFailures"]]
        if not failures:
            return rounds
        first = min(failures)
        remaining = [r for r in remaining if int(r["dynamodb"]["SequenceNumber"]) >= first]
    return rounds


@dataclass
class FaultReport:
    handler: str
    calls: int
    faults: int
    records: int
    actions: int
    duplicates: int
    losses: int
    deliveries: int


REPORTS: list[FaultReport] = []


class _Answered:
    """The HTTP side of an answer a hook gives instead of the service (botocore reads only its status)."""

    def __init__(self) -> None:
        self.status_code = 200
        self.headers: dict[str, str] = {}


# A batch call's event name, its entries' parameter and an entry's body field, by the service's botocore name.
_BATCH_CALLS = {
    "sqs": ("sqs.SendMessageBatch", "Entries", "MessageBody"),
    "sns": ("sns.PublishBatch", "PublishBatchRequestEntries", "Message"),
}


class RefusedEntries:
    """SQS answering a SendMessageBatch (or SNS a PublishBatch) with some entries in `Failed` (200, the others
    sent), as it does when it refuses an entry (an internal error, or a sender fault): `refuse(entry)` picks them,
    `code` and `sender_fault` are what the service lists for each. A refused entry is taken out of the request
    before it is built, so it never reaches the queue or topic (nor any other hook watching what is sent); a call
    left with no entry is answered without being made. `refused` keeps the bodies refused, in order."""

    def __init__(
        self, refuse: Callable[[dict[str, Any]], bool], code: str = "InternalError", sender_fault: bool = False
    ) -> None:
        self.refuse = refuse
        self.code = code
        self.sender_fault = sender_fault
        self.refused: list[str] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        self._call = _BATCH_CALLS["sqs"]

    def attach(self, client: Any) -> Any:
        self._call = _BATCH_CALLS[client.meta.service_model.service_name]
        events, (operation, _, _) = client.meta.events, self._call
        events.register_first(f"before-parameter-build.{operation}", self._take_out)
        events.register(f"before-call.{operation}", self._answer_if_empty)
        events.register(f"after-call.{operation}", self._list_failed)
        return client

    def detach(self, client: Any) -> None:
        events, (operation, _, _) = client.meta.events, self._call
        events.unregister(f"before-parameter-build.{operation}", self._take_out)
        events.unregister(f"before-call.{operation}", self._answer_if_empty)
        events.unregister(f"after-call.{operation}", self._list_failed)

    def _take_out(self, params: dict[str, Any], **_: Any) -> None:
        listed, body = self._call[1:]
        refused = [entry for entry in params[listed] if self.refuse(entry)]
        params[listed] = [entry for entry in params[listed] if entry not in refused]
        self._local.failed = [
            {"Id": e["Id"], "Code": self.code, "SenderFault": self.sender_fault, "Message": "refused"} for e in refused
        ]
        self._local.empty = not params[listed]
        with self._lock:
            self.refused += [entry[body] for entry in refused]

    def _answer_if_empty(self, **_: Any) -> tuple[_Answered, dict[str, Any]] | None:
        if not self._local.empty:
            return None
        return _Answered(), {"Successful": [], "Failed": []}

    def _list_failed(self, parsed: dict[str, Any], **_: Any) -> None:
        parsed["Failed"] = list(parsed.get("Failed") or []) + self._local.failed
        self._local.failed = []


class Throttled:
    """A service throttling the calls `throttle(params)` picks, every time they are made, for longer than the SDK's
    and the handler's own retries (DynamoDB's ProvisionedThroughputExceededException on a hot partition during a
    herd, by default). Raised before the request is built, so the call never reaches the service; `throttled`
    counts them."""

    def __init__(
        self, throttle: Callable[[dict[str, Any]], bool], code: str = "ProvisionedThroughputExceededException"
    ) -> None:
        self.throttle = throttle
        self.code = code
        self.throttled = 0
        self._lock = threading.Lock()
        self._events: list[tuple[Any, str]] = []

    def attach(self, client: Any, *operations: str) -> Any:
        service = client.meta.service_model.service_name
        for operation in operations:
            event = f"before-parameter-build.{service}.{operation}"
            client.meta.events.register(event, self._check)
            self._events.append((client, event))
        return client

    def detach(self) -> None:
        for client, event in self._events:
            client.meta.events.unregister(event, self._check)
        self._events = []

    def _check(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if not self.throttle(params):
            return
        with self._lock:
            self.throttled += 1
        raise ClientError(
            {
                "Error": {"Code": self.code, "Message": "injected: the request rate is too high"},
                "ResponseMetadata": {"HTTPStatusCode": 400},
            },
            model.name,
        )
