"""An EventBridge event bus: one event per due event, the due event as its `detail`, with the configured
`detailType` and `source`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import constants
from ..errors import refused_entry
from . import GRANT_ARN

if TYPE_CHECKING:
    from collections.abc import Sequence

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
# PutEvents takes 10 entries a call, 256 KiB in all.
BATCH_ENTRIES = constants.BATCH_ENTRIES
BATCH_BYTES = constants.EVENTBRIDGE_ENTRY_BYTES
AWS_ACTIONS = SEND_ACTIONS


def request(target: TargetConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    return None


def send(clients: Clients, target: TargetConfig, payload: str, occurrence: str) -> None:
    """PutEvents answers 200 even when it refused the entry: a refused entry raises, as the call's error would, so
    the record is retried (ThrottlingException, InternalFailure) or parked with AWS's reason, never dropped."""
    refused = send_batch(clients, target, [(payload, occurrence)])[0]
    if refused is not None:
        raise refused


def send_batch(clients: Clients, target: TargetConfig, batch: Sequence[tuple[str, str]]) -> list[Exception | None]:
    """One PutEvents of up to BATCH_ENTRIES due events (payload, occurrence): per entry, None when the bus took it,
    else the error its refusal stands for (the call answers 200 with the entry's ErrorCode)."""
    entry = {"EventBusName": target["arn"], "Source": target["source"], "DetailType": target["detailType"]}
    response = clients.get("events").put_events(Entries=[{**entry, "Detail": payload} for payload, _ in batch])
    results = list(response.get("Entries") or [])
    results += [{}] * (len(batch) - len(results))  # an entry AWS did not answer for was not taken
    return [
        None
        if result.get("EventId") and not result.get("ErrorCode")
        else refused_entry(result.get("ErrorCode"), result.get("ErrorMessage"), "PutEvents")
        for result in results[: len(batch)]
    ]


def scheduler_parameters(target: TargetConfig, payload: str) -> dict[str, Any]:
    # Scheduler's templated EventBridge target: PutEvents with `Input` as the event's detail.
    return {"EventBridgeParameters": {"DetailType": target["detailType"], "Source": target["source"]}}
