"""`scheduled-table inspect --function NAME`: what a deployed ScheduledTable holds right now, read-only.

Before a redrive, an operator wants to see what is pending and what is parked without changing either: the
occurrences waiting to fire (the schedules in the table's group; the due index's entries in `polling`; the release
queue's delayed messages at `precision="second"`) and, for the poison queue, the stream DLQ and the target DLQ,
how many messages each holds and why, from a sample of them.

Reading a queue without consuming it: each message is received with `VisibilityTimeout=0`, so it stays visible to
the consumer and to the next redrive; receiving does add one to its receive count (none of these queues has a
redrive policy that counts receives). A queue's figures are SQS's approximate ones; the sample is up to `--max`
distinct messages (SQS returns a sample of the queue's servers per receive, so a short queue is read whole only
after a few receives). Named `inspection`, not `inspect`: a module of the package must never hide the standard
library's `inspect` (which dataclasses and pulumi import) when the package's folder is a working directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from .. import modes
from ..packaging import error_code, runtime_module
from .aws import Client, Emit
from .redrive.discovery import RedriveError, Stack, discover
from .redrive.records import record_keys

SAMPLE = 10
# Scan pages (up to 1 MB each) inspect reads looking for due attributes no filter can match.
SCAN_PAGES = 10
# Items inspect reads to find those without the time attribute (`--sample-items`), PAGE_ITEMS a scan page.
SAMPLE_ITEMS = 200
PAGE_ITEMS = 100


@dataclass
class Parked:
    """One queue's contents: SQS's counts and the distinct messages read (id, reason, keys)."""

    label: str
    url: str
    visible: int = 0
    in_flight: int = 0
    delayed: int = 0
    sample: list[tuple[str, str, str]] = field(default_factory=list)


def reason_of(body: str, attributes: dict[str, Any]) -> tuple[str, str]:
    """Why a message is parked and which item it is about, from what each source writes: the poison queue's
    `reason` and `keys`, Lambda's on-failure record for a stream batch (`requestContext.condition`, the batch's
    shard and sequence numbers), Scheduler's dead-letter attributes (`ERROR_CODE`, `ERROR_MESSAGE`) on a due
    event, the polling processor's `reason`."""
    try:
        document: Any = json.loads(body)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        return "not JSON: " + body[:80], "-"
    keys = document.get("keys")
    shown = json.dumps(keys, sort_keys=True, default=str) if keys else "-"
    if not keys and isinstance(document.get("record"), dict):  # a poison message: the parked stream record's keys
        shown = record_keys(document["record"])
    if document.get("reason"):
        return str(document["reason"]), shown
    context = document.get("requestContext")
    if isinstance(context, dict):
        batch = document.get("DDBStreamBatchInfo") or {}
        where = f"{batch.get('batchSize', '?')} record(s) from {batch.get('startSequenceNumber', '?')}"
        return f"stream batch: {context.get('condition', 'failed')}", where
    code = (attributes.get("ERROR_CODE") or {}).get("StringValue")
    message = (attributes.get("ERROR_MESSAGE") or {}).get("StringValue")
    if code or message:
        errors = runtime_module("errors")
        # Scheduler could not deliver to the target: when KMS refused its role the target's key, say which option
        refused = errors.key_refusal(str(code or ""), str(message or ""))
        if refused:
            return refused, shown
        said = ": ".join(str(part) for part in (code, message) if part)
        if code == "MessageRejected" and errors.SES_NOT_VERIFIED in str(message):  # SES's words never say sandbox
            said += f" ({errors.SES_SANDBOX})"
        return said, shown
    return "-", shown


def peek(client: Client, label: str, url: str, limit: int = SAMPLE) -> Parked:
    """A queue's counts and up to `limit` distinct messages, received with VisibilityTimeout=0 (left in place)."""
    sqs = client("sqs")
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    visible, in_flight, delayed = (int(counts.get(name, 0)) for name in names)
    parked = Parked(label, url, visible, in_flight, delayed)
    seen: set[str] = set()
    for _ in range(3):  # a few receives: each answers from a sample of SQS's servers
        if len(seen) >= min(limit, parked.visible):
            break
        messages = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=min(10, max(1, limit)),
            VisibilityTimeout=0,
            WaitTimeSeconds=0,
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        for message in messages:
            if message["MessageId"] in seen or len(seen) >= limit:
                continue
            seen.add(message["MessageId"])
            reason, keys = reason_of(message.get("Body", ""), message.get("MessageAttributes") or {})
            parked.sample.append((message["MessageId"], reason, keys))
    return parked


@dataclass
class Pending:
    """What waits to fire: a count, where it was read, and a few of them (name or keys, and when)."""

    source: str
    count: int
    sample: list[tuple[str, str]] = field(default_factory=list)
    note: str = ""


def pending(client: Client, stack: Stack, limit: int = SAMPLE) -> list[Pending]:
    """The occurrences waiting to fire, by mode."""
    config = stack.config
    found: list[Pending] = []
    group = (config.get("scheduler") or {}).get("group")
    if group:
        found.append(_schedules(client, str(group), limit))
    if config.get("polling"):
        found.append(_due_index(client, str(config["table"]), limit))
    release = (config.get("eventbridge") or {}).get("release")
    if release:
        queue = peek(client, "release queue", str(release["queueUrl"]), 0)
        found.append(Pending("release queue (precision second)", queue.visible + queue.delayed + queue.in_flight))
    if modes.operated(config).sampled_by_scan and not group:
        found.append(Pending("DynamoDB TTL", -1, note="expiring items are the table's own: TTL lists none"))
    return found


def _schedules(client: Client, group: str, limit: int) -> Pending:
    """The group's schedules: all counted, a sample of `limit` shown with the time each fires. ListSchedules names
    no time, so each sampled one is read with GetSchedule (one call each); the sample is shown soonest first."""
    scheduler = client("scheduler")
    count, sample = 0, list[tuple[str, str]]()
    token: str | None = None
    while True:
        page = scheduler.list_schedules(GroupName=group, **({"NextToken": token} if token else {}))
        for schedule in page.get("Schedules", []):
            count += 1
            if len(sample) < limit:
                name = str(schedule.get("Name"))
                found = scheduler.get_schedule(GroupName=group, Name=name)
                state = str(schedule.get("State", ""))
                sample.append((name, fire_time(found) + ("" if state in ("", "ENABLED") else f" ({state})")))
        token = page.get("NextToken")
        if not token:
            note = "" if count <= len(sample) else f"{len(sample)} shown, as Scheduler lists them (by name)"
            return Pending(f"schedule group {group}", count, sorted(sample, key=lambda s: s[1]), note)


def fire_time(schedule: dict[str, Any]) -> str:
    """When a schedule fires, from GetSchedule: a one-time `at()` time as UTC (`2026-03-30T09:00:00Z`; Scheduler
    fires within that minute), a recurring expression as written with its time zone."""
    expression = str(schedule.get("ScheduleExpression", ""))
    zone = str(schedule.get("ScheduleExpressionTimezone") or "UTC")
    if expression.startswith("at(") and expression.endswith(")"):
        try:
            local = datetime.fromisoformat(expression[3:-1]).replace(tzinfo=ZoneInfo(zone))
        except (ValueError, KeyError):
            return expression
        return local.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{expression} {zone}" if expression else "-"


def _due_index(client: Client, table: str, limit: int) -> Pending:
    ddb = client("dynamodb")
    index = runtime_module("pending")  # the due index's names, as the handlers query it
    count, sample = 0, list[tuple[str, str]]()
    start: dict[str, Any] | None = None
    while True:
        request: dict[str, Any] = {"TableName": table, "IndexName": index.INDEX_NAME}
        if start:
            request["ExclusiveStartKey"] = start
        page = ddb.scan(**request)
        for item in page.get("Items", []):
            count += 1
            if len(sample) < limit:
                due = item.get(index.DUE, {}).get("N")
                when = datetime.fromtimestamp(int(float(due)), UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if due else "-"
                keys = {k: next(iter(v.values())) for k, v in item.items() if not k.startswith("st")}
                sample.append((json.dumps(keys, sort_keys=True, default=str)[:120], when))
        start = page.get("LastEvaluatedKey")
        if not start:
            return Pending(f"due index of {table}", count, sorted(sample, key=lambda s: s[1]))


def filters_by_type(config: dict[str, Any]) -> bool:
    """Whether the stack's mapping passes records by the due attribute's type (eventbridge, precise ttl): a map or
    a list there is matched by none of its filters (they test leaf values), so the item never reaches the function
    and nothing is parked for it."""
    return modes.operated(config).filters_by_due_type


def unpassed_types(stack: Stack) -> list[str]:
    """The types of due attribute the stack's mapping passes to the function in no filter (its patterns as deployed,
    read from the mapping; the component's for the mode if none were read): a map and a list always (filters test
    leaf values), and the leaf types left out of Lambda's five filters (components/filters.py)."""
    from ..modes.eventbridge import eventbridge_filters
    from ..modes.ttl import ttl_filters

    config = stack.config
    attribute = str(config["timeAttribute"])
    patterns = stack.filters or (
        eventbridge_filters(attribute) if config.get("mode") == "eventbridge" else ttl_filters(attribute, precise=True)
    )
    passed = {
        tag
        for pattern in patterns
        for tag in (((pattern.get("dynamodb") or {}).get("NewImage") or {}).get(attribute) or {})
    }
    return [tag for tag in runtime_module("stream").TYPE_NAMES if tag not in passed]


def unmatchable(client: Client, stack: Stack, limit: int = SAMPLE, pages: int = SCAN_PAGES) -> Pending | None:
    """Items whose due attribute is of a type the mapping's filters do not pass (a map or a list; a binary or a set
    when the filters had no room for them), found by a scan of the table (nothing is written), or None for a mode
    whose filter does not look at the attribute's type. At most `pages` scan pages (1 MB each) are read, so
    inspecting a large table stays quick and cheap; the note says so when it stopped before the end (`reconcile
    --dry-run` reads the whole table and reports them all)."""
    config = stack.config
    if not filters_by_type(config):
        return None
    attribute = str(config["timeAttribute"])
    types = unpassed_types(stack)
    keys = [str(config["partitionKey"])] + ([str(config["sortKey"])] if config.get("sortKey") else [])
    names = {f"#k{i}": name for i, name in enumerate(keys)} | {"#d": attribute}
    request: dict[str, Any] = {
        "TableName": config["table"],
        "FilterExpression": " OR ".join(f"attribute_type(#d, :t{i})" for i in range(len(types))),
        "ProjectionExpression": ", ".join(names),
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {f":t{i}": {"S": tag} for i, tag in enumerate(types)},
    }
    type_names = runtime_module("stream").TYPE_NAMES
    source = f"items whose {attribute} is " + (
        "a map or a list" if types == ["M", "L"] else f"of a type no filter passes ({', '.join(types)})"
    )
    count, sample = 0, list[tuple[str, str]]()
    for _ in range(pages):
        page = client("dynamodb").scan(**request)
        for item in page.get("Items", []):
            count += 1
            if len(sample) < limit:
                shown = {k: next(iter(v.values())) for k, v in item.items() if k != attribute}
                kind = str(next(iter(item.get(attribute) or {"?": None})))
                what = f"{attribute} is a DynamoDB {kind} ({type_names.get(kind, '?')})"
                sample.append((json.dumps(shown, sort_keys=True, default=str)[:120], what))
        if not page.get("LastEvaluatedKey"):
            note = "never seen by the mapping's filter: write the due time as a string or a number" if count else ""
            return Pending(source, count, sample, note)
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    partial = f"at least: the first {pages} scan pages of the table read; `reconcile --dry-run` reads it all"
    return Pending(source, count, sample, partial)


def queues(client: Client, stack: Stack, limit: int = SAMPLE) -> list[Parked]:
    """The poison queue, the stream DLQ and the target DLQ (those the stack has), each peeked."""
    named = [("poison queue", stack.poison_url), ("stream DLQ", stack.stream_dlq_url)]
    named.append(("target DLQ", stack.target_dlq_url))
    return [peek(client, label, url, limit) for label, url in named if url]


def missing_time(client: Client, stack: Stack, items: int = SAMPLE_ITEMS) -> dict[str, Any] | None:
    """Items without the stack's time attribute, from a sample of the table: the first `items` a scan returns, read
    page by page (`PAGE_ITEMS` a page), never the whole table. None for aggregate mode, which reads no time. Without
    it, an application writing its due times under another name sees nothing happen and nothing parked."""
    from .time_hints import find

    config = stack.config
    if not modes.operated(config).reads_due_time or not config.get("timeAttribute") or items < 1:
        return None
    attribute = str(config["timeAttribute"])
    read: list[dict[str, Any]] = []
    request: dict[str, Any] = {"TableName": config["table"]}
    more = True
    while more and len(read) < items:
        page = client("dynamodb").scan(**request, Limit=min(PAGE_ITEMS, items - len(read)))
        read += page.get("Items", [])
        more = bool(page.get("LastEvaluatedKey"))
        request["ExclusiveStartKey"] = page.get("LastEvaluatedKey")
    whole = not more
    counted = f"{len(read)} item{'' if len(read) == 1 else 's'}"
    sampled = f"the whole table, {counted}" if whole else f"a sample: the first {counted} a scan returns"
    hint = find((timed_view(item, config) for item in read), attribute)
    return {
        "attribute": attribute,
        "sampled": len(read),
        "whole": whole,
        "missing": hint.missing if hint else 0,
        "candidates": list(hint.candidates) if hint else [],
        "message": hint.message if hint else f"every item sampled has `{attribute}`",
        "note": sampled,
    }


def timed_view(item: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """An item as the time-attribute check sees it: without its keys (a sort key holding a date is no candidate);
    in polling, an item the mode indexed or handled (any of its `st*` attributes: a writer's `pending_attributes`, a
    delay, the default delay) or that carries the delay attribute counts as carrying a time."""
    attribute = str(config["timeAttribute"])
    keys = (config.get("partitionKey"), config.get("sortKey"))
    polling = config.get("polling") or {}
    index = runtime_module("pending")
    if modes.operated(config).due_index and (
        polling.get("delayAttribute") in item or any(name in item for name in index.INDEX_ATTRIBUTES)
    ):
        return {attribute: True}
    return {name: value for name, value in item.items() if name not in keys}


def document(client: Client, stack: Stack, limit: int, items: int = SAMPLE_ITEMS) -> dict[str, Any]:
    """What the stack holds, as `inspect --output json` prints it (the text output is written from it). Its
    shape, documented in docs/operations.md:

    - `table`, `mode`, `function`: strings; the stack's table, mode and consumer function.
    - `pending`: a list of `{source, count, note, sample: [{name, when}]}`, what waits to fire, by where it was read
      (`count` null where AWS lists none: DynamoDB TTL); `name` a schedule's name or an item's keys as JSON text.
    - `unmatchable`: null, or `{source, count, note, sample: [{keys, why}]}`: items whose time attribute is of a type
      no filter of the mapping passes (eventbridge and precise ttl only).
    - `missing_time`: null (aggregate mode), or `{attribute, sampled, whole, missing, candidates, message, note}`:
      of `sampled` items read (`whole`: the table was read to its end), `missing` carry no `attribute`;
      `candidates` names the attributes holding a time those carry, most carried first; `note` says what was read.
    - `parked`: a list of `{queue, url, visible, in_flight, delayed, sample: [{message_id, keys, reason}]}`, one per
      queue the stack has (poison queue, stream DLQ, target DLQ); `keys` the item's keys as JSON text (or a stream
      batch's first sequence number).
    """
    config = stack.config

    def waiting(found: Pending) -> dict[str, Any]:
        return {
            "source": found.source,
            "count": None if found.count < 0 else found.count,
            "note": found.note,
            "sample": [{"name": name, "when": when} for name, when in found.sample],
        }

    unseen = unmatchable(client, stack, limit)
    return {
        "table": config.get("table"),
        "mode": config.get("mode"),
        "function": stack.function,
        "pending": [waiting(found) for found in pending(client, stack, limit)],
        "unmatchable": None
        if unseen is None
        else {**waiting(unseen), "sample": [{"keys": keys, "why": why} for keys, why in unseen.sample]},
        "missing_time": missing_time(client, stack, items),
        "parked": [
            {
                "queue": parked.label,
                "url": parked.url,
                "visible": parked.visible,
                "in_flight": parked.in_flight,
                "delayed": parked.delayed,
                "sample": [{"message_id": i, "keys": keys, "reason": reason} for i, reason, keys in parked.sample],
            }
            for parked in queues(client, stack, limit)
        ],
    }


def text(found: dict[str, Any]) -> list[str]:
    """The document as the text output's lines."""
    lines = [f"table {found['table']} (mode {found['mode']}), consumer {found['function']}", "pending:"]
    for waiting in found["pending"]:
        figure = "-" if waiting["count"] is None else str(waiting["count"])
        lines.append(f"  {waiting['source']}: {figure}" + (f" ({waiting['note']})" if waiting["note"] else ""))
        lines += [f"    {shown['name']}  {shown['when']}" for shown in waiting["sample"]]
    unseen = found["unmatchable"]
    if unseen is not None:
        lines.append("not seen (a due attribute no filter can match; a scan of the table):")
        lines.append(f"  {unseen['source']}: {unseen['count']}" + (f" ({unseen['note']})" if unseen["note"] else ""))
        lines += [f"    {shown['keys']}  {shown['why']}" for shown in unseen["sample"]]
    missing = found["missing_time"]
    if missing is not None:
        lines.append(f"without {missing['attribute']} (never scheduled; {missing['note']}):")
        lines.append(f"  {missing['message']}")
    lines.append("parked (left in place; `scheduled-table redrive SOURCE` replays them):")
    for parked in found["parked"]:
        lines.append(
            f"  {parked['queue']}: {parked['visible']} visible, {parked['in_flight']} in flight"
            + (f", {parked['delayed']} delayed" if parked["delayed"] else "")
        )
        lines += [f"    {shown['message_id']}  {shown['keys']}  {shown['reason']}" for shown in parked["sample"]]
    return lines


def report(
    client: Client, function: str, limit: int, emit: Emit, output: str = "text", items: int = SAMPLE_ITEMS
) -> None:
    """Print what the stack holds: the text lines, or (`output="json"`) the document as one JSON text."""
    found = document(client, discover(client, function), limit, items)
    if output == "json":
        emit(json.dumps(found, indent=2, default=str))
        return
    for line in text(found):
        emit(line)


def inspect(
    client: Client, function: str, limit: int, emit: Emit, output: str = "text", items: int = SAMPLE_ITEMS
) -> None:
    """`report`, with an AWS error (a queue or group gone, access denied) raised as a RedriveError naming it, as
    the redrive's are, so the command prints one line and exits 2."""
    try:
        report(client, function, limit, emit, output, items)
    except RedriveError:
        raise
    except Exception as error:
        if not isinstance(getattr(error, "response", None), dict):
            raise
        raise RedriveError(f"{error_code(error)}: {error}") from error


__all__ = [
    "Parked",
    "Pending",
    "document",
    "filters_by_type",
    "fire_time",
    "inspect",
    "missing_time",
    "peek",
    "pending",
    "queues",
    "reason_of",
    "report",
    "text",
    "unmatchable",
]
