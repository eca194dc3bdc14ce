"""Benchmark: the console's Upcoming view on a polling table of 100,000 pending occurrences (moto), served over
HTTP by the console's own server and timed from request to last byte. It checks first that the page lists the
soonest occurrences of the whole table (those the due index holds first), then times the hour, day and week
windows and the next page, and says what each read (entries read from the index, Query calls); then the Drift view
(`reconcile --dry-run` on its default sample of 100 items: one scan page). Beside them, what `inspect` reads for the
same table: the whole index, to count it (a scan), which the console never does."""

from __future__ import annotations

import http.client
import json
import random
import re
import time
from datetime import UTC, datetime
from html import unescape
from typing import Any
from urllib.parse import urlencode

from .harness import REGION, aws, expect, sized, table, timed

SHARDS = 8
SPREAD = 7 * 86_400  # the occurrences are due at random seconds over the next week
RUNS = 3  # renders timed per view; the median is reported


def due_index_table(ddb: Any, name: str) -> None:
    """A polling table (PK, SK) with its due index (shard, due) as the component makes it; keys only projected."""
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": a, "AttributeType": t}
            for a, t in (("PK", "S"), ("SK", "S"), ("stShard", "N"), ("stDue", "N"))
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "due",
                "KeySchema": [
                    {"AttributeName": "stShard", "KeyType": "HASH"},
                    {"AttributeName": "stDue", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def load(ddb: Any, name: str, size: int, now: int) -> list[tuple[int, str]]:
    """A polling table with `size` pending items, due over the next week; their (due, PK), soonest first."""
    due_index_table(ddb, name)
    rng = random.Random(size)
    loaded: list[tuple[int, str]] = []
    batch: list[dict[str, Any]] = []
    for n in range(size):
        due = now + 1 + rng.randrange(SPREAD)
        key = f"job-{n:06d}"
        loaded.append((due, key))
        item = {
            "PK": {"S": key},
            "SK": {"S": "run"},
            "dueAt": {"N": str(due)},
            "stShard": {"N": str(n % SHARDS)},
            "stDue": {"N": str(due)},
            "stStatus": {"S": "PENDING"},
        }
        batch.append({"PutRequest": {"Item": item}})
        if len(batch) == 25:
            ddb.batch_write_item(RequestItems={name: batch})
            batch = []
    if batch:
        ddb.batch_write_item(RequestItems={name: batch})
    return sorted(loaded)


def run() -> tuple[str, dict[str, float]]:
    import boto3

    from components import ScheduledTableArgs
    from components.cli.console.guard import Guard
    from components.cli.console.server import Console, bind, start
    from components.cli.inspection import pending
    from components.cli.redrive.discovery import Stack
    from components.runtime_config import Value
    from tests.support.handler_config import handler_config

    size = sized(100_000, 500)
    with aws():
        made: dict[str, Any] = {}

        def client(service: str) -> Any:
            if service not in made:
                made[service] = boto3.client(service, region_name=REGION)
            return made[service]

        calls: list[float] = []  # each DynamoDB call's start, then (after it) its seconds
        spent: list[float] = []
        events = client("dynamodb").meta.events
        events.register("before-call.dynamodb.*", lambda **_: calls.append(time.perf_counter()))
        events.register("after-call.dynamodb.*", lambda **_: spent.append(time.perf_counter() - calls[-1]))
        now = int(time.time())
        seconds_loading, loaded = timed(lambda: load(client("dynamodb"), "console-jobs", size, now))
        poison = client("sqs").create_queue(QueueName="console-jobs-poison")["QueueUrl"]
        names = {Value.TABLE: "console-jobs", Value.POISON_QUEUE_URL: poison}
        config = handler_config(ScheduledTableArgs(mode="polling", shards=SHARDS), names, unnamed="")
        stack = Stack("console-jobs-consumer", dict(config), poison, None, None, [])
        server = bind(0)
        guard = Guard.new(server.server_address[1])
        fixed = datetime.fromtimestamp(now, UTC)
        start(server, Console(client, {stack.function: stack}, guard, {stack.function: None}, clock=lambda: fixed))

        def get(**query: str) -> str:
            return get_view("/upcoming", **query)

        def get_view(path: str, **query: str) -> str:
            connection = http.client.HTTPConnection("127.0.0.1", guard.port, timeout=600)
            headers = {"Host": f"127.0.0.1:{guard.port}", "Cookie": f"{guard.cookie}={guard.token}"}
            connection.request("GET", f"{path}?" + urlencode({"stack": stack.function, **query}), headers=headers)
            response = connection.getresponse()
            body = response.read().decode()
            connection.close()
            expect("the page's status", response.status, 200)
            return body

        try:
            first = get(window="week")
            listed = re.findall(r'<tr class="occurrence"><td>([^<]+)</td><td>([^<]+)</td>', first)
            soonest = [json.dumps({"PK": key, "SK": "run"}, sort_keys=True) for _, key in loaded[: len(listed)]]
            expect("occurrences listed on the week's first page", len(listed), min(100, size))
            # a page ends on a whole second: the last few may move to the next page; the rest are the soonest
            expect("the soonest occurrences of the whole table, in order", [unescape(w) for _, w in listed], soonest)
            rows: list[tuple[str, int, int, int, float, float, float]] = []

            def measured(view: str, runs: int, **query: str) -> None:
                """The page's median time over `runs` renders, split into DynamoDB's (moto's) and the console's."""
                taken = []
                for _ in range(runs):
                    calls.clear()
                    spent.clear()
                    seconds, body = timed(lambda: get(**query))
                    taken.append((seconds, sum(spent)))
                total, in_aws = sorted(taken)[len(taken) // 2]
                read = re.search(r"\((\d+) read\)", body)
                shown = body.count('<tr class="occurrence">')
                entries = int(read.group(1)) if read else 0
                rows.append((view, shown, entries, len(calls), total * 1000, in_aws * 1000, (total - in_aws) * 1000))

            for window in ("hour", "day", "week"):
                measured(f"Upcoming, next {window}", RUNS, window=window)
            cursor = re.search(r'class="next" href="/upcoming\?[^"]*cursor=(\d+)', first)
            expect("a next page offered", cursor is not None, size > 100)
            if cursor:
                measured("Upcoming, next week, page 2", 1, window="week", cursor=cursor.group(1))
            calls.clear()
            spent.clear()
            seconds_drift, body = timed(lambda: get_view("/drift", items="100"))
            scanned = re.search(r"reconcile: (\d+) scanned", body)
            expect("Drift's sample of the table", int(scanned.group(1)) if scanned else 0, min(100, size))
            rows.append(
                (
                    "Drift: reconcile --dry-run on a sample of 100 items",
                    body.count("<tr class="),
                    int(scanned.group(1)) if scanned else 0,
                    len(calls),
                    seconds_drift * 1000,
                    sum(spent) * 1000,
                    (seconds_drift - sum(spent)) * 1000,
                )
            )
            calls.clear()
            spent.clear()
            seconds_scan, found = timed(lambda: pending(client, stack, 10))
            expect("inspect's count of the index", found[0].count, size)
            in_scan = sum(spent)
            rows.append(
                (
                    "inspect's pending count (a scan of the index)",
                    10,
                    size,
                    len(calls),
                    seconds_scan * 1000,
                    in_scan * 1000,
                    (seconds_scan - in_scan) * 1000,
                )
            )
        finally:
            server.shutdown()
            server.server_close()
    text = table(
        f"console: the Upcoming view on a polling table of {size:,} pending occurrences ({SHARDS} shards, moto)",
        (
            "view",
            "shown",
            "entries or items read",
            "DynamoDB calls",
            "page ms",
            "of which DynamoDB (moto)",
            "console's own",
        ),
        rows,
        note=f"Median of {RUNS} renders (page 2, Drift and inspect: one), served over HTTP by the console's server. "
        f"Loading the table took {seconds_loading:.0f} s. The console queries each shard of the due index by due "
        "time, up to 100 entries each, and never counts the table; `inspect` scans the whole index to count it. "
        "moto answers a Query by reading every item of the table (it keeps no index), so its share is moto's, not "
        "DynamoDB's: DynamoDB reads only the entries asked for (8 Queries of 100 keys, a round trip each). The "
        "console's own share (parsing, merging, rendering) is what stays when DynamoDB answers quickly. Drift reads "
        "one scan page of 100 items (and, for each, what the mode keeps: here the item itself), whatever the table "
        "holds.",
    )
    figures = {f"console_upcoming_{w}_own_ms": row[6] for w, row in zip(("hour", "day", "week"), rows, strict=False)}
    figures["console_drift_ms"] = next(row[4] for row in rows if row[0].startswith("Drift"))
    return text, figures
