"""moto's DynamoDB backend is not thread-safe for transactions (concurrent TransactWriteItems on one table raise
"dictionary changed size during iteration"); DynamoDB itself is. Handlers write concurrently by design, so tests and
benchmarks that run them against moto serialize moto's transaction method, and only that."""

from __future__ import annotations

import functools
import threading
from typing import Any

_LOCK = threading.RLock()


def serialize_moto_transactions() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    original = DynamoDBBackend.transact_write_items
    if getattr(original, "_serialized", False):
        return

    @functools.wraps(original)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _LOCK:
            return original(self, *args, **kwargs)

    locked._serialized = True  # type: ignore[attr-defined]
    DynamoDBBackend.transact_write_items = locked  # type: ignore[method-assign]
