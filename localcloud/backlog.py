"""The `backlog` scenario: a table that already holds items when the stack deploys, given their actions by
`scheduled-table backfill` and repaired by `reconcile`, both fanned out over the stack's backfill functions.

A stream carries only the changes made after it is enabled, so items written before that have no schedule and no
total until backfill gives them one. `prefill` makes the table as a user's would be before they attach to it: items
written first, the stream enabled afterwards (ministack then holds no record of them, as AWS would not). The stack
(`Pulumi.local.yaml`: `backlog`, eventbridge, and `backlog-totals`, aggregate, both on the table `backlog`, both with
`backfillFunction: true`) then deploys onto it, and `Backlog` runs what an operator would:

0. Nothing has acted yet: no schedule, no due event, no total, though the stack runs and the stream is on.
1. `backfill --in-lambda` for both components: each past-due item is delivered once, at once; each future one and the
   weekly one get their schedule and act at their time, never before; each customer's total is set from the orders.
2. Drift, by hand: schedules of two future items and of the weekly one deleted, one total raised, one deleted.
3. `reconcile --dry-run` (what it finds, changing nothing), then `reconcile` (what it repairs): the schedules are made
   again before their minute, so those items still act once at their time; the totals equal their orders again.
4. `backfill` again finds every timed item already scheduled and acts on none.

The counts each step must report are checked; a difference is a failure of the scenario (`make demo` and
tests/e2e/test_local_stack.py both run it, with 30% of stream batches redelivered).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.config import Config

from .component import discover, scan_commands
from .deploy import Deployment, TableKeys
from .provision import CREDENTIALS, STREAM, Provisioner, clients
from .scenarios import MINUTE_SCHEDULE, Delivery, Outcome, dead_letters, drain_due_events, iso, put_many, tally

TABLE = "backlog"
EVENTS = "backlog"  # the eventbridge component (its key in the stack's outputs)
TOTALS = "backlog-totals"  # the aggregate component on the same table
SEGMENTS = 2  # each a chain of invocations of the component's backfill function
# Past-due items: how long ago each was due when the table was filled.
PAST = (3600, 600, 30)
# Future items: how far ahead of the filling each is due. The stack deploys in between (seconds; more on a loaded
# machine), then backfill, the drift and reconcile run: all before the first item whose schedule is deleted is due.
FUTURE = (50, 55, 60, 65)
# The weekly item: the first whole UTC minute at least this far ahead.
WEEKLY_LEAD = 60
# A schedule is deleted by hand only while its item is at least this far from due, so reconcile re-makes it in time.
DRIFT_MARGIN = 20.0
# Backfill sends a past-due item itself, as it reads it: its due event must arrive within this long of backfill's end
# (from its start, a loaded machine's Lambda start-up would count too).
PAST_DUE_PROMPT = 30.0
ORDERS = ((1, 25), (2, 40), (3, 15), (1, 10), (2, 5), (3, 30), (1, 60), (2, 35), (3, 20), (1, 45), (2, 50), (3, 5))


@dataclass(frozen=True)
class Prefilled:
    """What the table held before the stack deployed: each timed item's key (PK) and when it must act, each
    customer's sum of orders, and how many items were written."""

    filled_at: float
    past: dict[str, float]
    future: dict[str, float]
    weekly: dict[str, float]
    sums: dict[str, int]
    items: int


def table_before_stream(endpoint: str, region: str, name: str, items: list[dict[str, Any]]) -> None:
    """Make table `name` (string PK and SK, on demand, no stream), write `items`, then enable its stream
    (NEW_AND_OLD_IMAGES, what the stack needs): the items predate the stream, as a user's existing items do, so
    no stream record describes them."""
    if not Provisioner(endpoint, region).ensure_table(name, TableKeys(name, "PK", "SK"), stream=False):
        raise RuntimeError(f"table {name!r} exists already: its items would not be the ones written here")
    client = clients(endpoint, region)
    put_many(client, name, items)
    client("dynamodb").update_table(TableName=name, StreamSpecification=STREAM)


def prefill(endpoint: str, region: str, now: float | None = None) -> Prefilled:
    """The table `backlog` as it is before the stack deploys: past-due, future and weekly items, and orders."""
    now = time.time() if now is None else now
    items: list[dict[str, Any]] = []
    past = {f"PAST#{n}": now - ago for n, ago in enumerate(PAST, 1)}
    future = {f"SOON#{n}": float(int(now + ahead)) for n, ahead in enumerate(FUTURE, 1)}
    for key, due in {**past, **future}.items():
        items.append({"PK": key, "SK": "TASK", "dueAt": iso(due), "note": "written before the stream existed"})
    minute = datetime.fromtimestamp(now + WEEKLY_LEAD, UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    dow = (minute.weekday() + 1) % 7 + 1  # AWS numbering: 1 = Sunday
    items.append({"PK": "WEEKLY#1", "SK": "TASK", "dueAt": f"cron({minute.minute} {minute.hour} ? * {dow} *)"})
    sums: dict[str, int] = {}
    for n, (customer, amount) in enumerate(ORDERS):
        group = f"CUSTOMER#{customer}"
        items.append({"PK": f"ORDER#{n:02}", "SK": group, "amount": amount})
        sums[group] = sums.get(group, 0) + amount
    table_before_stream(endpoint, region, TABLE, items)
    return Prefilled(now, past, future, {"WEEKLY#1": minute.timestamp()}, sums, len(items))


def operator(endpoint: str, region: str) -> Callable[[str], Any]:
    """Clients as the operator's command makes them (the local cloud's admin credentials): a backfill invocation is
    waited for, and never sent twice by the SDK while the first still runs."""
    session = boto3.session.Session(region_name=region, **CREDENTIALS)
    made: dict[str, Any] = {}
    invoke = Config(read_timeout=960, connect_timeout=10, retries={"total_max_attempts": 1})
    lock = threading.Lock()

    def client(service: str) -> Any:
        with lock:
            if service not in made:
                config = invoke if service == "lambda" else Config(retries={"max_attempts": 3, "mode": "standard"})
                made[service] = session.client(service, endpoint_url=endpoint, config=config)
            return made[service]

    return client


@dataclass
class Step:
    """One command's result: its counts by kind, and whether every segment finished."""

    command: str
    component: str
    kinds: dict[str, int]
    acted: int
    failed: int
    finished: bool


@dataclass
class Backlog:
    """The scenario (see the module's docstring); `start` runs the steps in two threads, one per component, while
    `observe` collects the due events."""

    deployment: Deployment
    prefilled: Prefilled
    name: str = "backlog (existing items: backfill, reconcile)"
    mode: str = "eventbridge"
    expected: dict[str, float] = field(default_factory=dict)
    deliveries: list[Delivery] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    corrupted: list[str] = field(default_factory=list)
    backfilled_at: float = 0.0  # when the eventbridge component's first backfill returned

    def __post_init__(self) -> None:
        self.client = operator(self.deployment.endpoint, self.deployment.region)
        self.events: dict[str, Any] = self.deployment.outputs[EVENTS]
        self.sums: dict[str, Any] = self.deployment.outputs[TOTALS]
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    # -- the operator's commands and the drift ------------------------------------------------------------------------

    def command(self, component: str, command: str, dry_run: bool = False, label: str = "") -> Step:
        """`scheduled-table <command> --function F --in-lambda B [--dry-run]` for one component (its step named
        `label` when one command runs twice)."""
        outputs = self.deployment.outputs[component]
        stack = discover(self.client, outputs["function_name"])
        plan = scan_commands.Plan(
            command=command, segments=SEGMENTS, dry_run=dry_run, in_lambda=outputs["backfill_function_name"]
        )
        result, finished = scan_commands.run(self.client, stack, plan, progress=lambda line: None)
        step = Step(
            label or command + (" --dry-run" if dry_run else ""),
            component,
            dict(result.kinds),
            result.acted,
            result.failed,
            finished,
        )
        with self._lock:
            self.steps.append(step)
        return step

    def schedules(self) -> dict[str, str]:
        """The eventbridge component's schedules, by the key (PK) of the item each acts for."""
        scheduler = self.client("scheduler")
        group = self.events["schedule_group_name"]
        found: dict[str, str] = {}
        for page in scheduler.get_paginator("list_schedules").paginate(GroupName=group):
            for summary in page["Schedules"]:
                schedule = scheduler.get_schedule(Name=summary["Name"], GroupName=group)
                found[str(json.loads(schedule["Target"]["Input"])["keys"]["PK"])] = summary["Name"]
        return found

    def delete_schedules(self, keys: list[str], margin: float = DRIFT_MARGIN) -> list[str]:
        """Drift by hand: these items' schedules deleted (as a mistaken cleanup would), each only while its item is
        still `margin` seconds from due. Reconcile re-makes a schedule deleted before its due time; one deleted later
        cannot be told from one that ran (Scheduler deletes an at() schedule once it has run), so it is left alone,
        and a scenario that deleted it would lose that item by its own doing. Returns the keys deleted."""
        names = self.schedules()
        due = {**self.prefilled.future, **self.prefilled.weekly}
        for key in keys:
            if due[key] - time.time() < margin:
                continue
            self.client("scheduler").delete_schedule(Name=names[key], GroupName=self.events["schedule_group_name"])
            self.deleted.append(key)
        return list(self.deleted)

    def corrupt_totals(self) -> None:
        """Drift by hand: the first customer's total raised by 100, the second's deleted."""
        ddb = self.client("dynamodb")
        first, second = sorted(self.prefilled.sums)[:2]
        ddb.update_item(
            TableName=TABLE,
            Key={"PK": {"S": first}, "SK": {"S": "TOTAL"}},
            UpdateExpression="SET totalAmount = totalAmount + :extra",
            ExpressionAttributeValues={":extra": {"N": "100"}},
        )
        ddb.delete_item(TableName=TABLE, Key={"PK": {"S": second}, "SK": {"S": "TOTAL"}})
        self.corrupted += [first, second]

    def read_totals(self) -> dict[str, int]:
        ddb = self.client("dynamodb")
        for group in self.prefilled.sums:
            item = ddb.get_item(TableName=TABLE, Key={"PK": {"S": group}, "SK": {"S": "TOTAL"}}).get("Item")
            self.totals[group] = int(item["totalAmount"]["N"]) if item else 0
        return dict(self.totals)

    # -- the two threads ----------------------------------------------------------------------------------------------

    def timed_steps(self) -> None:
        """eventbridge: nothing acted before backfill; backfill; three schedules deleted; reconcile (a dry run finds
        them and changes nothing, then it re-makes them); backfill again finds nothing left to do."""
        if self.schedules() or self.observe():
            self.wrong.append("a schedule or a due event before backfill: something acted on items no record describes")
        self.check(self.command(EVENTS, "backfill"), {"fed as a fresh write": self.timed_items()})
        self.backfilled_at = time.time()
        deleted = self.delete_schedules(["SOON#3", "SOON#4", "WEEKLY#1"])
        if not deleted:
            self.wrong.append("no schedule deleted: this machine took too long to get there before the items' time")
        left = set(self.schedules())
        self.check(self.command(EVENTS, "reconcile", dry_run=True), {"would schedule": len(deleted)})
        if set(self.schedules()) != left:
            self.wrong.append("reconcile --dry-run changed the schedules")
        self.check(self.command(EVENTS, "reconcile"), {"fed as a fresh write": len(deleted)})
        if not set(deleted) <= set(self.schedules()):
            self.wrong.append(f"reconcile did not re-make the deleted schedules {deleted}")
        again = self.command(EVENTS, "backfill", label="backfill again")
        self.check(again, {"already scheduled": self.timed_items()})
        if again.acted:
            self.wrong.append(f"backfill again acted on {again.acted} items that already had their actions")

    def total_steps(self) -> None:
        """aggregate: backfill sets every total, two corrupted, reconcile finds and replaces them. Each replacing run
        waits a minute from its start (records written just before it reach their totals first)."""
        groups = len(self.prefilled.sums)
        if any(self.read_totals().values()):
            self.wrong.append(f"totals before backfill: {self.totals} (something counted items no record describes)")
        self.check(self.command(TOTALS, "backfill"), {"total replaced": groups})
        self.corrupt_totals()
        self.check(self.command(TOTALS, "reconcile", dry_run=True), {"would replace total": 2})
        self.check(self.command(TOTALS, "reconcile"), {"total replaced": 2, "total agrees": groups - 2})
        self.read_totals()

    def timed_items(self) -> int:
        return len(self.prefilled.past) + len(self.prefilled.future) + len(self.prefilled.weekly)

    def check(self, step: Step, wanted: dict[str, int]) -> None:
        """The counts a step must report; any other (or a failure, or an unfinished run) is a wrong outcome."""
        found = {kind: step.kinds.get(kind, 0) for kind in wanted}
        if found != wanted or step.failed or not step.finished:
            self.wrong.append(f"{step.component} {step.command}: {found} (failed {step.failed}), expected {wanted}")

    # -- the Scenario protocol ----------------------------------------------------------------------------------------

    def start(self, now: float) -> None:
        self.expect(now)
        for work in (self.timed_steps, self.total_steps):
            self.in_background(work)

    def expect(self, now: float) -> None:
        """Each timed item once, not before its time; a past-due one's time is `now`, when backfill starts (a delivery
        before it would mean something acted without backfill)."""
        self.expected = {key: now for key in self.prefilled.past}
        self.expected.update(self.prefilled.future)
        self.expected.update(self.prefilled.weekly)

    def in_background(self, work: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=self._guarded, args=(work,), daemon=True)
        self._threads.append(thread)
        thread.start()
        return thread

    def _guarded(self, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as error:  # reported as the scenario's failure, never a silent thread death
            self.wrong.append(f"{work.__name__}: {type(error).__name__}: {str(error)[:300]}")

    def observe(self) -> list[Delivery]:
        for body, at in drain_due_events(self.client, self.events["due_queue_url"]):
            self.deliveries.append(Delivery(str(body["keys"]["PK"]), at))
        return self.deliveries

    def done(self) -> bool:
        finished = all(not thread.is_alive() for thread in self._threads)
        return finished and set(self.expected) <= {d.key for d in self.deliveries}

    def outcome(self) -> Outcome:
        for thread in self._threads:
            thread.join(timeout=0)
        result = tally(self.name, self.mode, self.prefilled.items, self.expected, set(), self.deliveries)
        result.unexpected += self.wrong
        if any(thread.is_alive() for thread in self._threads):
            result.unexpected.append("backfill or reconcile still running")
        ended = self.backfilled_at or time.time()
        slow = {d.key: round(d.at - ended, 1) for d in self.deliveries if d.key in self.prefilled.past}
        if any(late >= PAST_DUE_PROMPT for late in slow.values()):
            result.unexpected.append(f"past-due items not sent at once by backfill (seconds after it ended: {slow})")
        wrong_totals = {g: t for g, t in self.totals.items() if t != self.prefilled.sums[g]}
        if not self.totals or wrong_totals:
            result.missing.append(f"totals equal to their orders after reconcile (read {self.totals})")
        queues: dict[str, int] = {}
        for outputs in (self.events, self.sums):
            for queue, depth in dead_letters(self.client, outputs).items():
                queues[queue] = queues.get(queue, 0) + depth
        result.dead_letters = queues
        result.bound = MINUTE_SCHEDULE
        return result

    def report(self) -> str:
        """What each command found and did, in plain words."""
        by = {(s.component, s.command): s for s in self.steps}

        def kind(component: str, command: str, name: str) -> int:
            step = by.get((component, command))
            return step.kinds.get(name, 0) if step else 0

        past, ahead = len(self.prefilled.past), len(self.prefilled.future) + len(self.prefilled.weekly)
        return (
            f"{self.prefilled.items} items in the table before the stack; backfill in Lambda fed "
            f"{kind(EVENTS, 'backfill', 'fed as a fresh write')} timed items to the consumer ({past} past due, "
            f"delivered at once; {ahead} scheduled) and set {kind(TOTALS, 'backfill', 'total replaced')} totals; "
            f"by hand: {len(self.deleted)} schedules deleted, {len(self.corrupted)} totals corrupted; reconcile "
            f"found {kind(EVENTS, 'reconcile --dry-run', 'would schedule')} schedules missing and "
            f"{kind(TOTALS, 'reconcile --dry-run', 'would replace total')} totals wrong, repaired "
            f"{kind(EVENTS, 'reconcile', 'fed as a fresh write')} schedules and "
            f"{kind(TOTALS, 'reconcile', 'total replaced')} totals"
        )
