"""Reading a parked-work queue once through, and giving back what a run did not finish."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ..aws import Client

# Messages stay hidden from other readers while a run works on them; the ones kept are made visible at the end.
VISIBILITY_SECONDS = 600
# Long polling for each receive: it asks every SQS server, so an empty answer means an empty queue (short polling
# samples a few servers and may answer empty while messages wait).
WAIT_SECONDS = 1


@dataclass
class Message:
    id: str
    receipt: str
    body: str
    attributes: dict[str, str] = field(default_factory=dict)
    received: float = field(default_factory=time.time)  # hidden from others until VISIBILITY_SECONDS after this


def stopped(error: BaseException) -> list[str] | None:
    """What to tell the operator of a run an AWS error stopped midway (None: not an AWS error, a defect to raise):
    the refused call, then whether the messages the run held are visible again or until when they stay hidden."""
    if isinstance(error, StillHidden):
        cause = error.__context__
        first = [f"stopped: {refusal(cause)}"] if cause is not None and not isinstance(cause, StillHidden) else []
        return [*first, str(error)]
    if not isinstance(getattr(error, "response", None), dict):
        return None
    return [f"stopped: {refusal(error)}", "the messages it held are visible again; nothing is lost"]


class StillHidden(Exception):
    """The run could not make the messages it held visible again (ChangeMessageVisibility refused, say): nothing is
    lost, they come back by themselves when their visibility timeout ends, which the message says."""


def refusal(error: BaseException) -> str:
    """An AWS error as one line naming the call AWS refused (AWS's own message names the IAM action)."""
    response = getattr(error, "response", None)
    code = (response or {}).get("Error", {}).get("Code") if isinstance(response, dict) else None
    operation = getattr(error, "operation_name", None)
    return f"{operation or 'a call'} refused: {code or type(error).__name__}: {error}"


class Queue:
    """Reads a queue once through: each message is received (and hidden) at most once per run; `finish` deletes the
    ones that succeeded and makes every other one visible again at once, so the next run or reader sees it."""

    def __init__(self, client: Client, url: str, *, wait_seconds: int = 1) -> None:
        self.sqs = client("sqs")
        self.url = url
        self.wait_seconds = wait_seconds
        self.held: dict[str, Message] = {}

    def messages(self) -> Iterator[Message]:
        """Every message visible now, each once. Long polling (`wait_seconds` > 0) asks every SQS server, so an
        empty answer means the queue has nothing visible; short polling may miss messages."""
        while True:
            answer = self.sqs.receive_message(
                QueueUrl=self.url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=VISIBILITY_SECONDS,
                WaitTimeSeconds=self.wait_seconds,
                MessageAttributeNames=["All"],
            )
            batch = answer.get("Messages", [])
            fresh = [m for m in batch if m["MessageId"] not in self.held]
            for raw in batch:
                attributes = {k: str(v.get("StringValue", "")) for k, v in (raw.get("MessageAttributes") or {}).items()}
                self.held[raw["MessageId"]] = Message(raw["MessageId"], raw["ReceiptHandle"], raw["Body"], attributes)
            if not fresh:
                return
            for raw in fresh:
                yield self.held[raw["MessageId"]]

    def delete(self, message: Message) -> None:
        self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=message.receipt)
        self.held.pop(message.id, None)

    def release(self) -> None:
        """Make every message still held visible again; StillHidden, after trying every batch, when some cannot be
        (saying until when they stay hidden)."""
        held = list(self.held.values())
        stuck: list[Message] = []
        error: Exception | None = None
        for start in range(0, len(held), 10):
            batch = held[start : start + 10]
            entries = [{"Id": str(i), "ReceiptHandle": m.receipt, "VisibilityTimeout": 0} for i, m in enumerate(batch)]
            try:
                self.sqs.change_message_visibility_batch(QueueUrl=self.url, Entries=entries)
            except Exception as failed:  # refused, say: the others are still tried
                stuck += batch
                error = failed
        self.held.clear()
        if error is not None:
            until = datetime.fromtimestamp(max(m.received for m in stuck) + VISIBILITY_SECONDS, UTC)
            raise StillHidden(
                f"{len(stuck)} message(s) of {self.url} could not be made visible again ({refusal(error)}): they stay "
                f"hidden until {until:%H:%M:%S} UTC ({VISIBILITY_SECONDS} s after they were received), then come "
                "back by themselves; nothing is lost"
            )
