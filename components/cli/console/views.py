"""What the console shows, read from AWS with the operator's credentials and nothing written: what is upcoming
(from what each mode keeps), what was delivered and how late (from the handlers' structured log lines, with the
metrics they publish beside them, and Scheduler's own counts from CloudWatch), what is parked (`inspect`'s reading of
the queues, with a fix per reason), and drift (`reconcile --dry-run` over a sample of the table).

Every read is bounded: a page of the schedule group, the soonest entries of each shard of the due index, a sample
of a TTL table, one time range of log events; each view says what it read, so a table of millions costs one page.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ... import modes
from ...packaging import error_code, runtime_module
from ..aws import Client
from ..inspection import Parked, fire_time, peek, queues
from ..redrive.discovery import Stack, config_of, table_consumers

# Upcoming's windows, by the name the page's links use.
WINDOWS = {"hour": 3600, "day": 86_400, "week": 7 * 86_400}
LIMIT = 100  # occurrences read per page by default (schedules listed, entries per shard, items sampled)
LOG_EVENTS = 1000  # log events read at most per function and view
DELIVERY_ACTIONS = ("dispatched", "dispatched-now", "executed")  # the handlers' lines for a send, with lateSeconds
# Scheduler's own counts (CloudWatch namespace AWS/Scheduler, by schedule group): its deliveries log nothing in the
# stack's functions.
SCHEDULER_METRICS = (
    "InvocationAttemptCount",
    "TargetErrorCount",
    "InvocationThrottleCount",
    "InvocationDroppedCount",
    "InvocationsSentToDeadLetterCount",
)
DRIFT_ITEMS = 100  # items the drift view's reconcile --dry-run reads by default
DRIFT_MOST = 10_000  # and at most (`items=`): the command line reads the whole table


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
    if modes.operated(config).sampled_by_scan:  # plain ttl: nothing but the table holds what is due
        found.append(ttl_sample(client, config, now, window, limit))
    release = (config.get("eventbridge") or {}).get("release")
    if release:
        queue = peek(client, "release queue", str(release["queueUrl"]), 0)
        waiting = queue.visible + queue.delayed + queue.in_flight
        found.append(Upcoming("release queue (precision second)", [], f"{waiting} release(s) waiting (SQS's count)"))
    if modes.operated(config).totals:
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
    return modes.of_config(config).lateness_bound(config)


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


def log_events(
    client: Client, functions: list[tuple[str, str]], now: datetime, since: int, pattern: str, found: list[int]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The log events of the stack's functions over the last `since` seconds that `pattern` (a FilterLogEvents
    term) matches, as (function, event), up to LOG_EVENTS per function; `found` gets how many were read and whether
    the cap stopped the reading ([read, 1 if capped])."""
    logs = client("logs")
    found[:] = [0, 0]
    for function, group in functions:
        request: dict[str, Any] = {
            "logGroupName": group,
            "startTime": int((now.timestamp() - since) * 1000),
            "filterPattern": pattern,
        }
        read = 0
        while True:
            try:
                page = logs.filter_log_events(**request)
            except Exception as error:
                if type(error).__name__ == "ResourceNotFoundException":  # a function that never ran has no group
                    break
                raise
            for event in page.get("events", []):
                read += 1
                found[0] += 1
                yield function, event
            if not page.get("nextToken"):
                break
            if read >= LOG_EVENTS:
                found[1] = 1
                break
            request["nextToken"] = page["nextToken"]


def delivered(
    client: Client, functions: list[tuple[str, str]], now: datetime, since: int, limit: int = LIMIT
) -> tuple[list[Delivery], str]:
    """The sends the stack's functions logged over the last `since` seconds (lines carrying `lateSeconds`:
    polling's `dispatched` at INFO; a past-due send of eventbridge's consumer and ttl's executor at DEBUG), newest
    first, up to `limit`, with what was read. Scheduler's own deliveries (eventbridge, precise ttl) log nothing in
    these functions: its metrics count them (`scheduler_counts`)."""
    found: list[Delivery] = []
    read: list[int] = []
    for function, event in log_events(client, functions, now, since, '"lateSeconds"', read):
        delivery = delivery_of(event, function)
        if delivery is not None:
            found.append(delivery)
    found.sort(key=lambda d: d.at, reverse=True)
    capped = f" (stopped at {LOG_EVENTS} a function: at least)" if read[1] else ""
    note = f"{read[0]} log event(s) of {len(functions)} function(s) over the last {since // 60} min read{capped}"
    return found[:limit], note


@dataclass
class Metric:
    """One value the stack's functions published over the window: a CloudWatch metric of their embedded-metric
    lines (`published`), or a count those lines carry beside them; summed, or the largest for a name ending in Max."""

    name: str
    published: bool
    by_function: dict[str, float] = field(default_factory=dict)

    @property
    def largest(self) -> bool:
        return self.name.endswith("Max")

    @property
    def total(self) -> float:
        values = self.by_function.values()
        return max(values) if self.largest else sum(values)


def published(client: Client, functions: list[tuple[str, str]], now: datetime, since: int) -> tuple[list[Metric], str]:
    """What the stack's functions published over the last `since` seconds, from their embedded-metric lines (the
    same lines CloudWatch turns into the dashboard's metrics, read here so the local cloud shows them too): each
    metric summed, and the counts the lines carry beside them (delivered, scheduled, cancelled, ...)."""
    found: dict[tuple[str, bool], Metric] = {}
    read: list[int] = []
    for function, event in log_events(client, functions, now, since, '"CloudWatchMetrics"', read):
        for name, value, metric in metric_values(str(event.get("message", ""))):
            entry = found.setdefault((name, metric), Metric(name, metric))
            held = entry.by_function.get(function)
            if held is None:
                entry.by_function[function] = value
            else:
                entry.by_function[function] = max(held, value) if entry.largest else held + value
    capped = f" (stopped at {LOG_EVENTS} a function: at least)" if read[1] else ""
    note = f"{read[0]} embedded-metric line(s) of {len(functions)} function(s) over the last {since // 60} min read"
    return sorted(found.values(), key=lambda m: (not m.published, m.name)), note + capped


def metric_values(message: str) -> list[tuple[str, float, bool]]:
    """The values of one embedded-metric line: (name, value, whether it is a CloudWatch metric); the dimensions
    (text) and what is not a plain number (lists, booleans) left out."""
    try:
        line = json.loads(message.strip())
    except ValueError:
        return []
    if not isinstance(line, dict) or not isinstance(line.get("_aws"), dict):
        return []
    declared = {
        str(metric.get("Name"))
        for directive in line["_aws"].get("CloudWatchMetrics") or []
        for metric in directive.get("Metrics") or []
    }
    return [
        (name, float(value), name in declared)
        for name, value in sorted(line.items())
        if name != "_aws" and isinstance(value, int | float) and not isinstance(value, bool)
    ]


def scheduler_counts(client: Client, group: str, now: datetime, since: int) -> tuple[dict[str, float] | None, str]:
    """Scheduler's own counts for the schedule group over the last `since` seconds (CloudWatch's AWS/Scheduler
    metrics: attempts, target errors, throttles, drops, dead letters), summed; None with why when there are none to
    show (no data point: the local cloud publishes none; or the read was refused)."""
    period = max(60, since // 60 * 60)
    queries = [
        {
            "Id": f"m{n}",
            "MetricStat": {
                "Metric": {
                    "Namespace": "AWS/Scheduler",
                    "MetricName": name,
                    "Dimensions": [{"Name": "ScheduleGroup", "Value": group}],
                },
                "Period": period,
                "Stat": "Sum",
            },
        }
        for n, name in enumerate(SCHEDULER_METRICS)
    ]
    try:
        answer = client("cloudwatch").get_metric_data(
            MetricDataQueries=queries,
            StartTime=datetime.fromtimestamp(now.timestamp() - period, UTC),
            EndTime=now,
        )
    except Exception as error:
        if not isinstance(getattr(error, "response", None), dict):
            raise
        return None, f"not read: CloudWatch refused GetMetricData ({error_code(error)})"
    values = {str(r["Id"]): [float(v) for v in r.get("Values") or []] for r in answer.get("MetricDataResults", [])}
    if not any(values.values()):
        return None, (
            f"CloudWatch holds no AWS/Scheduler data point for group {group} over the last {period // 60} min "
            "(on AWS: no schedule of the group ran in it; the local cloud publishes none)"
        )
    counts = {name: sum(values.get(f"m{n}", [])) for n, name in enumerate(SCHEDULER_METRICS)}
    return counts, f"CloudWatch's AWS/Scheduler metrics of group {group}, summed over the last {period // 60} min"


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


# -- drift ---------------------------------------------------------------------------------------------------------


@dataclass
class Drift:
    """`reconcile --dry-run` over a sample of the table: the tally (each kind with its count and examples), the
    summary's first line as the command prints it, whether the whole table was read (then the schedules no item
    asks for, and aggregate's totals, were checked too), what stopped it early, and how long it took."""

    tally: Any
    headline: str
    whole: bool
    problems: list[str]
    seconds: float

    @property
    def kinds(self) -> list[tuple[str, int, list[str]]]:
        """Each kind found: what a repair would do first ("would ..."), then the rest, by count."""
        found = [(kind, count, list(self.tally.examples.get(kind) or [])) for kind, count in self.tally.kinds.items()]
        return sorted(found, key=lambda k: (not k[0].startswith("would "), -k[1], k[0]))


def drift(client: Client, stack: Stack, items: int = DRIFT_ITEMS, clock: Callable[[], float] = time.monotonic) -> Drift:
    """`scheduled-table reconcile --dry-run` (ops.backfill.run, the command's own code) over the first `items` items
    a scan returns (rounded up to whole pages of at most 100), a page at a time under the command's ceilings on
    reads and Scheduler calls; nothing is written (a dry run only reads). RedriveError when it cannot start (the
    table or the ledger unreadable)."""
    from ..backfill import Plan, run
    from ..engine import engine
    from ..scan_report import summary

    pages = -(-items // engine().PAGE_ITEMS)
    page = -(-items // pages)  # pages as even as they go: 150 items are two pages of 75
    asked = iter(range(1, pages + 1))
    said: list[str] = []
    began = clock()
    tally, whole = run(
        client,
        stack,
        Plan(command="reconcile", dry_run=True, segments=1, page_items=page),
        progress=said.append,
        stop=lambda: next(asked, pages) >= pages,  # asked after each page: stop once `pages` were read
    )
    seconds = clock() - began
    problems = [line for line in said if " stopped: " in line]
    headline = summary("reconcile", tally, True, True)[0]
    return Drift(tally, headline, whole, problems, seconds)


__all__ = [
    "DELIVERY_ACTIONS",
    "DRIFT_ITEMS",
    "DRIFT_MOST",
    "LIMIT",
    "SCHEDULER_METRICS",
    "WINDOWS",
    "Delivery",
    "Drift",
    "Metric",
    "Occurrence",
    "Upcoming",
    "bound",
    "consumers",
    "delivered",
    "drift",
    "fix",
    "log_events",
    "metric_values",
    "parked",
    "published",
    "scheduler_counts",
    "stack_functions",
    "upcoming",
]
