"""The records the component's builders take and hand back (the AWS Solutions Constructs pattern: the construct only
wires; each `build_x(ctx, ...)` makes its resources and returns what it made). A leaf of the package: it imports no
other module of the component but the IAM types, so every builder and mode module can use it without a cycle."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from . import policies
from .args import ScheduledTableArgs


@dataclass(frozen=True)
class TableRef:
    """What the component needs of its table, whether it made it or was given it."""

    name: pulumi.Output[str]
    arn: pulumi.Output[str]
    stream_arn: pulumi.Output[str]
    resource: aws.dynamodb.Table | None = None  # the table the component made; None for an existing table


@dataclass(frozen=True)
class QueueRef:
    """What the component needs of a queue it sends to, whether it made it or was given it (ExistingQueue): its
    ARN and URL, the customer-managed key its writers must be allowed to use (None: SQS-managed or AWS-managed
    encryption), and the largest message it takes."""

    arn: pulumi.Output[str]
    url: pulumi.Output[str]
    max_message_bytes: int
    key_arn: pulumi.Input[str] | None = None
    resource: aws.sqs.Queue | None = None  # the queue the component made; None for the user's


@dataclass
class Made:
    """Every function and queue a build made, by role: the alarms and the dashboard are made from these."""

    functions: dict[str, aws.lambda_.Function] = field(default_factory=dict)
    stream_functions: dict[str, aws.lambda_.Function] = field(default_factory=dict)
    queues: dict[str, aws.sqs.Queue] = field(default_factory=dict)
    # The user's queues used in place of one (ExistingQueue), by the same roles: their names, for the alarms.
    given_queue_names: dict[str, pulumi.Output[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Owner:
    """Whose resources these are: the component (the parent of every child), its name (every child's logical name
    is `f"{name}-..."`), the tags every taggable child gets, and the record of what was made."""

    name: str
    parent: pulumi.Resource
    tags: Mapping[str, str]
    made: Made

    @property
    def child(self) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self.parent)


@dataclass(frozen=True)
class BuildContext:
    """What every mode's builder needs: the validated args, the table, the queues every mode has, and the target
    (its kind and ARN; an owned due queue's ARN when the user gave none; "" in aggregate mode). `home_arn`: an ARN
    in the deploying account and region (the stack's caller identity's), which the identities of the deploying
    account are built from (Scheduler's trust condition, the SES identities, the alarm key's account): the table
    itself may be another account's."""

    owner: Owner
    args: ScheduledTableArgs
    table: TableRef
    stream_dlq: QueueRef
    poison_queue: QueueRef
    target_kind: str
    target_arn: pulumi.Input[str]
    home_arn: pulumi.Output[str]
    # How a deploy-time failure names the options: as written in Python, or as the provider's camelCase inputs.
    rename: Callable[[str], str] = str


@dataclass(frozen=True)
class Consumer:
    """A stream-consuming function and the pieces every mode's consumer has."""

    function: aws.lambda_.Function
    role: aws.iam.Role
    log_group: aws.cloudwatch.LogGroup
    policy: aws.iam.RolePolicy
    mapping: aws.lambda_.EventSourceMapping | None = None


@dataclass(frozen=True)
class Scheduling:
    """What a per-item-schedule mode adds to its consumer: the schedule group, the target DLQ, the IAM statements
    the consumer needs and the values of the handler's `scheduler` config."""

    group: aws.scheduler.ScheduleGroup
    target_dlq: QueueRef
    consumer_statements: pulumi.Output[list[policies.Statement]]
    values: dict[str, pulumi.Input[str]]


@dataclass(frozen=True)
class ModeResult:
    """What a mode built: its main consumer (the component's `function_name`) and the outputs only some modes have."""

    consumer: Consumer
    schedule_group_name: pulumi.Output[str] | None = None
    target_dlq_url: pulumi.Output[str] | None = None
    ledger_table_name: pulumi.Output[str] | None = None
    processor_function_name: pulumi.Output[str] | None = None
    tick_rule_name: pulumi.Output[str] | None = None
    tick_rule: aws.cloudwatch.EventRule | None = None


def flatten(parts: list[list[policies.Statement]]) -> list[policies.Statement]:
    return [statement for part in parts for statement in part]
