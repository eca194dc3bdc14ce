"""Faults as AWS produces them, injected into ministack's own process at a stated rate (`make soak` turns them on;
`make demo` and the tests do not).

- Service answers: a fraction of the DynamoDB, Scheduler and SQS calls made with any credentials but the local
  cloud's own (so the functions' calls, and the emulators' calls made as a schedule's role) is refused before it is
  handled, with the error AWS answers under load: DynamoDB `ProvisionedThroughputExceededException` (400),
  `ThrottlingException` (400) or `InternalServerError` (500); Scheduler `ThrottlingException` (429) or
  `InternalServerException` (500); SQS `ServiceUnavailable` (503) or `InternalError` (500). Nothing was done, so
  the caller's retry (botocore's, then Lambda's) is what must save it.
- Targets: a fraction of Scheduler's firings of a templated target (an SQS queue, say) is refused by the target
  (throttled); Scheduler retries it, as its retry policy says, a few seconds later (each retry may be refused
  again). How long each firing was held so is kept per occurrence (`HELD_FILE`, beside the fault log): that wait
  is Scheduler's delay, which every Scheduler-delivered mode's lateness bound adds, so a report can judge a
  firing's lateness less what its retries added.
- A function timeout mid-batch: a fraction of the stream batches Lambda's poller hands a function is cut short, as
  a timeout would: the function runs on the first records only (possibly none), then the invocation counts as
  timed out and the poller delivers the whole batch again.
- Partial batch responses (`ReportBatchItemFailures`): ministack treats a stream batch whose response names failed
  records as done, which loses them; Lambda retries from the first failed record. Here the whole batch is retried
  (a superset of what Lambda redelivers, which the handlers must take anyway).

`LOCALCLOUD_FAULTS=<fraction>` sets every rate at once; each injected fault is counted, per kind, in the file named
by `LOCALCLOUD_FAULT_LOG` (JSON), so a report can say what was injected.
"""

from __future__ import annotations

import contextvars
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .component import constants

FAULTS_VARIABLE = "LOCALCLOUD_FAULTS"
FAULT_LOG_VARIABLE = "LOCALCLOUD_FAULT_LOG"
# The local cloud's own credentials (provision.CREDENTIALS): the driver's calls and the emulators' service work.
ADMIN_KEY = "test"
TARGET_RETRY_SECONDS = (1.0, 5.0)
TARGET_MAX_ATTEMPTS = 10
# Beside the fault log: per `<table>/<occurrenceId>` held by Scheduler's retries, [first attempt, let through] (epoch
# seconds).
HELD_FILE = "held.json"
TIMEOUT_MESSAGE = "Task timed out (injected: the function's time ran out part-way through the batch)"

# (status, code) pairs per service module, as AWS answers a call it did not perform.
SERVICE_FAULTS: dict[str, tuple[tuple[int, str], ...]] = {
    "dynamodb": (
        (400, "ProvisionedThroughputExceededException"),
        (400, "ThrottlingException"),
        (500, "InternalServerError"),
    ),
    "scheduler": ((429, "ThrottlingException"), (500, "InternalServerException")),
    "sqs": ((503, "ServiceUnavailable"), (500, "InternalError")),
}
JSON_TYPES = {"dynamodb": "com.amazonaws.dynamodb.v20120810#", "sqs": "com.amazonaws.sqs#"}


def fault_response(service: str, status: int, code: str) -> tuple[int, dict[str, str], bytes]:
    """The HTTP answer AWS gives for `code` in `service`'s protocol (JSON 1.0 with `__type` for DynamoDB and SQS,
    REST-JSON with `x-amzn-ErrorType` for Scheduler)."""
    message = f"{code} (injected fault)"
    document = {"__type": JSON_TYPES.get(service, "") + code, "message": message, "Message": message}
    headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-ErrorType": code}
    if service == "sqs":
        headers["x-amzn-query-error"] = f"{code};Receiver" if status >= 500 else f"{code};Sender"
    return status, headers, json.dumps(document).encode()


def batch_failed(result: Any) -> bool:
    """A stream batch's invocation result that names failed records (`batchItemFailures`)."""
    body = result.get("body") if isinstance(result, dict) else None
    if isinstance(body, str | bytes):
        try:
            body = json.loads(body)
        except ValueError:
            return False
    return isinstance(body, dict) and bool(body.get("batchItemFailures"))


@dataclass
class Faults:
    """The injector: one rate, one seeded generator, counts per kind written to `log_path` as they change."""

    rate: float
    rng: random.Random
    log_path: str | None = None
    counts: Counter[str] = field(default_factory=Counter)
    held: dict[str, list[float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def hit(self) -> bool:
        with self._lock:
            return self.rng.random() < self.rate

    def choose(self, options: tuple[tuple[int, str], ...]) -> tuple[int, str]:
        with self._lock:
            return options[self.rng.randrange(len(options))]

    def count(self, kind: str) -> None:
        with self._lock:
            self.counts[kind] += 1
            if self.log_path:
                with open(self.log_path, "w") as out:
                    json.dump(dict(self.counts), out)

    def hold(self, occurrence: str, first: float, through: float) -> None:
        """A retried firing of `occurrence` (first attempted at `first`) let through to its target at `through`."""
        if not occurrence:
            return
        with self._lock:
            self.held[occurrence] = [first, through]
            if self.log_path:
                with open(Path(self.log_path).with_name(HELD_FILE), "w") as out:
                    json.dump(self.held, out)


def firing_occurrence(target: dict) -> str:
    """The occurrence a Scheduler firing carries, as `<table>/<occurrenceId>` of its due event (occurrenceIds are
    per table: two tables' items with the same keys and due time share one), or, for a release envelope
    (`precision="second"`), of the due event inside it; "" for any other input."""
    try:
        document = json.loads(str(target.get("Input") or ""))
        if isinstance(document, dict) and isinstance(document.get(constants.RELEASE_ENVELOPE), dict):
            document = document.get("payload")
            if isinstance(document, str):
                document = json.loads(document)
    except ValueError:
        return ""
    if not isinstance(document, dict):
        return ""
    occurrence, table = document.get("occurrenceId"), document.get("table")
    return f"{table}/{occurrence}" if isinstance(occurrence, str) and isinstance(table, str) else ""


def patch_services(faults: Faults) -> None:
    """Refuse a fraction of the non-admin calls to DynamoDB, Scheduler and SQS before they are handled."""
    from ministack.app import _get_module
    from ministack.core.router import extract_access_key_id

    for service, options in SERVICE_FAULTS.items():
        module = _get_module(service)
        handle = module.handle_request

        async def faulty(
            method: str,
            path: str,
            headers: dict,
            body: bytes,
            query_params: dict,
            _service: str = service,
            _options: tuple[tuple[int, str], ...] = options,
            _handle: Callable[..., Any] = handle,
        ) -> Any:
            if extract_access_key_id(headers, query_params) not in ("", ADMIN_KEY) and faults.hit():
                status, code = faults.choose(_options)
                faults.count(f"{_service} {code}")
                return fault_response(_service, status, code)
            return await _handle(method, path, headers, body, query_params)

        module.handle_request = faulty


def patch_targets(faults: Faults) -> None:
    """Scheduler's firings of templated targets: a fraction throttled by the target, retried by Scheduler later."""
    from ministack.services import eventbridge

    invoke = eventbridge._invoke_target

    def attempt(target: dict, event: dict, rule: dict, view: Any, number: int, first: float) -> Any:
        if number < TARGET_MAX_ATTEMPTS and faults.hit():
            faults.count("target throttled (Scheduler retried)")
            delay = faults.rng.uniform(*TARGET_RETRY_SECONDS)
            # In the firing's context (ministack keeps the request's account and region in context variables).
            context = contextvars.copy_context()
            timer = threading.Timer(delay, context.run, (attempt, target, event, rule, view, number + 1, first))
            timer.daemon = True
            timer.start()
            return None
        if number > 1:
            faults.hold(firing_occurrence(target), first, time.time())
        return invoke(target, event, rule, view)

    def with_target_faults(target: dict, event: dict, rule: dict, view: Any = None) -> Any:
        from_scheduler = isinstance(event, dict) and event.get("Source") == "aws.scheduler"
        if not from_scheduler:
            return invoke(target, event, rule, view)
        return attempt(target, event, rule, view, 1, time.time())

    eventbridge._invoke_target = with_target_faults


def patch_stream_batches(faults: Faults) -> None:
    """Within Lambda's stream poller only: cut a fraction of batches short (a timeout mid-batch), and retry the whole
    batch when its response names failed records."""
    from ministack.services import lambda_svc

    poll = lambda_svc._poll_dynamodb_streams
    execute = lambda_svc._execute_function
    polling = threading.local()

    def poll_streams() -> Any:
        polling.inside = True
        try:
            return poll()
        finally:
            polling.inside = False

    def execute_function(func: dict, event: dict) -> Any:
        records = event.get("Records") if isinstance(event, dict) else None
        if not getattr(polling, "inside", False) or not records:
            return execute(func, event)
        if faults.hit():
            done = faults.rng.randrange(len(records))
            faults.count("function timed out mid-batch")
            if done:
                execute(func, {**event, "Records": records[:done]})
            return {"error": True, "body": {"errorType": "Sandbox.Timedout", "errorMessage": TIMEOUT_MESSAGE}}
        result = execute(func, event)
        if batch_failed(result):
            faults.count("partial batch response (whole batch retried)")
            return {"error": True, "body": {"errorType": "BatchItemFailures", "errorMessage": "records reported"}}
        return result

    lambda_svc._poll_dynamodb_streams = poll_streams
    lambda_svc._execute_function = execute_function


def install(rate: float, seed_value: int, log_path: str | None) -> Faults:
    """Every kind of fault at `rate`, drawn from its own generator (the run's seed + 2)."""
    faults = Faults(rate, random.Random(seed_value + 2), log_path)
    patch_services(faults)
    patch_targets(faults)
    patch_stream_batches(faults)
    return faults
