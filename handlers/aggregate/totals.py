"""aggregate's totals: one conditional write per group (per chunk of its records) that adds the batch's delta and
checks and adds the records' ids on the total (the ring path), or, when they do not fit, goes through the ledger
(`LedgerPath`); each record counted once."""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from st_core.errors import PermanentError, TransientError, error_code, is_transient
from st_core.idempotency import shares_account_with_ledger

from aggregate.ledger import LedgerPath
from aggregate.records import (
    BUCKET_SECONDS,
    DYNAMODB_NUMBERS,
    Contribution,
    Outcome,
    Plan,
    Unwritable,
    chunks,
    consumed_units,
    note_applied,
)
from aggregate.ring import LEDGER_UNTIL, RINGS, Ring, RingCache, bucket_name, present

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.clients import Clients
    from st_core.config import HandlerConfig

# The AWS actions this module's own calls need (checked by tests/iam): the total's update (the ledger path's calls
# are `LedgerPath`'s).
AWS_ACTIONS: tuple[str, ...] = ("dynamodb:UpdateItem",)

# What the ids may take of the total item (each 6 bytes, each bucket's name 12): about 130 ids, so that with a short
# group key the total stays under 1 KB and every write to it costs one write unit.
RING_BYTES = 800
# A write that fails for a transient reason (throttled, 5xx, timed out, a transaction conflict) is tried again this
# many times in the invocation, after 50, 100 and 200 ms, before the group is reported for Lambda's retry: every
# attempt is conditional, so repeating one is safe, and Lambda's retry resends the rest of the batch as well.
TRANSIENT_RETRIES = 3
RETRY_DELAY_SECONDS = 0.05
# Attempts of a chunk whose condition failed because of what another write did meanwhile.
CONDITION_ATTEMPTS = 4


class Totals:
    """Applies coalesced deltas: one conditional write per group (per chunk), each record counted once."""

    def __init__(
        self, config: HandlerConfig, clients: Clients, now: Callable[[], float], rings: RingCache = RINGS
    ) -> None:
        self.config = config
        self.settings = config["aggregate"]
        self.horizon = int(self.settings["horizonSeconds"])
        self.clients = clients
        self.now = now
        self.rings = rings
        self.ledger = LedgerPath(config, clients, rings)

    def apply(self, group: str, items: list[Contribution], outcome: Outcome) -> None:
        """Applies what of `items` was not applied before, counting in `outcome`. Unwritable, naming the records not
        applied, when the total can never be written (every chunk is tried: some may be applied before)."""
        failed: Unwritable | None = None
        unapplied: list[Contribution] = []
        for chunk in chunks(items):
            try:
                self._apply_chunk(group, chunk, outcome)
            except Unwritable as exc:
                failed = failed or exc
                unapplied += exc.records
        if failed is not None:
            raise Unwritable(str(failed), unapplied, failed.code)

    def _apply_chunk(self, group: str, chunk: list[Contribution], outcome: Outcome) -> None:
        conditions = transient = 0
        while True:
            # Records whose ids this container saw on the total were applied: no write needed to learn that again
            # (Lambda's retry of a batch mostly reaches the container that saw its first delivery).
            known = self.rings.get((self.config["table"], group))
            pending = [c for c in chunk if known is None or not known.holds(c)]
            outcome.skipped += len(chunk) - len(pending)
            chunk = pending
            if not chunk:
                return
            try:
                seen = self._write(group, chunk, outcome)
            except Exception as exc:
                if isinstance(exc, PermanentError):
                    raise Unwritable(str(exc), self._unapplied(group, chunk), error_code(exc)) from exc
                if not is_transient(exc) or transient == TRANSIENT_RETRIES:
                    raise
                transient += 1
                time.sleep(RETRY_DELAY_SECONDS * 2 ** (transient - 1))
                continue
            if seen is None:
                outcome.applied += len(chunk)
                return
            outcome.skipped += len(seen)
            chunk = [c for i, c in enumerate(chunk) if i not in seen]
            conditions += 1
            if chunk and conditions == CONDITION_ATTEMPTS:
                raise TransientError(f"group {group!r}: the total's write kept failing its condition")

    def _unapplied(self, group: str, chunk: list[Contribution]) -> list[Contribution]:
        """Of a chunk whose write can never succeed, the records whose ids the total does not hold: the others were
        applied before, whichever check DynamoDB made first. The total is read with a write that cannot happen (its
        condition is false on any item; DynamoDB returns the item that failed it): UpdateItem is all this function
        may call on the table. A record applied through the ledger is found by its marker when it is replayed."""
        s = self.settings
        hash_name = str(self.config["partitionKey"])
        try:
            self.clients.get("dynamodb").update_item(
                TableName=self.config["table"],
                Key={hash_name: chunk[0].key, str(self.config["sortKey"]): {"S": s["totalSortKey"]}},
                UpdateExpression="REMOVE #until",
                ConditionExpression="attribute_exists(#key) AND attribute_not_exists(#key)",
                ExpressionAttributeNames={"#until": LEDGER_UNTIL, "#key": hash_name},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            held = present(chunk, getattr(exc, "response", {}).get("Item") or {})
            return [c for i, c in enumerate(chunk) if i not in held]
        raise TransientError(f"group {group!r}: a condition that cannot hold held")  # never: DynamoDB checks it

    # -- one write ---------------------------------------------------------------------------------------------------

    def _write(self, group: str, chunk: list[Contribution], outcome: Outcome) -> set[int] | None:
        """One attempt: None when the chunk was applied, else the indexes of its records applied before (possibly
        none, when only the ledger guard failed: the next attempt takes the ledger path)."""
        now = int(self.now())
        cache_key = (self.config["table"], group)
        known = self.rings.get(cache_key)
        plan = self._plan(chunk, known, now)
        request = self.request(group, chunk, plan, now)
        try:
            if plan.ledger and not shares_account_with_ledger(self.config["table"]):
                return self.ledger.in_steps(group, chunk, plan, request, now, outcome)
            if plan.ledger:
                return self.ledger.transact(group, chunk, plan, request, now, outcome)
            response = self.clients.get("dynamodb").update_item(
                **request, ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD"
            )
        except Exception as exc:
            code = error_code(exc)
            if code == "ValidationException":
                raise PermanentError(f"group {group!r}: the total cannot be written: {str(exc)[:300]}") from exc
            if code != "ConditionalCheckFailedException":
                raise
            outcome.failed_writes += 1
            item = getattr(exc, "response", {}).get("Item")
            if item is None:
                # AWS returns the item whenever this write's condition can fail (it only fails on an existing item).
                raise TransientError(f"group {group!r}: condition failed and DynamoDB returned no item") from exc
            self.rings.put(cache_key, Ring.of(item))
            return present(chunk, item)
        outcome.units += consumed_units(response)
        outcome.writes += 1
        self.rings.put(cache_key, Ring.of(response.get("Attributes", {})))
        note_applied(group, chunk, plan, request, consumed_units(response))
        return None

    def _plan(self, chunk: list[Contribution], known: Ring | None, now: int) -> Plan:
        ring = known or Ring()
        referenced = {c.bucket for c in chunk if c.bucket is not None}
        expired = sorted(b for b in ring.buckets if self._expired(b, now) and b not in referenced)
        kept = {b: n for b, n in ring.buckets.items() if b not in expired}
        for c in chunk:
            if c.bucket is not None:
                kept[c.bucket] = kept.get(c.bucket, 0) + 1
        fits = ring.size(kept) <= RING_BYTES
        timed = len(referenced) > 0
        ring_only = all(c.bucket is not None and not c.ledger_only for c in chunk)
        if fits and timed and ring_only and ring.ledger_until < now:
            return Plan(ledger=False, add_ids=True, set_until=False, expired=expired)
        add_ids = fits and timed
        return Plan(ledger=True, add_ids=add_ids, set_until=timed and not add_ids, expired=expired)

    def _expired(self, bucket: int, now: int) -> bool:
        """True once no record of the bucket can come back: its latest record is older than the horizon."""
        return (bucket + 1) * BUCKET_SECONDS + self.horizon < now

    def request(self, group: str, chunk: list[Contribution], plan: Plan, now: int) -> dict[str, Any]:
        """The total's UpdateItem (alone, or the Update of the ledger path's transaction)."""
        s = self.settings
        try:
            delta = Decimal(0)
            for c in chunk:
                delta = DYNAMODB_NUMBERS.add(delta, c.delta)
        except ArithmeticError as exc:
            raise PermanentError(
                f"group {group!r}: the batch's change to the total is beyond DynamoDB's numbers (38 digits, "
                f"magnitude up to 1E+126): {type(exc).__name__}"
            ) from exc
        names: dict[str, str] = {"#total": s["totalAttribute"]}
        values: dict[str, Any] = {":delta": {"N": str(delta)}}
        by_bucket: dict[int, list[tuple[int, bytes]]] = {}
        for index, c in enumerate(chunk):
            if c.bucket is not None:
                by_bucket.setdefault(c.bucket, []).append((index, c.digest))
        adds = ["#total :delta"]
        checks: list[str] = []
        for n, (bucket, members) in enumerate(sorted(by_bucket.items())):
            names[f"#b{n}"] = bucket_name(bucket)
            clauses = []
            for index, digest in members:
                values[f":i{index}"] = {"B": digest}
                clauses.append(f"contains(#b{n},:i{index})")
            checks.append(f"NOT ({' OR '.join(clauses)})")
            if plan.add_ids:
                # A set has no duplicates: two records with one digest (about 1e-12) share it, and both count.
                values[f":s{n}"] = {"BS": sorted({digest for _, digest in members})}
                adds.append(f"#b{n} :s{n}")
        expression = "ADD " + ", ".join(adds)
        if not plan.ledger:
            names["#until"] = LEDGER_UNTIL
            values[":now"] = {"N": str(now)}
            checks.insert(0, "(attribute_not_exists(#until) OR #until < :now)")
        elif plan.set_until:
            names["#until"] = LEDGER_UNTIL
            values[":until"] = {"N": str(now + self.horizon)}
            expression += " SET #until = :until"
        if plan.expired:
            for n, bucket in enumerate(plan.expired):
                names[f"#x{n}"] = bucket_name(bucket)
            expression += " REMOVE " + ", ".join(f"#x{n}" for n in range(len(plan.expired)))
        request: dict[str, Any] = {
            "TableName": self.config["table"],
            "Key": {self.config["partitionKey"]: chunk[0].key, str(self.config["sortKey"]): {"S": s["totalSortKey"]}},
            "UpdateExpression": expression,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnConsumedCapacity": "TOTAL",
        }
        if checks:
            request["ConditionExpression"] = " AND ".join(checks)
        return request
