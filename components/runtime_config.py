"""The handler configuration document (env SCHEDULED_TABLE_CONFIG) as a pure function of the args and the names,
ARNs and URLs of the resources the component creates; read by handlers/st_core/config.py, whose TypedDicts describe
the same shape. Also the check that a function's environment fits Lambda's 4 KB: at construction with placeholders
of the longest realistic length for what is not known yet, and again with the real values."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from . import modes
from .packaging import constants
from .targets import QueueTarget

if TYPE_CHECKING:  # the options validate themselves with this module's 4 KB check: a type-only import back
    import pulumi

    from .args import ScheduledTableArgs

# Stand-in for a name, ARN or URL not known at construction: as long as such a value realistically gets.
PLACEHOLDER_CHARS = 256


class Value(StrEnum):
    """A value of the document that only exists once a resource does."""

    TABLE = "table"
    TARGET_ARN = "targetArn"
    POISON_QUEUE_URL = "poisonQueueUrl"
    SCHEDULE_GROUP = "scheduleGroup"
    SCHEDULER_ROLE_ARN = "schedulerRoleArn"
    TARGET_DLQ_ARN = "targetDlqArn"
    TARGET_DLQ_URL = "targetDlqUrl"
    LEDGER_TABLE = "ledgerTable"
    RELEASE_QUEUE_ARN = "releaseQueueArn"
    RELEASE_QUEUE_URL = "releaseQueueUrl"
    SCHEDULE_KEY_ARN = "scheduleKeyArn"


def own_key_arn(args: ScheduledTableArgs) -> pulumi.Input[str] | None:
    """The customer-managed key the component's own queues (poison, DLQs, release) and its schedules' payloads are
    kept under: the table's (`kms_key_arn`), since they carry its items whole. Not for a table given by stream ARN,
    which may be another account's (its key is that account's to lend, for its table): those keep SQS's and
    Scheduler's own keys."""
    given = args.existing_table
    if args.kms_key_arn is None or (given is not None and given.stream_arn is not None):
        return None
    return args.kms_key_arn


def scheduling_values(args: ScheduledTableArgs) -> tuple[Value, ...]:
    """The values of the `scheduler` section (`scheduler_section`), for the modes that make per-item schedules."""
    keyed = (Value.SCHEDULE_KEY_ARN,) if own_key_arn(args) is not None else ()
    return (Value.SCHEDULE_GROUP, Value.SCHEDULER_ROLE_ARN, Value.TARGET_DLQ_ARN, *keyed)


def needed_values(args: ScheduledTableArgs) -> tuple[Value, ...]:
    """The values `handler_document` reads for this configuration: the shared ones, then its mode's."""
    return (Value.TABLE, Value.TARGET_ARN, Value.POISON_QUEUE_URL, *modes.of(args).needed_values(args))


def known_target_arn(args: ScheduledTableArgs) -> str | None:
    """The target's ARN when the args already hold it as text; None when a resource will tell."""
    if not modes.of(args).has_target:
        return ""  # aggregate writes totals to the table itself: there is no target
    arn = None if args.target is None else args.target.arn
    return arn if isinstance(arn, str) else None


def handler_document(args: ScheduledTableArgs, values: Mapping[str, str]) -> str:
    """The configuration document every function of the table reads."""
    target: dict[str, Any] = {"kind": target_kind(args), "arn": values[Value.TARGET_ARN]}
    size = max_message_bytes(args)
    if size is not None:
        target["maxMessageBytes"] = size
    if args.target is not None:
        target.update(args.target.handler_options())
    config: dict[str, Any] = {
        "mode": str(args.mode),
        "table": values[Value.TABLE],
        "partitionKey": args.partition_key,
        "sortKey": args.sort_key,
        "timeAttribute": args.time_attribute,
        "target": target,
        "poisonQueueUrl": values[Value.POISON_QUEUE_URL],
        "maxWorkers": args.max_workers,
        **modes.of(args).section(args, values),
    }
    if args.existing_poison_queue is not None:  # the component's own takes 1 MiB, the handlers' default
        config["poisonMaxMessageBytes"] = args.existing_poison_queue.max_message_bytes
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def max_message_bytes(args: ScheduledTableArgs) -> int | None:
    """The largest message the target queue takes: the owned due queue's 1 MiB, or a QueueTarget's own setting;
    None for other targets."""
    if not modes.of(args).has_target:
        return None
    if args.target is None:
        return constants.OWNED_QUEUE_MESSAGE_BYTES
    return args.target.max_message_bytes if isinstance(args.target, QueueTarget) else None


def target_kind(args: ScheduledTableArgs) -> str:
    if not modes.of(args).has_target:
        return "none"
    return "sqs" if args.target is None else args.target.kind


def lease_seconds(args: ScheduledTableArgs) -> int:
    """How long a ledger claim lasts: it outlives the invocation that made it, so a crashed run is retried, a live
    one not. Also the release queue's visibility timeout (a message comes back when its claim has expired)."""
    return args.lambda_timeout_seconds + 30


# The release function holds a due event up to a second, then claims, checks and sends it, each call with the SDK's
# retries. A run that times out leaves its whole batch invisible for the release queue's visibility timeout (the
# ledger's lease, `lease_seconds`): every event in it half a minute late, which second precision exists to prevent.
RELEASE_MIN_TIMEOUT_SECONDS = 10


def ledger_section(args: ScheduledTableArgs, values: Mapping[str, str]) -> dict[str, Any]:
    return {
        "ledgerTable": values[Value.LEDGER_TABLE],
        "leaseSeconds": lease_seconds(args),
        "windowSeconds": args.idempotency_window_seconds,
    }


def scheduler_section(args: ScheduledTableArgs, values: Mapping[str, str]) -> dict[str, Any]:
    section: dict[str, Any] = {
        "group": values[Value.SCHEDULE_GROUP],
        "roleArn": values[Value.SCHEDULER_ROLE_ARN],
        "deadLetterArn": values[Value.TARGET_DLQ_ARN],
        "maxEventAgeSeconds": args.schedule_max_event_age_seconds,
        "maxRetryAttempts": args.schedule_retry_attempts,
    }
    if values.get(Value.SCHEDULE_KEY_ARN):  # each schedule's payload (the whole item) under the table's key
        section["kmsKeyArn"] = values[Value.SCHEDULE_KEY_ARN]
    return section


# -- the 4 KB environment --------------------------------------------------------------------------------------


def estimated_document(args: ScheduledTableArgs) -> str:
    """The document as long as it can realistically get: every value not known yet is a placeholder."""
    values: dict[str, str] = {v: "x" * PLACEHOLDER_CHARS for v in needed_values(args)}
    arn = known_target_arn(args)
    if arn is not None:
        values[Value.TARGET_ARN] = arn
    return handler_document(args, values)


def user_text(args: ScheduledTableArgs, target_arn: str | None = None) -> dict[str, str]:
    """The text the user chose that goes into the document, by option (`target.body` for EmailTarget.body); with
    `target_arn`, the ARN of the user's target as well (an Output until the resources exist)."""
    names = ["partition_key", "sort_key", "time_attribute"]
    names += modes.of(args).text_options
    text = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    target = args.target
    if target is None:
        return text
    if target.arn_field is not None and target_arn is not None:
        text["target.arn"] = target_arn
    # The target's own text options (a key's ARN is not in the document).
    for f in dataclasses.fields(target):
        value = getattr(target, f.name)
        if f.name not in (target.arn_field, "kms_key_arn") and isinstance(value, str):
            text[f"target.{f.name}"] = value
    return text


def function_environment(args: ScheduledTableArgs, document: str, *, estimated: bool = False) -> dict[str, str]:
    """The variables of every function of the table; ValueError naming the largest text the user chose when they
    would not fit Lambda's 4 KB (`estimated`: the document holds placeholders, so the size is an upper bound)."""
    variables = {constants.CONFIG_VARIABLE: document, constants.LOG_LEVEL_VARIABLE: args.log_level}
    size = constants.environment_bytes(variables)
    if size <= constants.LAMBDA_ENVIRONMENT_BYTES:
        return variables
    # The size each text takes in the document (JSON-escaped, as written there).
    arn = known_target_arn(args) if estimated else json.loads(document)["target"]["arn"]
    sizes = sorted(((len(json.dumps(v)) - 2, k) for k, v in user_text(args, arn).items()), reverse=True)
    (largest, field_name), *rest = sizes
    owner = type(args.target).__name__
    label = {k: k.replace("target.", f"{owner}.") for _, k in sizes}
    then = f"; next largest: {label[rest[0][1]]}, {rest[0][0]:,} bytes" if rest else ""
    raise ValueError(
        f"{field_name}: the function environment would be {'about ' if estimated else ''}{size:,} bytes, over "
        f"Lambda's 4 KB limit ({constants.LAMBDA_ENVIRONMENT_BYTES:,} bytes); shorten {label[field_name]} "
        f"({largest:,} bytes{then})"
    )
