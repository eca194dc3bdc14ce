"""A shard's lease: the ledger item that holds a shard for one invocation, so only one sends a shard's items at a
time (one conditional write a shard and tick, not one an item). It ends at the Lambda timeout + 30 s from the tick's
start, so an invocation that dies leaves its shards to the next tick after that; one that ends releases them."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from st_core import log
from st_core.errors import error_code

if TYPE_CHECKING:
    from st_core.clients import Clients
    from st_core.config import PollingConfig

# Hold a shard (a conditional put in the ledger) and release it (a conditional delete).
AWS_ACTIONS = ("dynamodb:DeleteItem", "dynamodb:PutItem")

# The ledger item that holds a shard for one invocation: `LEASE_PREFIX` + the shard number.
LEASE_PREFIX = "lease#shard#"


class Lease:
    """One invocation's leases on the shards it drains: all end at the same time (`ends`), and carry its own mark
    (`holder`), so only it releases them."""

    def __init__(self, polling: PollingConfig, clients: Clients, now: Callable[[], float]) -> None:
        self.ledger = polling["ledgerTable"]
        self.clients = clients
        self.now = now
        # A shard's lease outlives the invocation that took it: the Lambda timeout + 30 s from the tick's start.
        self.ends = int(now()) + polling["leaseSeconds"]
        # Who holds a shard: this invocation's own mark, so only it releases its leases.
        self.holder = os.urandom(8).hex()

    @staticmethod
    def key(shard: int) -> dict[str, Any]:
        """The ledger key of the shard's lease."""
        return {"id": {"S": f"{LEASE_PREFIX}{shard}"}}

    def hold(self, shard: int) -> bool:
        """Take the shard until the lease ends, unless another invocation holds it: one conditional write. Only one
        invocation sends a shard's items at a time, so two overlapping ticks never send one item twice."""
        try:
            self.clients.get("dynamodb").put_item(
                TableName=self.ledger,
                Item={**self.key(shard), "holder": {"S": self.holder}, "expiresAt": {"N": str(self.ends)}},
                # Its own lease too: the SDK's retry of a put DynamoDB applied but whose answer was lost would
                # otherwise find this invocation's lease and leave the shard held, by nobody, until the lease ends.
                ConditionExpression="attribute_not_exists(#ends) OR #ends <= :now OR #holder = :holder",
                ExpressionAttributeNames={"#ends": "expiresAt", "#holder": "holder"},
                ExpressionAttributeValues={":now": {"N": str(int(self.now()))}, ":holder": {"S": self.holder}},
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def release(self, shard: int) -> None:
        """Give the shard back as the drain ends, so the next tick need not wait for the lease. A release that
        fails only delays the shard until its lease ends."""
        try:
            self.clients.get("dynamodb").delete_item(
                TableName=self.ledger,
                Key=self.key(shard),
                ConditionExpression="#holder = :holder",
                ExpressionAttributeNames={"#holder": "holder"},
                ExpressionAttributeValues={":holder": {"S": self.holder}},
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                log.warning("shard-release-failed", shard=shard, reason=f"{type(exc).__name__}: {str(exc)[:300]}")
