"""Redrive from the poison queue: parked records re-run through the consumer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...packaging import runtime_module
from ..aws import Client
from .discovery import Stack
from .ordering import Verdict, current_item, judge
from .queues import Message, Queue
from .records import item_identity, record_id, record_keys, sequence_order
from .replay import replay
from .report import EVERYTHING, Report, Selection, short


@dataclass
class Parked:
    message: Message
    body: dict[str, Any]
    reason: str

    @property
    def record(self) -> Any:
        return self.body.get("record")

    @property
    def identity(self) -> tuple[str, str]:
        return record_id(self.record if isinstance(self.record, dict) else {})

    @property
    def unusable_item(self) -> bool:
        """Parked by the polling processor (an index entry it could not read), not by a consumer: no stream record."""
        record = self.record
        unusable: str = runtime_module("poison").UNUSABLE_ITEM
        return self.body.get("error") == unusable and not (isinstance(record, dict) and "dynamodb" in record)

    def describe(self) -> str:
        what = "(an index entry)" if self.unusable_item else self.body.get("eventName") or ""
        return f"{record_keys(self.record)} {what} failedAt={self.body.get('failedAt')}"


# What to do with an item the polling processor parked (`settle_unusable`).
UNUSABLE_FIX = (
    "not a stream record: the polling processor could not read this item's index entry and took the item out of "
    "the due index; nothing to replay. Fix the item as the reason says: put it again without its st* attributes "
    "(the assigner indexes it from its time), index it with pending_attributes, or write it a new time; then run "
    "this again: the message is deleted once the item was written or deleted"
)


def settle_unusable(client: Client, stack: Stack, parked: Parked, report: Report, queue: Queue, dry_run: bool) -> None:
    """A message the polling processor parked: the item waits, out of the due index, for its user's fix. While it
    is still as the processor left it (`stError` the message's reason, no `stDue`) the message is kept and listed
    with what to do (the command fails); once the item was written since (indexed again, run) or deleted, the
    message is deleted: it is settled. Without the keys in DynamoDB JSON (a message from before they were
    parked with it) it is only listed."""
    record = parked.record if isinstance(parked.record, dict) else {}
    keys = record.get("Keys")
    detail = f"reason={short(parked.reason, 500)!r}; {UNUSABLE_FIX}"
    if not isinstance(keys, dict) or not keys:
        report.line("item to fix", parked.describe(), detail + " (this message too: it does not carry the keys)")
        return
    pending = runtime_module("pending")
    now = current_item(client, stack, {"dynamodb": {"Keys": keys}})
    if now is not None and now.get(pending.ERROR) == {"S": parked.reason} and pending.DUE not in now:
        report.line("item to fix", parked.describe(), detail)
        return
    since = "the item was deleted since" if now is None else "the item was written since (indexed again, or run)"
    report.line("would delete" if dry_run else "settled", parked.describe(), f"{since}; nothing to replay")
    if not dry_run:
        queue.delete(parked.message)


def replay_problem(body: dict[str, Any]) -> str:
    """Why a parked record cannot be replayed as it is, or "" when it can."""
    note = str(body.get("note") or "")
    if "record" not in body or "trimmed" in note or "omitted" in note:
        return (
            f"{note or 'no record'}: the message keeps only the keys (the record was larger than an SQS message); "
            "write the item again to make a new record, then delete this message"
        )
    problem: str = runtime_module("stream").record_problem(body["record"])
    if problem:
        return f"not a stream record Lambda could send ({problem}): nothing to replay; delete it once understood"
    return ""


def poison(
    client: Client,
    stack: Stack,
    report: Report,
    choice: Selection = EVERYTHING,
) -> Report:
    """Re-run parked records through the consumer. Several messages of one record (parked on two deliveries) are
    replayed once and deleted together. A record parked again by the replay has a new message with the new reason,
    so its old message is deleted too; it is reported as parked again (and the command fails).

    Ordering (`judge`): a record is replayed whole only while it is its item's latest change: no newer record of
    the item is parked (every message is read for that, also those --reason or --max leave out) and the item is
    still what the record made it. Otherwise only what it says of the due time the item left is replayed. An item's
    records go in sequence order, and a failed one holds back the item's later ones (`replay`)."""
    reason, limit, dry_run, wait_seconds = choice.reason, choice.limit, choice.dry_run, choice.wait_seconds
    queue = Queue(client, stack.poison_url, wait_seconds=wait_seconds)
    selected: dict[tuple[str, str], list[Parked]] = {}
    newest: dict[str, int] = {}
    try:
        for message in queue.messages():
            try:
                body = json.loads(message.body)
            except ValueError:
                body = {"reason": "", "note": "not JSON"}
            if not isinstance(body, dict):
                body = {"reason": "", "note": "not a JSON object"}
            parked = Parked(message, body, str(body.get("reason") or ""))
            if isinstance(parked.record, dict) and isinstance(parked.record.get("dynamodb"), dict):
                key = item_identity(parked.record)
                newest[key] = max(newest.get(key, 0), sequence_order(parked.record))
            if limit is not None and sum(len(v) for v in selected.values()) >= limit:
                continue
            if reason is not None and not reason.search(parked.reason):
                continue
            if parked.unusable_item:
                settle_unusable(client, stack, parked, report, queue, dry_run)
                continue
            problem = replay_problem(body)
            if problem:
                report.line("cannot replay", parked.describe(), f"reason={short(parked.reason, 120)!r}; {problem}")
                continue
            selected.setdefault(parked.identity, []).append(parked)
        verdicts: dict[tuple[str, str], Verdict] = {}
        for identity, group in list(selected.items()):
            record = group[0].record
            verdict = judge(client, stack, record, newest.get(item_identity(record), 0))
            if verdict.send is None:
                del selected[identity]
                report.line("would skip" if dry_run else "superseded", group[0].describe(), verdict.note)
                if not dry_run:
                    for parked in group:
                        queue.delete(parked.message)
                continue
            verdicts[identity] = verdict
        if dry_run:
            for identity, group in selected.items():
                first = group[0]
                copies = f" ({len(group)} messages)" if len(group) > 1 else ""
                note = "" if verdicts[identity].whole else f"; {verdicts[identity].note}"
                report.line("would replay", first.describe() + copies, f"reason={short(first.reason, 160)!r}{note}")
            return report
        owner = {record_id(r): identity for identity, verdict in verdicts.items() for r in verdict.records}
        settled = replay(client, stack.function, [r for verdict in verdicts.values() for r in verdict.records])
        failed: dict[tuple[str, str], str] = {}
        for record, why in settled.failed:
            failed.setdefault(owner[record_id(record)], why)
        done = [identity for identity in verdicts if identity not in failed]
        replayed = set(done)
        for identity in done:
            for parked in selected[identity]:
                queue.delete(parked.message)
        for identity, why in failed.items():
            report.line("failed", selected[identity][0].describe(), why)
        # A replayed record the handler parked again has a new message now: tell it apart from a success.
        again = {}
        for message in queue.messages():
            try:
                body = json.loads(message.body)
            except ValueError:
                continue
            if isinstance(body, dict):
                identity = Parked(message, body, "").identity
                if identity in replayed:
                    again[identity] = str(body.get("reason") or "")
        for identity in done:
            first = selected[identity][0]
            if identity in again:
                report.line("parked again", first.describe(), f"new reason={short(again[identity], 160)!r}")
            else:
                note = "" if verdicts[identity].whole else f"; {verdicts[identity].note}"
                report.line("replayed", first.describe(), f"was: {short(first.reason, 120)!r}{note}")
        return report
    finally:
        queue.release()
