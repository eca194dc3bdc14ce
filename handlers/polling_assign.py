"""`polling` mode's assigner (`polling_assign.handler`, the stream consumer): puts newly written items in the due index.

Its own module and its own entry point, so that neither cold start compiles the other's code: the tick
(`polling.handler`, which runs every interval) never loads the stream batch machinery only the assigner uses, and
the assigner never loads the tick's shard scanning. Exactly-once indexing under redelivery is described on
`assign_record`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from st_core import log
from st_core.batch import handle_stream_batch
from st_core.clients import CLIENTS, Clients
from st_core.config import load_config
from st_core.errors import PermanentError, error_code
from st_core.idempotency import marker_put, shares_account_with_ledger
from st_core.pending import ATTEMPTS, DUE, ERROR, SHARD, STATUS, TIMED, Status, pending_attributes
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
# a marker put into the ledger; on another account's table, the marker read, put and index update one by one.
AWS_ACTIONS = ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")

MODE = "polling"
ASSIGN_MARKER = "assign#"
# On another account's table, the item an assignment is staged on carries `<eventID>#<nonce>` here until it is
# indexed (see `_assign_in_steps`): out of the due index meanwhile, and never on an item that can run.
STAGED = "stStaged"


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
    dispatched (DONE), backed off (RETRY) or dead-lettered (FAILED). The index write is therefore made
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
    # over a PENDING or RETRY item). Before it the item had no status, or a settled one: done or failed
    # stays so, and an item never indexed is indexed by the earlier record that wrote that time (processed first,
    # and conditional on the item as it is now), so a second PutItem over a done item does not run it again.
    settled = new.get(STATUS) is not None or old.get(STATUS) in (None, Status.DONE.value, Status.FAILED.value)
    if unchanged and settled:
        return  # its time did not change: leave it where it is (in the index, done or failed)
    if new.get(STATUS) not in (None, Status.PENDING.value):
        return  # the mode's own write (filtered out on AWS; a defensive no-op here)
    if unchanged and new.get(STATUS) is None and _restaged_since(old, config, clients):
        log.info("assign-skipped", reason="the record staged on the item before this write indexed it since")
        return
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
        "#time": time_attribute,
        "#timed": TIMED,
        "#staged": STAGED,
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
            "SET #shard = :shard, #due = :due, #status = :pending, #timed = :timed REMOVE #attempts, #error, #staged"
            if timed
            else "SET #shard = :shard, #due = :due, #status = :pending REMOVE #attempts, #error, #timed, #staged"
        ),
        "ConditionExpression": " AND ".join(conditions),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    ddb = clients.get("dynamodb")
    polling = config["polling"]
    if new.get(STATUS) is not None:
        # A waiting item's index entry: once it runs its status changes, which no PutItem can give back.
        skipped = _conditional(lambda: ddb.update_item(**update))
    elif shares_account_with_ledger(config["table"]):
        # An item without a status: after it ran, a PutItem that keeps its time (a consumer writing it back) leaves
        # an item this record's conditions cannot tell from the one it shows. So the index write is paired with a
        # marker for the record in the ledger, in one transaction: a redelivered record finds the marker.
        marker = marker_put(
            polling["ledgerTable"],
            f"{ASSIGN_MARKER}{record['eventID']}",
            int(now.timestamp()) + polling["windowSeconds"],
        )
        skipped = _conditional(lambda: ddb.transact_write_items(TransactItems=[{"Update": update}, marker]))
    else:
        # Another account's table: no transaction may hold its item and the ledger's marker.
        skipped = _assign_in_steps(record, update, config, clients, int(now.timestamp()) + polling["windowSeconds"])
    if skipped:
        log.info(
            "assign-skipped",
            reason="already indexed, or the item changed since this record (deleted, newer write, done)",
        )
        return
    log.info("assigned", dueAt=format_due(due), shard=attributes[SHARD])


def _assign_in_steps(
    record: DynamoDBStreamRecord, update: dict[str, Any], config: HandlerConfig, clients: Clients, expires: int
) -> bool:
    """Index an item without a status on another account's table exactly once per record, without a transaction
    (DynamoDB refuses one whose items are in two accounts, and the ledger is in the deploying account). True when
    nothing was indexed (a condition failed). Four calls, each conditional or a read:

    1. read the record's marker (consistent);
    2. marker absent: stage the item: status PENDING and `stStaged = <eventID>#<nonce>`, but no shard or due, so
       no processor can see it; conditional on the item being as this record shows (as the index update is), or
       already staged by this record, whose nonce it then keeps;
    3. put the marker with the nonce the item holds (or take the one an overlapping attempt put);
    4. index it: shard and due set, `stStaged` removed, conditional on the item still holding that nonce and the
       record's time, and having no shard.

    Why a crash anywhere, a redelivery at any later time and a user's writes meanwhile leave it indexed once:
    - only step 4 makes the item runnable, and only on an item that holds this record's staging, which a run and a
      write-back (a PutItem) never give back: a record whose item ran is never indexed again by it;
    - a marker is put only after its staging (step 2 before 3): a delivery that finds the marker goes straight to
      step 4 and never stages again. Before the marker, the item was never runnable under this record, so staging
      again (a crash between 2 and 3, or before 2) cannot run it twice;
    - a user's PutItem over a staged item (a later record R2, whose old image shows the staging) wipes it: when the
      marker was already there this record stops at step 4 and R2 indexes the item, as it would over any waiting
      item; when it was not, this record's next delivery (before R2: records of one item come in order) stages it
      again under a new nonce, indexes it, and R2 finds the marker's nonce differs from the one it wiped and leaves
      it (`_restaged_since`).
    Cost: one consistent read and three writes (the transaction: four write units), none more on a redelivery."""
    ddb = clients.get("dynamodb")
    polling = config["polling"]
    marker_id = f"{ASSIGN_MARKER}{record['eventID']}"
    found = ddb.get_item(TableName=polling["ledgerTable"], Key={"id": {"S": marker_id}}, ConsistentRead=True)
    token = found.get("Item", {}).get("nonce", {}).get("S")
    names, values = update["ExpressionAttributeNames"], update["ExpressionAttributeValues"]
    if token is None:
        stage = {
            **update,
            "UpdateExpression": "SET #status = :pending, #staged = if_not_exists(#staged, :token)",
            "ConditionExpression": f"({update['ConditionExpression']}) OR begins_with(#staged, :record)",
            "ExpressionAttributeNames": {k: names[k] for k in ("#status", "#staged", "#pk", "#time")},
            "ExpressionAttributeValues": {
                **{k: v for k, v in values.items() if k in (":pending", ":time")},
                ":token": {"S": f"{record['eventID']}#{uuid.uuid4().hex}"},
                ":record": {"S": f"{record['eventID']}#"},
            },
            "ReturnValues": "ALL_NEW",  # the nonce it holds (if_not_exists kept an earlier one: not "updated")
        }
        staged: dict[str, Any] = {}
        if _conditional(lambda: staged.update(ddb.update_item(**stage))):
            return True
        token = staged["Attributes"][STAGED]["S"]
        marker = marker_put(polling["ledgerTable"], marker_id, expires)["Put"]
        marker["Item"]["nonce"] = {"S": token}
        try:
            ddb.put_item(**marker, ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            token = getattr(exc, "response", {}).get("Item", {}).get("nonce", {}).get("S", token)
    index = {
        **update,
        "ConditionExpression": "#staged = :token AND attribute_not_exists(#shard) AND "
        + ("#time = :time" if ":time" in values else "attribute_not_exists(#time)"),
        "ExpressionAttributeNames": {**names},
        "ExpressionAttributeValues": {**{k: v for k, v in values.items() if k != ":indexed"}, ":token": {"S": token}},
    }
    del index["ExpressionAttributeNames"]["#pk"]
    return _conditional(lambda: ddb.update_item(**index))


def _restaged_since(old: dict[str, Any], config: HandlerConfig, clients: Clients) -> bool:
    """True when this record is a write over an item staged by an earlier record (its old image holds
    `stStaged`) whose next delivery staged and indexed it again after this write: the marker of that record holds
    another nonce than the staging this write wiped. See `_assign_in_steps`."""
    staged = old.get(STAGED)
    if not isinstance(staged, str) or "#" not in staged:
        return False
    marker_id = f"{ASSIGN_MARKER}{staged.rsplit('#', 1)[0]}"
    found = clients.get("dynamodb").get_item(
        TableName=config["polling"]["ledgerTable"], Key={"id": {"S": marker_id}}, ConsistentRead=True
    )
    nonce = found.get("Item", {}).get("nonce", {}).get("S")
    return nonce is not None and nonce != staged


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
