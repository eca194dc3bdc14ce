"""Upcoming's reads, against moto: the due index a page at a time, every entry on exactly one page however the
shards' pages cut the seconds; the schedule group a page of ListSchedules at a time."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from bench.bench_console import due_index_table
from components.ops.console.views import due_index, schedules
from tests.conftest import REGION

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
T = int(NOW.timestamp())
CONFIG = {"table": "jobs", "partitionKey": "PK", "sortKey": "SK", "polling": {"shards": 2}}
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
