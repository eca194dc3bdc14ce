"""Alarms and the dashboard: `build_operations(ctx)` over everything the mode's build made (`Owner.made`)."""

from __future__ import annotations

from functools import partial

import pulumi
import pulumi_aws as aws

from . import arns, operations, policies
from .parts import BuildContext, Made, Owner


def build_operations(ctx: BuildContext) -> pulumi.Output[str] | None:
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
        specs: list[tuple[str, pulumi.Output[operations.AlarmSpec]]] = []
        for role, name in alarmed_queues(made).items():
            specs.append((f"{role}-not-empty", name.apply(partial(operations.queue_alarm, role))))
        for role, function in made.functions.items():
            specs.append((f"{role}-errors", function.name.apply(partial(operations.function_errors_alarm, role))))
        for role, function in made.stream_functions.items():
            age = partial(operations.iterator_age_alarm, role, seconds=a.iterator_age_alarm_seconds)
            specs.append((f"{role}-iterator-age", function.name.apply(age)))
        if a.reconcile_every is not None:
            specs.append(("reconcile-drift", ctx.table.name.apply(operations.reconcile_drift_alarm)))
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
            lambda v: operations.dashboard_body(
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
            dashboard_name=operations.dashboard_name(owner.name, pulumi.get_stack()),
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
    owner: Owner, suffix: str, spec: pulumi.Output[operations.AlarmSpec], topic: pulumi.Input[str] | None
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
