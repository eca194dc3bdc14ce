"""What the console shows, read from AWS with the operator's credentials and nothing written: what is upcoming
(from what each mode keeps), what was delivered and how late (from the handlers' structured log lines), and what is
parked (`inspect`'s reading of the queues, with a fix per reason).

Every read is bounded: a page of the schedule group, the soonest entries of each shard of the due index, a sample
of a TTL table, one time range of log events; each view says what it read, so a table of millions costs one page.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...packaging import runtime_module
from ..aws import Client
from ..inspection import Parked, fire_time, peek, queues
from ..redrive.discovery import Stack, config_of, table_consumers

# Upcoming's windows, by the name the page's links use.
WINDOWS = {"hour": 3600, "day": 86_400, "week": 7 * 86_400}
LIMIT = 100  # occurrences read per page by default (schedules listed, entries per shard, items sampled)
LOG_EVENTS = 1000  # log events read at most per function and view
DELIVERY_ACTIONS = ("dispatched", "dispatched-now", "executed")  # the handlers' lines for a send, with lateSeconds


@dataclass
class Occurrence:
    """One occurrence waiting to fire: when (None: a recurring expression, `label` says it), and which item."""

    when: datetime | None
    what: str
    label: str = ""


@dataclass
class Upcoming:
    """What one of the mode's stores holds for the window: the occurrences read, what was read, and the cursor of
    the next page (None: nothing more to read)."""

    source: str
    occurrences: list[Occurrence] = field(default_factory=list)
    read: str = ""
    cursor: str | None = None


def stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def upcoming(
    client: Client, stack: Stack, now: datetime, window: int, limit: int = LIMIT, cursor: str | None = None
) -> list[Upcoming]:
    """The occurrences due from `now` to `now + window` seconds, by where the mode keeps them; `cursor` continues
    the one store that has pages (the schedule group's NextToken, the due index's last second shown)."""
    config = stack.config
    found: list[Upcoming] = []
    group = (config.get("scheduler") or {}).get("group")
    if group:
        found.append(schedules(client, str(group), now, window, limit, cursor))
    if config.get("polling"):
        found.append(due_index(client, config, now, window, limit, cursor))
    if config.get("mode") == "ttl" and not (config.get("ttl") or {}).get("precise"):
        found.append(ttl_sample(client, config, now, window, limit))
    release = (config.get("eventbridge") or {}).get("release")
    if release:
        queue = peek(client, "release queue", str(release["queueUrl"]), 0)
        waiting = queue.visible + queue.delayed + queue.in_flight
        found.append(Upcoming("release queue (precision second)", [], f"{waiting} release(s) waiting (SQS's count)"))
    if config.get("mode") == "aggregate":
        found.append(Upcoming("running totals", [], "aggregate mode keeps totals: nothing waits to fire"))
    return found


def schedules(client: Client, group: str, now: datetime, window: int, limit: int, cursor: str | None) -> Upcoming:
    """A page of `limit` schedules of the group, each read with GetSchedule for its time (ListSchedules names
    none), those due in the window kept. Scheduler lists by name, not by time: the page is a sample of the group,
    and the next page continues it."""
    scheduler = client("scheduler")
    listed: list[dict[str, Any]] = []
    token = cursor
    while len(listed) < limit:
        request: dict[str, Any] = {"GroupName": group, "MaxResults": min(100, limit - len(listed))}
        if token:
            request["NextToken"] = token
        page = scheduler.list_schedules(**request)
        listed += page.get("Schedules", [])
        token = page.get("NextToken")
        if not token:
            break
    end = now.timestamp() + window
    kept: list[Occurrence] = []
    for schedule in listed:
        name = str(schedule.get("Name"))
        when = fire_time(scheduler.get_schedule(GroupName=group, Name=name))
        try:
            at = datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        except ValueError:  # recurring: its expression, not placed on the timeline
            kept.append(Occurrence(None, name, when))
            continue
        if now.timestamp() - 60 <= at.timestamp() <= end:  # Scheduler fires within the minute: a minute's grace
            kept.append(Occurrence(at, name))
    read = (
        f"{len(listed)} schedule(s) of group {group} read (GetSchedule each), as Scheduler lists them (by name, not "
        f"time){': the whole group' if token is None and cursor is None else '; more on the next page'}"
    )
    return Upcoming(f"schedule group {group}", sort(kept), read, token)


def due_index(
    client: Client, config: dict[str, Any], now: datetime, window: int, limit: int, cursor: str | None
) -> Upcoming:
    """The soonest `limit` entries of the due index up to the window's end, overdue ones first (due, waiting for
    the next tick): each shard queried by due time (its sort key), `limit` at most each, merged. A shard with more
    than it gave is read only up to its last second read, so the page holds every entry before the earliest such
    second, and ends on a whole second: the next page starts after the last second shown and skips nothing (but a
    second holding more than `limit` entries of one shard, of which it shows `limit`)."""
    index = runtime_module("pending")
    table = str(config["table"])
    keys = [str(config["partitionKey"])] + ([str(config["sortKey"])] if config.get("sortKey") else [])
    start = int(cursor) + 1 if cursor and cursor.isdigit() else 0
    end = int(now.timestamp()) + window
    names = {"#s": index.SHARD, "#d": index.DUE} | {f"#k{i}": name for i, name in enumerate(keys)}
    entries: list[tuple[int, str]] = []
    horizon: int | None = None  # the earliest second a shard was not read to its end at
    shards = int(config["polling"]["shards"])
    for shard in range(shards):
        page = client("dynamodb").query(
            TableName=table,
            IndexName=index.INDEX_NAME,
            KeyConditionExpression="#s = :s AND #d BETWEEN :a AND :b",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={":s": {"N": str(shard)}, ":a": {"N": str(start)}, ":b": {"N": str(end)}},
            ProjectionExpression=", ".join(names),
            Limit=limit,
        )
        dues = []
        for item in page.get("Items", []):
            shown = {name: next(iter(item[name].values())) for name in keys if name in item}
            dues.append(int(float(item[index.DUE]["N"])))
            entries.append((dues[-1], json.dumps(shown, sort_keys=True, default=str)))
        if page.get("LastEvaluatedKey") and dues:
            horizon = min(dues[-1], horizon if horizon is not None else dues[-1])
    entries.sort()
    certain = [entry for entry in entries if horizon is None or entry[0] < horizon]
    if certain:
        listed = certain[:limit]
        if len(certain) > limit and certain[limit][0] == listed[-1][0]:  # end the page on a whole second
            last = listed[-1][0]
            listed = [entry for entry in listed if entry[0] != last] or [e for e in certain if e[0] == last]
    else:  # the soonest second is all a shard's page held: that second, whole as read
        listed = [entry for entry in entries if entry[0] == horizon]
    more = horizon is not None or len(certain) > limit
    overdue = "overdue: waits for the next tick"
    occurrences = [
        Occurrence(datetime.fromtimestamp(due, UTC), what, overdue if due < now.timestamp() else "")
        for due, what in listed
    ]
    read = (
        f"the due index's soonest entries: {shards} shard(s) queried by due time, up to {limit} each "
        f"({len(entries)} read)" + ("; more on the next page" if more else "")
    )
    return Upcoming(f"due index of {table}", occurrences, read, str(listed[-1][0]) if more and listed else None)


def ttl_sample(client: Client, config: dict[str, Any], now: datetime, window: int, limit: int) -> Upcoming:
    """Plain ttl: DynamoDB TTL lists nothing, so a sample of the table (the first `limit` items of a scan) with
    expiry times in the window. TTL deletes expired items within days, not at their time."""
    attribute = str(config["timeAttribute"])
    keys = [str(config["partitionKey"])] + ([str(config["sortKey"])] if config.get("sortKey") else [])
    names = {f"#k{i}": name for i, name in enumerate(keys)} | {"#t": attribute}
    page = client("dynamodb").scan(
        TableName=str(config["table"]),
        ProjectionExpression=", ".join(names),
        ExpressionAttributeNames=names,
        Limit=limit,
    )
    end = now.timestamp() + window
    kept = []
    for item in page.get("Items", []):
        raw = (item.get(attribute) or {}).get("N")
        if raw is None or not now.timestamp() <= float(raw) <= end:
            continue
        shown = {name: next(iter(item[name].values())) for name in keys if name in item}
        kept.append(Occurrence(datetime.fromtimestamp(float(raw), UTC), json.dumps(shown, sort_keys=True)))
    read = (
        f"a sample: the first {len(page.get('Items', []))} items a scan returns (DynamoDB TTL lists nothing; it "
        "deletes expired items within days, not at their time)"
    )
    return Upcoming(f"TTL attribute {attribute}", sort(kept), read)


def sort(occurrences: list[Occurrence]) -> list[Occurrence]:
    return sorted(occurrences, key=lambda o: (o.when is None, o.when or datetime.max.replace(tzinfo=UTC), o.what))


# -- delivered -----------------------------------------------------------------------------------------------------


@dataclass
class Delivery:
    """One send a handler logged: when, the occurrence's due time, which item or schedule, and how late."""

    at: datetime
    due: str
    what: str
    late: float
    function: str


def bound(config: dict[str, Any]) -> tuple[float | None, str]:
    """The mode's documented lateness bound (docs/guarantees.md) in seconds (None: none to compare with), and its
    words."""
    mode = config.get("mode")
    if mode == "eventbridge":
        if (config.get("eventbridge") or {}).get("release"):
            return 2.0, "under 2 s (precision second) + Scheduler's delay"
        return 180.0, "120 s (180 s if processed within 10 s of the minute) + Scheduler's delay"
    if mode == "ttl":
        if (config.get("ttl") or {}).get("precise"):
            return 180.0, "120 s (precise) + Scheduler's delay"
        return None, "DynamoDB TTL's: minutes to days"
    if mode == "polling":
        return None, "the poll interval + the tick's processing"
    return None, "the stream's lag (aggregate: no deliveries)"


def stack_functions(client: Client) -> dict[str, list[tuple[str, str]]]:
    """Every ScheduledTable function of the region (consumer, processor, releaser...) with its log group, by table:
    where a stack's deliveries are logged. Read once, when the console starts (ListFunctions names both)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for page in client("lambda").get_paginator("list_functions").paginate():
        for function in page.get("Functions", []):
            config = config_of(function)
            if config is not None:
                name = str(function["FunctionName"])
                group = (function.get("LoggingConfig") or {}).get("LogGroup") or f"/aws/lambda/{name}"
                found.setdefault(str(config.get("table")), []).append((name, str(group)))
    return {table: sorted(functions) for table, functions in found.items()}


def consumers(client: Client, tables: list[str]) -> list[str]:
    """The consumer functions of these tables (one per table's stream, as `--table` finds it)."""
    return sorted({name for table in tables for name in table_consumers(client, table)})


def delivered(
    client: Client, functions: list[tuple[str, str]], now: datetime, since: int, limit: int = LIMIT
) -> tuple[list[Delivery], str]:
    """The sends the stack's functions logged over the last `since` seconds (lines carrying `lateSeconds`:
    polling's `dispatched` at INFO; a past-due send of eventbridge's consumer and ttl's executor at DEBUG), newest
    first, up to `limit`, with what was read. Scheduler's own deliveries (eventbridge, precise ttl) log nothing in
    these functions: its metrics count them."""
    found: list[Delivery] = []
    logs = client("logs")
    read = 0
    for function, group in functions:
        request: dict[str, Any] = {
            "logGroupName": group,
            "startTime": int((now.timestamp() - since) * 1000),
            "filterPattern": '"lateSeconds"',
        }
        while read < LOG_EVENTS * len(functions):
            try:
                page = logs.filter_log_events(**request)
            except Exception as error:
                if type(error).__name__ == "ResourceNotFoundException":  # a function that never ran has no group
                    break
                raise
            for event in page.get("events", []):
                read += 1
                delivery = delivery_of(event, function)
                if delivery is not None:
                    found.append(delivery)
            if not page.get("nextToken"):
                break
            request["nextToken"] = page["nextToken"]
    found.sort(key=lambda d: d.at, reverse=True)
    minutes = since // 60
    note = f"{read} log event(s) of {len(functions)} function(s) over the last {minutes} min read"
    return found[:limit], note


def delivery_of(event: dict[str, Any], function: str) -> Delivery | None:
    try:
        line = json.loads(str(event.get("message", "")).strip())
    except ValueError:
        return None
    if not isinstance(line, dict) or line.get("action") not in DELIVERY_ACTIONS or "lateSeconds" not in line:
        return None
    what = line.get("keys") or line.get("schedule") or "-"
    return Delivery(
        at=datetime.fromtimestamp(int(event.get("timestamp", 0)) / 1000, UTC),
        due=str(line.get("dueAt", "-")),
        what=what if isinstance(what, str) else json.dumps(what, sort_keys=True, default=str),
        late=float(line["lateSeconds"]),
        function=function,
    )


# -- parked --------------------------------------------------------------------------------------------------------

# The fix for a reason, by what the reason says (the first that matches), before the queue's own.
FIXES = (
    (r"NonExistentQueue|ResourceNotFound|NotFound|does not exist", "the target is missing: create it (or deploy the "
     "table with the target that exists), then redrive"),
    (r"AccessDenied|not authorized|KMS", "a permission is missing: grant the function's role (or the key policy) "
     "what the reason names, then redrive"),
    (r"Throttl|TooManyRequests|ServiceUnavailable|Timeout", "AWS was busy: redrive as it is"),
    (r"neither|no time|time attribute|not a time|never expires", "the item's time cannot be read: write the item "
     "again with a time the table's time_attribute reads; the write is scheduled by itself"),
)  # fmt: skip
QUEUE_FIXES = {
    "poison queue": "fix what the reason names, then redrive: each record is replayed through the consumer",
    "stream DLQ": "fix the cause in the consumer's logs, then redrive within 24 h, while the stream keeps the batch",
    "target DLQ": "fix the target (or its permission), then redrive: the due event is sent again",
}


def fix(queue: str, reason: str) -> str:
    for pattern, said in FIXES:
        if re.search(pattern, reason, re.IGNORECASE):
            return said
    return QUEUE_FIXES.get(queue, "fix what the reason names, then redrive")


def parked(client: Client, stack: Stack, limit: int) -> list[Parked]:
    """`inspect`'s reading of the poison queue, the stream DLQ and the target DLQ (left in place)."""
    return queues(client, stack, limit)


__all__ = [
    "DELIVERY_ACTIONS",
    "LIMIT",
    "WINDOWS",
    "Delivery",
    "Occurrence",
    "Upcoming",
    "bound",
    "consumers",
    "delivered",
    "fix",
    "parked",
    "stack_functions",
    "upcoming",
]
