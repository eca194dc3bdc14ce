"""The views' reads, against moto: Upcoming's due index a page at a time, every entry on exactly one page however the
shards' pages cut the seconds, and its schedule group a page of ListSchedules at a time; Delivered's metrics the
functions publish (their embedded-metric lines, summed over the window) and Scheduler's own counts (CloudWatch)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from bench.bench_console import due_index_table
from components import ScheduledTableArgs
from components.cli.console.views import SCHEDULER_METRICS, due_index, published, scheduler_counts, schedules
from components.runtime_config import Value
from tests.conftest import REGION
from tests.support.handler_config import handler_config

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
T = int(NOW.timestamp())
CONFIG = dict(handler_config(ScheduledTableArgs(mode="polling", shards=2), {Value.TABLE: "jobs"}, unnamed=""))
# (key, shard, seconds from now): a second (20) held by both shards, more of it than a page of one shard.
ENTRIES = [("a", 0, 10), ("b", 0, 20), ("c", 0, 20), ("d", 0, 30), ("e", 1, 15), ("f", 1, 20), ("g", 1, 40)]


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws():
        made: dict[str, Any] = {}

        def client(service: str) -> Any:
            return made.setdefault(service, boto3.client(service, region_name=REGION))

        yield client


def test_the_due_index_is_read_a_page_at_a_time_and_every_entry_is_on_exactly_one_page(client: Any) -> None:
    ddb = client("dynamodb")
    due_index_table(ddb, "jobs")
    for key, shard, after in ENTRIES:
        item = {"PK": {"S": key}, "SK": {"S": "x"}, "stShard": {"N": str(shard)}, "stDue": {"N": str(T + after)}}
        ddb.put_item(TableName="jobs", Item=item)

    pages: list[list[tuple[str, int]]] = []
    cursor = None
    while True:
        found = due_index(client, CONFIG, NOW, 3600, 2, cursor)
        pages.append([(o.what[8:9], int(o.when.timestamp()) - T) for o in found.occurrences if o.when])
        cursor = found.cursor
        if cursor is None:
            break
        assert len(pages) < 10, pages

    seen = [entry for page in pages for entry in page]
    assert sorted(seen) == sorted((key, after) for key, _, after in ENTRIES)  # each once
    assert seen == sorted(seen, key=lambda entry: entry[1])  # soonest first, across pages
    assert {after for page in pages for _, after in page if after == 20} == {20}
    assert [after for page in pages if any(a == 20 for _, a in page) for _, after in page] == [20, 20, 20]


def test_the_schedule_group_is_read_a_page_of_list_schedules_at_a_time(client: Any) -> None:
    scheduler = client("scheduler")
    scheduler.create_schedule_group(Name="g")
    for n in range(5):
        scheduler.create_schedule(
            GroupName="g",
            Name=f"s{n}",
            ScheduleExpression=f"at({datetime.fromtimestamp(T + 60 * (n + 1), UTC):%Y-%m-%dT%H:%M:%S})",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": f"arn:aws:sqs:{REGION}:123456789012:q", "RoleArn": "arn:aws:iam::123456789012:role/r"},
        )
    first = schedules(client, "g", NOW, 3600, 3, None)
    assert len(first.occurrences) == 3 and first.cursor is not None
    assert "3 schedule(s) of group g read" in first.read and "more on the next page" in first.read
    second = schedules(client, "g", NOW, 3600, 3, first.cursor)
    assert second.cursor is None
    assert sorted(o.what for o in first.occurrences + second.occurrences) == [f"s{n}" for n in range(5)]


# -- Delivered: what the functions publish, and Scheduler's own counts -------------------------------------------


def emf(table: str, mode: str, metrics: dict[str, int], **counts: Any) -> str:
    """An embedded-metric line as the handlers write it (st_core.log.metrics): the metrics declared under `_aws`,
    the batch's counts beside them."""
    directive = {
        "Dimensions": [["Mode", "Table"]],
        "Metrics": [{"Name": name, "Unit": "Count"} for name in sorted(metrics)],
        "Namespace": "ScheduledTable",
    }
    line = {"_aws": {"CloudWatchMetrics": [directive], "Timestamp": T * 1000}, "Mode": mode, "Table": table}
    return json.dumps({**line, **metrics, **counts}, sort_keys=True)


def test_the_metrics_the_functions_publish_are_summed_over_the_window_by_function(client: Any) -> None:
    logs = client("logs")
    lines = {
        "consumer": [
            (
                T - 30,
                emf("t", "eventbridge", {"Records": 3, "Poisoned": 1, "Retried": 0}, delivered=2, milliseconds=40),
            ),
            (T - 20, emf("t", "eventbridge", {"Records": 5, "Poisoned": 0, "Retried": 2}, delivered=1, scheduled=4)),
            (T - 7200, emf("t", "eventbridge", {"Records": 100, "Poisoned": 9, "Retried": 9}, delivered=50)),  # old
            (T - 10, json.dumps({"action": "dispatched", "lateSeconds": 1.5})),  # a delivery, not a metric line
        ],
        "releaser": [
            (T - 5, emf("t", "eventbridge", {"Records": 2, "Poisoned": 0, "Retried": 0}, lateMillisecondsMax=900)),
            (T - 4, emf("t", "eventbridge", {"Records": 1, "Poisoned": 0, "Retried": 0}, lateMillisecondsMax=300)),
        ],
    }
    for function, events in lines.items():
        logs.create_log_group(logGroupName=f"/aws/lambda/{function}")
        logs.create_log_stream(logGroupName=f"/aws/lambda/{function}", logStreamName="s")
        logs.put_log_events(
            logGroupName=f"/aws/lambda/{function}",
            logStreamName="s",
            logEvents=[{"timestamp": at * 1000, "message": message} for at, message in sorted(events)],
        )
    functions = [(f, f"/aws/lambda/{f}") for f in ("consumer", "releaser", "never-ran")]

    found, note = published(client, functions, NOW, 3600)

    by_name = {m.name: (m.total, m.published, m.by_function) for m in found}
    assert by_name["Records"] == (11, True, {"consumer": 8, "releaser": 3})
    assert by_name["Poisoned"][:2] == (1, True) and by_name["Retried"][:2] == (2, True)
    assert by_name["delivered"] == (3, False, {"consumer": 3})
    assert by_name["scheduled"][:2] == (4, False)
    assert by_name["lateMillisecondsMax"] == (900, False, {"releaser": 900})  # the largest, not a sum
    assert "Mode" not in by_name and "Table" not in by_name  # dimensions are text
    assert [m.published for m in found] == sorted((m.published for m in found), reverse=True)  # metrics first
    assert note == "4 embedded-metric line(s) of 3 function(s) over the last 60 min read"


def test_schedulers_own_counts_are_read_from_cloudwatch_for_the_group_and_say_when_there_are_none(client: Any) -> None:
    cloudwatch = client("cloudwatch")
    counts, note = scheduler_counts(client, "g", NOW, 3600)
    assert counts is None
    assert note.startswith("CloudWatch holds no AWS/Scheduler data point for group g over the last 60 min")

    def put(group: str, name: str, value: float, at: int) -> None:
        cloudwatch.put_metric_data(
            Namespace="AWS/Scheduler",
            MetricData=[
                {
                    "MetricName": name,
                    "Dimensions": [{"Name": "ScheduleGroup", "Value": group}],
                    "Value": value,
                    "Timestamp": datetime.fromtimestamp(at, UTC),
                }
            ],
        )

    put("g", "InvocationAttemptCount", 4, T - 600)
    put("g", "InvocationAttemptCount", 3, T - 60)
    put("g", "TargetErrorCount", 1, T - 60)
    put("other", "InvocationAttemptCount", 50, T - 60)  # another group's

    counts, note = scheduler_counts(client, "g", NOW, 3600)

    assert counts == {name: 0.0 for name in SCHEDULER_METRICS} | {
        "InvocationAttemptCount": 7.0,
        "TargetErrorCount": 1.0,
    }
    assert note == "CloudWatch's AWS/Scheduler metrics of group g, summed over the last 60 min"
