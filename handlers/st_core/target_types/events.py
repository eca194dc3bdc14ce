"""An EventBridge event bus: one event per due event, the due event as its `detail`, with the configured
`detailType` and `source`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import constants
from . import GRANT_ARN

if TYPE_CHECKING:
    from ..clients import Clients
    from ..config import TargetConfig

KIND = "events"
SERVICE = "events"
NOUN = "event bus"
ARN_RESOURCE = r"event-bus/[A-Za-z0-9/._-]{1,256}"
ARN_EXAMPLE = "arn:aws:events:eu-west-1:123456789012:event-bus/orders"
FIFO = False
SCHEDULER_FIFO = False
GRANT = GRANT_ARN
SEND_ACTIONS = ("events:PutEvents",)
SCHEDULER_ACTIONS = ("events:PutEvents",)
SCHEDULER_ARN = ""
# EventBridge uses a bus's customer key itself (its key policy must allow events.amazonaws.com): a sender needs none.
KMS_ACTIONS: tuple[str, ...] = ()
PAYLOAD_BYTES = constants.EVENTBRIDGE_ENTRY_BYTES
AWS_ACTIONS = SEND_ACTIONS


def request(target: TargetConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    return None


def send(clients: Clients, target: TargetConfig, payload: str, occurrence: str) -> None:
    """PutEvents answers 200 even when it refused the entry: a refused entry raises, as the call's error would, so
    the record is retried (ThrottlingException, InternalFailure) or parked with AWS's reason, never dropped."""
    entry = {"EventBusName": target["arn"], "Source": target["source"], "DetailType": target["detailType"]}
    response = clients.get("events").put_events(Entries=[{**entry, "Detail": payload}])
    results = response.get("Entries") or [{}]
    refused = [r for r in results if r.get("ErrorCode") or not r.get("EventId")]
    if not response.get("FailedEntryCount") and not refused:
        return
    from botocore.exceptions import ClientError

    # No code at all: AWS's own failure, which retrying clears.
    code = next((str(r["ErrorCode"]) for r in refused if r.get("ErrorCode")), "InternalFailure")
    message = next((str(r["ErrorMessage"]) for r in refused if r.get("ErrorMessage")), "the entry was not accepted")
    raise ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}}, "PutEvents"
    )


def scheduler_parameters(target: TargetConfig, payload: str) -> dict[str, Any]:
    # Scheduler's templated EventBridge target: PutEvents with `Input` as the event's detail.
    return {"EventBridgeParameters": {"DetailType": target["detailType"], "Source": target["source"]}}
