"""aggregate's ledger path: a write whose records' ids do not fit on the total (or cannot be checked there) is a
transaction with one marker per record in the ledger table (`transact`); on another account's table, where no
transaction can span both, three steps with a journal on the total (`in_steps`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from st_core.errors import PermanentError, TransientError, error_code
from st_core.idempotency import marker_put, put_markers
from st_core.reads import read_items
from st_core.stream import AttributeValue, identity_of

from aggregate.records import Contribution, Outcome, Plan, consumed_units, journal_marker, note_applied
from aggregate.ring import Ring, RingCache, present

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.clients import Clients
    from st_core.config import HandlerConfig

# The AWS actions this module's own calls need (checked by tests/iam): the total's update in a transaction with one
# marker put per record into the ledger, and the journal's removal (on another account's table, the markers are
# read and put in batches by st_core's reads and idempotency, which declare those).
AWS_ACTIONS: tuple[str, ...] = ("dynamodb:PutItem", "dynamodb:UpdateItem")

# On another account's table: the ids of a ledger-path write applied to the total whose markers may not be in the
# ledger yet (see `LedgerPath.in_steps`).
JOURNAL = "stJournal"


class LedgerPath:
    """The writes of a total's records through the ledger: each record counted once, by its marker."""

    def __init__(self, config: HandlerConfig, clients: Clients, rings: RingCache) -> None:
        self.config = config
        self.settings = config["aggregate"]
        self.horizon = int(self.settings["horizonSeconds"])
        self.clients = clients
        self.rings = rings

    def transact(
        self,
        group: str,
        chunk: list[Contribution],
        plan: Plan,
        request: dict[str, Any],
        now: int,
        outcome: Outcome,
    ) -> set[int] | None:
        """The ledger path: the total's update and one marker per record, all or nothing."""
        s = self.settings
        update = {k: v for k, v in request.items() if k != "ReturnConsumedCapacity"}
        update["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        expires = self._marker_expiry(now)
        actions: list[dict[str, Any]] = [{"Update": update}]
        actions += [marker_put(s["ledgerTable"], c.marker, expires) for c in chunk]
        try:
            response = self.clients.get("dynamodb").transact_write_items(
                TransactItems=actions, ReturnConsumedCapacity="TOTAL"
            )
        except Exception as exc:
            code = error_code(exc)
            if code == "ValidationException":
                raise PermanentError(f"group {group!r}: the total cannot be written: {str(exc)[:300]}") from exc
            if code != "TransactionCanceledException":
                raise
            reasons = getattr(exc, "response", {}).get("CancellationReasons", [])
            invalid = [r for r in reasons if r.get("Code") in ("ValidationError", "ValidationException")]
            if invalid:
                # The total is not a number, or the sum leaves DynamoDB's range: retrying cannot help.
                message = invalid[0].get("Message") or invalid[0].get("Code")
                raise PermanentError(f"group {group!r}: the total cannot be written: {message}") from exc
            failed = [i for i, r in enumerate(reasons) if r.get("Code") == "ConditionalCheckFailed"]
            if not failed:
                raise TransientError(f"group {group!r}: transaction cancelled ({reasons})") from exc
            outcome.failed_writes += 1
            seen = {i - 1 for i in failed if i > 0}
            if 0 in failed:
                item = reasons[0].get("Item")
                if item is None:
                    raise TransientError(f"group {group!r}: condition failed and DynamoDB returned no item") from exc
                self.rings.put((self.config["table"], group), Ring.of(item))
                seen |= present(chunk, item)
            return seen
        units = consumed_units(response)
        outcome.units += units
        outcome.writes += 1
        outcome.ledger_writes += 1
        self._remember(group, chunk, plan, now)
        note_applied(group, chunk, plan, request, units)
        return None

    def in_steps(
        self,
        group: str,
        chunk: list[Contribution],
        plan: Plan,
        request: dict[str, Any],
        now: int,
        outcome: Outcome,
    ) -> set[int] | None:
        """The ledger path on another account's table, without a transaction: each record still counts once.

        1. read the chunk's markers (consistent): a record with one was applied;
        2. add to the total as the transaction's update would, and add the chunk's ids to `stJournal`, conditional
           (besides the ids on the total) on the total having no journal;
        3. put the chunk's markers, then remove the journal (conditional on it being this write's).

        A record is applied exactly when its id is on the total (ring or journal) or its marker is in the ledger,
        and every write checks the total's ids and journal in its own condition: a crash after step 2 leaves the
        journal, which fails the next ledger-path write of that total (any container's, any batch's); that write
        puts the journal's markers and removes it (`_settle`), and its own records are then checked in the ledger
        again (step 1), where the journal's now are. Steps 1 and 2 are not one: a record counted by another write
        between them would count twice; a record is only ever in one invocation at a time (Lambda runs one batch
        per shard, or per key with a parallelization factor, and retries a batch only after it ended).
        Cost: one consistent read per record, the update, a put per record and the journal's removal (the
        transaction: two write units per record and two for the update)."""
        keys = [{"id": {"S": c.step_marker}} for c in chunk]
        found = read_items(self.clients, self.settings["ledgerTable"], {identity_of(k): k for k in keys}, workers=1)
        if any(identity_of(k) not in found for k in keys):
            raise TransientError(f"group {group!r}: the ledger's markers could not all be read")
        marked = {i for i, k in enumerate(keys) if found[identity_of(k)] is not None}
        if marked:
            return marked
        journal = sorted({c.digest for c in chunk})
        update = {
            **request,
            "UpdateExpression": request["UpdateExpression"].replace("ADD ", "ADD #journal :journal, ", 1),
            "ConditionExpression": " AND ".join(
                [
                    "attribute_not_exists(#journal)",
                    *([request["ConditionExpression"]] if "ConditionExpression" in request else []),
                ]
            ),
            "ExpressionAttributeNames": {**request["ExpressionAttributeNames"], "#journal": JOURNAL},
            "ExpressionAttributeValues": {**request["ExpressionAttributeValues"], ":journal": {"BS": journal}},
        }
        ddb = self.clients.get("dynamodb")
        try:
            response = ddb.update_item(**update, ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            outcome.failed_writes += 1
            item = getattr(exc, "response", {}).get("Item")
            if item is None:
                raise TransientError(f"group {group!r}: condition failed and DynamoDB returned no item") from exc
            self.rings.put((self.config["table"], group), Ring.of(item))
            left = {bytes(b) for b in item.get(JOURNAL, {}).get("BS", [])}
            if left:
                self._settle(group, chunk[0].key, left, now)
            return present(chunk, item) | {i for i, c in enumerate(chunk) if c.digest in left}
        units = consumed_units(response)
        outcome.units += units
        outcome.writes += 1
        outcome.ledger_writes += 1
        self.rings.put((self.config["table"], group), Ring.of(response.get("Attributes", {})))
        self._settle(group, chunk[0].key, set(journal), now)
        note_applied(group, chunk, plan, request, units)
        return None

    def _settle(self, group: str, key: AttributeValue, journal: set[bytes], now: int) -> None:
        """Put the markers of the records a total's journal names, then remove the journal (if it is still that
        one: another container may have settled it first)."""
        s = self.settings
        markers = [journal_marker(group, d) for d in sorted(journal)]
        put_markers(self.clients, s["ledgerTable"], markers, self._marker_expiry(now))
        try:
            self.clients.get("dynamodb").update_item(
                TableName=self.config["table"],
                Key={self.config["partitionKey"]: key, str(self.config["sortKey"]): {"S": s["totalSortKey"]}},
                UpdateExpression="REMOVE #journal",
                ConditionExpression="#journal = :journal",
                ExpressionAttributeNames={"#journal": JOURNAL},
                ExpressionAttributeValues={":journal": {"BS": sorted(journal)}},
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    def _marker_expiry(self, now: int) -> int:
        """A marker must outlive every redelivery of its record, however the ledger window is set."""
        return now + max(self.settings["windowSeconds"], self.horizon)

    def _remember(self, group: str, chunk: list[Contribution], plan: Plan, now: int) -> None:
        """A transaction returns no item: what this write did to the ring, applied to what was known of it."""
        key = (self.config["table"], group)
        known = self.rings.get(key)
        if known is None:
            return
        ids = {b: joined for b, joined in known.ids.items() if b not in plan.expired}
        if plan.add_ids:
            for c in chunk:
                if c.bucket is not None and not known.holds(c):
                    ids[c.bucket] = ids.get(c.bucket, b"") + c.digest
        until = now + self.horizon if plan.set_until else known.ledger_until
        self.rings.put(key, Ring(ids, until))
