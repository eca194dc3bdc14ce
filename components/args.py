"""ScheduledTableArgs: every option optional, its default here and only here, and bad combinations refused early.

Each rule raises ValueError naming the field and the fix, so `pulumi up` stops before anything is created.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

import pulumi

from . import modes, target_types
from .arns import kms_key_problem
from .checks import between, defaults, fail
from .existing import TABLE_OPTIONS, ExistingTable, existing_table_problem
from .modes.base import refuse_foreign
from .overrides import BACKFILL_ROLE, OVERRIDES_DOC, FunctionOverrides, from_mappings, overrides_problem
from .queues import (
    EXISTING_QUEUE_DOC,
    MAX_QUEUE_MESSAGE_BYTES,
    QUEUE_OPTIONS,
    ExistingQueue,
    existing_queue_problem,
    shared_queue_problem,
)
from .queues import from_mapping as queue_from_mapping
from .runtime_config import RELEASE_MIN_TIMEOUT_SECONDS
from .suggest import keyword_hints
from .targets import Target, is_target, resource_problem, scheduler_problem, topic_arn_problem
from .types import KeyType, LambdaArchitecture, Mode, ModeName

# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS = frozenset(
    {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}
)
# Lambda's Python runtimes still open to new functions. python3.11: Lambda deprecates it on 2027-06-30 and blocks
# function updates from 2027-08-31 (its runtimes page, as read on 2026-11-26).
LambdaRuntime = Literal["python3.11", "python3.12", "python3.13", "python3.14"]
LAMBDA_RUNTIMES = frozenset(get_args(LambdaRuntime))
TRACING_MODES = ("PassThrough", "Active")


@keyword_hints
@dataclass(frozen=True, kw_only=True)
class ScheduledTableArgs:
    """Everything a ScheduledTable can be told; every option but `mode` is optional, with a secure default, and a
    bad value or combination raises ValueError at construction naming the field and the fix."""

    mode: Mode | ModeName
    # Table: a new one by default; or one you have (its name and stream ARN), and then the component makes only
    # what acts on it (see components/existing.py for what each mode needs of that table)
    existing_table: ExistingTable | None = None
    partition_key: str = "PK"
    partition_key_type: KeyType = "S"
    sort_key: str | None = "SK"
    sort_key_type: KeyType = "S"
    # ISO-8601 or epoch seconds; in ttl mode epoch seconds only. DynamoDB TTL silently ignores anything else (a
    # string, epoch milliseconds, a value more than five years old): such an item never expires and never fires.
    # Only precise ttl mode sees it (on insert) and parks it in the poison queue with that reason.
    time_attribute: str = "dueAt"
    billing_mode: Literal["PAY_PER_REQUEST", "PROVISIONED"] = "PAY_PER_REQUEST"
    read_capacity: int | None = None
    write_capacity: int | None = None
    point_in_time_recovery: bool = True
    server_side_encryption: bool = True
    # A customer-managed key for the table and the ledger: every role that reads or writes them or the stream (each
    # Lambda; Scheduler, which deletes items, in precise ttl mode) gets kms:Decrypt, kms:Encrypt, kms:GenerateDataKey.
    kms_key_arn: pulumi.Input[str] | None = None
    deletion_protection: bool = True
    tags: dict[str, str] = field(default_factory=dict)
    # Target
    target: Target | None = None
    # Lambda
    # Lambda gives CPU in proportion to memory (one vCPU at 1,769 MB); the handlers are bound by the SDK's CPU per call,
    # so 1,024 MB runs a batch about 4x faster than 256 MB for the same cost per record (see README "Performance").
    lambda_memory_mb: int = 1024
    lambda_timeout_seconds: int = 60
    lambda_architecture: LambdaArchitecture = "arm64"
    lambda_runtime: LambdaRuntime = "python3.12"
    # Ship the handlers' bytecode when the deploying Python is lambda_runtime's (see components/packaging.py)
    lambda_bytecode: bool = True
    log_retention_days: int = 30
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    max_workers: int = 16
    # X-Ray: "PassThrough" (trace only requests that arrive traced) or "Active" (sample and trace every function;
    # adds xray:PutTraceSegments and xray:PutTelemetryRecords, which IAM only grants on "*")
    tracing: Literal["PassThrough", "Active"] = "PassThrough"
    # Per function role (components/overrides.py): memory, reserved concurrency, VPC, layers, log retention and
    # architecture of that function only, over the component-wide settings above
    function_overrides: dict[str, FunctionOverrides] = field(default_factory=dict)
    # Event source mapping
    batch_size: int = 100
    maximum_batching_window_seconds: int = 1
    starting_position: Literal["TRIM_HORIZON", "LATEST"] = "TRIM_HORIZON"
    maximum_retry_attempts: int = 10
    maximum_record_age_seconds: int = 3600
    bisect_on_error: bool = True
    parallelization_factor: int = 1
    # Scheduler (eventbridge mode)
    schedule_retry_attempts: int = 185
    schedule_max_event_age_seconds: int = 86400
    # eventbridge mode: one occurrence per offset, in seconds from the due time ([-86400, -3600, 0]: a day before, an
    # hour before, and at the time), each with its own schedule, moved and cancelled with the item
    offsets: list[int] = field(default_factory=lambda: [0])
    # eventbridge mode: the time attribute may also hold a Scheduler `rate(...)` or `cron(...)` expression (one
    # recurring schedule per item); these attributes give its IANA time zone (also read for due times written without
    # an offset; UTC when absent) and when it starts and ends
    time_zone_attribute: str | None = None
    recurrence_start_attribute: str = "recurrenceStart"
    recurrence_end_attribute: str = "recurrenceEnd"
    # eventbridge mode: "second" acts at the item's due second instead of within the minute after it (a schedule in
    # the minute before, into a release queue that holds each due event until its second; see README "Second
    # precision"); recurring items stay on Scheduler's minute
    precision: Literal["minute", "second"] = "minute"
    # TTL (ttl mode)
    precise: bool = False
    repeat_attribute: str = "repeatEvery"
    repeat_until_attribute: str = "repeatUntil"
    occurrence_attribute: str = "occurrence"
    # every mode: how long the idempotency ledger remembers an action or a stream record (48 h)
    idempotency_window_seconds: int = 172800
    # Polling (polling mode)
    shards: int = 8
    # polling mode: processor invocations a tick (1: one takes every shard; more: the rule's invocation invokes one
    # per group of shards with something due, for herds)
    shard_groups: int = 1
    poll_interval_minutes: int = 1
    on_done: Literal["mark", "delete"] = "mark"
    delay_attribute: str = "delaySeconds"
    default_delay_seconds: int | None = None
    max_attempts: int = 5
    retry_backoff_seconds: int = 60
    # Queues of your own (components/queues.py), each used instead of the one the component would make
    existing_poison_queue: ExistingQueue | None = None
    existing_stream_dlq: ExistingQueue | None = None
    existing_target_dlq: ExistingQueue | None = None
    # Operations
    alarms: bool = True
    # An SNS topic for the alarms. If it is encrypted, its KMS key's policy must let cloudwatch.amazonaws.com use
    # the key (kms:Decrypt, kms:GenerateDataKey*), or no alarm ever arrives; the AWS-managed alias/aws/sns key
    # cannot allow that. `create_alarm_topic` makes a topic with a key of its own that does
    # (policies.alarm_topic_key_policy shows the policy to give your own key).
    alarm_topic_arn: pulumi.Input[str] | None = None
    create_alarm_topic: bool = False
    iterator_age_alarm_seconds: int = 300
    dashboard: bool = True
    backfill_function: bool = False
    reconcile_every: str | None = None
    # Totals (aggregate mode); the defaults are seed 003's layout
    source_prefix: str = "SCORE"
    value_attribute: str = "Score"
    group_from: str = "SK"
    total_sort_key: str = "TOTAL"
    total_attribute: str = "totalScore"
    aggregation: Literal["sum", "count"] = "sum"
    on_change: Literal["ignore", "adjust"] = "ignore"

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", _mode(self.mode))
        object.__setattr__(self, "function_overrides", from_mappings(self.function_overrides))
        for option in QUEUE_OPTIONS:
            object.__setattr__(self, option, queue_from_mapping(option, getattr(self, option)))
        for rule in _RULES:
            rule(self)


def _mode(value: Mode | str) -> Mode | str:
    """A built-in mode as its `Mode` member; one registered from outside (components/modes/) by its name."""
    if value not in modes.names():
        choices = ", ".join(repr(name) for name in modes.names())
        raise ValueError(f"mode: {value!r} is not a mode; use one of {choices}")
    return Mode(value) if value in Mode.__members__.values() else str(value)


def _types(args: ScheduledTableArgs) -> None:
    """A value of the wrong type says so (a YAML `"true"` or `"10"` read as text, say), before any range check."""
    for name, default in _DEFAULTS.items():
        value = getattr(args, name)
        if value is None or value == default:
            continue
        if isinstance(default, bool) and not isinstance(value, bool):
            fail(name, f"expected true or false, got {value!r}", f"pass {name}=True or {name}=False")
        if isinstance(default, str) and not isinstance(value, str):
            fail(name, f"expected text, got {value!r}", f"pass {name} as a string, e.g. {default!r}")
        if isinstance(default, dict) and not isinstance(value, dict):
            fail(name, f"expected a mapping, got {value!r}", f"pass {name} as a dict of strings")


def _keys(args: ScheduledTableArgs) -> None:
    if not args.partition_key:
        fail("partition_key", "must not be empty", "name the table's partition key attribute, e.g. 'PK'")
    if args.sort_key == "":
        fail("sort_key", "must not be empty", "name the sort key attribute, or pass None for a table without one")
    if args.sort_key is not None and args.sort_key == args.partition_key:
        fail("sort_key", f"is the same attribute as partition_key ({args.partition_key!r})", "use another name")
    for name in ("partition_key_type", "sort_key_type"):
        if getattr(args, name) not in ("S", "N", "B"):
            fail(name, f"{getattr(args, name)!r} is not a key type", "use 'S' (string), 'N' (number) or 'B' (binary)")
    if not args.time_attribute:
        fail("time_attribute", "must not be empty", "name the attribute that holds the due time, e.g. 'dueAt'")
    if args.time_attribute in (args.partition_key, args.sort_key):
        fail("time_attribute", f"{args.time_attribute!r} is a key attribute", "keep the due time in its own attribute")


def _existing(args: ScheduledTableArgs) -> None:
    table = args.existing_table
    if table is None:
        return
    if not isinstance(table, ExistingTable):
        fail(
            "existing_table", f"{type(table).__name__} is not an ExistingTable", "pass ExistingTable(name, stream_arn)"
        )
    # Outputs are checked once they resolve, with the same message (ScheduledTable._given_table).
    problem = (
        resource_problem("existing_table.name", table.name, "name")
        or resource_problem("existing_table.stream_arn", table.stream_arn, "stream_arn")
        or existing_table_problem(table.name, table.stream_arn)
    )
    if problem:
        raise ValueError(problem)
    for name in TABLE_OPTIONS:
        if getattr(args, name) != _DEFAULTS[name]:
            fail(
                name,
                "only shapes a table the component creates, and existing_table is set",
                "remove it: the existing table keeps its own settings",
            )


def _billing(args: ScheduledTableArgs) -> None:
    if args.billing_mode not in ("PAY_PER_REQUEST", "PROVISIONED"):
        fail("billing_mode", f"{args.billing_mode!r} is not a billing mode", "use 'PAY_PER_REQUEST' or 'PROVISIONED'")
    capacities = (args.read_capacity, args.write_capacity)
    if args.billing_mode == "PROVISIONED":
        if any(c is None or c < 1 for c in capacities):
            fail("read_capacity", "PROVISIONED billing needs read_capacity and write_capacity", "set both to >= 1")
    elif any(c is not None for c in capacities):
        fail("read_capacity", "capacities only apply to PROVISIONED billing", "remove them or set billing_mode")


def _encryption(args: ScheduledTableArgs) -> None:
    if args.kms_key_arn is not None and not args.server_side_encryption:
        fail("kms_key_arn", "a KMS key needs server_side_encryption=True", "remove kms_key_arn or enable encryption")
    # An Output is checked when it resolves, with the same message (ScheduledTable._checked_keys).
    problem = resource_problem("kms_key_arn", args.kms_key_arn)
    if isinstance(args.kms_key_arn, str):
        problem = kms_key_problem("kms_key_arn", args.kms_key_arn)
    if problem:
        raise ValueError(problem)


def _target(args: ScheduledTableArgs) -> None:
    if args.target is not None and not is_target(args.target):
        names = ", ".join(t.__name__ for t in target_types.classes())
        fail("target", f"{type(args.target).__name__} is not a target", f"pass one of {names}, or None")
    problem = scheduler_problem(args.target, scheduler_delivers=modes.of(args).scheduler_delivers(args))
    if problem:
        raise ValueError(problem)


def _lambda(args: ScheduledTableArgs) -> None:
    between(args, "lambda_memory_mb", 128, 10240)
    between(args, "lambda_timeout_seconds", 1, 900)
    if args.lambda_architecture not in ("arm64", "x86_64"):
        fail("lambda_architecture", f"{args.lambda_architecture!r} is not supported", "use 'arm64' or 'x86_64'")
    if args.lambda_runtime not in LAMBDA_RUNTIMES:
        fail("lambda_runtime", f"{args.lambda_runtime!r} is not supported", f"use one of {sorted(LAMBDA_RUNTIMES)}")
    days = args.log_retention_days
    if not isinstance(days, int | float) or isinstance(days, bool) or days not in LOG_RETENTION_DAYS:
        fail("log_retention_days", f"{args.log_retention_days!r} is not a CloudWatch period", "use e.g. 7, 30 or 90")
    if args.log_level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        fail("log_level", f"{args.log_level!r} is not a level", "use 'DEBUG', 'INFO', 'WARNING' or 'ERROR'")
    between(args, "max_workers", 1, 64)
    if args.tracing not in TRACING_MODES:
        fail("tracing", f"{args.tracing!r} is not an X-Ray mode", "use 'PassThrough' (the default) or 'Active'")
    backfill = args.backfill_function or args.reconcile_every is not None
    roles = modes.of(args).function_roles(args) + ((BACKFILL_ROLE,) if backfill else ())
    problem = overrides_problem(
        args.function_overrides, mode=str(args.mode), roles=roles, retention_days=LOG_RETENTION_DAYS
    )
    if problem:
        raise ValueError(problem)


def _stream(args: ScheduledTableArgs) -> None:
    between(args, "batch_size", 1, 10000)
    between(args, "maximum_batching_window_seconds", 0, 300)
    if args.starting_position not in ("TRIM_HORIZON", "LATEST"):
        fail("starting_position", f"{args.starting_position!r} is not valid", "use 'TRIM_HORIZON' or 'LATEST'")
    between(args, "maximum_retry_attempts", 0, 10000, " (-1, retry forever, would let one record block its shard)")
    between(args, "maximum_record_age_seconds", 60, 604800, " (-1, never expire, would block the shard)")
    between(args, "parallelization_factor", 1, 10)


def _mode_rules(args: ScheduledTableArgs) -> None:
    """Options of another mode are refused; then the mode's own rules (components/modes/)."""
    mode = modes.of(args)
    refuse_foreign(args, mode, modes.every())
    mode.check(args)


def _idempotency(args: ScheduledTableArgs) -> None:
    # Every mode keeps a ledger. Stream records live 24 h: a shorter memory would let a late redelivery act again.
    between(
        args, "idempotency_window_seconds", 86400, 2592000, " (at least the stream's 24 h retention; 48 h by default)"
    )


def _queues(args: ScheduledTableArgs) -> None:
    mode = modes.of(args)
    has_target_dlq = mode.has_target_dlq(args)
    for option in QUEUE_OPTIONS:
        given = getattr(args, option)
        problem = existing_queue_problem(option, given, has_target_dlq=has_target_dlq, mode=str(args.mode))
        if problem:
            raise ValueError(problem)
    problem = shared_queue_problem({option: getattr(args, option) for option in QUEUE_OPTIONS})
    if problem:
        raise ValueError(problem)
    dlq = args.existing_target_dlq
    # What reaches the target DLQ whole, and may be up to 1 MiB: the polling processor's dead letters (the item,
    # trimmed to fit 1 MiB only) and, at second precision, release messages (from the component's 1 MiB release
    # queue, by the release function and by the release queue's redrive).
    whole = mode.whole_dead_letters(args)
    if whole and dlq is not None and dlq.max_message_bytes < MAX_QUEUE_MESSAGE_BYTES:
        fail(
            "existing_target_dlq.max_message_bytes",
            f"{dlq.max_message_bytes} is less than 1 MiB, and {whole}",
            f"raise the queue's maxMessageSize to {MAX_QUEUE_MESSAGE_BYTES} (max_message_size on aws.sqs.Queue) and "
            f"set max_message_bytes={MAX_QUEUE_MESSAGE_BYTES}",
        )


def _operations(args: ScheduledTableArgs) -> None:
    if args.alarm_topic_arn is not None and args.create_alarm_topic:
        fail("create_alarm_topic", "conflicts with alarm_topic_arn", "give a topic or ask for one, not both")
    if (args.alarm_topic_arn is not None or args.create_alarm_topic) and not args.alarms:
        fail("alarms", "is off, so an alarm topic would never be used", "turn alarms on or remove the topic")
    # An Output (a topic made in the same program) is checked when it resolves, with the same message.
    topic = args.alarm_topic_arn
    problem = topic_arn_problem("alarm_topic_arn", topic) if isinstance(topic, str) else None
    problem = problem or resource_problem("alarm_topic_arn", topic)
    if problem:
        raise ValueError(problem)
    between(args, "iterator_age_alarm_seconds", 60, 86400)


# EventBridge's schedule expressions (a rule's): rate(1 hour), rate(6 hours), cron with six fields.
RECONCILE_EVERY = re.compile(
    r"rate\((1 (minute|hour|day)|([2-9]|[1-9][0-9]+) (minutes|hours|days))\)" r"|cron\(\S+( \S+){5}\)"
)


def _reconcile(args: ScheduledTableArgs) -> None:
    value = args.reconcile_every
    if value is None:
        return
    if not isinstance(value, str) or not RECONCILE_EVERY.fullmatch(value):
        fail(
            "reconcile_every",
            f"{value!r} is not an EventBridge schedule expression",
            "give one such as 'rate(1 day)', 'rate(6 hours)' or 'cron(0 3 * * ? *)'",
        )


def _tags(args: ScheduledTableArgs) -> None:
    if not isinstance(args.tags, Mapping):
        fail("tags", f"{args.tags!r} is not a mapping of tag names to values", "pass a dict, e.g. {'team': 'ops'}")
    for key, value in args.tags.items():
        if not isinstance(key, str) or not isinstance(value, str) or not key or key.startswith("aws:"):
            fail("tags", f"{key!r}: {value!r} is not a valid tag", "use non-empty string keys not starting 'aws:'")


def _environment(args: ScheduledTableArgs) -> None:
    """Lambda refuses an environment over 4 KB: check the config document at its longest (what is not known yet
    counted at its longest realistic length) now, rather than at `pulumi up`."""
    from .runtime_config import estimated_document, function_environment

    function_environment(args, estimated_document(args), estimated=True)


_RULES = (
    _types,
    _existing,
    _keys,
    _billing,
    _encryption,
    _target,
    _lambda,
    _stream,
    _mode_rules,
    _idempotency,
    _queues,
    _operations,
    _reconcile,
    _tags,
    _environment,  # last: it builds the config document, which needs every other rule to hold
)


_DEFAULTS = defaults(ScheduledTableArgs)

# What each option does, its range and the mode it belongs to, written once: help(ScheduledTableArgs), the provider's
# inputs (provider_inputs.py) and the docs' configuration page (docs/configuration.md, `python -m
# components.reference`) are generated from it with each field's default; tests fail when a generated file is stale.
OPTION_DOCS: dict[str, str] = {
    "mode": modes.option_doc(),
    "existing_table": (
        "`ExistingTable(name, stream_arn)` (stack: `{name: ..., streamArn: ...}`): act on a table you have instead of "
        "creating one; refuses the table-shaping options (billing, capacities, PITR, encryption, deletion protection, "
        "key types); see Existing tables"
    ),
    "partition_key": "the table's partition key attribute",
    "partition_key_type": "key types `S`, `N`, `B`",
    "sort_key": "the table's sort key attribute; `None` (stack: `none`) for a table without one",
    "sort_key_type": "key types `S`, `N`, `B`",
    "time_attribute": (
        "ISO-8601 string or epoch seconds; in `ttl` mode epoch seconds only (TTL's rule); not a key attribute"
    ),
    "billing_mode": "`PROVISIONED` requires `read_capacity` and `write_capacity`",
    "read_capacity": "only with `PROVISIONED`",
    "write_capacity": "only with `PROVISIONED`",
    "point_in_time_recovery": "continuous backups of the table and the ledger",
    "server_side_encryption": "AWS-managed KMS key unless `kms_key_arn`",
    "kms_key_arn": (
        "customer key for the table (and ledger), and for what holds its items whole: the queues the component "
        "makes to park them (poison, DLQs, release; not with a table given by stream ARN) and each schedule's "
        "payload (`KmsKeyArn`); every role that reads or writes the table, its stream or the ledger (each Lambda, "
        "and Scheduler in precise `ttl` mode) gets `kms:Decrypt`, `kms:Encrypt`, `kms:GenerateDataKey` on it only "
        "through DynamoDB (`kms:ViaService`), the queues' writers and readers through SQS, the scheduling function "
        "through Scheduler, and Scheduler's role `kms:Decrypt` of its group's schedules; the key's policy must let "
        "the account's IAM policies grant that (the default key policy does); the key's ARN (plain or an Output, "
        "checked when it resolves; not an alias or a key id: IAM grants `kms:` actions on the key's ARN only)"
    ),
    "deletion_protection": (
        "of the table and the ledger (with `existing_table`: the ledger's only, the one table the component then "
        "makes); turn off before `pulumi destroy`"
    ),
    "tags": "applied to every taggable resource, plus `scheduled-table:component`",
    "target": target_types.option_doc(),
    "lambda_memory_mb": (
        "128-10240; CPU comes with memory (1,024 MB is about 0.58 vCPU), and CPU-bound work costs the same per "
        "record at any size, so the default runs about 4x faster than 256 MB at the same cost"
    ),
    "lambda_timeout_seconds": f"1-900; at least {RELEASE_MIN_TIMEOUT_SECONDS} with `precision='second'`",
    "lambda_architecture": "or `x86_64`",
    "lambda_runtime": (
        ", ".join(f"`{runtime}`" for runtime in sorted(LAMBDA_RUNTIMES))
        + "; Lambda deprecates `python3.11` on 2027-06-30 and blocks updating functions on it from 2027-08-31"
    ),
    "lambda_bytecode": (
        "ship the handlers' compiled bytecode beside their source when the Python running `pulumi up` is the "
        "runtime's (CPython 3.12 for `python3.12`), so a cold start does not compile them; the archive then "
        "depends on that Python's minor version (another one uploads the source alone: a change to every "
        "function). Off: the source alone, the same archive from any Python; see Deploying"
    ),
    "log_retention_days": "an explicit log group per function",
    "log_level": "JSON lines: one summary per batch at `INFO`, one per action at `DEBUG`; items only at `DEBUG`",
    "max_workers": "concurrent items per batch (Scheduler calls are network round trips)",
    "tracing": (
        "X-Ray on every function: `PassThrough` or `Active` (adds `xray:PutTraceSegments` and "
        "`xray:PutTelemetryRecords`, which IAM grants only on `*`)"
    ),
    "function_overrides": (
        "per function, by role: `FunctionOverrides(memory_mb, reserved_concurrency, vpc=VpcConfig(subnet_ids, "
        "security_group_ids), layers, log_retention_days, architecture)` (or a dict of those keys) " + OVERRIDES_DOC
    ),
    "batch_size": "1-10000",
    "maximum_batching_window_seconds": "0-300",
    "starting_position": "nothing written before the mapping exists is missed",
    "maximum_retry_attempts": "finite: `-1` (forever) is refused, it lets one record block a shard",
    "maximum_record_age_seconds": "finite, 60-604800",
    "bisect_on_error": "split a failing batch to isolate the record that fails",
    "parallelization_factor": "1-10; per-item order holds at any value",
    "schedule_retry_attempts": "`eventbridge`, and `ttl` with `precise`: Scheduler's retries of the target, 0-185",
    "schedule_max_event_age_seconds": "`eventbridge`, and `ttl` with `precise`: 60-86400",
    "offsets": (
        "`eventbridge`: seconds from the due time, one occurrence and schedule each (`[-86400, -3600, 0]`); the due "
        "event's `offsetSeconds` says which; at most 10, within a year"
    ),
    "time_zone_attribute": (
        "`eventbridge`: the item attribute holding an IANA zone (`Europe/London`) for its recurrence and for due times "
        "written without an offset (`2026-03-30T09:00:00`); `None`, or an item without it: UTC"
    ),
    "recurrence_start_attribute": (
        "`eventbridge`: a recurring item's first possible firing (ISO-8601 or epoch seconds), if it has this attribute"
    ),
    "recurrence_end_attribute": (
        "`eventbridge`: a recurring item's last possible firing; its schedule is deleted once this has passed"
    ),
    "precision": (
        "`eventbridge`: `minute` (within the minute after the due time) or `second` (at the due second, never "
        "before: a schedule in the minute before hands each due event to an SQS release queue that holds it until "
        'its second; one-time due times only, recurring items stay on the minute); see "Second precision"'
    ),
    "precise": "`ttl` mode only: a delete schedule per item, so actions are on time; TTL stays the fallback",
    "repeat_attribute": "`ttl` mode: seconds between occurrences; items without it fire once",
    "repeat_until_attribute": "`ttl` mode: no occurrence after this time",
    "occurrence_attribute": "`ttl` mode: counts firings of a repeating item",
    "idempotency_window_seconds": (
        "every mode: how long the ledger remembers an occurrence or record, 86400-2592000 (longer than the "
        "stream's 24 h, so no redelivery outlives it)"
    ),
    "shards": "`polling` mode: partitions of the due index, 1-100; lowered, the shards above keep draining until empty",
    "shard_groups": (
        "`polling` mode: processor invocations a tick, 1 to `shards`; 1 takes every shard in one invocation, more "
        "fan out: the rule's invocation invokes the processor once per group of shards with something due, each "
        "with its own worker pool (for herds: see Performance)"
    ),
    "poll_interval_minutes": (
        "`polling` mode: how often the rule ticks, 1-1440; a tick that cannot reach the processor is dropped "
        "after one interval (at most 6 h, Lambda's maximum event age), the next one takes over its work"
    ),
    "on_done": '`polling` mode: keep a done item marked `DONE`, or `"delete"` it',
    "delay_attribute": "`polling` mode: an item without a time runs this many seconds after it was written",
    "default_delay_seconds": "`polling` mode: the delay for items with neither; `None` sends them to the poison queue",
    "max_attempts": "`polling` mode: dispatch attempts before the target DLQ, 1-100",
    "retry_backoff_seconds": "`polling` mode: first retry delay, doubled each attempt",
    **{
        option: f"{what}: `ExistingQueue(queue_arn, kms_key_arn, max_message_bytes)` (or a dict of those keys), "
        + EXISTING_QUEUE_DOC
        for option, what in QUEUE_OPTIONS.items()
    },
    "alarms": (
        "CloudWatch alarms: any message in a DLQ or poison queue, any function error, a stream consumer's iterator age"
    ),
    "alarm_topic_arn": (
        "SNS topic the alarms notify (and notify again when they clear): its ARN or the topic's `arn` output "
        "(checked when it resolves)"
    ),
    "create_alarm_topic": (
        "create `{name}-alarms` for them instead, encrypted with a KMS key of its own (rotation on; its "
        "policy lets the account administer it and CloudWatch use it for this account only: the "
        "AWS-managed `alias/aws/sns` key cannot let CloudWatch publish, so alarms to a topic encrypted with "
        "it never arrive); exported as `alarm_topic_arn`. A topic of your own that is encrypted needs a key "
        "policy allowing `cloudwatch.amazonaws.com` `kms:Decrypt` and `kms:GenerateDataKey*`"
    ),
    "iterator_age_alarm_seconds": "iterator age that counts as falling behind, 60-86400",
    "dashboard": (
        "one CloudWatch dashboard per table, named `{name}-{stack}-scheduled-table` (two stacks never share "
        "one): records, actions, failures, backlog, invocations, errors, DLQ depths, iterator age"
    ),
    "backfill_function": (
        "deploy `{name}-backfill`, the function `scheduled-table backfill/reconcile --in-lambda` fans a scan's "
        "segments out over (the consumer's permissions without the stream, plus Scan on the table); exported as "
        "`backfill_function_name`. Off: nothing is created (the commands still run from one machine)"
    ),
    "reconcile_every": (
        "run `reconcile` by itself on this EventBridge schedule expression (`rate(1 day)`, `cron(0 3 * * ? *)`), "
        "through `{name}-backfill` (made for it): one slice of up to 15 minutes per firing, the next firing going on "
        "from a checkpoint in the ledger. Each finished pass publishes what it found as CloudWatch metrics "
        "(namespace `ScheduledTable`, dimension `Table`: `ReconcileMissing`, `ReconcileStray`, "
        "`ReconcileWrongTotals`, `ReconcileRepaired`, `ReconcileDrift`), with an alarm when a pass finds drift "
        "(with `alarms`). Past occurrences the ledger no longer remembers are reported, never delivered. Off: "
        "nothing is created"
    ),
    "source_prefix": "`aggregate` mode: partition-key prefix of the items that count",
    "value_attribute": "`aggregate` mode: the number each source item adds",
    "group_from": (
        "`aggregate` mode: the attribute whose value is the group (and the total's partition key); not the "
        "partition key, whose values all start with `source_prefix` (a group value that does is parked with "
        "the reason)"
    ),
    "total_sort_key": "`aggregate` mode: the total's sort key",
    "total_attribute": "`aggregate` mode: the attribute holding the total",
    "aggregation": "`aggregate` mode: `sum` or `count`",
    "on_change": (
        "`aggregate` mode: `ignore` (inserts only, as the article *Building event-driven workflows with DynamoDB "
        "Streams*) or `adjust` (also updates and deletes)"
    ),
}


def _documented() -> str:
    lines = [(ScheduledTableArgs.__doc__ or "").strip(), "", "Options, with their defaults:", ""]
    for f in fields(ScheduledTableArgs):
        default = "required" if f.name == "mode" else f"default {_DEFAULTS[f.name]!r}"
        lines.append(f"{f.name} ({default})")
        lines.append(f"    {OPTION_DOCS[f.name]}")
    return "\n".join(lines)


ScheduledTableArgs.__doc__ = _documented()


def describe_defaults() -> dict[str, Any]:
    """Every option with its default (mode excluded): the README's "Default settings" table is checked against it."""
    return copy.deepcopy(_DEFAULTS)
