"""Reconcile's second pass in `eventbridge` and precise `ttl`: schedules no item asks for.

Every schedule of the group is checked against its item (consistent read): one whose item is gone, or holds
another time (its occurrence is no longer the item's), is deleted. It runs after the item pass, which made what
was missing, and skips the schedules that pass found as their items want them. A schedule whose keys cannot be read
from its input (an email target) is left alone and counted.

An `eventbridge` schedule whose minute has begun is never deleted while Scheduler may still run it: it may be
retrying its target (throttled or down: up to its retry policy's maximum event age, then its dead-letter queue), and a
delete would end the retries with nothing in the dead-letter queue and the ledger's marker claiming the occurrence,
so nothing would ever deliver it. The live handler's cancel leaves such a schedule to run for the same reason, by the
same rule (`st_core.schedules.may_have_started`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from backfill.feed import Run, feed_settled
from backfill.records import Record, change, describe, identity, stream
from backfill.resources import ANY, TABLE, flat
from backfill.timed import calls_for, ledger, schedule

# The AWS actions this module's own calls need, by resource (handlers/backfill/resources.py; checked by tests/iam):
# list the group's schedules (no resource-level permission), the table's key schema (to type the keys a due event
# carries as plain values).
AWS_ACTIONS_ON = {TABLE: ("dynamodb:DescribeTable",), ANY: ("scheduler:ListSchedules",)}
AWS_ACTIONS = flat(AWS_ACTIONS_ON)

# Scheduler's longest retry of a target (its default `MaximumEventAgeInSeconds`: 24 h), and how long after it a
# schedule is still taken to be in Scheduler's hands (its own delay in invoking, and in deleting a finished schedule).
MAX_EVENT_AGE_SECONDS = 86400.0
RETRIES_MARGIN_SECONDS = 3600.0


class Sweep:
    """One pass over the group's schedules for one run."""

    def __init__(self, run: Run, kind: str) -> None:
        self.run = run
        self.kind = kind
        self.types: dict[str, str] | None = None

    def all(self) -> None:
        if self.kind not in ("eventbridge", "ttl-precise"):
            return
        scheduler = self.run.clients.get("scheduler")
        token: str | None = None
        while True:
            self.run.calls.take(1)
            request: dict[str, Any] = {"GroupName": self.run.config["scheduler"]["group"]}
            if token:
                request["NextToken"] = token
            page = scheduler.list_schedules(**request)
            for summary in page.get("Schedules", []):
                if str(summary["Name"]) in self.run.confirmed:
                    self.run.note("skipped", "schedule matches its item")  # the item pass found it as wanted
                    continue
                self.one(str(summary["Name"]))
            token = page.get("NextToken")
            if not token:
                return

    def one(self, name: str) -> None:
        run = self.run
        found = schedule(run, name)
        if found is None:
            return  # fired (and deleted itself) since it was listed
        keys = self.keys_of(found)
        if keys is None:
            run.note("skipped", "schedule not understood (left alone)", name)
            return
        where = f"{name} ({describe(run.config, keys)})"
        item = run.read([keys]).get(identity(run.config, keys))
        if name in self.wanted(item):
            run.note("skipped", "schedule matches its item")
            return
        why = "item gone or holds another time"
        if self.kind == "eventbridge" and self.may_still_run(found):
            run.note("skipped", f"{why}, but its minute has begun: left to Scheduler (it may be retrying)", where)
            return
        if run.options.dry_run:
            run.note("acted", f"would delete schedule ({why})", where)
            return
        from st_core import schedules

        run.calls.take(1)
        deleted = schedules.delete(run.clients, run.config["scheduler"]["group"], name)
        if deleted and self.kind == "eventbridge" and not self.started(found):
            # As the handler's cancel: deleted before its minute began, it never ran, and its marker goes with it.
            # Judged by the clock once the delete has answered; past its retries (`may_still_run`) the marker stays.
            from st_core.errors import persist

            persist(lambda: ledger(run).unschedule(name))
        run.note("acted", f"deleted schedule ({why})", where)
        # A live write may have given the item that time again between the read and the delete: follow it.
        now = run.read([keys]).get(identity(run.config, keys))
        if now is not None and name in self.wanted(now):
            feed_settled(run, [change(run.config, None, now, run.now())], calls_for(run, self.kind))

    def wanted(self, image: Record | None) -> set[str]:
        """The schedule names a fresh write of the item would make (none for an absent item)."""
        if image is None:
            return set()
        run = self.run
        record = change(run.config, None, image, run.now())
        moment = datetime.fromtimestamp(run.now(), UTC)
        if self.kind == "eventbridge":
            import eventbridge

            steps = eventbridge.plan(stream(record), run.config, moment).steps
            return {step.occurrence.name for step in steps}
        import ttl

        decision = ttl.decide(stream(record), run.config, moment)
        return {ttl.schedule_name(stream(record), run.config)} if decision.step is ttl.Step.SCHEDULE else set()

    def keys_of(self, found: Record) -> Record | None:
        """The item's keys (Lambda-shaped) from a schedule's input: the release envelope's (second precision), the
        conditional delete's (precise ttl), or the due event's (plain values, typed by the table's key schema).
        Numbers are read as exact decimals: a float keeps 15-17 digits of DynamoDB's 38, and a rounded key names
        another item (this one would read as gone and its live schedule be deleted)."""
        text = str((found.get("Target") or {}).get("Input") or "")
        try:
            document = json.loads(text, parse_float=Decimal)
        except ValueError:
            return None
        if not isinstance(document, dict):
            return None
        from st_core import release

        if release.ENVELOPE in document:
            try:
                return dict(release.keys_of(text))  # a recurring schedule's holds Scheduler's placeholders
            except Exception:
                return None
        if isinstance(document.get("Key"), dict):
            return dict(document["Key"])
        plain = document.get("keys")
        if not isinstance(plain, dict):
            return None
        types = self.key_types()
        typed: Record = {}
        for name, value in plain.items():
            tag = types.get(name)
            if tag is None:
                return None
            typed[name] = {tag: str(value)}
        return typed

    def key_types(self) -> dict[str, str]:
        if self.types is None:
            table = self.run.clients.get("dynamodb").describe_table(TableName=self.run.config["table"])["Table"]
            self.types = {d["AttributeName"]: d["AttributeType"] for d in table["AttributeDefinitions"]}
        return self.types

    def started(self, found: Record) -> bool:
        """Whether a one-time schedule may have started to run (the handler's rule, `schedules.may_have_started`,
        applied to the schedule's own minute: the due time's for minute precision, the release minute for second
        precision); a recurring one never counts as started (it has no marker, and the handler's cancel deletes it)."""
        from st_core import schedules

        fire = at_time(found)
        return fire is not None and schedules.may_have_started(fire, datetime.fromtimestamp(self.run.now(), UTC))

    def may_still_run(self, found: Record) -> bool:
        """Whether Scheduler may still invoke the schedule's target: its minute has begun and its retries may not be
        over (the schedule's own `MaximumEventAgeInSeconds`, Scheduler's 24 h when it names none, after its minute,
        with a margin). A schedule still there after that will never run: deleting it loses nothing."""
        fire = at_time(found)
        if fire is None or not self.started(found):
            return False
        policy = (found.get("Target") or {}).get("RetryPolicy") or {}
        retries = float(policy.get("MaximumEventAgeInSeconds") or MAX_EVENT_AGE_SECONDS)
        ends = fire + timedelta(seconds=retries + RETRIES_MARGIN_SECONDS)
        return datetime.fromtimestamp(self.run.now(), UTC) < ends


def at_time(found: Record) -> datetime | None:
    """A one-time schedule's `at()` time (UTC); None for a recurring one."""
    expression = str(found.get("ScheduleExpression") or "")
    if not expression.startswith("at("):
        return None
    return datetime.fromisoformat(expression[3:-1]).replace(tzinfo=UTC)
