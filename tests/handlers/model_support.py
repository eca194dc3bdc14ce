"""Shared plumbing of the model checks (`test_model_*.py`): their test case and run settings (`model_test`), a
fresh moto world per sequence (`build_env`, which also serializes moto's DynamoDB), Lambda's event filtering, a
handler clock whose `sleep` moves time on, and the target queue read back with the instant each message was sent
(by the handler's clock)."""

from __future__ import annotations

import copy
import decimal
import functools
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, cast
from unittest import mock

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule
from st_core.clients import CLIENTS

from tests.handlers.conftest import Env, build_env, with_due_index

TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def model_env(*, due_index: bool = False) -> Env:
    """The `env` fixture's world for one hypothesis example (inside a started `mock_aws`): a table with a stream, a
    schedule group, queues and a ledger; with `due_index`, the `polling_env` fixture's table and config."""
    env = build_env().configure(max_workers=4)
    return with_due_index(env) if due_index else env


def ttl_config(env: Env, *, precise: bool) -> Env:
    """The env's config as `ttl` mode's (plain or precise), on the env's ledger."""
    return env.configure(mode="ttl", precise=precise)


def dynamodb_number_arithmetic() -> Any:
    """A patch (start it, stop it) giving moto DynamoDB's number arithmetic: moto adds numbers with a fraction in
    Python's default context (28 digits), so 10**30 + 7 - 0.001 comes back rounded; DynamoDB keeps 38 digits."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    def exact(method: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        @functools.wraps(method)
        def within_38_digits(self: Any, other: Any) -> Any:
            with decimal.localcontext(decimal.Context(prec=38)):
                return method(self, other)

        return within_38_digits

    return mock.patch.multiple(DynamoType, __add__=exact(DynamoType.__add__), __sub__=exact(DynamoType.__sub__))


class HandlerClock:
    """One invocation's clock: starts at `base`; `sleep` moves the sleeping thread's time on (the handler runs
    records of different items in threads, each of which really waits)."""

    def __init__(self, base: datetime) -> None:
        self.base = base
        self._local = threading.local()

    def now(self) -> datetime:
        return self.base + timedelta(seconds=getattr(self._local, "slept", 0.0))

    def sleep(self, seconds: float) -> None:
        self._local.slept = getattr(self._local, "slept", 0.0) + seconds


@dataclass
class Sent:
    body: dict[str, Any]
    at: datetime


@dataclass
class TargetQueue:
    """The due queue as its consumer sees it, with the instant each message was sent: the handlers' SendMessage and
    SendMessageBatch calls to it are stamped with `clock()` (the invocation's clock, sleeps included) as they are
    made."""

    env: Env
    clock: Callable[[], datetime]
    _sends: list[tuple[str, datetime]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def watch(self) -> None:
        for operation in ("SendMessage", "SendMessageBatch"):
            CLIENTS.get("sqs").meta.events.register(f"before-parameter-build.sqs.{operation}", self._stamp)

    def _stamp(self, params: dict[str, Any], **_: Any) -> None:
        if params.get("QueueUrl") == self.env.due_queue_url:
            with self._lock:
                for entry in params.get("Entries", [params]):  # a batch's messages are sent at its call
                    self._sends.append((entry["MessageBody"], self.clock()))

    def receive(self, *, at: datetime | None = None) -> list[Sent]:
        """Everything the queue received since the last call. A message the handlers sent carries its send time;
        one sent otherwise (a schedule firing) carries `at`."""
        received: list[Sent] = []
        while True:
            batch = self.env.sqs.receive_message(QueueUrl=self.env.due_queue_url, MaxNumberOfMessages=10)
            messages = batch.get("Messages", [])
            if not messages:
                break
            for message in messages:
                self.env.sqs.delete_message(QueueUrl=self.env.due_queue_url, ReceiptHandle=message["ReceiptHandle"])
                received.append(Sent(json.loads(message["Body"]), self._sent_at(message["Body"], at)))
        return received

    def _sent_at(self, body: str, at: datetime | None) -> datetime:
        with self._lock:
            for index, (sent, moment) in enumerate(self._sends):
                if sent == body:
                    del self._sends[index]
                    return moment
        assert at is not None, f"a message nobody sent reached the queue: {body[:200]}"
        return at


def due_time(message: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(message["dueAt"].replace("Z", "+00:00"))


class CheckedAtTheEnd(Protocol):
    def check_the_end(self) -> None: ...


def model_test(machine: type[RuleBasedStateMachine]) -> Any:
    """The test case of a model: the machine, with its end-of-sequence check (`check_the_end`, once the machine is
    set up) run before its teardown, and the run settings every model shares: `MODEL_EXAMPLES` sequences of up to 25
    steps; the same sequences on every `make test` (a build never fails by luck) unless `MODEL_RANDOM=1`."""

    class Checked(machine):  # type: ignore[valid-type,misc]
        def teardown(self) -> None:
            try:
                if getattr(self, "ready", True):
                    cast(CheckedAtTheEnd, self).check_the_end()
            finally:
                super().teardown()

    Checked.__name__ = Checked.__qualname__ = f"Checked{machine.__name__}"
    Checked.TestCase.settings = settings(
        max_examples=int(os.environ.get("MODEL_EXAMPLES", "30")),
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        print_blob=True,
        derandomize=not os.environ.get("MODEL_RANDOM"),
    )
    return Checked.TestCase


def _ready(machine: Any) -> bool:
    return bool(getattr(machine, "ready", True))


class StreamDelivery(RuleBasedStateMachine):
    """Lambda's side of a model: the records the mapping's filter lets through (`history`, in stream order), handed to
    `deliver` in batches with stream lag, again from a record on, and old batches again after newer ones. A model
    calls `start_stream` when it sets up, appends to `history`, and implements `deliver`."""

    def start_stream(self) -> None:
        self.history: list[dict[str, Any]] = []
        self.pending = 0  # history[pending:] not delivered yet
        self.batches: list[tuple[int, int]] = []  # what each delivery held: history[start:end]
        self.stale = False  # an old batch was delivered again after later records (out of stream order)

    def deliver(self, records: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def take_batch(self, limit: int) -> list[dict[str, Any]]:
        """The next batch of at most `limit` records (none when everything was delivered), now delivered."""
        end = min(len(self.history), self.pending + limit)
        if end == self.pending:
            return []
        self.batches.append((self.pending, end))
        start, self.pending = self.pending, end
        return self.history[start:end]

    @rule(limit=st.integers(1, 8))
    def lambda_delivers(self, limit: int) -> None:
        """The mapping's next batch (stream lag: what is left waits for the next one)."""
        records = self.take_batch(limit)
        if records:
            self.deliver(records)

    @precondition(lambda self: _ready(self) and self.pending > 0)
    @rule(data=st.data())
    def lambda_redelivers(self, data: st.DataObject) -> None:
        """Everything from a record on, again (a retry from a sequence number, or whole batches after a timeout)."""
        start = data.draw(st.integers(0, self.pending - 1), label="from record")
        self.deliver(copy.deepcopy(self.history[start : self.pending]))

    @precondition(lambda self: _ready(self) and len(self.batches) > 1)
    @rule(data=st.data())
    def lambda_redelivers_an_old_batch(self, data: st.DataObject) -> None:
        """An old batch alone, whole or from a record on, after later ones were processed (out of stream order)."""
        start, end = data.draw(st.sampled_from(self.batches[:-1]), label="batch")
        start = data.draw(st.integers(start, end - 1), label="from record")
        self.stale = True
        self.deliver(copy.deepcopy(self.history[start:end]))
