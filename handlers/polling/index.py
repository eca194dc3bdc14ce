"""The due index, read: a shard's due items a page at a time, whether a shard holds anything, which shards have
something due. Every read of the index goes through `DueIndex.page`, so a table without the index fails with one
message saying how to add it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from st_core import log
from st_core.errors import error_code
from st_core.pending import DUE, INDEX_NAME, SHARD

from polling.budget import PAGE_SIZE

if TYPE_CHECKING:
    from st_core.clients import Clients
    from st_core.config import HandlerConfig

# Query the due index (sparse GSI `due`: shard, then `stDue`).
AWS_ACTIONS = ("dynamodb:Query",)


class DueIndex:
    """The table's due index as the processor reads it: with the reading clients (a slow read only stops a shard's
    drain), `now` for what is due, and at most `workers` queries at once."""

    def __init__(self, config: HandlerConfig, clients: Clients, now: Callable[[], float], workers: int) -> None:
        self.config = config
        self.clients = clients
        self.now = now
        self.workers = workers

    def due_query(self, shard: int) -> dict[str, Any]:
        """One shard's due items: a range (`stDue <= now`), never one exact time bucket."""
        return {
            "TableName": self.config["table"],
            "IndexName": INDEX_NAME,
            "KeyConditionExpression": "#shard = :shard AND #due <= :now",
            "ExpressionAttributeNames": {"#shard": SHARD, "#due": DUE},
            "ExpressionAttributeValues": {":shard": {"N": str(shard)}, ":now": {"N": str(int(self.now()))}},
            "Limit": PAGE_SIZE,
        }

    def page(self, query: dict[str, Any]) -> dict[str, Any]:
        """One page of the due index. A table without the index (one the component does not own, given with its
        stream ARN, so nothing checked it at deploy) fails every tick: say which index and how to add it, in the
        log and in the error the alarm counts."""
        try:
            page: dict[str, Any] = self.clients.get("dynamodb").query(**query)
        except Exception as exc:
            # AWS: ValidationException "The table does not have the specified index"; moto: ResourceNotFound.
            if error_code(exc) not in ("ValidationException", "ResourceNotFoundException") or "index" not in str(exc):
                raise
            fix = (
                f"table {self.config['table']!r} has no due index {INDEX_NAME!r}: add a global secondary index "
                f"{INDEX_NAME!r} with partition key {SHARD!r} (N) and sort key {DUE!r} (N), projection ALL"
            )
            log.error("due-index-missing", table=self.config["table"], fix=fix)
            raise RuntimeError(fix) from exc
        return page

    def holds_any(self, shard: int) -> bool:
        """Whether the shard holds any index entry, due or not (one one-item Query)."""
        query = self.due_query(shard)
        query.update(
            KeyConditionExpression="#shard = :shard",
            ExpressionAttributeNames={"#shard": SHARD},
            ExpressionAttributeValues={":shard": {"N": str(shard)}},
            Limit=1,
        )
        return bool(self.page(query).get("Items"))

    def due_shards(self, shards: Sequence[int]) -> list[int]:
        """Those of `shards` with at least one item due now: a one-item page of each, read in parallel. What the
        fan-out reads before invoking anything, so a quiet tick costs one query per shard, as a single tick does."""

        def due(shard: int) -> bool:
            return bool(self.page({**self.due_query(shard), "Limit": 1}).get("Items"))

        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(shards)))) as readers:
            found = list(readers.map(due, shards))
        return [shard for shard, is_due in zip(shards, found, strict=True) if is_due]
