"""The `drift` scenario: reconcile running by itself (`reconcileEvery`), repairing state corrupted by hand, with no
operator command.

The stack's `drift` table (eventbridge, `reconcileEvery: rate(1 minute)`) has an EventBridge rule that invokes its
backfill function with the scheduled reconcile's event; each pass publishes what it found as CloudWatch metrics in
Embedded Metric Format (`ReconcileMissing`, `ReconcileStray`, `ReconcileRepaired`, `ReconcileDrift`, ...). The local
cloud fires that rule every few seconds instead of waiting for its minute (as it fires polling's tick), and reads the
metrics from the function's log group, where CloudWatch would extract them.

`SelfRepair` writes an item due in an hour and a weekly one; once the live function has made their schedules, it
corrupts them by hand: the item's pending schedule deleted, the weekly schedule's rule changed (a recurring rule
that drifted), and a stray schedule made (a copy naming an item that does not exist). It then only watches: a pass
must find and repair them (the deleted schedule and the changed rule missing, unless a stream batch Lambda delivers
again re-made one first; the stray stray), a later pass must find nothing, and the group must hold the deleted
schedule again under its own name, the weekly one with the item's rule, and no stray. No delivery is awaited (the
item's schedule is checked instead), so the scenario ends as soon as the repair is seen.

Not shown here: an item changed while its stream consumer is off. A disabled event source mapping resumes from where
it stopped, on AWS as in ministack, so such a change still reaches the consumer; it is lost only when the stream's
24 hours pass first (tests/backfill/test_month.py drops those records to cover it).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from .emulators import fire_rule
from .scenarios import MINUTE_SCHEDULE, Delivery, Outcome, Workload, drain_due_events, iso, put

# The timed item's due time, this far after the scenario starts: far enough that no load on this machine brings its
# time before the drift and the repair (a schedule deleted after its item's time cannot be told from one that ran,
# which Scheduler deletes: reconcile leaves it, see localcloud/backlog.py), so the scenario waits for no firing.
LEAD = 3600.0
WEEKLY = "cron(0 9 ? * MON *)"
DRIFTED = "cron(0 10 ? * MON *)"  # the weekly schedule's rule as changed by hand
STRAY = "STRAY#1"  # the key a stray schedule names: no such item exists
METRICS = ("ReconcileMissing", "ReconcileStray", "ReconcileWrongTotals", "ReconcileRepaired", "ReconcileDrift")


def reconcile_passes(client: Any, log_group: str) -> list[dict[str, int]]:
    """Each finished reconcile pass's metrics, oldest first, from the Embedded Metric Format lines in the log group."""
    logs = client("logs")
    passes: list[tuple[int, dict[str, int]]] = []
    for page in logs.get_paginator("filter_log_events").paginate(logGroupName=log_group):
        for event in page.get("events", []):
            try:
                document = json.loads(event["message"].strip())
            except ValueError:
                continue
            if isinstance(document, dict) and "_aws" in document and "ReconcileDrift" in document:
                passes.append((int(event["timestamp"]), {m: int(document.get(m, 0)) for m in METRICS}))
    return [metrics for _, metrics in sorted(passes, key=lambda p: p[0])]


def rule_invoking(client: Any, function_arn: str) -> str:
    """The EventBridge rule whose target is this function (the component's `{name}-reconcile`)."""
    events = client("events")
    for page in events.get_paginator("list_rules").paginate():
        for rule in page["Rules"]:
            targets = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
            if any(target["Arn"] == function_arn for target in targets):
                return str(rule["Name"])
    raise RuntimeError(f"no rule invokes {function_arn}")


@dataclass
class SelfRepair(Workload):
    fire_every: float = 3.0
    fired: int = 0
    corrupted_at: float = 0.0
    lost_name: str = ""
    passes: list[dict[str, int]] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    _last_fire: float = 0.0
    _repaired: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        self.group = self.outputs["schedule_group_name"]
        configuration = self.client("lambda").get_function_configuration(
            FunctionName=self.outputs["backfill_function_name"]
        )
        self.function_arn = str(configuration["FunctionArn"])
        self.log_group = str((configuration.get("LoggingConfig") or {}).get("LogGroup") or "")
        self.rule = rule_invoking(self.client, self.function_arn)

    def start(self, now: float) -> None:
        table = self.outputs["table_name"]
        put(self.client, table, {"PK": "LOST#1", "SK": "TASK", "dueAt": iso(float(int(now + LEAD)))})
        put(self.client, table, {"PK": "WEEKLY#1", "SK": "TASK", "dueAt": WEEKLY})
        self.forbidden.add(STRAY)
        self.written = 2

    def schedules(self) -> dict[str, dict[str, Any]]:
        """The group's schedules, by the key (PK) of the item each acts for."""
        scheduler = self.client("scheduler")
        found: dict[str, dict[str, Any]] = {}
        for page in scheduler.get_paginator("list_schedules").paginate(GroupName=self.group):
            for summary in page["Schedules"]:
                schedule = scheduler.get_schedule(Name=summary["Name"], GroupName=self.group)
                found[str(json.loads(schedule["Target"]["Input"])["keys"]["PK"])] = schedule
        return found

    def corrupt(self, found: dict[str, dict[str, Any]]) -> None:
        """By hand, as a mistaken cleanup or console edit would: a pending schedule deleted, the weekly schedule's
        rule changed, a stray schedule made (a copy of a pending one naming an item that does not exist)."""
        scheduler = self.client("scheduler")
        lost = found["LOST#1"]
        self.lost_name = str(lost["Name"])
        scheduler.delete_schedule(Name=self.lost_name, GroupName=self.group)
        weekly = found["WEEKLY#1"]
        scheduler.update_schedule(**{**_writable(weekly), "ScheduleExpression": DRIFTED})
        document = json.loads(lost["Target"]["Input"])
        document["keys"]["PK"] = STRAY
        target = {**lost["Target"], "Input": json.dumps(document)}
        scheduler.create_schedule(**{**_writable(lost), "Name": "stray-made-by-hand", "Target": target})
        self.corrupted_at = time.time()

    def observe(self) -> list[Delivery]:
        for body, at in drain_due_events(self.client, self.outputs["due_queue_url"]):
            self.deliveries.append(Delivery(str(body["keys"]["PK"]), at))
        if self._repaired or self.wrong:
            return self.deliveries
        try:
            self._step()
        except Exception as error:  # the scenario's failure, reported with the others, never a crashed demo
            self.wrong.append(f"{type(error).__name__}: {str(error)[:300]}")
        return self.deliveries

    def _step(self) -> None:
        """Corrupt once the schedules exist; then fire the reconcile rule every `fire_every` seconds until a pass
        found the drift and a later one found nothing."""
        if not self.corrupted_at:
            found = self.schedules()
            if {"LOST#1", "WEEKLY#1"} <= set(found):
                self.corrupt(found)
            return
        if time.time() - self._last_fire >= self.fire_every:
            self._last_fire = time.time()
            self.fired += fire_rule(self.client, self.rule, self.deployment.region)
            self.passes = reconcile_passes(self.client, self.log_group)
            drifted = [i for i, p in enumerate(self.passes) if p["ReconcileDrift"] > 0]
            self._repaired = bool(drifted) and any(p["ReconcileDrift"] == 0 for p in self.passes[drifted[0] + 1 :])

    def done(self) -> bool:
        return (self._repaired or bool(self.wrong)) and super().done()

    def outcome(self) -> Outcome:
        result = super().outcome()
        result.bound = MINUTE_SCHEDULE
        drifted = [p for p in self.passes if p["ReconcileDrift"] > 0]
        if not self.corrupted_at:
            result.missing.append("the drift (the live function never made the three schedules)")
        elif not drifted:
            result.missing.append(f"a reconcile pass that found the drift ({len(self.passes)} passes seen)")
        else:
            # A stream batch Lambda delivers again may re-make the deleted schedule or the rule first (the item's
            # latest record): then fewer are found missing. Nothing but reconcile removes the stray.
            found = {m: sum(p[m] for p in drifted) for m in METRICS}
            missing, stray, repaired = (found[m] for m in ("ReconcileMissing", "ReconcileStray", "ReconcileRepaired"))
            wrong_totals = found["ReconcileWrongTotals"]
            if not (1 <= missing <= 2 and stray == 1 and wrong_totals == 0 and repaired == missing + stray):
                result.unexpected.append(f"reconcile passes found {drifted}: want 1-2 missing, 1 stray, repaired")
            if not self._repaired:
                result.missing.append("a reconcile pass after the repair that finds nothing")
        schedules = self.schedules()
        if self.lost_name and schedules.get("LOST#1", {}).get("Name") != self.lost_name:
            result.missing.append(f"the deleted schedule made again ({self.lost_name})")
        if "WEEKLY#1" not in schedules or schedules["WEEKLY#1"].get("ScheduleExpression") != WEEKLY:
            result.unexpected.append(f"the weekly schedule's rule not repaired to {WEEKLY}")
        if STRAY in schedules:
            result.unexpected.append("the stray schedule left in place")
        result.unexpected += self.wrong
        return result

    def report(self) -> str:
        drifted = [p for p in self.passes if p["ReconcileDrift"] > 0]
        first = drifted[0] if drifted else dict.fromkeys(METRICS, 0)
        return (
            f"by hand: 1 pending schedule deleted, 1 recurring rule changed, 1 stray schedule made; the reconcile "
            f"rule fired {self.fired} times (the backfill function ran reconcile, no operator command); "
            f"{len(self.passes)} passes published metrics, the first after the drift ReconcileMissing="
            f"{first['ReconcileMissing']} ReconcileStray={first['ReconcileStray']} ReconcileRepaired="
            f"{first['ReconcileRepaired']} ReconcileDrift={first['ReconcileDrift']}, later ones ReconcileDrift=0"
        )


def _writable(schedule: dict[str, Any]) -> dict[str, Any]:
    """A schedule as GetSchedule returns it, reduced to what CreateSchedule and UpdateSchedule take."""
    names = (
        "Name",
        "GroupName",
        "ScheduleExpression",
        "ScheduleExpressionTimezone",
        "StartDate",
        "EndDate",
        "Description",
        "State",
        "KmsKeyArn",
        "Target",
        "FlexibleTimeWindow",
        "ActionAfterCompletion",
    )
    return {name: schedule[name] for name in names if name in schedule}


def self_repair(deployment: Any) -> SelfRepair:
    """The scenario for the stack's `drift` table."""
    return SelfRepair(deployment, "drift", "drift (reconcile by itself)", "eventbridge", bound=MINUTE_SCHEDULE)
