"""IAM documents as pure functions of plain strings: least privilege, no `*` action, tested without Pulumi."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .arns import (
    UNKNOWN_ARN,
    arn_parts,
    email_address,
    schedules_in_group,
    ses_configuration_set_arn,
    ses_identity_arns,
    via_service,
)
from .packaging import runtime_module

if TYPE_CHECKING:
    from collections.abc import Sequence

    from st_core.target_types import TargetType

Statement = dict[str, Any]

# A customer-managed key on the table (and so its stream and the ledger): read and write items through it.
TABLE_KEY_ACTIONS = ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"]
# The services whose use of a key each grant is for (`kms:ViaService`): the table's key is used by DynamoDB (its
# stream's records too: the AWS managed key aws/dynamodb allows dynamodb.<region> only, and its tables stream), a
# queue's by SQS; a target's by its kind's service (its SERVICE, st_core/target_types/).
TABLE_KEY_SERVICE = "dynamodb"
QUEUE_KEY_SERVICE = "sqs"


def target_type(kind: str) -> TargetType:
    """The handlers' declaration of a target kind (handlers/st_core/target_types/): the actions each caller needs."""
    declared: TargetType = runtime_module("target_types").of(kind)
    return declared


def document(statements: list[Statement]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def assume_role_policy(service: str, source_account: str | None = None) -> str:
    """Trust policy for a service principal; with `source_account`, only on behalf of that account (confused
    deputy protection, which Scheduler supports)."""
    statement: Statement = {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    if source_account:
        statement["Condition"] = {"StringEquals": {"aws:SourceAccount": source_account}}
    return document([statement])


def target_statements(
    kind: str,
    target_arn: str,
    *,
    home_arn: str,
    sender: str | None = None,
    configuration_set: str | None = None,
    target_key_arn: str | None = None,
    direct: bool = False,
) -> list[Statement]:
    """What Scheduler's execution role needs to deliver to the target: exactly its kind's actions on exactly the
    target's resource (email: on the sender's identities and configuration set, from the sender's address only),
    plus the use of the key that encrypts the target, if it has one. `home_arn`: any ARN of the deploying account and
    region (the SES identities and configuration set are its). `direct`: what a function (or the releaser)
    sending itself needs instead: its kind's send actions, those Scheduler also performs in the first statement,
    the rest (SQS's queue URL lookup) on the target alone after the key's."""
    declared = target_type(kind)
    send = [a for a in declared.SEND_ACTIONS if a in declared.SCHEDULER_ACTIONS]
    statements = _send_statements(
        declared,
        send if direct else list(declared.SCHEDULER_ACTIONS),
        target_arn,
        home_arn=home_arn,
        sender=sender,
        configuration_set=configuration_set,
        target_key_arn=target_key_arn,
    )
    lookups = [a for a in declared.SEND_ACTIONS if a not in send]
    if direct and lookups:
        statements.append({"Effect": "Allow", "Action": lookups, "Resource": [target_arn]})
    return statements


def _send_statements(
    declared: TargetType,
    actions: list[str],
    target_arn: str,
    *,
    home_arn: str,
    sender: str | None,
    configuration_set: str | None,
    target_key_arn: str | None,
) -> list[Statement]:
    registry = runtime_module("target_types")
    statement: Statement = {"Effect": "Allow", "Action": actions}
    if declared.GRANT == registry.GRANT_SES_IDENTITY:
        if not sender:
            raise ValueError("an email target needs its sender to scope ses:SendEmail")
        statement["Resource"] = ses_identity_arns(home_arn, sender)
        if configuration_set:
            statement["Resource"].append(ses_configuration_set_arn(home_arn, configuration_set))
        statement["Condition"] = {"StringEquals": {"ses:FromAddress": email_address(sender)}}
    elif declared.GRANT == registry.GRANT_QUALIFIED:
        statement["Resource"] = [target_arn, f"{target_arn}:*"]  # the function and its versions/aliases
    else:
        statement["Resource"] = [target_arn]
    return [statement, *key_statements(target_key_arn, declared.KMS_ACTIONS, declared.SERVICE)]


def key_statements(key_arn: str | None, actions: Sequence[str], service: str) -> list[Statement]:
    """`actions` on one customer-managed KMS key, only when `service` uses it on the role's behalf (`kms:ViaService`:
    the role itself may not call KMS with the key, so it cannot decrypt what it reads some other way); nothing
    without a key (AWS-managed keys need no grant) or without actions (a kind no key of which its senders use)."""
    if not key_arn or not actions:
        return []
    condition = {"StringEquals": {"kms:ViaService": via_service(service, key_arn)}}
    return [{"Effect": "Allow", "Action": sorted(actions), "Resource": [key_arn], "Condition": condition}]


# Scheduler keeps a schedule's payload under the key its KmsKeyArn names: it encrypts it when the schedule is made or
# changed, with the caller's permissions (kms:DescribeKey checks the key is symmetric, kms:GenerateDataKey makes the
# data key, kms:Decrypt reads it back), and decrypts it when the schedule fires, with the schedule's execution role
# (EventBridge Scheduler user guide, "Encryption at rest", "Managing KMS keys"). Each data key is bound to its
# schedule: the encryption context `aws:scheduler:schedule:arn` is the schedule's ARN.
SCHEDULE_KEY_SERVICE = "scheduler"
SCHEDULE_KEY_CONTEXT = "kms:EncryptionContext:aws:scheduler:schedule:arn"
SCHEDULE_WRITER_KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")


def schedule_writer_key_statements(key_arn: str | None, group_arn: str) -> list[Statement]:
    """What a function that makes or changes schedules under `key_arn` needs of it: through Scheduler only, and its
    data keys only for schedules of this group (DescribeKey carries no encryption context: it is through Scheduler
    alone). Nothing without a key (Scheduler's own AWS owned key)."""
    if not key_arn:
        return []
    via = {"kms:ViaService": via_service(SCHEDULE_KEY_SERVICE, key_arn)}
    bound = {"StringEquals": via, "ArnLike": {SCHEDULE_KEY_CONTEXT: schedules_in_group(group_arn)}}
    return [
        {"Effect": "Allow", "Action": ["kms:DescribeKey"], "Resource": [key_arn], "Condition": {"StringEquals": via}},
        {"Effect": "Allow", "Action": list(SCHEDULE_WRITER_KEY_ACTIONS), "Resource": [key_arn], "Condition": bound},
    ]


def schedule_reader_key_statements(key_arn: str | None, group_arn: str) -> list[Statement]:
    """What Scheduler's execution role needs of `key_arn` when a schedule fires: kms:Decrypt of the payloads of this
    group's schedules only. No `kms:ViaService` here: Scheduler calls KMS itself with the role's session (its
    CloudTrail record has no `invokedBy`, the guide's example statement no condition), so the request carries none
    and a ViaService condition would stop every firing; the encryption context binds the grant instead."""
    if not key_arn:
        return []
    bound = {"ArnLike": {SCHEDULE_KEY_CONTEXT: schedules_in_group(group_arn)}}
    return [{"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [key_arn], "Condition": bound}]


# What a sender to an SQS queue encrypted with a customer-managed key needs of that key.
QUEUE_KEY_ACTIONS = ("kms:Decrypt", "kms:GenerateDataKey")


def scheduler_execution_policy(
    target: list[Statement],
    target_dlq_arn: str,
    target_dlq_key_arn: str | None = None,
    *,
    payload_key_arn: str | None = None,
    group_arn: str = UNKNOWN_ARN,
) -> str:
    """What Scheduler may do when a schedule fires: read the schedule's payload (under `payload_key_arn`, the
    schedules of group `group_arn`), call the target, or park the event in the target DLQ (and use the DLQ's key,
    through SQS: Scheduler sends the dead letter as the role)."""
    dlq = {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [target_dlq_arn]}
    keys = key_statements(target_dlq_key_arn, QUEUE_KEY_ACTIONS, QUEUE_KEY_SERVICE)
    return document([*target, dlq, *keys, *schedule_reader_key_statements(payload_key_arn, group_arn)])


# What an event source mapping does with its function's role to read the table's stream.
STREAM_READ_ACTIONS = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
)


def stream_consumer_statements(
    *,
    table_arn: str | None,
    log_group_arn: str,
    send_queue_arns: list[str | None],
    kms_key_arn: str | None,
    send_queue_key_arns: Sequence[str | None] = (),
) -> list[Statement]:
    """What every handler needs: write its own logs, reach its queues (and use the customer-managed keys of those
    that have one: a user's ExistingQueue), use the table's own KMS key (if any); with `table_arn`, read that
    table's stream."""
    statements: list[Statement] = []
    if table_arn is not None:
        statements.append(
            {
                "Effect": "Allow",
                "Action": list(STREAM_READ_ACTIONS),
                "Resource": [f"{table_arn}/stream/*"],
            }
        )
    statements += [
        {
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": [log_group_arn, f"{log_group_arn}:*"],
        },
        {
            "Effect": "Allow",
            "Action": ["sqs:SendMessage"],
            "Resource": sorted({a or UNKNOWN_ARN for a in send_queue_arns}),
        },
    ]
    for key in sorted({k for k in send_queue_key_arns if k}):
        statements += queue_key_statements(key)
    return statements + key_statements(kms_key_arn, TABLE_KEY_ACTIONS, TABLE_KEY_SERVICE)


def queue_key_statements(key_arn: str | None) -> list[Statement]:
    """Send to and receive from queues encrypted with `key_arn`, through SQS."""
    return key_statements(key_arn, QUEUE_KEY_ACTIONS, QUEUE_KEY_SERVICE)


# X-Ray's write actions have no resource-level permissions: "*" is the only resource IAM accepts for them.
XRAY_ACTIONS = ("xray:PutTraceSegments", "xray:PutTelemetryRecords")


def tracing_statements(tracing: str) -> list[Statement]:
    """What a function traced by X-Ray (`tracing="Active"`) needs to send its segments; nothing otherwise."""
    if tracing != "Active":
        return []
    return [{"Effect": "Allow", "Action": list(XRAY_ACTIONS), "Resource": "*"}]


# AWSLambdaVPCAccessExecutionRole's actions: Lambda makes, describes and deletes the function's network interfaces
# with the function's role. IAM grants the EC2 network-interface actions on "*" only (no resource-level scoping).
VPC_ACCESS_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)


def vpc_access_statements(in_vpc: bool) -> list[Statement]:
    """What a function in a VPC (`FunctionOverrides.vpc`) needs for its network interfaces; nothing otherwise."""
    if not in_vpc:
        return []
    return [{"Effect": "Allow", "Action": list(VPC_ACCESS_ACTIONS), "Resource": "*"}]


def with_statements(policy_document: str, statements: list[Statement]) -> str:
    """`policy_document` with `statements` appended (the same document when there are none)."""
    if not statements:
        return policy_document
    parsed = json.loads(policy_document)
    return document(list(parsed["Statement"]) + statements)


def scheduling_statements(
    *, group_arn: str, scheduler_role_arn: str, payload_key_arn: str | None = None
) -> list[Statement]:
    """Manage schedules in this table's group only (their payloads under `payload_key_arn`, if any), and hand
    Scheduler its role and no other."""
    return [
        {
            "Effect": "Allow",
            # Create, update and delete only: the handlers never read a schedule back.
            "Action": ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"],
            "Resource": [schedules_in_group(group_arn)],
        },
        {
            "Effect": "Allow",
            "Action": ["iam:PassRole"],
            "Resource": [scheduler_role_arn],
            "Condition": {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
        },
        *schedule_writer_key_statements(payload_key_arn, group_arn),
    ]


def direct_dispatch_statements(kind: str, target_arn: str, **options: Any) -> list[Statement]:
    """The function (or the releaser) delivers itself (`target_statements`'s `direct`)."""
    return target_statements(kind, target_arn, direct=True, **options)


def queue_send_statements(queue_arn: str, key_arn: str | None = None) -> list[Statement]:
    """Send to one queue (precision="second": into the release queue), encrypted with `key_arn` if given."""
    return [{"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": [queue_arn]}, *queue_key_statements(key_arn)]


def self_invoke_statements(function_arn: str) -> list[Statement]:
    """A function invoking itself (`polling` with `shard_groups` > 1: the rule's invocation invokes one processor per
    group of shards): InvokeFunction on that function only."""
    return [{"Effect": "Allow", "Action": ["lambda:InvokeFunction"], "Resource": [function_arn]}]


def queue_consume_statements(queue_arn: str) -> list[Statement]:
    """What an SQS event source mapping needs of its queue (it polls with the function's role): receive, delete
    and read the queue's attributes, on that queue only."""
    return [
        {
            "Effect": "Allow",
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"],
            "Resource": [queue_arn],
        }
    ]


def table_item_statements(table_arn: str, actions: list[str]) -> list[Statement]:
    """Item-level actions on one table (no index, no stream, no other table)."""
    return [{"Effect": "Allow", "Action": sorted(f"dynamodb:{a}" for a in actions), "Resource": [table_arn]}]


def scheduled_delete_statements(table_arn: str, kms_key_arn: str | None) -> list[Statement]:
    """What Scheduler needs to fire an item at its due time (precise ttl mode: its universal target
    `dynamodb:updateItem` moves the due time into `stFiredAt`; the executor deletes the item): UpdateItem on the
    table, and the table's own KMS key if it has one."""
    return table_item_statements(table_arn, ["UpdateItem"]) + key_statements(
        kms_key_arn, TABLE_KEY_ACTIONS, TABLE_KEY_SERVICE
    )


def index_query_statements(table_arn: str, index_name: str) -> list[Statement]:
    """Query one index of one table."""
    return [{"Effect": "Allow", "Action": ["dynamodb:Query"], "Resource": [f"{table_arn}/index/{index_name}"]}]


def ledger_statements(ledger_arn: str, *, batch_markers: bool = False) -> list[Statement]:
    """Claim, complete and release occurrences in the idempotency ledger. `batch_markers`: the function also writes
    schedule markers 25 to a request (`Ledger.scheduled_many`); `dynamodb:BatchWriteItem` is an action of its own,
    which `PutItem` does not cover."""
    actions = ["DeleteItem", "GetItem", "PutItem", "UpdateItem"] + (["BatchWriteItem"] if batch_markers else [])
    return table_item_statements(ledger_arn, actions)


def alarm_topic_key_policy(arn_in_account: str) -> str:
    """Key policy of the key that encrypts the alarm topic (account and partition from any ARN of the deploying
    account: the key, the topic and the alarms are all the stack's, whoever's the table is).

    The account root administers the key: the standard key-admin statement, and the one `kms:*` this project
    writes (in a key policy `Resource: "*"` is this key only); without it no IAM policy could grant anything on the
    key. CloudWatch, which publishes the alarms to the topic, may use the key, only on behalf of this account: it
    needs kms:GenerateDataKey* and kms:Decrypt to publish to an encrypted topic (AWS re:Post "CloudWatch alarm with
    an encrypted SNS topic"). SNS itself needs no statement: it stores and delivers the topic's messages with the
    data keys the publisher's use of the key made. The AWS-managed alias/aws/sns key cannot allow CloudWatch, so
    alarms to a topic encrypted with it are silently dropped.
    """
    partition, _, _, account, _ = arn_parts(arn_in_account)
    statements: list[Statement] = [
        {
            "Sid": "AccountAdministersTheKey",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:{partition}:iam::{account}:root"},
            "Action": "kms:*",
            "Resource": "*",
        },
        {
            "Sid": "CloudWatchPublishesAlarms",
            "Effect": "Allow",
            "Principal": {"Service": "cloudwatch.amazonaws.com"},
            "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:SourceAccount": account}},
        },
    ]
    return document(statements)


def account_of(arn: str | None) -> str:
    return arn_parts(arn)[3]
