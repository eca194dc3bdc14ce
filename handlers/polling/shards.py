"""Which shards a tick takes: 0 to `shards`-1, and those above that a higher `shards` before a change left index
entries in, until they are empty. The ledger keeps the highest count in use (`SHARDS_RECORD`)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from st_core import log
from st_core.errors import error_code

if TYPE_CHECKING:
    from collections.abc import Callable

    from st_core.clients import Clients
    from st_core.config import PollingConfig

    from polling.index import DueIndex

# Read and write the ledger's record of the shard count in use.
AWS_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem")

# The ledger item that keeps the highest `shards` whose index entries may still wait (`index_shards`).
SHARDS_RECORD = {"id": {"S": "shards#highest"}}
# The most shards a configuration may have (components/args.py): what a first tick probes for entries left behind.
MAX_SHARDS = 100


class ShardCount:
    """The shards the due index may hold entries in, as the ledger's record keeps them (`index_shards`)."""

    def __init__(self, polling: PollingConfig, clients: Clients, index: DueIndex, now: Callable[[], float]) -> None:
        self.polling = polling
        self.clients = clients
        self.index = index
        self.now = now

    def index_shards(self) -> list[int]:
        """The shards the due index may hold entries in: 0 to `shards`-1, and those above that a higher `shards`
        before a change left entries in (the assigner indexes each new item on a shard below the current count,
        and an entry stays on its shard until it leaves the index), until they are empty. The ledger keeps the
        highest count in use (`SHARDS_RECORD`): raised at the first tick of a higher `shards`; lowered once every
        shard above the current count holds nothing and an assigner of the old count can no longer be running (a
        lease's length after the change was first seen). A stack's first tick, with no record yet (its assigner may
        have indexed items under another `shards` before it), probes every shard a configuration may have. One
        GetItem a tick, and while old shards hold entries, one more one-item Query each."""
        shards = self.polling["shards"]
        ddb = self.clients.get("dynamodb")
        ledger = self.polling["ledgerTable"]
        now = int(self.now())
        record = ddb.get_item(TableName=ledger, Key=SHARDS_RECORD, ConsistentRead=True).get("Item")
        if record is None:
            highest, since = self._highest_used(shards), now
            self._keep(highest, shards, since, "attribute_not_exists(#shards)", {})
        else:
            highest, seen, since = (int(record[name]["N"]) for name in ("shards", "config", "since"))
            if highest < shards:  # raised: every entry is on a shard below the new count
                self._keep(shards, shards, now, "#shards = :was", {":was": record["shards"]})
                highest = shards
            elif highest > shards and seen != shards:  # lowered: the old assigner's grace starts now
                since = now
                condition = "#shards = :was AND #config = :seen"
                self._keep(highest, shards, since, condition, {":was": record["shards"], ":seen": record["config"]})
        if highest <= shards:
            return list(range(shards))
        old = [shard for shard in range(shards, highest) if self.index.holds_any(shard)]
        if not old and now >= since + self.polling["leaseSeconds"]:
            condition = "#shards = :was AND #config = :seen"
            self._keep(shards, shards, since, condition, {":was": {"N": str(highest)}, ":seen": {"N": str(shards)}})
            log.info("old-shards-drained", shards=shards, was=highest)
        elif old:
            log.info("old-shards-draining", shards=shards, old=old, note="entries indexed before `shards` was lowered")
        return [*range(shards), *old]

    def _keep(self, highest: int, shards: int, since: int, condition: str, values: dict[str, Any]) -> None:
        """Write the shards record, if it is still as read (another tick's write wins: the next tick reads it)."""
        try:
            self.clients.get("dynamodb").put_item(
                TableName=self.polling["ledgerTable"],
                Item={
                    **SHARDS_RECORD,
                    "shards": {"N": str(highest)},
                    "config": {"N": str(shards)},
                    "since": {"N": str(since)},
                },
                ConditionExpression=condition,
                ExpressionAttributeNames={
                    "#shards": "shards",
                    **({"#config": "config"} if "#config" in condition else {}),
                },
                **({"ExpressionAttributeValues": values} if values else {}),
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    def _highest_used(self, shards: int) -> int:
        """One above the highest shard holding an entry, at least `shards`: every shard up to MAX_SHARDS probed."""
        above = list(range(shards, MAX_SHARDS))
        with ThreadPoolExecutor(max_workers=max(1, min(self.index.workers, len(above)))) as readers:
            held = [
                shard for shard, holds in zip(above, readers.map(self.index.holds_any, above), strict=True) if holds
            ]
        return max([shards, *(shard + 1 for shard in held)])
