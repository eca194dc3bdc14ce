"""What receives the due event. One small frozen class per kind; the kind string is the handlers' contract."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import pulumi

from .arns import email_address, kms_key_problem
from .packaging import constants, runtime_module
from .suggest import keyword_hints

# SQS FIFO: a MessageGroupId is 1-128 alphanumeric or punctuation characters (printable ASCII but space).
_FIFO_ID = re.compile(r"[!-~]{1,128}")
# EventBridge PutEvents: DetailType is 1-128 characters; Source 1-256, not starting `aws.` (AWS's own). Scheduler's
# templated target asks Source's first character to be one of these.
DETAIL_TYPE_CHARS = 128
SOURCE_CHARS = 256
_SOURCE_START = re.compile(r"[/._A-Za-z0-9-]")


# Per target kind: the ARN field, the service in the ARN, what the resource is called, the resource part's shape and
# an example. A plain-string ARN is checked when the target is made, an Output when it resolves (`checked_arn`).
_ARN_SHAPES: dict[str, tuple[str, str, str, str, str]] = {
    "sqs": ("queue_arn", "sqs", "queue", r"[A-Za-z0-9_-]{1,80}(\.fifo)?", "arn:aws:sqs:eu-west-1:123456789012:jobs"),
    "lambda": (
        "function_arn",
        "lambda",
        "function",
        r"function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9$_-]{1,128})?",
        "arn:aws:lambda:eu-west-1:123456789012:function:notify",
    ),
    "stepfunctions": (
        "state_machine_arn",
        "states",
        "state machine",
        r"stateMachine:[A-Za-z0-9_.-]{1,80}",
        "arn:aws:states:eu-west-1:123456789012:stateMachine:flow",
    ),
    "sns": ("topic_arn", "sns", "topic", r"[A-Za-z0-9_-]{1,256}(\.fifo)?", "arn:aws:sns:eu-west-1:123456789012:news"),
    "events": (
        "bus_arn",
        "events",
        "event bus",
        r"event-bus/[A-Za-z0-9/._-]{1,256}",
        "arn:aws:events:eu-west-1:123456789012:event-bus/orders",
    ),
}
_ARN = re.compile(r"arn:(aws|aws-cn|aws-us-gov):([a-z0-9-]+):([a-z0-9-]*):(\d{12}):(.+)")


def arn_problem(kind: str, owner: str, arn: str) -> str | None:
    """Why `arn` cannot be the ARN of a `kind` target (None if it can): a URL, a name, another service's ARN or
    another resource type, each with the fix. `owner` is the class name, for the message."""
    field_name, service, what, resource, example = _ARN_SHAPES[kind]
    where = f"{owner}.{field_name}: {arn!r}"
    if arn.startswith(("https://", "http://")):
        hint = "this is a queue URL; pass the queue's `.arn`" if kind == "sqs" else f"pass the {what}'s `.arn`"
        return f"{where} is a URL, not an ARN; {hint}"
    found = _ARN.fullmatch(arn)
    if found is None:
        return f"{where} is not a full ARN (a name?); pass the {what}'s `.arn`, e.g. {example!r}"
    if found.group(2) != service:
        return f"{where} is an ARN of {found.group(2)!r}, not of a {what} ({service!r}); pass the {what}'s `.arn`"
    if not found.group(3) or not re.fullmatch(resource, found.group(5)):
        return f"{where} is not a {what} ARN; pass the {what}'s `.arn`, e.g. {example!r}"
    return None


SNS_TOPIC_EXAMPLE = "arn:aws:sns:eu-west-1:123456789012:ops"


def topic_arn_problem(field_name: str, value: str) -> str | None:
    """Why `value` cannot be the SNS topic ARN option `field_name` (None if it can): the same message for a plain
    string at construction and for an Output once it resolves."""
    if arn_problem("sns", "", value) is None:
        return None
    return (
        f"{field_name}: {value!r} is not an SNS topic ARN; pass the topic's `.arn` "
        f"(arn:aws:sns:<region>:<account>:<topic>), e.g. {SNS_TOPIC_EXAMPLE!r}"
    )


def resource_problem(field_name: str, value: object, attribute: str = "arn") -> str | None:
    """Why `value` cannot be the text option `field_name` at all (None if it can: a string, or an Output or other
    awaitable that resolves to one): a Pulumi resource given where one of its outputs belongs (`QueueTarget(queue)`
    for `QueueTarget(queue.arn)`, which would otherwise fail deep inside Pulumi as `'Queue' object has no attribute
    'startswith'`), or a value of another type."""
    if value is None or isinstance(value, str | pulumi.Output) or inspect.isawaitable(value):
        return None
    if isinstance(value, pulumi.Resource):
        kind = type(value).__name__
        owner, _, option = field_name.rpartition(".")
        example = f"{option}={kind.lower()}.{attribute}"
        return (
            f"{field_name}: got the {kind} resource itself, not its {attribute}; pass its `.{attribute}` output: "
            + (f"{owner}({example}, ...)" if owner else example)
        )
    return f"{field_name}: {value!r} is not text; pass the {attribute} as a string or an Output"


def region_problem(target: Target, arn: str, stack_region: str) -> str | None:
    """Why the target cannot be reached from the stack (None if it can): it is in another region. EventBridge
    Scheduler calls a templated target in the schedule's own region, and the handlers' AWS clients are in their
    function's region (a queue of another region is not found there, a function or state machine ARN of another
    region is refused), so every due event would be dead-lettered. `stack_region` is read from a resource the
    component creates, so the check needs no lookup."""
    region = _region(arn)
    if isinstance(target, EmailTarget) or not region or region == stack_region:
        return None
    field_name, _, what, _, _ = _ARN_SHAPES[target.kind]
    return (
        f"{type(target).__name__}.{field_name}: {arn!r} is in {region}, and this stack deploys to {stack_region}: "
        f"Scheduler and the handlers deliver only within the stack's region, so every due event would fail; use a "
        f"{what} in {stack_region}, or deploy the ScheduledTable in {region} (to reach {region} from "
        f"{stack_region}: an EventBusTarget on a bus in {stack_region} whose rule targets a bus in {region})"
    )


def _check(target: QueueTarget | FunctionTarget | StateMachineTarget | TopicTarget | EventBusTarget) -> None:
    field_name = _ARN_SHAPES[target.kind][0]
    given = resource_problem(f"{type(target).__name__}.{field_name}", target.arn) or resource_problem(
        f"{type(target).__name__}.kms_key_arn", getattr(target, "kms_key_arn", None)
    )
    if given:
        raise ValueError(given)
    key = getattr(target, "kms_key_arn", None)
    if isinstance(key, str):  # an Output: when it resolves (ScheduledTable._checked_keys)
        problem = kms_key_problem(f"{type(target).__name__}.kms_key_arn", key)
        if problem:
            raise ValueError(problem)
    if isinstance(target.arn, str):
        problem = arn_problem(target.kind, type(target).__name__, target.arn) or options_problem(target, target.arn)
        if problem:
            raise ValueError(problem)


def options_problem(target: Target, arn: str) -> str | None:
    """Why the target's options do not fit the resource `arn` names (None if they do): FIFO options on a standard
    queue."""
    if not isinstance(target, QueueTarget) or arn.endswith(".fifo"):
        return None
    for name in ("message_group_attribute", "message_group_id", "content_based_deduplication"):
        if getattr(target, name):
            return (
                f"QueueTarget.{name}: only applies to a FIFO queue, and {arn!r} is a standard queue (a FIFO queue's "
                f"name ends in .fifo); remove {name}, or pass the FIFO queue's ARN"
            )
    return None


def scheduler_problem(target: Target | None, *, scheduler_delivers: bool) -> str | None:
    """Why Scheduler cannot deliver to the target (None if it can): a FIFO queue whose content-based deduplication
    is not declared. Scheduler's SQS target sets a message group but no deduplication id, and a FIFO queue refuses a
    message with neither that nor content-based deduplication (AWS: "If you specify an Amazon SQS FIFO queue as a
    target, the queue must have content-based deduplication enabled"). Only eventbridge mode's schedules deliver to
    the target; precise ttl's delete the item. An ARN not known yet is checked when it resolves (`checked_arn`)."""
    if not scheduler_delivers or not isinstance(target, QueueTarget) or target.content_based_deduplication:
        return None
    if not isinstance(target.queue_arn, str) or not target.queue_arn.endswith(".fifo"):
        return None
    return (
        "QueueTarget.content_based_deduplication: eventbridge mode delivers through EventBridge Scheduler, which "
        "sets no deduplication id, so the FIFO queue must deduplicate by content or it refuses every delivery; "
        "enable it on the queue (content_based_deduplication=True on aws.sqs.Queue) and set "
        "content_based_deduplication=True here"
    )


def checked_arn(
    target: Target,
    *,
    scheduler_delivers: bool = False,
    rename: Callable[[str], str] = str,
    stack_region_of: pulumi.Input[str] | None = None,
) -> pulumi.Input[str]:
    """The target's ARN; an Output is checked once it resolves, so a wrong one fails `pulumi up` with the same
    message a plain string gets at construction. `scheduler_delivers`: Scheduler delivers to it (eventbridge mode).
    `rename`: how the message names the fields (the provider's camelCase inputs for a program in another language).
    `stack_region_of`: the ARN of a resource the stack creates, whose region the target's must be (`region_problem`);
    known only once it resolves, so a plain-string ARN is checked then too."""
    arn = target.arn
    if isinstance(target, EmailTarget) or (isinstance(arn, str) and stack_region_of is None):
        return arn
    owner, kind = type(target).__name__, target.kind

    def check(values: list[str | None]) -> str | None:
        value, ours = values
        problem = None
        if value is not None:  # None: mocks that echo inputs
            problem = arn_problem(kind, owner, value) or options_problem(target, value)
            resolved = dataclasses.replace(target, queue_arn=value) if isinstance(target, QueueTarget) else None
            problem = problem or scheduler_problem(resolved, scheduler_delivers=scheduler_delivers)
            region = _region(ours)
            problem = problem or (region_problem(target, value, region) if region else None)
        if problem:
            raise ValueError(rename(problem))
        return value

    return pulumi.Output.all(arn, stack_region_of).apply(check)  # type: ignore[arg-type]


def _region(arn: str | None) -> str:
    """The region an ARN names ('' for none: a global resource, or not an ARN)."""
    found = _ARN.fullmatch(arn or "")
    return found.group(3) if found else ""


@keyword_hints
@dataclass(frozen=True)
class QueueTarget:
    """An SQS queue, standard or FIFO, receives the due event as the message body.

    `max_message_bytes`: the largest message the queue accepts; set this to the queue's max_message_size if you
    raised it (up to 1 MiB). The handlers keep every due event they send to it within that size.

    `kms_key_arn` (on every target with an ARN): the customer-managed KMS key that encrypts the target, if any;
    whoever sends to it is then allowed kms:GenerateDataKey and kms:Decrypt on that key (the key's policy must
    let the account's IAM policies grant that, as the default key policy does).

    FIFO queues only (an ARN ending in `.fifo`): each message's group is, by default, its item's (from the item's
    keys: an item's occurrences arrive in order, different items never wait for each other);
    `message_group_attribute` groups by an item attribute instead (an item without it keeps its own group), and
    `message_group_id` puts every message in that one group. The deduplication id comes from the occurrence, so SQS
    drops a redelivered occurrence within its 5-minute deduplication interval. `content_based_deduplication=True`
    says the queue has content-based deduplication on, which eventbridge mode requires: Scheduler sets no
    deduplication id.
    """

    queue_arn: pulumi.Input[str]
    max_message_bytes: int = constants.SQS_DEFAULT_MESSAGE_BYTES
    kms_key_arn: pulumi.Input[str] | None = None
    message_group_attribute: str | None = None
    message_group_id: str | None = None
    content_based_deduplication: bool = False
    kind: ClassVar[str] = "sqs"

    def __post_init__(self) -> None:
        self._check_fifo_options()
        _check(self)
        size = self.max_message_bytes
        if (
            isinstance(size, bool)
            or not isinstance(size, int)
            or not constants.SQS_MIN_MESSAGE_BYTES <= size <= constants.SQS_MAX_MESSAGE_BYTES
        ):
            raise ValueError(
                f"QueueTarget.max_message_bytes: {size!r} is out of range; use a whole number from "
                f"{constants.SQS_MIN_MESSAGE_BYTES} to {constants.SQS_MAX_MESSAGE_BYTES}, the queue's max_message_size"
            )

    def _check_fifo_options(self) -> None:
        attribute, group = self.message_group_attribute, self.message_group_id
        if attribute is not None and group is not None:
            raise ValueError(
                "QueueTarget.message_group_id: set either message_group_id (one group for every message) or "
                "message_group_attribute (a group per value of that item attribute), not both"
            )
        if attribute is not None and (not isinstance(attribute, str) or not attribute):
            raise ValueError(
                f"QueueTarget.message_group_attribute: {attribute!r} is not an attribute name; name the item "
                "attribute whose value is the message group, e.g. 'customerId'"
            )
        if group is not None and (not isinstance(group, str) or not _FIFO_ID.fullmatch(group)):
            raise ValueError(
                f"QueueTarget.message_group_id: {group!r} is not a message group id; use 1-128 letters, digits or "
                "punctuation (no spaces), e.g. 'reminders'"
            )
        if not isinstance(self.content_based_deduplication, bool):
            raise ValueError(
                f"QueueTarget.content_based_deduplication: {self.content_based_deduplication!r} is not a boolean; "
                "use True or False"
            )

    @property
    def arn(self) -> pulumi.Input[str]:
        return self.queue_arn


@keyword_hints
@dataclass(frozen=True)
class FunctionTarget:
    """A Lambda function is invoked asynchronously with the due event.

    `kms_key_arn`: the customer-managed KMS key encrypting it, if any (see QueueTarget).
    """

    function_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str] | None = None
    kind: ClassVar[str] = "lambda"

    def __post_init__(self) -> None:
        _check(self)

    @property
    def arn(self) -> pulumi.Input[str]:
        return self.function_arn


@keyword_hints
@dataclass(frozen=True)
class StateMachineTarget:
    """A Step Functions state machine starts one execution with the due event as input.

    `kms_key_arn`: the customer-managed KMS key encrypting it, if any (see QueueTarget).
    """

    state_machine_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str] | None = None
    kind: ClassVar[str] = "stepfunctions"

    def __post_init__(self) -> None:
        _check(self)

    @property
    def arn(self) -> pulumi.Input[str]:
        return self.state_machine_arn


@keyword_hints
@dataclass(frozen=True)
class TopicTarget:
    """An SNS topic receives the due event as the message.

    `kms_key_arn`: the customer-managed KMS key encrypting it, if any (see QueueTarget).
    """

    topic_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str] | None = None
    kind: ClassVar[str] = "sns"

    def __post_init__(self) -> None:
        _check(self)

    @property
    def arn(self) -> pulumi.Input[str]:
        return self.topic_arn


@keyword_hints
@dataclass(frozen=True)
class EventBusTarget:
    """An EventBridge event bus receives one event per due event, the due event as its `detail`, with this
    `detail_type` and `source` (defaults: "scheduled-table.due" and "scheduled-table"), for your rules to route
    (other buses and accounts, API destinations, any rule target).

    A bus encrypted with a customer-managed key needs nothing from the sender: EventBridge uses the key itself, so
    the key's policy must allow `events.amazonaws.com` (there is no `kms_key_arn` here, and no KMS grant).
    """

    bus_arn: pulumi.Input[str]
    detail_type: str = "scheduled-table.due"
    source: str = "scheduled-table"
    kind: ClassVar[str] = "events"

    def __post_init__(self) -> None:
        detail_type, source = self.detail_type, self.source
        if not isinstance(detail_type, str) or not 1 <= len(detail_type) <= DETAIL_TYPE_CHARS:
            raise ValueError(
                f"EventBusTarget.detail_type: {detail_type!r} is not a detail type; use 1-{DETAIL_TYPE_CHARS} "
                "characters, e.g. 'scheduled-table.due'"
            )
        if not isinstance(source, str) or not 1 <= len(source) <= SOURCE_CHARS or not _SOURCE_START.match(source):
            raise ValueError(
                f"EventBusTarget.source: {source!r} is not an event source; use 1-{SOURCE_CHARS} characters starting "
                "with a letter, digit or one of / . _ -, e.g. 'com.example.reminders'"
            )
        if source.startswith("aws."):
            raise ValueError(
                f"EventBusTarget.source: {source!r} starts with 'aws.', which AWS reserves for its own services; "
                "use your own, e.g. 'com.example.reminders'"
            )
        _check(self)

    @property
    def arn(self) -> pulumi.Input[str]:
        return self.bus_arn


@keyword_hints
@dataclass(frozen=True)
class EmailTarget:
    """SES (v2) sends a plain-text email; `subject` and `body` are `{attribute}` templates filled from the item.

    `sender`: a verified SES identity (the address or its domain), bare or with a display name
    (`Reminders <reminders@example.com>`); emails go out with it as written, and IAM allows sending only from that
    address.
    """

    sender: str
    recipient_attribute: str = "email"
    subject: str = "Reminder"
    body: str = "This is your reminder."
    kind: ClassVar[str] = "email"

    def __post_init__(self) -> None:
        local, _, domain = email_address(self.sender).partition("@")
        if not local or not domain or "@" in domain:
            raise ValueError(
                f"EmailTarget.sender: {self.sender!r} is not an email address; pass the verified SES identity to "
                "send from, e.g. 'reminders@example.com' or 'Reminders <reminders@example.com>'"
            )
        if not self.recipient_attribute:
            raise ValueError("EmailTarget.recipient_attribute: must name the item attribute holding the recipient")
        for field_name in ("subject", "body"):
            try:
                runtime_module("templates").template_fields(getattr(self, field_name))
            except ValueError as exc:
                raise ValueError(
                    f"EmailTarget.{field_name}: {exc}; write {{attribute}} to insert an item attribute"
                ) from exc

    @property
    def arn(self) -> str:
        # SES has no target ARN of its own: Scheduler calls it through the universal target.
        return constants.SES_UNIVERSAL_TARGET


Target = QueueTarget | FunctionTarget | StateMachineTarget | TopicTarget | EventBusTarget | EmailTarget
TARGET_TYPES: tuple[type, ...] = (
    QueueTarget,
    FunctionTarget,
    StateMachineTarget,
    TopicTarget,
    EventBusTarget,
    EmailTarget,
)
