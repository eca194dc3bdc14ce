"""Processing a stream batch: records of one item in stream order, different items concurrently.

Outcome per record: done; poisoned (can never succeed: parked with a reason, not retried); or failed (transient:
reported in batchItemFailures so Lambda retries from there). Nothing is dropped silently.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from . import log
from .clients import Clients
from .errors import PermanentError, advice, error_code, is_transient, kms_reason
from .poison import PoisonQueue, message_limit
from .stream import BatchResponse, DynamoDBStreamEvent, DynamoDBStreamRecord, key_identity, sequence_number, split_event

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from .config import HandlerConfig

_T = TypeVar("_T")
_R = TypeVar("_R")
RecordHandler = Callable[[DynamoDBStreamRecord], None]
# A record that can never succeed, with its reason and error code.
Parked = tuple[DynamoDBStreamRecord, str, str]
# Handles all of one item's records of a batch at once (to act on their net effect); returns the records to park.
GroupHandler = Callable[[list[DynamoDBStreamRecord]], list[Parked]]


def process_batch(
    records: Sequence[DynamoDBStreamRecord],
    handle: RecordHandler,
    *,
    poison: PoisonQueue,
    max_workers: int,
    handle_group: GroupHandler | None = None,
    identity_of: Callable[[DynamoDBStreamRecord], str] = key_identity,
) -> BatchResponse:
    """Apply `handle` to every record (or `handle_group` to each item's records); return the partial-batch response
    Lambda expects for stream sources. `identity_of`: the record's item (`stream.key_identity`, or a mode's copy of
    it worked out already)."""
    groups: dict[str, list[DynamoDBStreamRecord]] = {}
    for index, record in enumerate(records):
        try:
            identity = identity_of(record)
        except PermanentError:
            identity = f"unkeyed#{index}"  # a record without keys is its own group and ends in the poison queue
        groups.setdefault(identity, []).append(record)

    def run(group: list[DynamoDBStreamRecord]) -> str | None:
        if handle_group is not None:
            return _run_merged(group, handle_group, handle, poison)
        return _run_group(group, handle, poison)

    failed = in_parallel(run, list(groups.values()), max_workers)
    return {"batchItemFailures": [{"itemIdentifier": seq} for seq in failed if seq is not None]}


def in_parallel(work: Callable[[_T], _R], items: Sequence[_T], workers: int) -> list[_R]:
    """`[work(item) for item in items]`, up to `workers` items at a time; an exception from any item is raised once
    every item has run (the first by position), as `ThreadPoolExecutor.map` in a `with` block does. Each worker takes
    the next item as it finishes one and keeps its results, and the caller waits for the workers once: a pool's
    future per item (a condition variable signalled to the waiting caller each time) costs every item a switch of
    the interpreter lock to the caller and back, which a batch of short items pays in CPU."""
    if len(items) <= 1 or workers <= 1:
        return [work(item) for item in items]
    results: list[Any] = [None] * len(items)
    errors: dict[int, BaseException] = {}
    pending = iter(range(len(items)))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                position = next(pending, None)
            if position is None:
                return
            try:
                results[position] = work(items[position])
            except BaseException as exc:  # raised in the caller, as the pool would
                errors[position] = exc

    threads = [threading.Thread(target=worker) for _ in range(min(workers, len(items)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[min(errors)]
    return results


def _run_group(group: list[DynamoDBStreamRecord], handle: RecordHandler, poison: PoisonQueue) -> str | None:
    """Records of one item, in order; at the first transient failure stop, so later changes are not applied early."""
    for record in group:
        seq = sequence_number(record)
        try:
            handle(record)
            continue
        except Exception as exc:
            outcome = permanent_outcome(exc, seq)
            if outcome is None:
                return seq
            reason, code = outcome
        if not _park(poison, record, reason, code):
            return seq
    return None


def _run_merged(
    group: list[DynamoDBStreamRecord], handle_group: GroupHandler, handle: RecordHandler, poison: PoisonQueue
) -> str | None:
    """One item's records through `handle_group`. A transient failure retries the item from its first record (every
    step is safe to repeat); a failure it could not pin on one record falls back to record by record, which can."""
    first = sequence_number(group[0])
    try:
        parked = handle_group(group)
    except Exception as exc:
        if permanent_outcome(exc, first) is None:
            return first
        log.warning("merged-fallback", sequenceNumber=first, error=error_code(exc))
        return _run_group(group, handle, poison)
    for record, reason, code in parked:
        if not _park(poison, record, reason, code):
            return sequence_number(record)
    return None


def permanent_outcome(exc: Exception, seq: str) -> tuple[str, str] | None:
    """(reason, code) for a failure retrying cannot fix; None (after logging the retry) for a transient one."""
    if isinstance(exc, PermanentError):
        return str(exc), "PermanentError"
    if is_transient(exc):
        log.warning("retry", sequenceNumber=seq, error=error_code(exc), detail=str(exc)[:300])
        return None
    # A 4xx the API will always give for this input, or a defect: either way retrying cannot help.
    log.debug("poison-traceback", sequenceNumber=seq, traceback=traceback.format_exc())
    refused = kms_reason(exc)
    if refused:
        return refused, error_code(exc)
    extra = advice(exc)  # kept whole: the reason is bounded by cutting AWS's words instead
    return f"{error_code(exc)}: {exc}"[: 1000 - len(extra)] + extra, error_code(exc)


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
    handle_group: GroupHandler | None = None,
    prepare: Callable[[list[DynamoDBStreamRecord]], None] | None = None,
    finish: Callable[[], list[str]] | None = None,
    counts: Callable[[], dict[str, int]] | None = None,
    identity_of: Callable[[DynamoDBStreamRecord], str] = key_identity,
) -> BatchResponse:
    """A mode's whole batch: every record through `handle` (or each item's records through `handle_group`), poison
    (malformed records included) parked in the table's poison queue. `prepare` sees every well-formed record once
    before any item is handled (work done for the whole batch at once: it must not raise); `finish` runs once after
    every item (work deferred to the end of the batch) and returns sequence numbers to retry from; `counts` adds the
    mode's action counts to the batch's one summary line; `identity_of` names each record's item (`process_batch`)."""
    started = time.perf_counter()
    poison = PoisonQueue(
        config["poisonQueueUrl"], mode=mode, table=config["table"], clients=clients, limit=message_limit(config)
    )
    records, malformed = split_event(event)
    park_malformed(poison, malformed)
    if prepare is not None:
        prepare(records)
    response = process_batch(
        records,
        handle,
        poison=poison,
        max_workers=config["maxWorkers"],
        handle_group=handle_group,
        identity_of=identity_of,
    )
    if finish is not None:
        retry = {f["itemIdentifier"] for f in response["batchItemFailures"]} | set(finish())
        response = {"batchItemFailures": [{"itemIdentifier": seq} for seq in sorted(retry, key=sequence_order)]}
    summary = dict(counts() if counts is not None else {})
    summary["milliseconds"] = round((time.perf_counter() - started) * 1000)
    batch_metrics(
        config, mode=mode, records=len(records) + len(malformed), poison=poison, response=response, summary=summary
    )
    return response


def batch_metrics(
    config: HandlerConfig,
    *,
    mode: str,
    records: int,
    poison: PoisonQueue,
    response: BatchResponse,
    summary: dict[str, int] | None = None,
) -> None:
    """What the batch did, in one line at INFO: embedded metrics (the dashboard's and alarms' data, at no API cost)
    plus the mode's action counts as plain fields (searchable in Logs Insights, not billed as metrics)."""
    log.metrics(
        "ScheduledTable",
        {"Table": config["table"], "Mode": mode},
        properties=summary,
        Records=records,
        Poisoned=poison.sent,
        Retried=len(response["batchItemFailures"]),
    )


def sequence_order(sequence: str) -> int:
    """Sort key for stream sequence numbers (decimal strings of varying length), so the lowest comes first."""
    return int(sequence) if sequence.isdigit() else 0
