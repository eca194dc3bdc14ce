"""At most one action per occurrence, under at-least-once delivery: a ledger of claimed and completed occurrences.

Stream records are delivered at least once (retries, bisection, a second path such as a precise delete racing
TTL), so an action is claimed before it runs. The ledger is a small DynamoDB table of its own (no stream, so it can
never trigger anything), one item per occurrence:

- claim: a conditional PutItem, status PENDING with a lease; it fails if the occurrence is DONE, or PENDING under a
  live lease (another invocation is on it: a TransientError, so the record is retried after the lease).
- complete: status DONE. release: delete the claim after a failed action, so the retry can run at once.
- schedule (eventbridge): status SCHEDULED, written once a schedule owns the occurrence (a batch's markers in one
  BatchWriteItem per 25); a later claim of that
  occurrence returns False (the schedule delivers it), and a cancelled occurrence's marker is removed again.
- withhold (eventbridge, reconcile): status WITHHELD, for a past occurrence reconcile decided not to deliver (due
  longer ago than the ledger remembers: delivered long ago, or never). A claim refuses it as it refuses DONE, so the
  handler fed the item for another occurrence does not deliver it; unlike DONE it records no delivery, so a
  `--deliver-past-due` run removes it (`unwithhold`) and the handler's claim then delivers it once.
- first_scheduled (eventbridge, recurring items): when a recurring schedule first existed for one version of an
  item's rule, so a redelivered batch leaves the firings after it to Scheduler. Kept as long as a parked record can
  wait to be redriven (`RULE_MARKER_SECONDS`), since its record comes back that late.
- items expire through the ledger's TTL after `windowSeconds`, longer than any redelivery. So the ledger's silence
  about an occurrence means "never delivered" only for a while after its due time (`remembered`): after that,
  "delivered long ago" and "never delivered" look the same, and no path delivers it again.

Cost: two write request units per action (claim and complete), about $1.25 per million actions at on-demand
prices ($0.625 per million writes, us-east-1), no reads on the normal path, and none on a refused claim either
(the refusal returns the item that refused it). A crash between the action and
`complete` leaves a PENDING claim: after the lease the retry runs the action again (at-least-once, never lost).

Where the action is itself one conditional write to an item we own (aggregate's running total), the record's
`record_digest` can live on that item instead (see handlers/aggregate/): the check and the action are then one
write, with no ledger item and no transaction.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .clients import Clients
from .errors import TransientError, error_code

# The AWS actions this module's own calls need (checked against its code and against every function's role by
# tests/iam): all on the ledger table.
AWS_ACTIONS = (
    "dynamodb:BatchWriteItem",
    "dynamodb:DeleteItem",
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
)

PENDING = "PENDING"
DONE = "DONE"
SCHEDULED = "SCHEDULED"
WITHHELD = "WITHHELD"
# A recurring firing the stream handler took from Scheduler and could not send (the target refused it for now): the
# handler owes it, and a later handling of the record (Lambda's retry) claims and sends it, whenever that comes.
OWED = "OWED"
REFUSING = (DONE, WITHHELD)  # statuses that refuse every claim: acted, or held back by reconcile
BATCH_WRITE_LIMIT = 25  # DynamoDB's most items in one BatchWriteItem
UNPROCESSED_ATTEMPTS = 5
# How much earlier than `windowSeconds` after its due time the ledger's silence about an occurrence stops being
# trusted: the release schedule's lead (second precision: its marker counts from the release, up to a minute early),
# clock differences and the ledger writes' own time, with room to spare.
FORGET_MARGIN_SECONDS = 3600.0
# How long a new rule's first-scheduled entry is kept: SQS keeps a message at most 14 days, so a record parked in
# the poison queue is redriven within that (or never), and must still find when its rule's schedule was first made.
RULE_MARKER_SECONDS = 14 * 24 * 3600
# The ledger's record of the narrowest `windowSeconds` backfill and reconcile have run the table with (never
# expires; written by backfill.timed.memory_seconds): entries keep the expiry they were written with, so after the
# window is raised the ledger still forgets at the old one.
NARROWEST_WINDOW = "scheduled-table#window"
# The narrowest `idempotency_window_seconds` the component accepts (components/args.py): any entry lives this long.
SHORTEST_WINDOW_SECONDS = 86400


def remembered(due: datetime, at: datetime, window_seconds: float) -> bool:
    """Whether the ledger still holds, at `at`, every entry written for an occurrence due at `due` (one definition
    for every path that acts on the ledger's silence: the live handler, backfill and reconcile). Each entry lives at
    least `window_seconds` after the due time, less the release schedule's lead (a schedule's marker counts from its
    firing, a direct delivery's claim from when it is made, at or after the due time), and DynamoDB's TTL deletes
    only once that has passed. A caller that knows when the item took that due time, later than it (a write of a
    past time, whose record it holds), passes that instead: its entries were written no earlier. So before this an
    occurrence the ledger does not hold was never delivered; after it, "delivered long ago" and "never delivered"
    look the same. Judged at the moment the ledger is asked: TTL deletes by the clock, whenever the question comes
    (a stream record a day late, a redrive days later)."""
    return (at - due).total_seconds() < window_seconds - FORGET_MARGIN_SECONDS


def marker_put(table: str, marker: str, expires_at: int) -> dict[str, Any]:
    """A transaction's Put of a record-level marker (aggregate, polling's assigner): it fails if the marker is
    there, so the write it is paired with happens once per stream record however often the record comes back."""
    return {
        "Put": {
            "TableName": table,
            "Item": {"id": {"S": marker}, "expiresAt": {"N": str(expires_at)}},
            "ConditionExpression": "attribute_not_exists(id)",
        }
    }


def put_markers(clients: Clients, table: str, markers: list[str], expires_at: int) -> None:
    """Record-level markers put into the ledger outside a transaction (aggregate on another account's table), 25 to
    a BatchWriteItem; a put is idempotent, so unprocessed ones are sent again, and TransientError if some never go
    through."""
    ddb = clients.get("dynamodb")
    requests = [
        {"PutRequest": {"Item": {"id": {"S": marker}, "expiresAt": {"N": str(expires_at)}}}}
        for marker in dict.fromkeys(markers)  # a batch may not name an item twice
    ]
    for start in range(0, len(requests), BATCH_WRITE_LIMIT):
        pending = requests[start : start + BATCH_WRITE_LIMIT]
        for attempt in range(UNPROCESSED_ATTEMPTS):
            if attempt:
                time.sleep(0.05 * 2**attempt)
            pending = ddb.batch_write_item(RequestItems={table: pending}).get("UnprocessedItems", {}).get(table, [])
            if not pending:
                break
        else:
            raise TransientError(f"{len(pending)} record marker(s) left unprocessed by BatchWriteItem")


def shares_account_with_ledger(table: str) -> bool:
    """Whether one transaction may hold a write to `table` and one to the ledger. The ledger is always in the
    deploying account, named by its name; the component names another account's table by its ARN (and only such a
    table: components/existing.py `table_reference`), and DynamoDB refuses a transaction whose items are in two
    accounts or Regions (API reference, TransactWriteItems)."""
    return not table.startswith("arn:")


# A record's digest: 6 bytes. Two different records of one total are mistaken for each other with probability about
# n / 2**48 per record checked against n digests (n is at most about 130 here: under 1e-12), and a mistake
# drops a record rather than counting one twice; 48 bits keep each digest at 6 bytes of the item they live on.
DIGEST_BYTES = 6


def record_digest(event_id: str, scope: str) -> bytes:
    """A short, stable id of one stream record's effect on `scope` (the record's `eventID` is the same on every
    delivery, so is its digest)."""
    return hashlib.blake2b(f"{event_id}#{scope}".encode(), digest_size=DIGEST_BYTES).digest()


class Ledger:
    def __init__(self, table: str, *, clients: Clients, lease_seconds: int, window_seconds: int) -> None:
        self.table = table
        self.clients = clients
        self.lease_seconds = lease_seconds
        self.window_seconds = window_seconds

    @classmethod
    def of(cls, section: Mapping[str, Any], clients: Clients) -> Ledger:
        """The ledger a mode's config section names (`ledgerTable`, `leaseSeconds`, `windowSeconds`)."""
        return cls(
            section["ledgerTable"],
            clients=clients,
            lease_seconds=section["leaseSeconds"],
            window_seconds=section["windowSeconds"],
        )

    def claim(self, occurrence: str, now: float | None = None, *, take_over_scheduled: bool = False) -> bool:
        """True: run the action. False: it already ran. Raises TransientError while another run holds the lease.

        `take_over_scheduled`: a SCHEDULED marker does not stop this claim (it replaces it). For the delivery that
        marker stands for (`precision="second"`: the release consumer, and a settle after the item left its due
        time), where a direct delivery must leave the occurrence to its schedule."""
        moment = time.time() if now is None else now
        condition = "attribute_not_exists(id) OR (#status = :pending AND leaseUntil < :now) OR #status = :owed"
        values = {":pending": {"S": PENDING}, ":now": {"N": str(int(moment))}, ":owed": {"S": OWED}}
        if take_over_scheduled:
            condition += " OR #status = :scheduled"
            values[":scheduled"] = {"S": SCHEDULED}
        ddb = self.clients.get("dynamodb")
        try:
            ddb.put_item(
                TableName=self.table,
                Item={
                    "id": {"S": occurrence},
                    "status": {"S": PENDING},
                    "leaseUntil": {"N": str(int(moment) + self.lease_seconds)},
                    "expiresAt": {"N": str(int(moment) + self.window_seconds)},
                },
                ConditionExpression=condition,
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=values,
                # A refusal returns the item that refused it (no extra cost): the status below without a GetItem.
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            refused_by = (getattr(exc, "response", None) or {}).get("Item")
            # Always there from DynamoDB (the condition fails only on an existing item); read it if a client or an
            # emulator leaves it out.
            status = refused_by.get("status", {}).get("S") if refused_by else self._status(occurrence)
            if status in REFUSING or (status == SCHEDULED and not take_over_scheduled):
                return False
            raise TransientError(f"occurrence {occurrence} is being acted on by another invocation") from exc
        return True

    def narrowest_window(self) -> float:
        """The window to judge the ledger's memory by: this one, or a narrower one the table ran with before
        (`NARROWEST_WINDOW`, when recorded). One consistent read."""
        recorded = self._item(NARROWEST_WINDOW).get("seconds", {}).get("N")
        return float(self.window_seconds if recorded is None else min(self.window_seconds, int(recorded)))

    def complete(self, occurrence: str) -> None:
        self._set(occurrence, DONE)

    def owe(self, occurrence: str) -> None:
        """Turn this run's claim into OWED: not delivered, and the next claim takes it at once (no lease to wait)."""
        self._set(occurrence, OWED)

    def owed(self, occurrences: list[str]) -> list[str]:
        """Those of `occurrences` a run took over and owes (`owe`): one consistent read each."""
        return [name for name in occurrences if self._status(name) == OWED]

    def withhold(self, occurrence: str) -> None:
        """Turn this run's claim into WITHHELD: not delivered, and no claim takes it until `unwithhold`."""
        self._set(occurrence, WITHHELD)

    def unwithhold(self, occurrence: str) -> None:
        """Remove a WITHHELD entry (never another status), so the next claim delivers the occurrence."""
        self._delete_if(occurrence, WITHHELD)

    def _set(self, occurrence: str, status: str) -> None:
        self.clients.get("dynamodb").update_item(
            TableName=self.table,
            Key={"id": {"S": occurrence}},
            UpdateExpression="SET #status = :status",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":status": {"S": status}},
        )

    def scheduled_many(self, markers: list[tuple[str, float]]) -> None:
        """`scheduled` for many occurrences, 25 to a BatchWriteItem (a batch's schedules: one request, not 25).
        Unprocessed items (throttling) are sent again; TransientError if some never go through."""
        ddb = self.clients.get("dynamodb")
        latest = {name: fire_at for name, fire_at in markers}  # a batch may not name an item twice
        requests = [
            {
                "PutRequest": {
                    "Item": {
                        "id": {"S": name},
                        "status": {"S": SCHEDULED},
                        "expiresAt": {"N": str(int(fire_at) + self.window_seconds)},
                    }
                }
            }
            for name, fire_at in latest.items()
        ]
        for start in range(0, len(requests), BATCH_WRITE_LIMIT):
            pending = requests[start : start + BATCH_WRITE_LIMIT]
            for attempt in range(UNPROCESSED_ATTEMPTS):
                if attempt:
                    time.sleep(0.05 * 2**attempt)
                answer = ddb.batch_write_item(RequestItems={self.table: pending})
                pending = answer.get("UnprocessedItems", {}).get(self.table, [])
                if not pending:
                    break
            else:
                raise TransientError(f"{len(pending)} schedule marker(s) left unprocessed by BatchWriteItem")

    @property
    def rule_marker_seconds(self) -> int:
        """How long a `first_scheduled` entry lives after its time: the window, or as long as a parked record can
        wait to be redriven if that is longer."""
        return max(self.window_seconds, RULE_MARKER_SECONDS)

    def first_scheduled(self, marker: str, at: float) -> float:
        """Record that a schedule exists since `at` under `marker`, unless an earlier call recorded a time there;
        returns the time recorded (the first). One conditional write; a refusal returns the item that refused it.
        Kept `rule_marker_seconds`: the record that asks comes back up to that late (a redrive)."""
        try:
            self.clients.get("dynamodb").put_item(
                TableName=self.table,
                Item={
                    "id": {"S": marker},
                    "status": {"S": SCHEDULED},
                    "at": {"N": repr(at)},
                    "expiresAt": {"N": str(int(at) + self.rule_marker_seconds)},
                },
                ConditionExpression="attribute_not_exists(id)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            refused_by = (getattr(exc, "response", None) or {}).get("Item") or self._item(marker)
            return float(refused_by.get("at", {}).get("N", at))
        return at

    def first_scheduled_at(self, marker: str) -> float | None:
        """The time `first_scheduled` recorded under `marker`, if any (a consistent read)."""
        at = self._item(marker).get("at", {}).get("N")
        return None if at is None else float(at)

    def unschedule(self, occurrence: str) -> None:
        """Forget a cancelled occurrence's schedule marker (never a DONE one: that action was taken)."""
        self._delete_if(occurrence, SCHEDULED)

    def _delete_if(self, occurrence: str, status: str) -> None:
        """Delete the occurrence's entry if it holds `status` (otherwise leave it as it is)."""
        try:
            self.clients.get("dynamodb").delete_item(
                TableName=self.table,
                Key={"id": {"S": occurrence}},
                ConditionExpression="#status = :status",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={":status": {"S": status}},
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    def taken(self, occurrence: str) -> bool:
        """True when a schedule or a completed action already owns the occurrence."""
        return self._status(occurrence) in (DONE, SCHEDULED)

    def release(self, occurrence: str) -> None:
        self.clients.get("dynamodb").delete_item(TableName=self.table, Key={"id": {"S": occurrence}})

    def _status(self, occurrence: str) -> str | None:
        return self._item(occurrence).get("status", {}).get("S")

    def _item(self, occurrence: str) -> dict[str, Any]:
        found: dict[str, Any] = self.clients.get("dynamodb").get_item(
            TableName=self.table, Key={"id": {"S": occurrence}}, ConsistentRead=True
        )
        return dict(found.get("Item", {}))
