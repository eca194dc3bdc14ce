"""Reading a parked-work queue once through, and giving back what a run did not finish."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

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
        """Make every message still held visible again."""
        held = list(self.held.values())
        for start in range(0, len(held), 10):
            entries = [
                {"Id": str(i), "ReceiptHandle": m.receipt, "VisibilityTimeout": 0}
                for i, m in enumerate(held[start : start + 10])
            ]
            self.sqs.change_message_visibility_batch(QueueUrl=self.url, Entries=entries)
        self.held.clear()
