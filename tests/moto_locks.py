"""moto's DynamoDB backends are not thread-safe (a TransactWriteItems deep-copies the tables to roll back, and
raises "dictionary changed size during iteration" if another thread writes meanwhile; once in a while under CPU
load, a plain write beside a stream read did the same); DynamoDB itself is. Handlers call DynamoDB concurrently by
design, so tests and benchmarks that run them against moto serialize moto's DynamoDB and DynamoDB Streams backends,
one call at a time. The handlers' own threads still overlap everywhere else (clients, SQS, Scheduler, their logic)."""

from __future__ import annotations

import functools
import threading
from typing import Any

_LOCK = threading.RLock()


def _serialize(cls: type) -> None:
    for name, method in list(vars(cls).items()):
        plain = callable(method) and not isinstance(method, staticmethod | classmethod)
        if name.startswith("_") or not plain or getattr(method, "_serialized", False):
            continue

        def locked(self: Any, *args: Any, __method: Any = method, **kwargs: Any) -> Any:
            with _LOCK:
                return __method(self, *args, **kwargs)

        functools.update_wrapper(locked, method)
        locked._serialized = True  # type: ignore[attr-defined]
        setattr(cls, name, locked)


def serialize_moto_transactions() -> None:
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodbstreams.models import DynamoDBStreamsBackend

    _serialize(DynamoDBBackend)
    _serialize(DynamoDBStreamsBackend)
