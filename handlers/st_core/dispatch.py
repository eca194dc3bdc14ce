"""The due event and how it reaches the target: now (a direct SDK call) or later (a Scheduler target). What differs
by kind of target (its request, its send, its schedule target's parameters) is declared in that kind's module
(st_core/target_types/), which this module imports for the configured kind only.

Every mode sends the same document, so a consumer written for one mode works with all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from . import constants, target_types
from .clients import CLIENTS, Clients
from .errors import PermanentError
from .fifo import group_attribute
from .jsontext import dumps, size
from .timeparse import format_due

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from .config import SchedulerConfig, TargetConfig

SOURCE = "scheduled-table"


# The due event's shape, for the type checker only: at run time it is a plain dict (building a TypedDict at import
# costs about 0.3 ms of every cold start). The public contract is scheduled_table.DueEvent and the JSON Schema
# (components/due_event.py, schemas/due_event.schema.json); tests check all three name the same fields.
if TYPE_CHECKING:

    class DueEvent(TypedDict):
        source: str
        occurrenceId: str
        mode: str
        table: str
        keys: dict[str, Any]
        dueAt: str
        item: dict[str, Any]
        itemTrimmed: NotRequired[bool]
        offsetSeconds: NotRequired[int]
        recurrence: NotRequired[str]  # a recurring item's expression; its dueAt is the firing's scheduled time
        timeZone: NotRequired[str]

else:
    DueEvent = dict


def due_event(
    *,
    mode: str,
    table: str,
    keys: dict[str, Any],
    due: datetime,
    item: dict[str, Any],
    occurrence: str,
    offset: int | None = None,
) -> DueEvent:
    """`occurrence`: the occurrence's id (`naming.occurrence_id`), the one the ledger and the target's deduplication
    use. `offset`: which of the item's `offsets` this is (seconds from `dueAt`), on tables configured with several."""
    event: DueEvent = {
        "source": SOURCE,
        "occurrenceId": occurrence,
        "mode": mode,
        "table": table,
        "keys": keys,
        "dueAt": format_due(due),
        "item": item,
    }
    if offset is not None:
        event["offsetSeconds"] = offset
    return event


def payload_limit(target: TargetConfig, *, via_scheduler: bool) -> int:
    """The largest payload (bytes) the target takes (a queue's own `maxMessageBytes`, else its kind's), and
    Scheduler's input limit when a schedule delivers it."""
    limit = int(target.get("maxMessageBytes") or target_types.of(target["kind"]).PAYLOAD_BYTES)
    if via_scheduler:
        limit = min(limit, constants.SCHEDULER_INPUT_BYTES)
    return limit - constants.ENVELOPE_BYTES


def target_input(target: TargetConfig, event: DueEvent, *, via_scheduler: bool = False) -> str:
    """What the target receives, as the JSON text both Scheduler's `Input` and the direct calls take: its kind's
    own request (an email), or the due event. A due event too big for the target is sent without its item (`item`
    empty, `itemTrimmed` true): the keys and due time always fit, so the action is never lost; the consumer reads
    the item by its keys."""
    limit = payload_limit(target, via_scheduler=via_scheduler)
    kind = target_types.of(target["kind"])
    request = kind.request(target, dict(event))
    if request is not None:
        text = dumps(request)
        if size(text) > limit:
            raise PermanentError(
                f"the {kind.NOUN} rendered from this item is {size(text)} bytes, over the {limit} allowed"
            )
        return text
    text = dumps(event, str_keys=True)  # its keys and the item's (DynamoDB attribute names) are strings
    if size(text) <= limit:
        return text
    # A FIFO target's group attribute stays, so the trimmed event goes to the same message group as a whole one.
    kept = group_attribute(target, event["item"])
    trimmed = dumps({**event, "item": kept, "itemTrimmed": True}, str_keys=True)
    if kept and size(trimmed) > limit:
        trimmed = dumps({**event, "item": {}, "itemTrimmed": True}, str_keys=True)
    return trimmed


def scheduler_target(target: TargetConfig, scheduler: SchedulerConfig, payload: str) -> dict[str, Any]:
    """The `Target` of a schedule delivering `payload` (from `target_input(..., via_scheduler=True)`): the
    target's ARN (or its kind's universal target), role, input, retries, DLQ, and its kind's parameters."""
    kind = target_types.of(target["kind"])
    request = schedule_target(kind.SCHEDULER_ARN or target["arn"], scheduler, payload)
    request.update(kind.scheduler_parameters(target, payload))
    return request


def schedule_target(arn: str, scheduler: SchedulerConfig, payload: str) -> dict[str, Any]:
    """A schedule `Target` for any ARN, universal targets included, with the component's retries and DLQ."""
    return {
        "Arn": arn,
        "RoleArn": scheduler["roleArn"],
        "Input": payload,
        "DeadLetterConfig": {"Arn": scheduler["deadLetterArn"]},
        "RetryPolicy": {
            "MaximumEventAgeInSeconds": scheduler["maxEventAgeSeconds"],
            "MaximumRetryAttempts": scheduler["maxRetryAttempts"],
        },
    }


def send_now(target: TargetConfig, payload: str, *, occurrence: str, clients: Clients = CLIENTS) -> None:
    """Deliver a payload to the target immediately. `occurrence` names this firing where the target dedupes."""
    target_types.of(target["kind"]).send(clients, target, payload, occurrence)


def batch_entries(target: TargetConfig) -> int:
    """How many due events one call to the target takes: its kind's batch call's (SendMessageBatch, PutEvents: 10),
    or 1 for a kind that has none."""
    return int(getattr(target_types.of(target["kind"]), "BATCH_ENTRIES", 1))


def packed(sizes: Sequence[int], entries: int, limit: int) -> list[list[int]]:
    """The positions of `sizes` (bytes) in consecutive batches of at most `entries` whose sizes add up to at most
    `limit`; an entry over `limit` by itself is a batch of its own (sent alone, by the single call)."""
    batches: list[list[int]] = []
    used = 0
    for position, bytes_ in enumerate(sizes):
        if batches and len(batches[-1]) < entries and used + bytes_ <= limit:
            batches[-1].append(position)
            used += bytes_
        else:
            batches.append([position])
            used = bytes_
    return batches


def _sizes(batch: Sequence[tuple[str, str]]) -> list[int]:
    """Each (payload, occurrence)'s bytes in a batch call, with its entry's envelope."""
    return [size(payload) + constants.ENVELOPE_BYTES for payload, _ in batch]


def most_calls(target: TargetConfig, batch: Sequence[tuple[str, str]]) -> int:
    """The most calls `send_many` makes for `batch` (after `prepare`): one a pack of entries where the kind has a
    batch call, plus one an entry of each pack the target may refuse whole for its size (a queue whose own maximum
    message size is below the pack's total: its entries are then sent one a call); one an entry where it has none.
    What a caller with a deadline counts before it sends."""
    kind = target_types.of(target["kind"])
    if getattr(kind, "send_batch", None) is None:
        return len(batch)
    sizes, limit = _sizes(batch), int(getattr(kind, "BATCH_BYTES", 0))
    own = int(target.get("maxMessageBytes") or limit)
    packs = packed(sizes, batch_entries(target), limit)
    return len(packs) + sum(len(pack) for pack in packs if len(pack) > 1 and sum(sizes[p] for p in pack) > own)


def prepare(target: TargetConfig, *, clients: Clients = CLIENTS) -> None:
    """Make now the lookups the target's sends make before their first call (an SQS queue's URL, kept per client),
    so that a send then makes only the calls `most_calls` counts."""
    lookup = getattr(target_types.of(target["kind"]), "prepare", None)
    if lookup is not None:
        lookup(clients, target)


def send_many(
    target: TargetConfig, batch: Sequence[tuple[str, str]], *, clients: Clients = CLIENTS
) -> list[Exception | None]:
    """Deliver several (payload, occurrence) at once: a tenth of the requests where the target's kind has a batch
    call (`send_batch`), one `send_now` each where it has not. Per entry, None when the target took it, else the
    error that refused it, so each is retried or parked by itself: an entry the service refused (a batch call
    answers 200 listing it) or the whole call's failure is never taken as sent, and what was taken is never sent
    again by this call."""
    kind = target_types.of(target["kind"])
    results: list[Exception | None] = [None] * len(batch)
    # A kind's batch call is optional (TargetType declares what every kind has): sqs and events declare one.
    send_batch = getattr(kind, "send_batch", None)
    if send_batch is None:
        for position, (payload, occurrence) in enumerate(batch):
            try:
                kind.send(clients, target, payload, occurrence)
            except Exception as exc:
                results[position] = exc
        return results
    entries, limit = batch_entries(target), int(getattr(kind, "BATCH_BYTES", 0))
    sizes = _sizes(batch)
    for positions in packed(sizes, entries, limit):
        try:
            if len(positions) == 1 and sizes[positions[0]] > limit:
                payload, occurrence = batch[positions[0]]
                kind.send(clients, target, payload, occurrence)
                continue
            refused = send_batch(clients, target, [batch[p] for p in positions])
        except Exception as exc:  # the call itself failed: none of its entries was taken
            for position in positions:
                results[position] = exc
            continue
        for position, error in zip(positions, refused, strict=True):
            results[position] = error
    return results
