"""The provider form of ScheduledTableArgs: what TypeScript, YAML, Go and C# programs pass (camelCase in
the package schema). Generated from ScheduledTableArgs, OPTION_DOCS and the target classes by
`python -m components.provider`; do not edit (tests/provider fails while it is stale). No
`from __future__ import annotations`: Pulumi's schema analyzer reads these annotations."""

from enum import StrEnum
from typing import Required, TypedDict

import pulumi


class Mode(StrEnum):
    """The values of `mode`."""

    Eventbridge = "eventbridge"
    Ttl = "ttl"
    Polling = "polling"
    Aggregate = "aggregate"


class KeyType(StrEnum):
    """The values of `partitionKeyType` and `sortKeyType`."""

    S = "S"
    N = "N"
    B = "B"


class BillingMode(StrEnum):
    """The values of `billingMode`."""

    PayPerRequest = "PAY_PER_REQUEST"
    Provisioned = "PROVISIONED"


class LambdaArchitecture(StrEnum):
    """The values of `lambdaArchitecture` and `architecture`."""

    Arm64 = "arm64"
    X86_64 = "x86_64"


class LambdaRuntime(StrEnum):
    """The values of `lambdaRuntime`."""

    Python3_11 = "python3.11"
    Python3_12 = "python3.12"
    Python3_13 = "python3.13"
    Python3_14 = "python3.14"


class LogLevel(StrEnum):
    """The values of `logLevel`."""

    Debug = "DEBUG"
    Info = "INFO"
    Warning = "WARNING"
    Error = "ERROR"


class Tracing(StrEnum):
    """The values of `tracing`."""

    PassThrough = "PassThrough"
    Active = "Active"


class StartingPosition(StrEnum):
    """The values of `startingPosition`."""

    TrimHorizon = "TRIM_HORIZON"
    Latest = "LATEST"


class Precision(StrEnum):
    """The values of `precision`."""

    Minute = "minute"
    Second = "second"


class OnDone(StrEnum):
    """The values of `onDone`."""

    Mark = "mark"
    Delete = "delete"


class Aggregation(StrEnum):
    """The values of `aggregation`."""

    Sum = "sum"
    Count = "count"


class OnChange(StrEnum):
    """The values of `onChange`."""

    Ignore = "ignore"
    Adjust = "adjust"


class TargetKind(StrEnum):
    """The values of `kind`."""

    Queue = "queue"
    Function = "function"
    StateMachine = "stateMachine"
    Topic = "topic"
    EventBus = "eventBus"
    Email = "email"


class Target(TypedDict, total=False):
    """What receives the due event: a `kind` and that kind's fields; the others are refused."""

    kind: Required[TargetKind]
    """What receives the due event. Required."""
    arn: pulumi.Input[str]
    (
        "The ARN of the queue, function, state machine, topic or event bus (its `arn` output). Only for `queue`, "
        "`function`, `stateMachine`, `topic`, `eventBus`. Required for every kind that has one."
    )
    max_message_bytes: int
    (
        "The largest message the queue accepts, 1024-1048576 (its `maxMessageSize`); due events larger than this are "
        "sent without the item (`itemTrimmed`). Only for `queue`. Default: `262144`."
    )
    kms_key_arn: pulumi.Input[str] | None
    (
        "The customer-managed KMS key encrypting the target, if any: whoever sends to it gets `kms:GenerateDataKey` "
        "and `kms:Decrypt` on it. Only for `queue`, `stateMachine`, `topic`. Default: not set."
    )
    message_group_attribute: str | None
    (
        "FIFO queues: the item attribute whose value is the message group (an item without it keeps its own group); "
        "not set: one group per item. Only for `queue`. Default: not set."
    )
    message_group_id: str | None
    (
        "FIFO queues: put every message in this one group (not with `messageGroupAttribute`). Only for `queue`. "
        "Default: not set."
    )
    content_based_deduplication: bool
    (
        "FIFO queues: the queue has content-based deduplication on, which `eventbridge` mode requires (Scheduler sets "
        "no deduplication id). Only for `queue`. Default: `false`."
    )
    detail_type: str
    """The events' `detail-type`, for your rules to match. Only for `eventBus`. Default: `"scheduled-table.due"`."""
    source: str
    (
        "The events' `source` (not starting `aws.`), for your rules to match. Only for `eventBus`. Default: "
        '`"scheduled-table"`.'
    )
    sender: str
    (
        "A verified SES identity to send from, bare or with a display name (`Reminders <reminders@example.com>`); IAM "
        "allows sending only from that address. Only for `email`."
    )
    recipient_attribute: str
    """The item attribute holding the recipient's address. Only for `email`. Default: `"email"`."""
    subject: str
    (
        "The subject, a template: `{attribute}` inserts an item attribute, `{{` and `}}` are literal braces. Only for "
        '`email`. Default: `"Reminder"`.'
    )
    body: str
    """The plain-text body, a template like `subject`. Only for `email`. Default: `"This is your reminder."`."""
    configuration_set: str | None
    (
        "The SES configuration set to send with, by name (the sender's default one, if its identity has one): whoever "
        "sends is also allowed `ses:SendEmail` on it. Only for `email`. Default: not set."
    )


class ExistingTable(TypedDict, total=False):
    """A DynamoDB table you already have, for ScheduledTable to act on."""

    name: Required[pulumi.Input[str]]
    """The table's name. Required."""
    stream_arn: pulumi.Input[str] | None
    (
        "The table's latest stream ARN, view type `NEW_AND_OLD_IMAGES`; not set: the component looks the table up by "
        "name when it deploys and checks what its mode needs. Default: not set."
    )


class VpcConfig(TypedDict, total=False):
    """The VPC a function runs in: its subnets and security groups."""

    subnet_ids: Required[list[pulumi.Input[str]]]
    """The subnets' ids, 1-16, each with a route to DynamoDB, SQS, Scheduler and the target. Required."""
    security_group_ids: Required[list[pulumi.Input[str]]]
    """The security groups' ids, 1-5. Required."""


class FunctionOverrides(TypedDict, total=False):
    """One function's settings that differ from the component-wide ones."""

    memory_mb: int | None
    """This function's memory, 128-10240 (over `lambdaMemoryMb`). Default: not set."""
    reserved_concurrency: int | None
    (
        "Executions reserved for (and the most allowed to) this function; not 0 for a stream consumer (it would stop "
        "its stream), none for `releaser` (SQS throttling would send due events to the target DLQ); not set: no "
        "reservation. Default: not set."
    )
    vpc: VpcConfig | None
    (
        "Run this function in your VPC (its role then gets the ENI actions of AWSLambdaVPCAccessExecutionRole). "
        "Default: not set."
    )
    layers: list[pulumi.Input[str]]
    """Layer version ARNs (a LayerVersion's `arn` output), at most 5. Default: `[]`."""
    log_retention_days: int | None
    """This function's log group's retention, a CloudWatch period (over `logRetentionDays`). Default: not set."""
    architecture: LambdaArchitecture | None
    """`arm64` or `x86_64` (over `lambdaArchitecture`). Default: not set."""


class ExistingQueue(TypedDict, total=False):
    """A standard SQS queue of yours, used instead of one the component would make."""

    queue_arn: Required[pulumi.Input[str]]
    """The queue's ARN (its `arn` output, not the Queue itself nor its URL); a standard queue. Required."""
    kms_key_arn: pulumi.Input[str] | None
    (
        "The customer-managed KMS key that encrypts the queue, if any; every writer (the functions' roles, Scheduler's "
        "role) is granted kms:GenerateDataKey and kms:Decrypt on it. Its key policy is yours: it must let the "
        "account's IAM policies grant that (the default key policy does). Default: not set."
    )
    max_message_bytes: int
    (
        "The queue's `maxMessageSize`, 1024-1048576: a parked record larger than this is sent with its keys, a note "
        "and as much of itself as fits; at least 8192 for the poison queue and a target DLQ, 1048576 for a target DLQ "
        "in `polling` mode or at `precision` `second`. Default: `262144`."
    )


class ScheduledTableInputs(TypedDict, total=False):
    """ScheduledTableArgs as the provider takes it (camelCase in the schema); ScheduledTable also accepts it."""

    mode: Required[Mode]
    """`eventbridge`, `ttl`, `polling` or `aggregate`. Required."""
    existing_table: ExistingTable | None
    (
        "A table you already have (`{name, streamArn}`, or `{name}` to have it looked up when deploying; its stream "
        "on, view type `NEW_AND_OLD_IMAGES`): act on it instead of creating one; refuses the table-shaping options "
        "(billing, capacities, PITR, encryption, deletion protection, key types). Default: not set."
    )
    partition_key: str
    """The table's partition key attribute. Default: `"PK"`."""
    partition_key_type: KeyType
    """Key types `S`, `N`, `B`. Default: `"S"`."""
    sort_key: str | None
    """The table's sort key attribute; `"none"` for a table without one. Default: `"SK"`."""
    sort_key_type: KeyType
    """Key types `S`, `N`, `B`. Default: `"S"`."""
    time_attribute: str
    (
        "ISO-8601 string or epoch seconds; in `ttl` mode epoch seconds only (TTL's rule); not a key attribute. "
        'Default: `"dueAt"`.'
    )
    billing_mode: BillingMode
    """`PROVISIONED` requires `readCapacity` and `writeCapacity`. Default: `"PAY_PER_REQUEST"`."""
    read_capacity: int | None
    """Only with `PROVISIONED`. Default: not set."""
    write_capacity: int | None
    """Only with `PROVISIONED`. Default: not set."""
    point_in_time_recovery: bool
    """Continuous backups of the table and the ledger. Default: `true`."""
    server_side_encryption: bool
    """AWS-managed KMS key unless `kmsKeyArn`. Default: `true`."""
    kms_key_arn: pulumi.Input[str] | None
    (
        "Customer key for the table (and ledger), and for what holds its items whole: the queues the component makes "
        "to park them (poison, DLQs, release; not with a table given by stream ARN) and each schedule's payload "
        "(`KmsKeyArn`); every role that reads or writes the table, its stream or the ledger (each Lambda, and "
        "Scheduler in precise `ttl` mode) gets `kms:Decrypt`, `kms:Encrypt`, `kms:GenerateDataKey` on it only through "
        "DynamoDB (`kms:ViaService`), the queues' writers and readers through SQS, the scheduling function through "
        "Scheduler, and Scheduler's role `kms:Decrypt` of its group's schedules; the key's policy must let the "
        "account's IAM policies grant that (the default key policy does); the key's ARN (plain or an Output, checked "
        "when it resolves; not an alias or a key id: IAM grants `kms:` actions on the key's ARN only). Default: not "
        "set."
    )
    deletion_protection: bool
    (
        "Of the table and the ledger (with `existingTable`: the ledger's only, the one table the component then "
        "makes); turn off before `pulumi destroy`. Default: `true`."
    )
    tags: dict[str, str]
    """Applied to every taggable resource, plus `scheduled-table:component`. Default: `{}`."""
    target: Target | None
    (
        'What receives the due event: `{kind, ...}` with that kind\'s fields (`{kind: "queue", arn: queue.arn}`); not '
        "set: a due queue the component creates (exported as `dueQueueUrl`). Default: not set."
    )
    lambda_memory_mb: int
    (
        "128-10240; CPU comes with memory (1,024 MB is about 0.58 vCPU), and CPU-bound work costs the same per record "
        "at any size, so the default runs about 4x faster than 256 MB at the same cost. Default: `1024`."
    )
    lambda_timeout_seconds: int
    """1-900; at least 10 with `precision='second'`. Default: `60`."""
    lambda_architecture: LambdaArchitecture
    """Or `x86_64`. Default: `"arm64"`."""
    lambda_runtime: LambdaRuntime
    (
        "`python3.11`, `python3.12`, `python3.13`, `python3.14`; Lambda deprecates `python3.11` on 2027-06-30 and "
        'blocks updating functions on it from 2027-08-31. Default: `"python3.12"`.'
    )
    lambda_bytecode: bool
    (
        "Ship the handlers' compiled bytecode beside their source when the Python running `pulumi up` is the runtime's "
        "(CPython 3.12 for `python3.12`), so a cold start does not compile them; the archive then depends on that "
        "Python's minor version (another one uploads the source alone: a change to every function). Off: the source "
        "alone, the same archive from any Python; see Deploying. Default: `true`."
    )
    log_retention_days: int
    """An explicit log group per function. Default: `30`."""
    log_level: LogLevel
    (
        "JSON lines: one summary per batch at `INFO`, one per action at `DEBUG`; items only at `DEBUG`. Default: "
        '`"INFO"`.'
    )
    max_workers: int
    """Concurrent items per batch (Scheduler calls are network round trips). Default: `16`."""
    tracing: Tracing
    (
        "X-Ray on every function: `PassThrough` or `Active` (adds `xray:PutTraceSegments` and "
        '`xray:PutTelemetryRecords`, which IAM grants only on `*`). Default: `"PassThrough"`.'
    )
    function_overrides: dict[str, FunctionOverrides]
    (
        "Per function, by role: `{role: {memoryMb, reservedConcurrency, vpc: {subnetIds, securityGroupIds}, layers, "
        "logRetentionDays, architecture}}`, each winning over the component-wide setting for that function only. "
        "Roles: `scheduler`, and `releaser` with `precision` `second` (`eventbridge`), `executor` (`ttl`), `assigner` "
        "and `processor` (`polling`), `aggregator` (`aggregate`), `backfill` (with `backfillFunction` or "
        "`reconcileEvery`); another role is refused. A VPC adds the ENI actions of AWSLambdaVPCAccessExecutionRole to "
        "that function's role (IAM grants them on `*` only); its subnets need a route to DynamoDB, SQS, Scheduler and "
        "the target. Reserved concurrency 0 is refused for the stream consumers (it would stop the stream), and any "
        "for `releaser` (throttled SQS batches would send due events to the target DLQ). Default: `{}`."
    )
    batch_size: int
    """1-10000. Default: `100`."""
    maximum_batching_window_seconds: int
    """0-300. Default: `1`."""
    starting_position: StartingPosition
    """Nothing written before the mapping exists is missed. Default: `"TRIM_HORIZON"`."""
    maximum_retry_attempts: int
    """Finite: `-1` (forever) is refused, it lets one record block a shard. Default: `10`."""
    maximum_record_age_seconds: int
    """Finite, 60-604800. Default: `3600`."""
    bisect_on_error: bool
    """Split a failing batch to isolate the record that fails. Default: `true`."""
    parallelization_factor: int
    """1-10; per-item order holds at any value. Default: `1`."""
    schedule_retry_attempts: int
    """`eventbridge`, and `ttl` with `precise`: Scheduler's retries of the target, 0-185. Default: `185`."""
    schedule_max_event_age_seconds: int
    """`eventbridge`, and `ttl` with `precise`: 60-86400. Default: `86400`."""
    offsets: list[int]
    (
        "`eventbridge`: seconds from the due time, one occurrence and schedule each (`[-86400, -3600, 0]`); the due "
        "event's `offsetSeconds` says which; at most 10, within a year. Default: `[0]`."
    )
    time_zone_attribute: str | None
    (
        "`eventbridge`: the item attribute holding an IANA zone (`Europe/London`) for its recurrence and for due times "
        "written without an offset (`2026-03-30T09:00:00`); not set, or an item without it: UTC. Default: not set."
    )
    recurrence_start_attribute: str
    (
        "`eventbridge`: a recurring item's first possible firing (ISO-8601 or epoch seconds), if it has this "
        'attribute. Default: `"recurrenceStart"`.'
    )
    recurrence_end_attribute: str
    (
        "`eventbridge`: a recurring item's last possible firing; its schedule is deleted once this has passed. "
        'Default: `"recurrenceEnd"`.'
    )
    precision: Precision
    (
        "`eventbridge`: `minute` (within the minute after the due time) or `second` (at the due second, never before: "
        "a schedule in the minute before hands each due event to an SQS release queue that holds it until its second; "
        'one-time due times only, recurring items stay on the minute); see "Second precision". Default: `"minute"`.'
    )
    precise: bool
    """`ttl` mode only: a delete schedule per item, so actions are on time; TTL stays the fallback. Default: `false`."""
    repeat_attribute: str
    """`ttl` mode: seconds between occurrences; items without it fire once. Default: `"repeatEvery"`."""
    repeat_until_attribute: str
    """`ttl` mode: no occurrence after this time. Default: `"repeatUntil"`."""
    occurrence_attribute: str
    """`ttl` mode: counts firings of a repeating item. Default: `"occurrence"`."""
    idempotency_window_seconds: int
    (
        "Every mode: how long the ledger remembers an occurrence or record, 86400-2592000 (longer than the stream's 24 "
        "h, so no redelivery outlives it). Default: `172800`."
    )
    shards: int
    (
        "`polling` mode: partitions of the due index, 1-100; lowered, the shards above keep draining until empty. "
        "Default: `8`."
    )
    shard_groups: int
    (
        "`polling` mode: processor invocations a tick, 1 to `shards`; 1 takes every shard in one invocation, more fan "
        "out: the rule's invocation invokes the processor once per group of shards with something due, each with its "
        "own worker pool (for herds: see Performance). Default: `1`."
    )
    poll_interval_minutes: int
    (
        "`polling` mode: how often the rule ticks, 1-1440; a tick that cannot reach the processor is dropped after one "
        "interval (at most 6 h, Lambda's maximum event age), the next one takes over its work. Default: `1`."
    )
    on_done: OnDone
    """`polling` mode: keep a done item marked `DONE`, or `"delete"` it. Default: `"mark"`."""
    delay_attribute: str
    """`polling` mode: an item without a time runs this many seconds after it was written. Default: `"delaySeconds"`."""
    default_delay_seconds: int | None
    """`polling` mode: the delay for items with neither; not set sends them to the poison queue. Default: not set."""
    max_attempts: int
    """`polling` mode: dispatch attempts before the target DLQ, 1-100. Default: `5`."""
    retry_backoff_seconds: int
    """`polling` mode: first retry delay, doubled each attempt. Default: `60`."""
    existing_poison_queue: ExistingQueue | None
    (
        "The poison queue: records and items that can never succeed, each with its reason (the stream consumers, the "
        "release function, the polling processor and the backfill function send there): `{queueArn, kmsKeyArn, "
        "maxMessageBytes}`, instead of the queue the component makes, which it then does not make. A standard queue "
        "(FIFO is refused: the handlers park without a message group, and neither Lambda's on-failure destination nor "
        "Scheduler's DLQ may be FIFO) in the stack's account and Region (checked when the ARN is known); the component "
        "grants its writers sqs:SendMessage on it (and the KMS key's use) and alarms on it. Default: not set."
    )
    existing_stream_dlq: ExistingQueue | None
    (
        "The stream DLQ: the stream mapping's on-failure destination (Lambda sends a record of each batch it gave up "
        "on, with the consumer's role): `{queueArn, kmsKeyArn, maxMessageBytes}`, instead of the queue the component "
        "makes, which it then does not make. A standard queue (FIFO is refused: the handlers park without a message "
        "group, and neither Lambda's on-failure destination nor Scheduler's DLQ may be FIFO) in the stack's account "
        "and Region (checked when the ARN is known); the component grants its writers sqs:SendMessage on it (and the "
        "KMS key's use) and alarms on it. Default: not set."
    )
    existing_target_dlq: ExistingQueue | None
    (
        "The target DLQ: Scheduler's dead-letter queue (`eventbridge`, precise `ttl`), the release function's and the "
        "polling processor's (`polling`) for due events the target refused: `{queueArn, kmsKeyArn, maxMessageBytes}`, "
        "instead of the queue the component makes, which it then does not make. A standard queue (FIFO is refused: the "
        "handlers park without a message group, and neither Lambda's on-failure destination nor Scheduler's DLQ may be "
        "FIFO) in the stack's account and Region (checked when the ARN is known); the component grants its writers "
        "sqs:SendMessage on it (and the KMS key's use) and alarms on it. Default: not set."
    )
    alarms: bool
    (
        "CloudWatch alarms: any message in a DLQ or poison queue, any function error, a stream consumer's iterator "
        "age. Default: `true`."
    )
    alarm_topic_arn: pulumi.Input[str] | None
    (
        "SNS topic the alarms notify (and notify again when they clear): its ARN or the topic's `arn` output (checked "
        "when it resolves). Default: not set."
    )
    create_alarm_topic: bool
    (
        "Create `{name}-alarms` for them instead, encrypted with a KMS key of its own (rotation on; its policy lets "
        "the account administer it and CloudWatch use it for this account only: the AWS-managed `alias/aws/sns` key "
        "cannot let CloudWatch publish, so alarms to a topic encrypted with it never arrive); exported as "
        "`alarmTopicArn`. A topic of your own that is encrypted needs a key policy allowing `cloudwatch.amazonaws.com` "
        "`kms:Decrypt` and `kms:GenerateDataKey*`. Default: `false`."
    )
    iterator_age_alarm_seconds: int
    """Iterator age that counts as falling behind, 60-86400. Default: `300`."""
    dashboard: bool
    (
        "One CloudWatch dashboard per table, named `{name}-{stack}-scheduled-table` (two stacks never share one): "
        "records, actions, failures, backlog, invocations, errors, DLQ depths, iterator age. Default: `true`."
    )
    backfill_function: bool
    (
        "Deploy `{name}-backfill`, the function `scheduled-table backfill/reconcile --in-lambda` fans a scan's "
        "segments out over (the consumer's permissions without the stream, plus Scan on the table); exported as "
        "`backfill_function_name`. Off: nothing is created (the commands still run from one machine). Default: "
        "`false`."
    )
    reconcile_every: str | None
    (
        "Run `reconcile` by itself on this EventBridge schedule expression (`rate(1 day)`, `cron(0 3 * * ? *)`), "
        "through `{name}-backfill` (made for it): one slice of up to 15 minutes per firing, the next firing going on "
        "from a checkpoint in the ledger. Each finished pass publishes what it found as CloudWatch metrics (namespace "
        "`ScheduledTable`, dimension `Table`: `ReconcileMissing`, `ReconcileStray`, `ReconcileWrongTotals`, "
        "`ReconcileRepaired`, `ReconcileDrift`), with an alarm when a pass finds drift (with `alarms`). Past "
        "occurrences the ledger no longer remembers are reported, never delivered. Off: nothing is created. Default: "
        "not set."
    )
    source_prefix: str
    """`aggregate` mode: partition-key prefix of the items that count. Default: `"SCORE"`."""
    value_attribute: str
    """`aggregate` mode: the number each source item adds. Default: `"Score"`."""
    group_from: str
    (
        "`aggregate` mode: the attribute whose value is the group (and the total's partition key); not the partition "
        "key, whose values all start with `sourcePrefix` (a group value that does is parked with the reason). Default: "
        '`"SK"`.'
    )
    total_sort_key: str
    """`aggregate` mode: the total's sort key. Default: `"TOTAL"`."""
    total_attribute: str
    """`aggregate` mode: the attribute holding the total. Default: `"totalScore"`."""
    aggregation: Aggregation
    """`aggregate` mode: `sum` or `count`. Default: `"sum"`."""
    on_change: OnChange
    (
        "`aggregate` mode: `ignore` (inserts only, as the article *Building event-driven workflows with DynamoDB "
        'Streams*) or `adjust` (also updates and deletes). Default: `"ignore"`.'
    )
