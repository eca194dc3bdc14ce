"""`polling` mode: a rule ticks -> processor takes due items from the sharded index; the assigner indexes what users
write (seed 002). The handler side is `handlers/polling/`."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from . import modes, policies
from .builders import (
    build_function,
    build_ledger,
    build_stream_consumer,
    build_target_dlq,
    handler_config,
    other_accounts_table,
    target_statements,
)
from .packaging import runtime_module
from .parts import BuildContext, ModeResult, flatten
from .runtime_config import Value


def build(ctx: BuildContext) -> ModeResult:
    """A rule ticks -> processor takes due items from the sharded index; the assigner indexes new items."""
    a = ctx.args
    pending = runtime_module("pending")
    target_dlq = build_target_dlq(ctx)
    # The assigner indexes an item and marks the record in the ledger in one transaction (once per record; on
    # another account's table one write after the other, reading the marker first); the processor holds each shard
    # it takes with a lease item there.
    ledger = build_ledger(ctx)
    config = handler_config(ctx, {Value.TARGET_DLQ_URL: target_dlq.url, Value.LEDGER_TABLE: ledger.name})
    done_actions = ["DeleteItem", "UpdateItem"] if a.on_done == "delete" else ["UpdateItem"]
    processor = build_function(
        ctx,
        role="processor",
        handler="polling.handler",
        extra_statements=pulumi.Output.all(
            target_statements(ctx, policies.direct_dispatch_statements),
            ctx.table.arn.apply(lambda arn: policies.index_query_statements(arn, pending.INDEX_NAME)),
            ctx.table.arn.apply(lambda arn: policies.table_item_statements(arn, ["BatchGetItem", *done_actions])),
            # A shard is held by one invocation at a time: a lease item put into the ledger and deleted again; the
            # highest shard count still in use is read and kept there too (shards above a lowered count drain).
            ledger.arn.apply(lambda arn: policies.table_item_statements(arn, ["DeleteItem", "GetItem", "PutItem"])),
        ).apply(flatten),
        config=config,
        stream=False,
        # Dead letters to the target DLQ; an item it cannot handle (a hand-written index attribute) to the poison queue.
        send_queues=[target_dlq, ctx.poison_queue],
    )
    if a.shard_groups > 1:
        # The fan-out invokes the processor itself: a policy of its own, attached to the processor's role after the
        # function exists (in the role's main policy the function's ARN would be a cycle: the function waits for it).
        aws.iam.RolePolicy(
            f"{ctx.owner.name}-processor-policy-fanout",
            role=processor.role.id,
            policy=processor.function.arn.apply(lambda arn: policies.document(policies.self_invoke_statements(arn))),
            opts=ctx.owner.child,
        )
    # A failed tick is retried by the next one (its items are still due); no async retries, and a record of
    # the failure in the target DLQ.
    aws.lambda_.FunctionEventInvokeConfig(
        f"{ctx.owner.name}-processor-invoke-config",
        function_name=processor.function.name,
        maximum_retry_attempts=0,
        maximum_event_age_in_seconds=processor_event_age_seconds(a.poll_interval_minutes),
        destination_config=aws.lambda_.FunctionEventInvokeConfigDestinationConfigArgs(
            on_failure=aws.lambda_.FunctionEventInvokeConfigDestinationConfigOnFailureArgs(destination=target_dlq.arn)
        ),
        opts=ctx.owner.child,
    )
    rule = aws.cloudwatch.EventRule(
        f"{ctx.owner.name}-tick",
        schedule_expression=tick_expression(a.poll_interval_minutes),
        description=f"scheduled-table polling tick for {ctx.owner.name}",
        tags=dict(ctx.owner.tags),
        opts=ctx.owner.child,
    )
    permission = aws.lambda_.Permission(
        f"{ctx.owner.name}-tick-permission",
        action="lambda:InvokeFunction",
        function=processor.function.name,
        principal="events.amazonaws.com",
        source_arn=rule.arn,
        opts=ctx.owner.child,
    )
    aws.cloudwatch.EventTarget(
        f"{ctx.owner.name}-tick-target",
        rule=rule.name,
        arn=processor.function.arn,
        opts=pulumi.ResourceOptions(parent=ctx.owner.parent, depends_on=[permission]),
    )
    assigner = build_stream_consumer(
        ctx,
        role="assigner",
        handler="polling_assign.handler",
        filters=modes.of(a).filters(a),
        extra_statements=pulumi.Output.all(
            ctx.table.arn.apply(lambda arn: policies.table_item_statements(arn, ["UpdateItem"])),
            pulumi.Output.all(ledger.arn, other_accounts_table(ctx)).apply(
                # on another account's table the marker is read first (no transaction holds both accounts' items)
                lambda v: policies.table_item_statements(v[0], ["GetItem", "PutItem"] if v[1] else ["PutItem"])
            ),
        ).apply(flatten),
        config=config,
    )
    return ModeResult(
        consumer=assigner,
        target_dlq_url=target_dlq.url,
        ledger_table_name=ledger.name,
        processor_function_name=processor.function.name,
        tick_rule_name=rule.name,
        tick_rule=rule,
    )


# FunctionEventInvokeConfig.MaximumEventAgeInSeconds accepts 60..21600.
MAX_EVENT_AGE_SECONDS = 21600


def processor_event_age_seconds(poll_interval_minutes: int) -> int:
    """How long a tick may wait for the processor: one interval (the next tick supersedes it), at most the six
    hours Lambda's async invoke config allows."""
    return min(60 * poll_interval_minutes, MAX_EVENT_AGE_SECONDS)


def tick_expression(minutes: int) -> str:
    """EventBridge's rate() wants the singular for one."""
    return "rate(1 minute)" if minutes == 1 else f"rate({minutes} minutes)"
