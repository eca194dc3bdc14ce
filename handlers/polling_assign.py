"""`polling` mode's assigner (`polling_assign.handler`, the stream consumer): puts newly written items in the due index.

Its own module and its own entry point, so that neither cold start compiles the other's code: the tick
(`polling.handler`, which runs every interval) never loads the stream batch machinery only the assigner uses, and
the assigner never loads the tick's shard scanning. Exactly-once indexing under redelivery is described on
`assign_record`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from st_core import log
from st_core.batch import handle_stream_batch
from st_core.clients import CLIENTS, Clients
from st_core.config import load_config
from st_core.errors import PermanentError, error_code
from st_core.idempotency import marker_put
from st_core.pending import ATTEMPTS, CLAIM, DUE, ERROR, SHARD, STATUS, TIMED, Status, pending_attributes
from st_core.stream import (
    BatchResponse,
    DynamoDBStreamEvent,
    DynamoDBStreamRecord,
    changed_at,
    decode_image,
    key_identity,
    to_request,
)
from st_core.timeparse import format_due, parse_due

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import HandlerConfig

# The AWS actions this module's own calls need (checked by tests/iam): index an item (update), in a transaction with
# a marker put into the ledger.
AWS_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem")

MODE = "polling"
ASSIGN_MARKER = "assign#"


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
    try:
        due = due_of(new, config, written)
    except PermanentError:
        if new.get(STATUS) == Status.PENDING.value and DUE in new_typed:
            _unindex(record, config, clients)  # a waiting item left without a time: cancelled, not due any more
        raise
    attributes = pending_attributes(key_identity(record), due, config["polling"]["shards"])
    names = {
        "#shard": SHARD,
        "#due": DUE,
        "#status": STATUS,
        "#attempts": ATTEMPTS,
        "#error": ERROR,
        "#claim": CLAIM,
        "#time": time_attribute,
        "#timed": TIMED,
    }
    values: dict[str, Any] = {
        ":shard": {"N": str(attributes[SHARD])},
        ":due": {"N": str(attributes[DUE])},
        ":pending": {"S": Status.PENDING.value},
    }
    # Indexed from its time attribute (marked), or from a delay (not): see `pending.TIMED`.
    timed = new.get(time_attribute) is not None
    if timed:
        values[":timed"] = {"BOOL": True}
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
        "UpdateExpression": (
            "SET #shard = :shard, #due = :due, #status = :pending, #timed = :timed REMOVE #attempts, #error, #claim"
            if timed
            else "SET #shard = :shard, #due = :due, #status = :pending REMOVE #attempts, #error, #claim, #timed"
        ),
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


def _unindex(record: DynamoDBStreamRecord, config: HandlerConfig, clients: Clients) -> None:
    """Take a waiting item that no longer has a time it can run at (its time attribute removed, or rewritten as no
    time, and no delay) out of the due index, before its record is parked with the reason: otherwise the processor
    would still send it at the `stDue` it left behind. Conditional on the item still being the index entry and the
    time attribute this record shows; it stays PENDING, so the user's next write of its time indexes it again.
    (The processor does the same for an item it reads first, when the item was indexed from its time.)"""
    data = record["dynamodb"]
    new = data.get("NewImage") or {}
    time_attribute = config["timeAttribute"]
    names = {"#status": STATUS, "#due": DUE, "#shard": SHARD, "#timed": TIMED, "#time": time_attribute}
    values: dict[str, Any] = {":pending": {"S": Status.PENDING.value}, ":indexed": to_request({"d": new[DUE]})["d"]}
    condition = "#status = :pending AND #due = :indexed AND "
    if time_attribute in new:
        values[":time"] = to_request({"t": new[time_attribute]})["t"]
        condition += "#time = :time"
    else:
        condition += "attribute_not_exists(#time)"
    ddb = clients.get("dynamodb")
    update = {
        "TableName": config["table"],
        "Key": to_request(data["Keys"]),
        "UpdateExpression": "REMOVE #shard, #due, #timed",
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    if not _conditional(lambda: ddb.update_item(**update)):
        log.info("unindexed", note="a waiting item without a usable time: out of the due index")


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


def handler(event: DynamoDBStreamEvent, context: object = None) -> BatchResponse:
    """Lambda entry point for the stream (`polling_assign.handler`)."""
    log.invoked(context)
    return handle_assign_batch(event, load_config())
