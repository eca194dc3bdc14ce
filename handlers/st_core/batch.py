"""Processing a stream batch: records of one item in stream order, different items concurrently.

Outcome per record: done; poisoned (can never succeed: parked with a reason, not retried); or failed (transient:
reported in batchItemFailures so Lambda retries from there). Nothing is dropped silently.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import log
from .clients import Clients
from .config import HandlerConfig
from .errors import PermanentError, error_code, is_transient
from .poison import PoisonQueue
from .stream import BatchResponse, DynamoDBStreamEvent, DynamoDBStreamRecord, key_identity, sequence_number, split_event

RecordHandler = Callable[[DynamoDBStreamRecord], None]


def process_batch(
    records: Sequence[DynamoDBStreamRecord],
    handle: RecordHandler,
    *,
    poison: PoisonQueue,
    max_workers: int,
) -> BatchResponse:
    """Apply `handle` to every record; return the partial-batch response Lambda expects for stream sources."""
    groups: dict[str, list[DynamoDBStreamRecord]] = {}
    for index, record in enumerate(records):
        try:
            identity = key_identity(record)
        except PermanentError:
            identity = f"unkeyed#{index}"  # a record without keys is its own group and ends in the poison queue
        groups.setdefault(identity, []).append(record)

    def run(group: list[DynamoDBStreamRecord]) -> str | None:
        return _run_group(group, handle, poison)

    if len(groups) <= 1 or max_workers <= 1:
        failed = [run(group) for group in groups.values()]
    else:
        with ThreadPoolExecutor(max_workers=min(max_workers, len(groups))) as pool:
            failed = list(pool.map(run, groups.values()))
    return {"batchItemFailures": [{"itemIdentifier": seq} for seq in failed if seq is not None]}


def _run_group(group: list[DynamoDBStreamRecord], handle: RecordHandler, poison: PoisonQueue) -> str | None:
    """Records of one item, in order; at the first transient failure stop, so later changes are not applied early."""
    for record in group:
        seq = sequence_number(record)
        try:
            handle(record)
            continue
        except PermanentError as exc:
            reason, code = str(exc), "PermanentError"
        except Exception as exc:
            if is_transient(exc):
                log.warning("retry", sequenceNumber=seq, error=error_code(exc), detail=str(exc)[:300])
                return seq
            # A 4xx the API will always give for this input, or a defect: either way retrying cannot help.
            reason = f"{error_code(exc)}: {exc}"[:1000]
            code = error_code(exc)
            log.debug("poison-traceback", sequenceNumber=seq, traceback=traceback.format_exc())
        if not _park(poison, record, reason, code):
            return seq
    return None


def park_malformed(poison: PoisonQueue, malformed: list[tuple[object, str]]) -> None:
    """Park what is not a stream record at all. It has no sequence number to retry from, so if the poison queue
    cannot take it the invocation fails as a whole and Lambda delivers the batch again: never lost."""
    for thing, reason in malformed:
        poison.send(thing, reason, "MalformedRecord")
        log.warning("poisoned", error="MalformedRecord", reason=reason)


def _park(poison: PoisonQueue, record: Any, reason: str, code: str) -> bool:
    seq = sequence_number(record)
    try:
        poison.send(record, reason, code)
    except Exception as exc:  # the poison queue itself is unreachable: keep the record in the stream
        log.error("poison-failed", sequenceNumber=seq, error=error_code(exc), reason=reason)
        return False
    log.warning("poisoned", sequenceNumber=seq, error=code, reason=reason)
    return True


def handle_stream_batch(
    event: DynamoDBStreamEvent | object,
    config: HandlerConfig,
    *,
    mode: str,
    handle: RecordHandler,
    clients: Clients,
) -> BatchResponse:
    """A mode's whole batch: every record through `handle`, poison (malformed records included) parked in the
    table's poison queue."""
    poison = PoisonQueue(config["poisonQueueUrl"], mode=mode, table=config["table"], clients=clients)
    records, malformed = split_event(event)
    park_malformed(poison, malformed)
    response = process_batch(records, handle, poison=poison, max_workers=config["maxWorkers"])
    batch_metrics(config, mode=mode, records=len(records) + len(malformed), poison=poison, response=response)
    return response


def batch_metrics(
    config: HandlerConfig, *, mode: str, records: int, poison: PoisonQueue, response: BatchResponse
) -> None:
    """What the batch did, as embedded metrics (the dashboard's and alarms' data, at no API cost)."""
    log.metrics(
        "ScheduledTable",
        {"Table": config["table"], "Mode": mode},
        Records=records,
        Poisoned=poison.sent,
        Retried=len(response["batchItemFailures"]),
    )
