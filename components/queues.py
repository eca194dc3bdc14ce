"""Bring-your-own queues (Solutions Constructs' `existingQueueObj`/`deadLetterQueue`): the user's own SQS queue,
by ARN, in place of the poison queue, the stream DLQ or the target DLQ the component would make. These three are
where things that did not happen end up, so teams route them to queues they already watch, retain and encrypt. The
due queue is not here (the `target` option already takes the user's queue), nor the release queue (its delays,
visibility timeout and redrive are the component's machinery, not a place anyone reads).

Checked at construction with the field and the fix (a plain ARN; an Output when it resolves): a standard queue's
ARN, in the account and Region the stack deploys to (the functions' SQS clients are in their own Region, where
another Region's queue is not found; and only the deploying account's IAM policies can grant the writers).
Imports only the ARN helpers and the handlers' constants, so the options, the builders and the provider can all use
it."""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import pulumi

from .arns import dns_suffix, kms_key_problem
from .packaging import constants

# The options, each with what the queue is for and who writes to it (in messages and docs).
QUEUE_OPTIONS: dict[str, str] = {
    "existing_poison_queue": (
        "the poison queue: records and items that can never succeed, each with its reason (the stream consumers, "
        "the release function, the polling processor and the backfill function send there)"
    ),
    "existing_stream_dlq": (
        "the stream DLQ: the stream mapping's on-failure destination (Lambda sends a record of each batch it gave "
        "up on, with the consumer's role)"
    ),
    "existing_target_dlq": (
        "the target DLQ: Scheduler's dead-letter queue (`eventbridge`, precise `ttl`), the release function's and "
        "the polling processor's (`polling`) for due events the target refused"
    ),
}
# The component's role for each queue (Made.queues, the alarms, the dashboard).
QUEUE_ROLES: dict[str, str] = {
    "existing_poison_queue": "poison",
    "existing_stream_dlq": "stream-dlq",
    "existing_target_dlq": "target-dlq",
}
# The largest message SQS takes (and the component's own queues): what the polling processor's dead letters need.
MAX_QUEUE_MESSAGE_BYTES = constants.SQS_MAX_MESSAGE_BYTES
EXAMPLE = "arn:aws:sqs:eu-west-1:123456789012:parked"
_QUEUE_ARN = re.compile(r"arn:(aws[a-z-]*):sqs:([a-z0-9-]+):(\d{12}):([A-Za-z0-9_-]{1,80}(\.fifo)?)")


@dataclass(frozen=True)
class ExistingQueue:
    """A standard SQS queue of yours, in the account and Region the stack deploys to, for the component to send to
    instead of making its own. The component grants every writer sqs:SendMessage on it (and kms:GenerateDataKey and
    kms:Decrypt on `kms_key_arn`), alarms on its visible messages, and neither changes nor deletes it."""

    queue_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str] | None = None
    max_message_bytes: int = constants.SQS_DEFAULT_MESSAGE_BYTES


# What each field means, written once: the provider's inputs (provider_inputs.py) and the docs are generated from it.
EXISTING_QUEUE_DOCS: dict[str, str] = {
    "queue_arn": "the queue's ARN (its `arn` output, not the Queue itself nor its URL); a standard queue",
    "kms_key_arn": (
        "the customer-managed KMS key that encrypts the queue, if any; every writer (the functions' roles, Scheduler's "
        "role) is granted kms:GenerateDataKey and kms:Decrypt on it. Its key policy is yours: it must let the "
        "account's IAM policies grant that (the default key policy does)"
    ),
    "max_message_bytes": (
        f"the queue's `maxMessageSize`, {constants.SQS_MIN_MESSAGE_BYTES}-{constants.SQS_MAX_MESSAGE_BYTES}: a "
        "parked record larger than this is sent with its keys, a note and as much of itself as fits; at least 8192 for "
        "the poison queue and a target DLQ, 1048576 for a target DLQ in `polling` mode or at `precision` `second`"
    ),
}
# The options' description after their syntax (args.OPTION_DOCS, provider.PROVIDER_DOCS).
EXISTING_QUEUE_DOC = (
    "instead of the queue the component makes, which it then does not make. A standard queue (FIFO is refused: the "
    "handlers park without a message group, and neither Lambda's on-failure destination nor Scheduler's DLQ may be "
    "FIFO) in the stack's account and Region (checked when the ARN is known); the component grants its writers "
    "sqs:SendMessage on it (and the KMS key's use) and alarms on it"
)


def from_mapping(option: str, given: Any) -> Any:
    """The option as given, a plain mapping (a provider's or a Python user's dict, keys in snake_case or camelCase)
    made an ExistingQueue; other values are left for `existing_queue_problem` to name."""
    if not isinstance(given, Mapping):
        return given
    names = [f.name for f in fields(ExistingQueue)]
    values: dict[str, Any] = {}
    for key, value in given.items():
        name = re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), str(key))
        if name not in names:
            raise ValueError(f"{option}.{key}: unknown key; use one of {', '.join(names)}")
        if value is not None:
            values[name] = value
    if "queue_arn" not in values:
        raise ValueError(f"{option}.queue_arn: missing; give the queue's `.arn`, e.g. {EXAMPLE!r}")
    return ExistingQueue(**values)


def existing_queue_problem(option: str, given: Any, *, has_target_dlq: bool, mode: str) -> str | None:
    """What is wrong with option `option`'s value at construction, as `field: problem; fix`, or None."""
    if given is None:
        return None
    if option == "existing_target_dlq" and not has_target_dlq:
        return (
            f"{option}: this ScheduledTable (mode {mode!r}) has no target DLQ (only `eventbridge`, `ttl` with "
            "`precise`, and `polling` have one); remove it"
        )
    if isinstance(given, pulumi.Resource):
        return (
            f"{option}: got the {type(given).__name__} resource itself; pass "
            f"ExistingQueue(queue_arn={type(given).__name__.lower()}.arn)"
        )
    if isinstance(given, str | pulumi.Output):
        return f"{option}: pass ExistingQueue(queue_arn=...), not the ARN alone"
    if not isinstance(given, ExistingQueue):
        return f"{option}: {type(given).__name__} is not an ExistingQueue; pass ExistingQueue(queue_arn=queue.arn)"
    arn = given.queue_arn
    problem = _text_problem(f"{option}.queue_arn", arn) or _text_problem(f"{option}.kms_key_arn", given.kms_key_arn)
    if problem:
        return problem
    if isinstance(arn, str):
        problem = queue_arn_problem(option, arn)
    key = given.kms_key_arn
    if problem is None and isinstance(key, str):
        problem = kms_key_problem(f"{option}.kms_key_arn", key)
    size = given.max_message_bytes
    if problem is None and (
        isinstance(size, bool)
        or not isinstance(size, int)
        or not constants.SQS_MIN_MESSAGE_BYTES <= size <= constants.SQS_MAX_MESSAGE_BYTES
    ):
        problem = (
            f"{option}.max_message_bytes: {size!r} is out of range; use a whole number from "
            f"{constants.SQS_MIN_MESSAGE_BYTES} to {constants.SQS_MAX_MESSAGE_BYTES}, the queue's maxMessageSize"
        )
    if problem is None and option in PARKING_OPTIONS and size < PARKED_MIN_MESSAGE_BYTES:
        problem = (
            f"{option}.max_message_bytes: {size} is too small for a parked message (its reason, its item's keys of "
            f"up to 3 KB and its envelope always go whole); give a queue whose maxMessageSize is at least "
            f"{PARKED_MIN_MESSAGE_BYTES}"
        )
    return problem


# The queues a handler parks whole messages in (the stream DLQ takes Lambda's own small failure records), and the
# least room such a message needs: the reason and error, the item's keys (DynamoDB: up to 2,048 + 1,024 bytes) and
# the envelope are never cut (st_core/poison.fit).
PARKING_OPTIONS = ("existing_poison_queue", "existing_target_dlq")
PARKED_MIN_MESSAGE_BYTES = 8 * 1024


def shared_queue_problem(given: Mapping[str, ExistingQueue | None]) -> str | None:
    """One queue given for two of the options (their ARNs as plain strings): `scheduled-table redrive poison`,
    `redrive stream` and `redrive target` each read their queue as one kind of message, and the backfill function,
    which may send to the poison queue but not the stream DLQ, would lose its grant."""
    seen: dict[str, str] = {}
    for option, queue in given.items():
        arn = queue.queue_arn if queue is not None else None
        if not isinstance(arn, str):
            continue
        if arn in seen:
            return (
                f"{option}.queue_arn: {arn!r} is also {seen[arn]}; the redrive commands read each queue as one kind "
                "of message (parked records, failed stream batches, undelivered due events): give each its own queue"
            )
        seen[arn] = option
    return None


def _text_problem(field_name: str, value: object) -> str | None:
    """A Pulumi resource where its `.arn` belongs (`queue_arn=queue`), or a value of another type."""
    if value is None or isinstance(value, str | pulumi.Output) or inspect.isawaitable(value):
        return None
    if isinstance(value, pulumi.Resource):
        kind = type(value).__name__
        option, _, name = field_name.rpartition(".")
        return (
            f"{field_name}: got the {kind} resource itself, not its arn; pass its `.arn` output: "
            f"{option}=ExistingQueue({name}={kind.lower()}.arn, ...)"
        )
    return f"{field_name}: {value!r} is not text; pass the ARN as a string or an Output"


def queue_arn_problem(option: str, arn: str) -> str | None:
    """Why `arn` cannot be option `option`'s queue (None if it can): not a queue ARN, or a FIFO queue's. The same
    message for a plain string at construction and for an Output once it resolves."""
    where = f"{option}.queue_arn: {arn!r}"
    if arn.startswith(("https://", "http://")):
        return f"{where} is a URL, not an ARN; this is a queue URL; pass the queue's `.arn`"
    found = _QUEUE_ARN.fullmatch(arn)
    if found is None:
        return f"{where} is not an SQS queue ARN; pass the queue's `.arn`, e.g. {EXAMPLE!r}"
    if found.group(5):
        return (
            f"{where} is a FIFO queue; the handlers send to it without a message group, and neither Lambda's "
            "on-failure destination nor Scheduler's DLQ may be FIFO; pass a standard queue's ARN"
        )
    return None


def placement_problem(option: str, arn: str, home_arn: str) -> str | None:
    """Why the queue `arn` cannot be used from a stack deploying where `home_arn` is (None if it can): another
    Region or another account. The functions' SQS clients are in the stack's Region, where another Region's queue
    is not found; and a writer in the stack's account reaches another account's queue only if that queue's policy
    allows it, which the component cannot write."""
    partition, region, account = _placement(arn)
    home_partition, home_region, home_account = _placement(home_arn)
    if not region or not home_region:  # mocks that echo inputs, or an ARN checked elsewhere
        return None
    where = f"{option}.queue_arn: {arn!r}"
    if region != home_region or partition != home_partition:
        return (
            f"{where} is in {region}, and this stack deploys to {home_region}: the functions send from the stack's "
            f"Region, where a queue of another Region is not found; use a queue in {home_region}"
        )
    if account != home_account:
        return (
            f"{where} is in account {account}, and this stack deploys to account {home_account}: the component can "
            "grant its writers only in its own account (another account's queue would need a queue policy of its own); "
            f"use a queue in account {home_account}"
        )
    return None


def _placement(arn: str) -> tuple[str, str, str]:
    parts = (arn or "").split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        return "", "", ""
    return parts[1], parts[3], parts[4]


def queue_url(arn: str) -> str:
    """The queue's URL from its ARN (SQS's URL is `https://sqs.<region>.<domain>/<account>/<name>`)."""
    _, partition, _, region, account, name = arn.split(":", 5)
    return f"https://sqs.{region}.{dns_suffix(partition)}/{account}/{name}"


def queue_name(arn: str) -> str:
    """The queue's name (the alarms' QueueName dimension) from its ARN."""
    return arn.rsplit(":", 1)[-1]
