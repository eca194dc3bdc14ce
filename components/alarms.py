"""Alarms and the dashboard of a table: what an operator needs to hear about its machinery, and one page to look at
it. The specs are plain data built by pure functions (tested without a Pulumi engine); `build_alarms(ctx)` turns
them into resources over everything the mode's build made (`Owner.made`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

import pulumi
import pulumi_aws as aws

from . import arns, policies
from .parts import BuildContext, Made, Owner

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
    them): something the stream did not carry, or a hand's change. Published once per pass (backfill.every)."""
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


def build_alarms(ctx: BuildContext) -> pulumi.Output[str] | None:
    """Alarms on every dead-letter and poison queue, every function's errors and each stream consumer's iterator age
    (to the alarm topic, if any), and one dashboard for the table. Returns the alarm topic's ARN, if there is one."""
    a, owner, made = ctx.args, ctx.owner, ctx.owner.made
    alarm_topic_arn: pulumi.Output[str] | None = None
    if a.alarms:
        topic: pulumi.Input[str] | None = a.alarm_topic_arn
        if a.create_alarm_topic:
            topic = build_alarm_topic(ctx).arn
        if topic is not None:
            alarm_topic_arn = pulumi.Output.from_input(topic)
        # (logical name suffix, spec): names are known now, the specs once the resources have names.
        specs: list[tuple[str, pulumi.Output[AlarmSpec]]] = []
        for role, name in alarmed_queues(made).items():
            specs.append((f"{role}-not-empty", name.apply(partial(queue_alarm, role))))
        for role, function in made.functions.items():
            specs.append((f"{role}-errors", function.name.apply(partial(function_errors_alarm, role))))
        for role, function in made.stream_functions.items():
            age = partial(iterator_age_alarm, role, seconds=a.iterator_age_alarm_seconds)
            specs.append((f"{role}-iterator-age", function.name.apply(age)))
        if a.reconcile_every is not None:
            specs.append(("reconcile-drift", ctx.table.name.apply(reconcile_drift_alarm)))
        for suffix, spec in specs:
            build_alarm(owner, suffix, spec, topic)
    if a.dashboard:
        names = alarmed_queues(made)
        body = pulumi.Output.all(
            ctx.table.name,
            ctx.table.arn,
            [f.name for f in made.functions.values()],
            [f.name for f in made.stream_functions.values()],
            pulumi.Output.all(**names),
        ).apply(
            lambda v: dashboard_body(
                region=arns.arn_parts(v[1])[2],
                table=v[0],
                mode=str(a.mode),
                functions=list(v[2]),
                stream_functions=list(v[3]),
                queues=dict(v[4]),
            )
        )
        aws.cloudwatch.Dashboard(
            f"{owner.name}-dashboard",
            dashboard_name=dashboard_name(owner.name, pulumi.get_stack()),
            dashboard_body=body,
            opts=owner.child,
        )
    return alarm_topic_arn


def alarmed_queues(made: Made) -> dict[str, pulumi.Output[str]]:
    """The name of every dead-letter and poison queue by role, the component's own and the user's (an alarm needs
    only the queue's name, so one on a queue the component does not own works the same); not the due queue, the
    target, where messages are the point."""
    owned = {role: queue.name for role, queue in made.queues.items() if role != "due"}
    return {**owned, **made.given_queue_names}


def build_alarm_topic(ctx: BuildContext) -> aws.sns.Topic:
    """An SNS topic encrypted with a key of its own whose policy lets CloudWatch publish to it (the AWS-managed
    alias/aws/sns key cannot: alarms to a topic encrypted with it never arrive)."""
    owner = ctx.owner
    key = aws.kms.Key(
        f"{owner.name}-alarms-key",
        description=f"Encrypts the alarm topic of scheduled table {owner.name}; CloudWatch may use it",
        enable_key_rotation=True,
        policy=ctx.home_arn.apply(policies.alarm_topic_key_policy),
        tags=dict(owner.tags),
        opts=owner.child,
    )
    return aws.sns.Topic(f"{owner.name}-alarms", kms_master_key_id=key.arn, tags=dict(owner.tags), opts=owner.child)


def build_alarm(
    owner: Owner, suffix: str, spec: pulumi.Output[AlarmSpec], topic: pulumi.Input[str] | None
) -> aws.cloudwatch.MetricAlarm:
    actions = [topic] if topic is not None else []
    return aws.cloudwatch.MetricAlarm(
        f"{owner.name}-{suffix}-alarm",
        alarm_description=spec.apply(lambda s: s.description),
        namespace=spec.apply(lambda s: s.namespace),
        metric_name=spec.apply(lambda s: s.metric),
        dimensions=spec.apply(lambda s: s.dimensions),
        statistic=spec.apply(lambda s: s.statistic),
        period=spec.apply(lambda s: s.period),
        evaluation_periods=spec.apply(lambda s: s.evaluation_periods),
        threshold=spec.apply(lambda s: s.threshold),
        comparison_operator=spec.apply(lambda s: s.comparison),
        treat_missing_data="notBreaching",
        alarm_actions=actions,
        ok_actions=actions,
        tags=dict(owner.tags),
        opts=owner.child,
    )
