"""`polling` mode (seed 002, sharded as in part 2 of the AWS series): a rule invokes `handler` every interval; it
takes what is due from the sparse due index, one shard per thread, and runs each item exactly once. `assign` is
the stream consumer that puts newly written items in the index (seed 002's "task scheduler").

Exactly once, with overlapping or crashing processors: an item is claimed with a conditional update (a lease)
before dispatch; a claim never completed comes back after the lease; a failed dispatch goes back into the index
with an attempt count and exponential backoff, and after the last attempt to the dead-letter queue with the reason.
Every write here sets `stStatus`, so the stream filter never hands these writes back to `assign` (no loop).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, Protocol

from st_core import log
from st_core.batch import handle_stream_batch
from st_core.clients import CLIENTS, Clients
from st_core.config import HandlerConfig, load_config
from st_core.dispatch import due_event, send_now, target_input
from st_core.errors import PermanentError, error_code, is_transient, persist
from st_core.idempotency import marker_put
from st_core.naming import dedupe_name
from st_core.pending import (
    ATTEMPTS,
    CLAIM,
    DONE_AT,
    DUE,
    ERROR,
    INDEX_NAME,
    SHARD,
    STATUS,
    Status,
    pending_attributes,
    without_index,
)
from st_core.poison import fit
from st_core.stream import (
    BatchResponse,
    DynamoDBStreamEvent,
    DynamoDBStreamRecord,
    changed_at,
    decode_image,
    identity_of,
    key_identity,
    to_request,
)
from st_core.timeparse import format_due, parse_due

MODE = "polling"
# The prefix of the ledger marker of a stream record the assigner has indexed.
ASSIGN_MARKER = "assign#"
PAGE_SIZE = 100


class LambdaContext(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


@dataclass
class TickReport:
    """What one processor invocation did (also its return value and the metrics it logs)."""

    dispatched: int = 0
    retried: int = 0
    failed: int = 0
    skipped: int = 0
    backlog: int = 0
    out_of_time: bool = False
    shards: dict[int, int] = field(default_factory=dict)


# -- the processor ---------------------------------------------------------------------------------------------


class Processor:
    def __init__(
        self, config: HandlerConfig, clients: Clients, now: Callable[[], float], time_left: Callable[[], float]
    ):
        self.config = config
        self.polling = config["polling"]
        self.clients = clients
        self.now = now
        self.time_left = time_left
        self.keys = [k for k in (config["partitionKey"], config["sortKey"]) if k]

    def tick(self) -> TickReport:
        report = TickReport()
        shards = range(self.polling["shards"])
        with ThreadPoolExecutor(max_workers=min(self.config["maxWorkers"], len(shards))) as pool:
            for shard, counts in zip(shards, pool.map(self._drain, shards), strict=True):
                report.dispatched += counts.dispatched
                report.retried += counts.retried
                report.failed += counts.failed
                report.skipped += counts.skipped
                report.backlog += counts.backlog
                report.out_of_time |= counts.out_of_time
                report.shards[shard] = counts.dispatched
        log.metrics(
            "ScheduledTable",
            {"Table": self.config["table"], "Mode": MODE},
            Dispatched=report.dispatched,
            Retried=report.retried,
            Failed=report.failed,
            Backlog=report.backlog,
        )
        return report

    def _out_of_time(self) -> bool:
        return self.time_left() < self.polling["budgetMarginSeconds"]

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

    def due_pages(self, shard: int) -> Iterator[dict[str, Any]]:
        """The shard's due items, a page at a time (also what the benchmarks count reads with)."""
        query = self.due_query(shard)
        ddb = self.clients.get("dynamodb")
        while True:
            page: dict[str, Any] = ddb.query(**query)
            yield page
            if not page.get("LastEvaluatedKey"):
                return
            query["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _drain(self, shard: int) -> TickReport:
        counts = TickReport()
        for page in self.due_pages(shard):
            for index, raw in enumerate(page.get("Items", [])):
                if self._out_of_time():
                    counts.out_of_time = True
                    counts.backlog += len(page["Items"]) - index + self._remaining(shard, page)
                    return counts
                self._run(raw, counts)
        return counts

    def _remaining(self, shard: int, page: dict[str, Any]) -> int:
        """How many due items are left behind in this shard beyond the current page (for the backlog metric)."""
        if not page.get("LastEvaluatedKey"):
            return 0
        rest = {k: v for k, v in self.due_query(shard).items() if k != "Limit"}
        rest.update(Select="COUNT", ExclusiveStartKey=page["LastEvaluatedKey"])
        try:
            return int(self.clients.get("dynamodb").query(**rest).get("Count", 0))
        except Exception:  # the metric is best effort; the items themselves wait for the next tick
            return 0

    def _key(self, raw: dict[str, Any]) -> dict[str, Any]:
        return {k: raw[k] for k in self.keys}

    def _run(self, raw: dict[str, Any], counts: TickReport) -> None:
        key, due = self._key(raw), int(raw[DUE]["N"])
        lease = int(self.now()) + self.polling["leaseSeconds"]
        if self._moved(raw, due) or not self._claim(key, due, lease, raw):
            counts.skipped += 1
            return
        item = without_index(decode_image(raw) or {})
        occurrence = dedupe_name(identity_of(key), str(due))
        try:
            moment = datetime.fromtimestamp(due, UTC)
            event = due_event(
                mode=MODE, table=self.config["table"], keys=decode_image(key) or {}, due=moment, item=item
            )
            send_now(
                self.config["target"],
                target_input(self.config["target"], event),
                occurrence=occurrence,
                clients=self.clients,
            )
        except Exception as exc:
            self._failed(key, raw, lease, exc, counts)
            return
        persist(lambda: self._done(key, lease))
        counts.dispatched += 1
        log.info(
            "dispatched",
            keys=decode_image(key),
            dueAt=format_due(datetime.fromtimestamp(due, UTC)),
            lateSeconds=round(self.now() - due, 3),
        )

    def _moved(self, raw: dict[str, Any], due: int) -> bool:
        """A waiting item whose time attribute no longer gives its index time: the user moved it and the assigner
        has not re-indexed it yet. It is left for the assigner (running it now would run it at its old time)."""
        value = raw.get(self.config["timeAttribute"])
        if raw.get(STATUS, {}).get("S") != Status.PENDING.value or value is None:
            return False
        try:
            return int(parse_due(decode_image({"t": value})["t"]).timestamp()) != due  # type: ignore[index]
        except PermanentError:
            return False

    def _claim(self, key: dict[str, Any], due: int, lease: int, raw: dict[str, Any] | None = None) -> bool:
        """Take the item for `leaseSeconds`, only if it is still due at `due`, nobody holds a live claim and (given
        the item as the index showed it) its time attribute is unchanged since (the index is eventually consistent)."""
        names = {"#claim": CLAIM, "#status": STATUS, "#due": DUE}
        values: dict[str, Any] = {
            ":lease": {"N": str(lease)},
            ":claimed": {"S": Status.CLAIMED.value},
            ":due": {"N": str(due)},
            ":now": {"N": str(int(self.now()))},
        }
        condition = "#due = :due AND (attribute_not_exists(#claim) OR #claim < :now)"
        if raw is not None:
            names["#time"] = self.config["timeAttribute"]
            if names["#time"] in raw:
                condition += " AND #time = :time"
                values[":time"] = raw[names["#time"]]
            else:
                condition += " AND attribute_not_exists(#time)"
        try:
            self.clients.get("dynamodb").update_item(
                TableName=self.config["table"],
                Key=key,
                UpdateExpression="SET #claim = :lease, #status = :claimed",
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False  # another processor has it, or it moved or left the index
            raise
        return True

    def _done(self, key: dict[str, Any], lease: int) -> None:
        ddb = self.clients.get("dynamodb")
        ours = {":lease": {"N": str(lease)}}
        try:
            if self.polling["onDone"] == "delete":
                ddb.delete_item(
                    TableName=self.config["table"],
                    Key=key,
                    ConditionExpression="#claim = :lease",
                    ExpressionAttributeNames={"#claim": CLAIM},
                    ExpressionAttributeValues=ours,
                )
                return
            ddb.update_item(
                TableName=self.config["table"],
                Key=key,
                UpdateExpression="SET #status = :done, #doneAt = :at REMOVE #shard, #due, #claim, #error",
                ConditionExpression="#claim = :lease",
                ExpressionAttributeNames={
                    "#status": STATUS,
                    "#doneAt": DONE_AT,
                    "#shard": SHARD,
                    "#due": DUE,
                    "#claim": CLAIM,
                    "#error": ERROR,
                },
                ExpressionAttributeValues={
                    **ours,
                    ":done": {"S": Status.DONE.value},
                    ":at": {"S": format_due(datetime.fromtimestamp(self.now(), UTC))},
                },
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            log.warning("lease-lost", keys=decode_image(key), note="dispatched after the lease ran out")

    def _failed(self, key: dict[str, Any], raw: dict[str, Any], lease: int, exc: Exception, counts: TickReport) -> None:
        attempts = int(raw.get(ATTEMPTS, {}).get("N", "0")) + 1
        reason = f"{type(exc).__name__}: {str(exc)[:500]}"
        final = not is_transient(exc) or attempts >= self.polling["maxAttempts"]
        ddb = self.clients.get("dynamodb")
        names = {"#claim": CLAIM, "#status": STATUS, "#attempts": ATTEMPTS, "#error": ERROR}
        values: dict[str, Any] = {
            ":lease": {"N": str(lease)},
            ":attempts": {"N": str(attempts)},
            ":error": {"S": reason},
        }
        if final:
            self._dead_letter(raw, reason, attempts)
            update = "SET #status = :failed, #attempts = :attempts, #error = :error REMOVE #shard, #due, #claim"
            names.update({"#shard": SHARD, "#due": DUE})
            values[":failed"] = {"S": Status.FAILED.value}
            counts.failed += 1
        else:
            backoff = self.polling["backoffSeconds"] * 2 ** (attempts - 1)
            update = "SET #status = :retry, #attempts = :attempts, #error = :error, #due = :next REMOVE #claim"
            names["#due"] = DUE
            values.update({":retry": {"S": Status.RETRY.value}, ":next": {"N": str(int(self.now()) + backoff)}})
            counts.retried += 1
        try:
            ddb.update_item(
                TableName=self.config["table"],
                Key=key,
                UpdateExpression=update,
                ConditionExpression="#claim = :lease",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as write_error:
            if error_code(write_error) != "ConditionalCheckFailedException":
                raise
        log.warning("dispatch-failed", keys=decode_image(key), attempts=attempts, final=final, reason=reason)

    def _dead_letter(self, raw: dict[str, Any], reason: str, attempts: int) -> None:
        body = {
            "reason": reason,
            "attempts": attempts,
            "mode": MODE,
            "table": self.config["table"],
            "keys": decode_image(self._key(raw)),
            "item": without_index(decode_image(raw) or {}),
        }
        # A 400 KB item still dead-letters: without its body if need be, never retried forever for its size.
        self.clients.get("sqs").send_message(QueueUrl=self.polling["deadLetterUrl"], MessageBody=fit(body, "item", {}))


def process(
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], float] = time.time,
    time_left: Callable[[], float] = lambda: 900.0,
) -> TickReport:
    return Processor(config, clients, now, time_left).tick()


def handler(event: dict[str, Any], context: LambdaContext | None = None) -> dict[str, Any]:
    """Lambda entry point for the rule (`polling.handler`): one tick."""
    if context is None:
        report = process(load_config())
    else:
        report = process(load_config(), time_left=lambda: context.get_remaining_time_in_millis() / 1000)
    return {
        "dispatched": report.dispatched,
        "retried": report.retried,
        "failed": report.failed,
        "backlog": report.backlog,
        "outOfTime": report.out_of_time,
    }


# -- the assigner ------------------------------------------------------------------------------------------------


def due_of(item: dict[str, Any], config: HandlerConfig, written: datetime) -> datetime:
    """The item's due time: its time attribute (ISO-8601 with any offset, or epoch seconds), else now plus its
    delay attribute (seconds), else now plus the component's default delay. Neither is a PermanentError."""
    value = item.get(config["timeAttribute"])
    if value is not None:
        return parse_due(value)
    polling = config["polling"]
    delay = item.get(polling["delayAttribute"])
    if delay is None:
        delay = polling["defaultDelaySeconds"]
    if delay is None:
        raise PermanentError(
            f"item has neither {config['timeAttribute']!r} (ISO-8601 or epoch seconds) nor "
            f"{polling['delayAttribute']!r} (seconds), and the component sets no default_delay_seconds"
        )
    if isinstance(delay, bool) or not isinstance(delay, int | float | Decimal) or delay < 0:
        raise PermanentError(f"delay attribute {polling['delayAttribute']!r} must be a number of seconds >= 0")
    return written + timedelta(seconds=int(delay))


def assign_record(record: DynamoDBStreamRecord, config: HandlerConfig, clients: Clients, now: datetime) -> None:
    """Put the item this record describes in the due index, exactly once per user write.

    Lambda may deliver the record again, whole batches at a time and long after: by then the item may have been
    dispatched (DONE), claimed, backed off (RETRY) or dead-lettered (FAILED). The index write is therefore made
    conditional on the item still being the version this record shows: no status yet (a user's PutItem, which
    removes ours) or the same PENDING index entry (a user's update of a waiting item), and the same due time. Any
    write of this mode changes one of those, so a stale record finds nothing to do."""
    data = record["dynamodb"]
    new_typed = data.get("NewImage") or {}
    new = decode_image(new_typed) or {}
    old = decode_image(data.get("OldImage")) or {}
    time_attribute = config["timeAttribute"]
    unchanged = record["eventName"] == "MODIFY" and new.get(time_attribute) == old.get(time_attribute)
    # A write that keeps the time only needs indexing again if it wiped a waiting task's bookkeeping (a PutItem
    # over a PENDING, CLAIMED or RETRY item). Before it the item had no status, or a settled one: done or failed
    # stays so, and an item never indexed is indexed by the earlier record that wrote that time (processed first,
    # and conditional on the item as it is now), so a second PutItem over a done item does not run it again.
    settled = new.get(STATUS) is not None or old.get(STATUS) in (None, Status.DONE.value, Status.FAILED.value)
    if unchanged and settled:
        return  # its time did not change: leave it where it is (in the index, done or failed)
    if new.get(STATUS) not in (None, Status.PENDING.value):
        return  # the mode's own write (filtered out on AWS; a defensive no-op here)
    created = changed_at(record)
    written = datetime.fromtimestamp(created, UTC) if created is not None else now
    due = due_of(new, config, written)
    attributes = pending_attributes(key_identity(record), due, config["polling"]["shards"])
    names = {
        "#shard": SHARD,
        "#due": DUE,
        "#status": STATUS,
        "#attempts": ATTEMPTS,
        "#error": ERROR,
        "#claim": CLAIM,
        "#time": time_attribute,
    }
    values: dict[str, Any] = {
        ":shard": {"N": str(attributes[SHARD])},
        ":due": {"N": str(attributes[DUE])},
        ":pending": {"S": Status.PENDING.value},
    }
    # The item must still exist: an UpdateItem on a deleted item would create it again (a phantom that then runs).
    conditions = ["attribute_exists(#pk)"]
    names["#pk"] = config["partitionKey"]
    if new.get(STATUS) is None:
        conditions.append("attribute_not_exists(#status)")
    else:
        conditions.append("#status = :pending")
        if DUE in new_typed:
            conditions.append("#due = :indexed")
            values[":indexed"] = new_typed[DUE]
        else:
            conditions.append("attribute_not_exists(#due)")
    if time_attribute in new_typed:
        conditions.append("#time = :time")
        values[":time"] = to_request({"t": new_typed[time_attribute]})["t"]
    else:
        conditions.append("attribute_not_exists(#time)")
    update = {
        "TableName": config["table"],
        "Key": to_request(data["Keys"]),
        "UpdateExpression": "SET #shard = :shard, #due = :due, #status = :pending REMOVE #attempts, #error, #claim",
        "ConditionExpression": " AND ".join(conditions),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    ddb = clients.get("dynamodb")
    if new.get(STATUS) is not None:
        # A waiting item's index entry: once it runs its status changes, which no PutItem can give back.
        skipped = _conditional(lambda: ddb.update_item(**update))
    else:
        # An item without a status: after it ran, a PutItem that keeps its time (a consumer writing it back) leaves
        # an item this record's conditions cannot tell from the one it shows. So the index write is paired with a
        # marker for the record in the ledger, in one transaction: a redelivered record finds the marker.
        polling = config["polling"]
        marker = marker_put(
            polling["ledgerTable"],
            f"{ASSIGN_MARKER}{record['eventID']}",
            int(now.timestamp()) + polling["windowSeconds"],
        )
        skipped = _conditional(lambda: ddb.transact_write_items(TransactItems=[{"Update": update}, marker]))
    if skipped:
        log.info(
            "assign-skipped",
            reason="already indexed, or the item changed since this record (deleted, newer write, done)",
        )
        return
    log.info("assigned", dueAt=format_due(due), shard=attributes[SHARD])


def _conditional(write: Callable[[], object]) -> bool:
    """Make a conditional write; True when a condition failed (nothing written, nothing to retry)."""
    try:
        write()
    except Exception as exc:
        if error_code(exc) in ("ConditionalCheckFailedException", "TransactionCanceledException") and _only_conditions(
            exc
        ):
            return True
        raise
    return False


def _only_conditions(exc: Exception) -> bool:
    """A cancelled transaction is a skip only if every reason is a failed condition (or none); a conflict or a
    throttle is retried."""
    reasons = getattr(exc, "response", {}).get("CancellationReasons", [])
    return all(r.get("Code") in ("None", "ConditionalCheckFailed", None) for r in reasons)


def handle_assign_batch(
    event: DynamoDBStreamEvent | object,
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> BatchResponse:
    return handle_stream_batch(
        event, config, mode=MODE, handle=lambda record: assign_record(record, config, clients, now()), clients=clients
    )


def assign(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """Lambda entry point for the stream (`polling.assign`)."""
    return handle_assign_batch(event, load_config())
