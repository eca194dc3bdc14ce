"""Alarms and the dashboard, as plain data built by pure functions (tested without Pulumi): what an operator needs
to hear about a table's machinery, and one page to look at it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

METRICS_NAMESPACE = "ScheduledTable"


@dataclass(frozen=True)
class AlarmSpec:
    """One CloudWatch alarm: `name_suffix` goes after the component name."""

    name_suffix: str
    description: str
    namespace: str
    metric: str
    dimensions: dict[str, str]
    statistic: str
    threshold: float
    period: int = 60
    evaluation_periods: int = 1
    comparison: str = "GreaterThanThreshold"


def queue_alarm(role: str, queue_name: str) -> AlarmSpec:
    """Any message in a dead-letter or poison queue is something that did not happen: tell someone at once."""
    return AlarmSpec(
        name_suffix=f"{role}-not-empty",
        description=f"Messages in the {role} queue: actions that did not happen. Read them, fix, redrive.",
        namespace="AWS/SQS",
        metric="ApproximateNumberOfMessagesVisible",
        dimensions={"QueueName": queue_name},
        statistic="Maximum",
        threshold=0,
    )


def reconcile_drift_alarm(table: str) -> AlarmSpec:
    """`reconcile_every` found items without what they should have, stray schedules or wrong totals (and repaired
    them): something the stream did not carry, or a hand's change. Published once per pass (handlers/backfill_every)."""
    return AlarmSpec(
        name_suffix="reconcile-drift",
        description=f"Reconcile found drift in table {table} (missing, stray or wrong) and repaired it: find out why.",
        namespace="ScheduledTable",
        metric="ReconcileDrift",
        dimensions={"Table": table},
        statistic="Sum",
        threshold=0,
        period=86400,
    )


def function_errors_alarm(role: str, function_name: str) -> AlarmSpec:
    """The function itself failed (a crash, a timeout), beyond the per-record errors it reports and retries."""
    return AlarmSpec(
        name_suffix=f"{role}-errors",
        description=f"The {role} function failed invocations (crashes or timeouts); records are being retried.",
        namespace="AWS/Lambda",
        metric="Errors",
        dimensions={"FunctionName": function_name},
        statistic="Sum",
        threshold=0,
        period=300,
    )


def iterator_age_alarm(role: str, function_name: str, seconds: int) -> AlarmSpec:
    """The stream consumer is falling behind: actions are becoming late."""
    return AlarmSpec(
        name_suffix=f"{role}-iterator-age",
        description=f"The {role} function is more than {seconds} s behind its stream: actions are late.",
        namespace="AWS/Lambda",
        metric="IteratorAge",
        dimensions={"FunctionName": function_name},
        statistic="Maximum",
        threshold=seconds * 1000,
        evaluation_periods=3,
    )


def dashboard_body(
    *, region: str, table: str, mode: str, functions: list[str], stream_functions: list[str], queues: dict[str, str]
) -> str:
    """One dashboard per table: due actions and failures (from the handlers' embedded metrics), Lambda invocations
    and errors, dead-letter depths, stream iterator age, the polling backlog."""

    def widget(title: str, metrics: list[list[Any]], x: int, y: int, stat: str = "Sum") -> dict[str, Any]:
        return {
            "type": "metric",
            "x": x,
            "y": y,
            "width": 12,
            "height": 6,
            "properties": {"title": title, "region": region, "stat": stat, "period": 60, "metrics": metrics},
        }

    def ours(name: str) -> list[Any]:
        # The handlers' embedded metrics carry both dimensions; CloudWatch matches the full set.
        return [METRICS_NAMESPACE, name, "Mode", mode, "Table", table]

    widgets = [
        widget(
            "Records, actions and failures",
            [ours(name) for name in ("Records", "Dispatched", "Poisoned", "Retried", "Failed", "Unsettled")],
            0,
            0,
        ),
        widget(
            "Processor backlog (polling)",
            [ours("Backlog"), ours("BackloggedShards"), ours("Throttled")],
            12,
            0,
            "Maximum",
        ),
        widget(
            "Lambda invocations and errors",
            [["AWS/Lambda", m, "FunctionName", f] for f in functions for m in ("Invocations", "Errors")],
            0,
            6,
        ),
        widget(
            "Dead-letter and poison queues (visible messages)",
            [["AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", q] for q in queues.values()],
            12,
            6,
            "Maximum",
        ),
        widget(
            "Stream iterator age (ms)",
            [["AWS/Lambda", "IteratorAge", "FunctionName", f] for f in stream_functions],
            0,
            12,
            "Maximum",
        ),
    ]
    return json.dumps({"widgets": widgets}, sort_keys=True)


def dashboard_name(component: str, stack: str) -> str:
    """The dashboard's physical name, unique per account and region like every dashboard name must be: the stack is
    in it, so two stacks with a component of the same name never overwrite each other's dashboard. CloudWatch takes
    letters, digits, '-' and '_' only (a stack name may also hold '.'), up to 255 characters."""
    raw = f"{component}-{stack}-scheduled-table"
    return "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "-" for c in raw)[:255]
