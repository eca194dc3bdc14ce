"""`eventbridge` mode: stream -> scheduling Lambda -> one Scheduler `at()` schedule per occurrence -> target (seed
000). The handler side is `handlers/eventbridge/`.

With `precision="second"` the schedules target the table's release queue instead, in the minute before each due
time, and a release function delivers each due event at its second (`handlers/st_core/release.py`)."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from . import modes, policies
from .builders import (
    build_function,
    build_ledger,
    build_scheduling,
    build_stream_consumer,
    build_target_dlq,
    handler_config,
    owned_queue,
    queue_encryption,
    target_statements,
)
from .packaging import constants
from .parts import BuildContext, Consumer, ModeResult, QueueRef, flatten
from .runtime_config import Value, lease_seconds, own_key_arn

# A release message that failed this many receives (a target failing for a while, a consumer crashing) goes to the
# target DLQ, where Scheduler also parks what it could not deliver.
RELEASE_MAX_RECEIVES = 5
# A release message lives at most ~130 s plus its retries; a day leaves room for an outage of the consumer.
RELEASE_RETENTION_SECONDS = 24 * 3600
# The release consumer takes a batch as soon as one message is visible (no batching window: that would be lateness).
RELEASE_BATCH_SIZE = 10


def build(ctx: BuildContext) -> ModeResult:
    """Stream -> scheduling Lambda -> one Scheduler `at()` schedule per item -> target (seed 000)."""
    a = ctx.args
    ledger = build_ledger(ctx)
    fire_statements = target_statements(ctx, policies.target_statements)
    target_dlq = release_queue = None
    values: dict[str, pulumi.Input[str]] = {Value.LEDGER_TABLE: ledger.name}
    if a.precision == "second":
        target_dlq = build_target_dlq(ctx)
        release_queue = _release_queue(ctx, target_dlq)
        # Scheduler sends every schedule's firings to the release queue (one-time occurrences and, from their next
        # change, recurring items' firings). The role keeps the target's statements: a recurring schedule made
        # before the table's precision became "second" still delivers to the target until its item next changes.
        fire_statements = pulumi.Output.all(fire_statements, release_queue.arn, own_key_arn(a)).apply(
            lambda v: v[0] + policies.queue_send_statements(v[1], v[2])
        )
        values.update(
            {
                Value.RELEASE_QUEUE_ARN: release_queue.arn,
                Value.RELEASE_QUEUE_URL: release_queue.url,
                Value.TARGET_DLQ_URL: target_dlq.url,
            }
        )
    scheduling = build_scheduling(ctx, fire_statements, target_dlq=target_dlq)
    values.update(scheduling.values)
    delivery = [
        target_statements(ctx, policies.direct_dispatch_statements),
        # Deliveries are claimed once per occurrence in the ledger; the item is read back before acting.
        ledger.arn.apply(policies.ledger_statements),
        ctx.table.arn.apply(lambda arn: policies.table_item_statements(arn, ["GetItem"])),
    ]
    # The scheduling function writes its batch's schedule markers with BatchWriteItem and reads its batch's items
    # back with BatchGetItem (GetItem for one the batch read left unsettled); the releaser does neither.
    markers = ledger.arn.apply(lambda arn: policies.ledger_statements(arn, batch_markers=True))
    items = ctx.table.arn.apply(lambda arn: policies.table_item_statements(arn, ["BatchGetItem", "GetItem"]))
    statements = [scheduling.consumer_statements, markers, delivery[0], items]
    if release_queue is not None:
        # Occurrences too close for a schedule go straight into the release queue.
        statements.append(
            pulumi.Output.all(release_queue.arn, own_key_arn(a)).apply(
                lambda v: policies.queue_send_statements(v[0], v[1])
            )
        )
    consumer = build_stream_consumer(
        ctx,
        role="scheduler",
        handler="eventbridge.handler",
        filters=modes.of(a).filters(a),
        extra_statements=pulumi.Output.all(*statements).apply(flatten),
        config=handler_config(ctx, values),
    )
    if release_queue is not None and target_dlq is not None:
        _releaser(ctx, release_queue, target_dlq, delivery, handler_config(ctx, values))
    return ModeResult(
        consumer=consumer,
        schedule_group_name=scheduling.group.name,
        target_dlq_url=scheduling.target_dlq.url,
        ledger_table_name=ledger.name,
    )


def _release_queue(ctx: BuildContext, target_dlq: QueueRef) -> aws.sqs.Queue:
    """Holds each due event until its second (per-message DelaySeconds); after `RELEASE_MAX_RECEIVES` failed
    receives a message goes to the target DLQ. Its visibility timeout outlasts the function's timeout (AWS requires
    at least that for an event source mapping) and equals the ledger's lease, so a retry finds a crashed run's claim
    expired. Not in the component's alarmed queues: messages wait here by design (the target DLQ is alarmed)."""
    a = ctx.args
    return aws.sqs.Queue(
        f"{ctx.owner.name}-release",
        **queue_encryption(own_key_arn(a)),
        max_message_size=constants.OWNED_QUEUE_MESSAGE_BYTES,
        message_retention_seconds=RELEASE_RETENTION_SECONDS,
        visibility_timeout_seconds=lease_seconds(a),
        redrive_policy=target_dlq.arn.apply(
            lambda arn: json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": RELEASE_MAX_RECEIVES})
        ),
        tags=dict(ctx.owner.tags),
        opts=ctx.owner.child,
    )


def _releaser(
    ctx: BuildContext,
    release_queue: aws.sqs.Queue,
    target_dlq: QueueRef,
    delivery: list[pulumi.Output[list[policies.Statement]]],
    config: pulumi.Output[str],
) -> Consumer:
    """The release function and its mapping on the release queue: it may consume that queue and send back to it
    (early messages), deliver to the target (claiming in the ledger, reading the item's due time), and park in the
    poison queue and the target DLQ; nothing else."""
    statements = pulumi.Output.all(*delivery, release_queue.arn.apply(policies.queue_consume_statements))
    consumer = build_function(
        ctx,
        role="releaser",
        handler="release.handler",
        extra_statements=statements.apply(flatten),
        config=config,
        stream=False,
        send_queues=[owned_queue(release_queue, own_key_arn(ctx.args)), ctx.poison_queue, target_dlq],
    )
    mapping = aws.lambda_.EventSourceMapping(
        f"{ctx.owner.name}-release-mapping",
        event_source_arn=release_queue.arn,
        function_name=consumer.function.arn,
        batch_size=RELEASE_BATCH_SIZE,
        maximum_batching_window_in_seconds=0,
        function_response_types=["ReportBatchItemFailures"],
        opts=pulumi.ResourceOptions(parent=ctx.owner.parent, depends_on=[consumer.policy]),
    )
    return Consumer(
        function=consumer.function,
        role=consumer.role,
        log_group=consumer.log_group,
        policy=consumer.policy,
        mapping=mapping,
    )
