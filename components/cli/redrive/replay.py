"""Records through the deployed consumer (a synthetic stream batch, invoked RequestResponse), with Lambda's
contract for its partial-batch answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ...packaging import error_code
from ..aws import Client
from .records import item_identity, sequence_order
from .report import short

# Lambda takes 6 MB in a RequestResponse payload; a batch of replayed records stays well under it.
INVOKE_PAYLOAD_BYTES = 5_000_000
INVOKE_RECORDS = 100


@dataclass(frozen=True)
class Invocation:
    failures: list[str]
    error: str | None = None


def invoke(client: Client, function: str, records: list[dict[str, Any]]) -> Invocation:
    """One synthetic stream batch through the consumer, as Lambda's event source mapping would hand it over."""
    payload = json.dumps({"Records": records}, separators=(",", ":")).encode("utf-8")
    try:
        answer = client("lambda").invoke(FunctionName=function, InvocationType="RequestResponse", Payload=payload)
    except Exception as error:
        return Invocation([], f"{error_code(error)}: {short(str(error))}")
    body = answer["Payload"].read() if answer.get("Payload") is not None else b""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    if answer.get("FunctionError"):
        return Invocation([], f"the function failed ({answer['FunctionError']}): {short(text)}")
    try:
        response = json.loads(text) if text.strip() else None
    except ValueError:
        return Invocation([], f"the function answered something that is not JSON: {short(text)}")
    failures = (response or {}).get("batchItemFailures") or [] if isinstance(response, dict) else []
    return Invocation([str((f or {}).get("itemIdentifier") or "") for f in failures])


def chunks(records: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    size = 0
    for record in records:
        record_size = len(json.dumps(record, separators=(",", ":")).encode("utf-8")) + 1
        if chunk and (len(chunk) >= INVOKE_RECORDS or size + record_size > INVOKE_PAYLOAD_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(record)
        size += record_size
    if chunk:
        yield chunk


@dataclass(frozen=True)
class Settled:
    done: list[dict[str, Any]]
    failed: list[tuple[dict[str, Any], str]]


def replay(client: Client, function: str, records: list[dict[str, Any]]) -> Settled:
    """Every record through the consumer, in stream order, with Lambda's contract for the answer: records before
    the lowest reported sequence number succeeded, the reported one failed, and the ones after it were not
    confirmed, so they go again (the handlers are safe to run twice on a record: that is what redelivery is). A
    failed record holds back the later records of the same item, as the stream would."""
    pending = sorted(records, key=sequence_order)
    done: list[dict[str, Any]] = []
    failed: list[tuple[dict[str, Any], str]] = []

    def fail(record: dict[str, Any], reason: str) -> None:
        nonlocal pending
        failed.append((record, reason))
        identity = item_identity(record)
        later = [r for r in pending if item_identity(r) == identity]
        pending = [r for r in pending if item_identity(r) != identity]
        failed.extend((r, "held back: an earlier record of the same item failed") for r in later)

    while pending:
        chunk = next(chunks(pending))
        pending = pending[len(chunk) :]
        result = invoke(client, function, chunk)
        if result.error is not None:
            for record in chunk:
                fail(record, result.error)
            continue
        if not result.failures:
            done.extend(chunk)
            continue
        sequences = [str(r["dynamodb"]["SequenceNumber"]) for r in chunk]
        reported = [sequences.index(s) for s in result.failures if s in sequences]
        if len(reported) != len(result.failures):
            # Lambda fails the whole batch for an identifier it does not know (empty, null, another batch's).
            for record in chunk:
                fail(record, f"the function reported unknown batchItemFailures {short(result.failures)}")
            continue
        first = min(reported)
        done.extend(chunk[:first])
        pending = chunk[first + 1 :] + pending
        fail(chunk[first], "reported in batchItemFailures again (transient: see the function's log)")
    return Settled(done, failed)
