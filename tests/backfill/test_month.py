"""Reconcile every hour for a simulated month (moto): nothing is delivered twice, every injected drift is repaired.

The table holds past-due, future, offset (a reminder a day before), recurring (rate, zoned cron, one with an end)
and moved items. A first backfill attaches; then each simulated hour: Scheduler fires what is due (an `at()`
schedule anywhere in its minute, then deleted, as `ActionAfterCompletion: DELETE` does; a recurring one at each of
its firings, by the rule it holds), DynamoDB's TTL deletes ledger entries some hours after they expire (as it does:
within days, never before), drift may be injected while the stream is off, and `reconcile` runs. Every delivery
(Scheduler's, and the handler's own past-due ones) lands in the due queue and is counted by `occurrenceId`.

Time is the simulation's: the handler, the ledger's clock and reconcile all read it; it starts at the half hour, so
no firing (on the hour, or ten minutes past) is inside a reconcile's minute."""

from __future__ import annotations

import copy
import json
import os
import random
import types
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import eventbridge
import pytest
from backfill.feed import answer_failures
from backfill.timed import FORGOTTEN
from moto.dynamodb.models import dynamodb_backends
from st_core import idempotency
from st_core.naming import SCHEDULED_TIME
from st_core.timeparse import format_due

from components.cli import backfill
from components.cli.redrive.discovery import discover
from tests.backfill.conftest import consumer
from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT, Env, SchedulerClock, firings
from tests.redrive.conftest import aws

DAY = timedelta(days=1)
HOUR = timedelta(hours=1)


class Month:
    def __init__(self, env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
        self.env = env
        self.t = datetime.now(UTC).replace(minute=30, second=0, microsecond=0) + HOUR
        self.start = self.t
        real_time = idempotency.time
        clock = types.SimpleNamespace(time=lambda: self.t.timestamp(), sleep=real_time.sleep)
        monkeypatch.setattr(idempotency, "time", clock)  # the ledger's claims expire on the simulation's clock
        self.scheduler = SchedulerClock(env, seed=38)
        self.random = random.Random(38)
        self.ttl_delay: dict[str, timedelta] = {}
        self.delivered: Counter[str] = Counter()
        self.items: dict[str, str] = {}  # occurrence id -> its item's partition key
        self.function = consumer(env)
        self.client = aws(self.function)
        self.reports: list[Any] = []
        self.known: dict[tuple[str, str], dict[str, Any]] = {}
        self.stack = discover(self.client, self.function.name)

    # -- the items -------------------------------------------------------------------------------------------------

    def put(self, pk: str, due: str | datetime, **extra: Any) -> None:
        self.env.put({"PK": pk, "SK": "A", "dueAt": due if isinstance(due, str) else format_due(due), **extra})

    def outage(self, change: Callable[[], None]) -> None:
        """A change the stream never carries to the consumer (its records dropped)."""
        change()
        self.env.stream.read()

    def live(self, change: Callable[[], None]) -> None:
        """A change the live function handles at once."""
        change()
        assert self.handle(self.env.event()) == {"batchItemFailures": []}

    def handle(self, event: Any, config: Any = None) -> Any:
        return eventbridge.handle_batch(
            event, config or self.env.config, now=lambda: self.t, sleep=lambda seconds: None
        )

    # -- AWS doing its part ----------------------------------------------------------------------------------------

    def advance(self) -> None:
        """One hour: Scheduler fires what came due, TTL deletes what expired a while ago."""
        since, self.t = self.t, self.t + HOUR
        for schedule in self.group():
            expression = schedule["ScheduleExpression"]
            if expression.startswith("at("):
                if self.scheduler.instant(schedule) <= self.t:
                    self.scheduler.run(schedule)
                continue
            for firing in firings(schedule, since, self.t):
                body = schedule["Target"]["Input"].replace(SCHEDULED_TIME, format_due(firing))
                self.env.sqs.send_message(QueueUrl=self.env.due_queue_url, MessageBody=body)
            end = schedule.get("EndDate")
            if end is not None and end <= self.t:
                self.env.scheduler.delete_schedule(Name=schedule["Name"], GroupName=self.env.group)
        self.expire()  # what was delivered is counted after the hour's reconcile, with what it delivered

    def group(self) -> list[dict[str, Any]]:
        """The group's schedules, each read again only when it changed (its LastModificationDate)."""
        found = []
        for page in self.env.scheduler.get_paginator("list_schedules").paginate(GroupName=self.env.group):
            for summary in page["Schedules"]:
                key = (summary["Name"], str(summary.get("LastModificationDate")))
                if key not in self.known or summary.get("LastModificationDate") is None:
                    self.known[key] = self.env.scheduler.get_schedule(Name=summary["Name"], GroupName=self.env.group)
                found.append(self.known[key])
        return found

    def collect(self) -> None:
        for message in self.env.messages(self.env.due_queue_url):
            self.delivered[message["occurrenceId"]] += 1
            self.items[message["occurrenceId"]] = message["keys"]["PK"]

    def expire(self) -> None:
        """DynamoDB's TTL process, inside DynamoDB (moto's backend): each ledger entry whose `expiresAt` passed its
        random delay ago is deleted, as TTL deletes without a request (no Scan and DeleteItem through the API each
        simulated hour: the month would spend most of its time serializing the ledger)."""
        ledger = dynamodb_backends[ACCOUNT][REGION].get_table(self.env.config["eventbridge"]["ledgerTable"])
        for item in ledger.all_items():
            expires = item.attrs.get("expiresAt")
            if expires is None:
                continue
            delay = self.ttl_delay.setdefault(item.hash_key.value, timedelta(hours=self.random.uniform(0, 36)))
            if datetime.fromtimestamp(float(expires.value), UTC) + delay < self.t:
                ledger.delete_item(item.hash_key, item.range_key)

    # -- the operator's commands -----------------------------------------------------------------------------------

    def command(self, name: str) -> Any:
        config = self.env.config

        def feed(records: list[dict[str, Any]]) -> list[tuple[Any, str]]:
            return answer_failures(records, self.handle({"Records": records}, config))

        plan = backfill.Plan(command=name, segments=1, read_units_per_second=None, scheduler_calls_per_second=None)
        tally, finished = backfill.run(
            self.client, self.stack, plan, progress=lambda line: None, feed=feed, now=lambda: self.t.timestamp()
        )
        assert finished and tally.failed == 0, tally.to_json()
        self.collect()
        self.reports.append(tally)
        return tally

    def schedules(self, pk: str) -> list[dict[str, Any]]:
        return [s for s in self.env.schedules() if json.loads(s["Target"]["Input"])["keys"]["PK"] == pk]

    def schedule(self, pk: str) -> dict[str, Any]:
        (found,) = self.schedules(pk)
        return found


@pytest.mark.slow  # 720 reconciles against moto: 50 s of CPU, 3.5 minutes on a loaded 2-core machine
def test_hourly_reconcile_for_a_month_delivers_nothing_twice_and_repairs_every_drift(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = copy.deepcopy(env.config)
    config["eventbridge"].update(
        {
            "offsets": [-86400, 0],
            "timeZoneAttribute": "timeZone",
            "endAttribute": "recurrenceEnd",
            "existingTable": True,  # the table predates the stack: its first backfill delivers what is past due
        }
    )
    env.config = config
    month = Month(env, monkeypatch)
    t0 = month.t
    at = lambda days, hours=0.0: (t0 + timedelta(days=days, hours=hours)).replace(minute=10)  # noqa: E731
    # The table before the stack attaches (no stream record describes these items).
    month.put("old", at(-5))
    month.put("recent", at(0, -3))
    month.put("tomorrow", at(1))
    month.put("week", at(7))
    month.put("moved", at(12))
    month.put("live", at(5))
    month.put("gone", at(20))
    month.put("daily", "rate(1 day)")
    month.put("weekly", "cron(0 9 ? * MON *)", timeZone="Europe/London")
    month.put("ending", "rate(6 hours)", recurrenceEnd=format_due(at(10).replace(minute=0)))
    env.stream.read()

    first = month.command("backfill")
    assert first.kinds.get("fed as a fresh write") == 10, first.to_json()
    delivered_first = {k for k in month.delivered}
    assert {occurrence.split("-")[0] for occurrence in delivered_first} >= {"old", "recent"}

    def drift(hour: int) -> str | None:
        """The drift injected at this hour of the month (the stream off while it happens), named."""
        if hour == 2 * 24 + 5:
            lost = month.schedules("week")[0]
            env.scheduler.delete_schedule(Name=lost["Name"], GroupName=env.group)
            return "a schedule deleted by hand"
        if hour == 3 * 24:
            month.outage(lambda: month.put("moved", at(15)))
            return "an item moved"
        if hour == 4 * 24:
            month.live(lambda: month.put("live", at(6)))  # not drift: the live function handles it
        if hour == 5 * 24:
            month.outage(lambda: month.put("daily", "rate(12 hours)"))
            return "a rule changed"
        if hour == 6 * 24:
            month.outage(lambda: month.put("weekly", "cron(0 9 ? * MON *)", timeZone="America/New_York"))
            return "a zone changed"
        if hour == 8 * 24:
            month.outage(lambda: env.delete("gone", "A"))
            return "an item deleted"
        if hour == 9 * 24:
            month.outage(lambda: month.put("missed", (month.t - timedelta(hours=3)).replace(minute=10)))
            return "an item written late while the stream was off"
        if hour == 9 * 24 + 1:
            month.outage(lambda: month.put("ancient", month.t - 10 * DAY))
            return "an item written long after its time while the stream was off"
        if hour == 9 * 24 + 2:
            end = format_due(at(20).replace(minute=0))
            month.outage(lambda: month.put("ending", "rate(6 hours)", recurrenceEnd=end))
            return "an end moved"
        if hour == 14 * 24:
            env.scheduler.delete_schedule(Name=month.schedule("weekly")["Name"], GroupName=env.group)
            return "a recurring schedule deleted by hand"
        return None

    repaired: list[str] = []
    for hour in range(1, int(os.environ.get("MONTH_HOURS", 30 * 24)) + 1):
        month.advance()
        injected = drift(hour)
        tally = month.command("reconcile")
        if injected is not None and "long after its time" in injected:
            assert tally.acted == 0, tally.to_json()  # reported, not delivered
            repaired.append(injected)
        elif injected is None:
            assert tally.acted == 0, (hour, tally.to_json())  # nothing drifted, nothing done
        else:
            assert tally.acted > 0, (hour, injected, tally.to_json())
            again = month.command("reconcile")
            assert again.acted == 0, (hour, injected, again.to_json())  # repaired in one run
            repaired.append(injected)
        if hour == 5 * 24:
            assert month.schedule("daily")["ScheduleExpression"] == "rate(12 hours)"
        if hour == 6 * 24:
            assert month.schedule("weekly")["ScheduleExpressionTimezone"] == "America/New_York"

    assert len(repaired) == 9
    assert max(month.delivered.values()) == 1, [k for k, n in month.delivered.items() if n > 1]
    by_item = Counter(month.items.values())
    assert by_item["old"] == by_item["recent"] == by_item["tomorrow"] == by_item["week"] == 2  # offset and due
    assert by_item["moved"] == by_item["missed"] == 2
    assert by_item["live"] == 3  # its first reminder had run before the move
    assert by_item["gone"] == by_item["ancient"] == 0  # deleted before its time; delivered long ago, or never
    assert by_item["daily"] >= 50 and by_item["weekly"] >= 4 and by_item["ending"] >= 4 * 19
    assert sum(report.kinds.get(FORGOTTEN, 0) for report in month.reports) > 100  # old, recent... reported hourly
