"""The shared builders every mode makes its resources with: free functions `build_x(ctx, ...) -> record` over the
build context (components/parts.py). Each child is named `f"{owner.name}-..."` and parented to the component, so
moving code here changed no resource's URN (tests/house/test_resources_unchanged.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import pulumi
import pulumi_aws as aws

from . import arns, descriptions, modes, policies
from .args import ScheduledTableArgs
from .existing import (
    WRONG_VIEW_TYPE_FILTER,
    existing_table_problem,
    latest_stream_problem,
    looked_up,
    stream_region_and_account,
    table_arn_of,
    table_key_problem,
    table_problems,
    table_reference,
)
from .filters import filter_patterns, within_filter_limit
from .overrides import FunctionOverrides, function_settings
from .packaging import constants, handler_archive
from .parts import BuildContext, Consumer, Owner, QueueRef, Scheduling, TableRef
from .queues import ExistingQueue, placement_problem, queue_arn_problem, queue_name, queue_url
from .runtime_config import Value, function_environment, handler_document, own_key_arn
from .targets import EmailTarget

DLQ_RETENTION_SECONDS = 14 * 24 * 3600


def build_table(owner: Owner, args: ScheduledTableArgs, rename: Callable[[str], str] = str) -> TableRef:
    """The table acted on: the one given (`existing_table`), or a new one. `rename` words a deploy-time failure as
    the user named the option (Python, or the provider's camelCase inputs)."""
    given = args.existing_table
    if given is not None:
        checks = _TableChecks(owner, args, rename)
        if given.stream_arn is None:
            return checks.looked_up(given.name)
        return checks.given(given.name, given.stream_arn)
    table = _new_table(owner, args)
    return TableRef(name=table.name, arn=table.arn, stream_arn=table.stream_arn, resource=table)


@dataclasses.dataclass(frozen=True)
class _TableChecks:
    """An existing table, checked when the stack deploys; a failed check raises inside an apply, which fails the
    deploy naming each setting to change, before anything reads the stream."""

    owner: Owner
    args: ScheduledTableArgs
    rename: Callable[[str], str]

    def fail(self, message: str) -> None:
        raise ValueError(self.rename(message))

    def checked(self, result: Any, stream_arn: str | None = None) -> dict[str, Any]:
        """A looked-up table, refused if it lacks what the mode needs (or, given by stream ARN, if that is not its
        latest stream)."""
        a = self.args
        table = looked_up(result)
        problems = table_problems(
            table,
            mode=str(a.mode),
            partition_key=a.partition_key,
            sort_key=a.sort_key,
            time_attribute=a.time_attribute,
        )
        if problems:
            self.fail("existing_table: " + "; ".join(problems))
        stale = latest_stream_problem(table, stream_arn) if stream_arn is not None else None
        if stale:
            self.fail(stale)
        return table

    def key_checked(self, table: dict[str, Any]) -> Any:
        """The looked-up table once its KMS key is known to be the `kms_key_arn` given, when it is customer-managed
        (looked up: whether AWS or the customer manages a key shows in KMS, not in its ARN)."""
        key = table.get("kms_key_arn")
        if not key:
            return table
        found = aws.kms.get_key_output(key_id=key, opts=pulumi.InvokeOutputOptions(parent=self.owner.parent))

        def check(values: list[Any]) -> dict[str, Any]:
            problem = table_key_problem(table.get("name"), str(key), values[0], values[1])
            if problem:
                self.fail(problem)
            return table

        return pulumi.Output.all(found.key_manager, self.args.kms_key_arn).apply(check)

    def looked_up(self, name: pulumi.Input[str]) -> TableRef:
        """An existing table given by name only: looked up when the stack deploys, and checked."""
        found = aws.dynamodb.get_table_output(name=name, opts=pulumi.InvokeOutputOptions(parent=self.owner.parent))
        table = found.apply(self.checked).apply(self.key_checked)
        return TableRef(
            name=table.apply(lambda t: str(t["name"])),
            arn=table.apply(lambda t: str(t["arn"])),
            stream_arn=table.apply(lambda t: str(t["stream_arn"])),
        )

    def given(self, name: pulumi.Input[str], stream_arn: pulumi.Input[str]) -> TableRef:
        """An existing table given by name and stream ARN, either of them plain or an Output. Once both are known
        they must be one table's (as plain strings are checked at construction); the table the stream ARN names is
        then looked up in its region and checked as a table given by name is, when it is in the deploying account
        (another account's cannot be described: its records are parked at run time instead, see
        existing.WRONG_VIEW_TYPE_FILTER). Everything built on the table waits for these checks."""
        parent = pulumi.InvokeOutputOptions(parent=self.owner.parent)
        caller = aws.get_caller_identity_output(opts=parent)

        def check(values: list[Any]) -> Any:
            table, stream, account = values
            if table is None or stream is None:  # mocks that echo inputs: nothing to check
                return [table, stream]
            problem = existing_table_problem(table, stream)
            if problem:
                self.fail(problem)
            region, owner = stream_region_and_account(stream)
            if owner != account:
                return [table, stream]
            found = aws.dynamodb.get_table_output(name=table, region=region, opts=parent)
            checked = found.apply(lambda result: self.checked(result, stream)).apply(self.key_checked)
            return checked.apply(lambda result: [result["name"], stream])

        pair = pulumi.Output.all(name, stream_arn, caller.account_id).apply(check)
        return TableRef(
            name=pair.apply(lambda p: p[0]),
            arn=pair.apply(lambda p: table_arn_of(p[1]) if p[1] is not None else arns.UNKNOWN_ARN),
            stream_arn=pair.apply(lambda p: p[1]),
        )


def _new_table(owner: Owner, a: ScheduledTableArgs) -> aws.dynamodb.Table:
    attributes = [aws.dynamodb.TableAttributeArgs(name=a.partition_key, type=a.partition_key_type)]
    if a.sort_key:
        attributes.append(aws.dynamodb.TableAttributeArgs(name=a.sort_key, type=a.sort_key_type))
    # What the mode adds: polling its due index, ttl the table's TTL on the time attribute.
    parts = modes.of(a).table_parts(a)
    attributes += parts.get("attributes", [])
    return aws.dynamodb.Table(
        f"{owner.name}-table",
        attributes=attributes,
        hash_key=a.partition_key,
        range_key=a.sort_key,
        billing_mode=a.billing_mode,
        read_capacity=a.read_capacity,
        write_capacity=a.write_capacity,
        stream_enabled=True,
        stream_view_type="NEW_AND_OLD_IMAGES",
        point_in_time_recovery=aws.dynamodb.TablePointInTimeRecoveryArgs(enabled=a.point_in_time_recovery),
        server_side_encryption=aws.dynamodb.TableServerSideEncryptionArgs(
            enabled=a.server_side_encryption, kms_key_arn=a.kms_key_arn
        ),
        deletion_protection_enabled=a.deletion_protection,
        global_secondary_indexes=parts.get("global_secondary_indexes"),
        ttl=parts.get("ttl"),
        tags=dict(owner.tags),
        opts=owner.child,
    )


def build_queue(
    owner: Owner, role: str, retention: int = DLQ_RETENTION_SECONDS, key_arn: pulumi.Input[str] | None = None
) -> aws.sqs.Queue:
    """Encrypted standard queue taking messages up to 1 MiB; a DLQ has no DLQ of its own (its messages are the
    end of the line). Under `key_arn` (`queue_encryption`). Recorded by role for the alarms and the dashboard."""
    queue = aws.sqs.Queue(
        f"{owner.name}-{role}",
        max_message_size=constants.OWNED_QUEUE_MESSAGE_BYTES,
        message_retention_seconds=retention,
        tags=dict(owner.tags),
        opts=owner.child,
        **queue_encryption(key_arn),
    )
    owner.made.queues[role] = queue
    return queue


def queue_encryption(key_arn: pulumi.Input[str] | None) -> dict[str, Any]:
    """A queue of the component's own encrypted with the customer-managed key `key_arn` (`own_key_arn`: parked
    messages carry whole items), or with SQS's own key when there is none."""
    return {"kms_master_key_id": key_arn} if key_arn is not None else {"sqs_managed_sse_enabled": True}


def owned_queue(queue: aws.sqs.Queue, key_arn: pulumi.Input[str] | None = None) -> QueueRef:
    """A queue the component made, as its senders see it: 1 MiB messages, under `key_arn` (None: SQS's own)."""
    return QueueRef(
        arn=queue.arn,
        url=queue.url,
        max_message_bytes=constants.OWNED_QUEUE_MESSAGE_BYTES,
        key_arn=key_arn,
        resource=queue,
    )


def build_dead_letter_queue(
    owner: Owner,
    role: str,
    given: ExistingQueue | None,
    *,
    option: str,
    home_arn: pulumi.Input[str] | None,
    rename: Callable[[str], str] = str,
    key_arn: pulumi.Input[str] | None = None,
) -> QueueRef:
    """The queue for `role` ("poison", "stream-dlq", "target-dlq"): the user's (`given`, option `option`), checked
    once its ARN and the deploying account and Region (`home_arn`: an ARN there) are known, and raising then, which
    fails the deploy naming the option; or a new one (`build_queue`, under `key_arn`). The user's is recorded by
    name for the alarms."""
    if given is None:
        return owned_queue(build_queue(owner, role, key_arn=key_arn), key_arn)

    def check(values: list[Any]) -> str:
        arn, home = values
        if arn is None:  # mocks that echo inputs: nothing to check
            return cast(str, arn)
        problem = queue_arn_problem(option, arn)
        if problem is None and home not in (None, arns.UNKNOWN_ARN):
            problem = placement_problem(option, arn, home)
        if problem:
            raise ValueError(rename(problem))
        return cast(str, arn)

    arn = pulumi.Output.all(given.queue_arn, home_arn).apply(check)
    owner.made.given_queue_names[role] = arn.apply(lambda a: queue_name(a or arns.UNKNOWN_ARN))
    return QueueRef(
        arn=arn,
        url=arn.apply(lambda a: queue_url(a or arns.UNKNOWN_ARN)),
        max_message_bytes=given.max_message_bytes,
        key_arn=given.kms_key_arn,
    )


def deploying_arn(owner: Owner) -> pulumi.Output[str]:
    """An ARN in the account and Region the stack deploys to, from the caller identity and the provider's Region:
    looked up only when no queue of the component's own can tell (the user brought the poison queue)."""
    opts = pulumi.InvokeOutputOptions(parent=owner.parent)
    identity = aws.get_caller_identity_output(opts=opts)
    region = aws.get_region_output(opts=opts)

    def arn(values: list[Any]) -> str:
        caller, where = values
        if not caller or not where:  # mocks that echo inputs
            return arns.UNKNOWN_ARN
        partition, _, _, account, _ = arns.arn_parts(caller)
        return f"arn:{partition}:sqs:{where}:{account}:scheduled-table"

    return pulumi.Output.all(identity.arn, region.region).apply(arn)


def build_lambda(
    owner: Owner,
    role: str,
    *,
    log_retention_days: int,
    role_description: str,
    policy: Callable[[pulumi.Output[str]], pulumi.Input[str]],
    overrides: FunctionOverrides | None = None,
    **function_args: Any,
) -> Consumer:
    """The one builder of every function the component makes: its log group (`{name}-{role}-logs`), its role
    (`{name}-{role}-role`, assumed by Lambda), the role's policy (`policy` of the log group's ARN: a function writes
    to its own group only) and the function (`{name}-{role}`, logging to that group, made once its policy and group
    exist). `function_args`: the function's own settings (code, handler, runtime, timeout, environment, ...);
    `overrides`: the user's for this role, which win over them (a VPC also grants the role its ENI actions)."""
    if overrides is not None and overrides.log_retention_days is not None:
        log_retention_days = overrides.log_retention_days
    log_group = aws.cloudwatch.LogGroup(
        f"{owner.name}-{role}-logs", retention_in_days=log_retention_days, tags=dict(owner.tags), opts=owner.child
    )
    vpc = policies.vpc_access_statements(overrides is not None and overrides.vpc is not None)
    lambda_role = aws.iam.Role(
        f"{owner.name}-{role}-role",
        description=role_description,
        assume_role_policy=policies.assume_role_policy("lambda.amazonaws.com"),
        tags=dict(owner.tags),
        opts=owner.child,
    )
    role_policy = aws.iam.RolePolicy(
        f"{owner.name}-{role}-policy",
        role=lambda_role.id,
        policy=pulumi.Output.from_input(policy(log_group.arn)).apply(lambda d: policies.with_statements(d, vpc)),
        opts=owner.child,
    )
    function = aws.lambda_.Function(
        f"{owner.name}-{role}",
        role=lambda_role.arn,
        logging_config=aws.lambda_.FunctionLoggingConfigArgs(log_format="Text", log_group=log_group.name),
        tags=dict(owner.tags),
        opts=pulumi.ResourceOptions(parent=owner.parent, depends_on=[role_policy, log_group]),
        **{**function_args, **function_settings(overrides)},
    )
    return Consumer(function=function, role=lambda_role, log_group=log_group, policy=role_policy)


def build_function(
    ctx: BuildContext,
    *,
    role: str,
    handler: str,
    extra_statements: pulumi.Output[list[policies.Statement]],
    config: pulumi.Output[str],
    stream: bool,
    send_queues: list[QueueRef],
) -> Consumer:
    """A handler of the mode (`build_lambda`) with its least-privilege policy; `stream` adds reading this table's
    stream. Recorded by role for the alarms and the dashboard."""
    a, owner = ctx.args, ctx.owner

    def policy(log_group_arn: pulumi.Output[str]) -> pulumi.Output[str]:
        return pulumi.Output.all(
            ctx.table.arn,
            log_group_arn,
            pulumi.Output.from_input(a.kms_key_arn),
            extra_statements,
            [q.arn for q in send_queues],
            [q.key_arn for q in send_queues],
        ).apply(
            lambda v: policies.document(
                policies.stream_consumer_statements(
                    table_arn=v[0] if stream else None,
                    log_group_arn=v[1],
                    send_queue_arns=list(v[4]),
                    kms_key_arn=v[2],
                    send_queue_key_arns=list(v[5]),
                )
                + v[3]
                + policies.tracing_statements(a.tracing)
            )
        )

    consumer = build_lambda(
        owner,
        role,
        log_retention_days=a.log_retention_days,
        role_description=descriptions.role(owner.name, role, str(a.mode)),
        policy=policy,
        overrides=a.function_overrides.get(role),
        code=handler_archive(a.lambda_runtime if a.lambda_bytecode else None),
        handler=handler,
        description=descriptions.function(owner.name, role, str(a.mode)),
        tracing_config=aws.lambda_.FunctionTracingConfigArgs(mode=a.tracing),
        runtime=a.lambda_runtime,
        architectures=[a.lambda_architecture],
        memory_size=a.lambda_memory_mb,
        timeout=a.lambda_timeout_seconds,
        # Checked against Lambda's 4 KB again with the real names (raising here fails `pulumi up`).
        environment=aws.lambda_.FunctionEnvironmentArgs(variables=config.apply(partial(function_environment, a))),
    )
    owner.made.functions[role] = consumer.function
    return consumer


def build_stream_consumer(
    ctx: BuildContext,
    *,
    role: str,
    handler: str,
    filters: list[dict[str, Any]],
    extra_statements: pulumi.Output[list[policies.Statement]],
    config: pulumi.Output[str],
) -> Consumer:
    """A function fed by this table's stream through a filtered event source mapping."""
    a, owner = ctx.args, ctx.owner
    consumer = build_function(
        ctx,
        role=role,
        handler=handler,
        extra_statements=extra_statements,
        config=config,
        stream=True,
        send_queues=[ctx.stream_dlq, ctx.poison_queue],
    )
    function, policy = consumer.function, consumer.policy
    owner.made.stream_functions[role] = function
    given = a.existing_table
    if given is not None and given.stream_arn is not None:
        # Another account's table is not looked up: let a stream without both images reach the function, which
        # parks each record naming the setting (a correct stream never matches this filter).
        filters = within_filter_limit([*filters, WRONG_VIEW_TYPE_FILTER])
    mapping = aws.lambda_.EventSourceMapping(
        f"{owner.name}-{role}-mapping",
        event_source_arn=ctx.table.stream_arn,
        function_name=function.arn,
        starting_position=a.starting_position,
        batch_size=a.batch_size,
        maximum_batching_window_in_seconds=a.maximum_batching_window_seconds,
        maximum_retry_attempts=a.maximum_retry_attempts,
        maximum_record_age_in_seconds=a.maximum_record_age_seconds,
        bisect_batch_on_function_error=a.bisect_on_error,
        parallelization_factor=a.parallelization_factor,
        function_response_types=["ReportBatchItemFailures"],
        destination_config=aws.lambda_.EventSourceMappingDestinationConfigArgs(
            on_failure=aws.lambda_.EventSourceMappingDestinationConfigOnFailureArgs(destination_arn=ctx.stream_dlq.arn)
        ),
        filter_criteria=aws.lambda_.EventSourceMappingFilterCriteriaArgs(
            filters=[
                aws.lambda_.EventSourceMappingFilterCriteriaFilterArgs(pattern=p) for p in filter_patterns(filters)
            ]
        ),
        opts=pulumi.ResourceOptions(parent=owner.parent, depends_on=[policy]),
    )
    return dataclasses.replace(consumer, mapping=mapping)


def target_statements(ctx: BuildContext, build: Callable[..., list[policies.Statement]]) -> pulumi.Output[list[Any]]:
    """`build` (a policies function over the target's kind and ARN) once the target's and the table's ARNs are known,
    with the email sender and configuration set and the target's own KMS key where there are."""
    target = ctx.args.target
    target_key = getattr(target, "kms_key_arn", None)
    email = {
        name: getattr(target, name)
        for name in ("sender", "configuration_set")
        if isinstance(target, EmailTarget) and getattr(target, name)
    }
    return pulumi.Output.all(ctx.target_arn, ctx.home_arn, target_key).apply(
        lambda v: build(ctx.target_kind, v[0], home_arn=v[1], target_key_arn=v[2], **email)
    )


def build_target_dlq(ctx: BuildContext) -> QueueRef:
    """The target DLQ: the user's (`existing_target_dlq`) or a new one."""
    return build_dead_letter_queue(
        ctx.owner,
        "target-dlq",
        ctx.args.existing_target_dlq,
        option="existing_target_dlq",
        home_arn=ctx.home_arn,
        rename=ctx.rename,
        key_arn=own_key_arn(ctx.args),
    )


def build_scheduling(
    ctx: BuildContext, fire_statements: pulumi.Output[list[policies.Statement]], target_dlq: QueueRef | None = None
) -> Scheduling:
    """Schedule group, target DLQ (`target_dlq`, if the mode made it first) and the role Scheduler assumes
    (allowed `fire_statements` and the DLQ, and its key), plus what the consumer needs to manage schedules in that
    group and pass that role."""
    owner = ctx.owner
    group = aws.scheduler.ScheduleGroup(f"{owner.name}-schedules", tags=dict(owner.tags), opts=owner.child)
    target_dlq = target_dlq or build_target_dlq(ctx)
    role = aws.iam.Role(
        f"{owner.name}-scheduler-exec-role",
        description=descriptions.scheduler_role(owner.name),
        # Scheduler assumes the role for the deploying account (the schedules are its), whoever's the table is.
        assume_role_policy=ctx.home_arn.apply(
            lambda arn: policies.assume_role_policy("scheduler.amazonaws.com", policies.account_of(arn))
        ),
        tags=dict(owner.tags),
        opts=owner.child,
    )
    # Each schedule's payload under the table's key (`own_key_arn`): Scheduler encrypts it as the scheduling
    # function, and decrypts it as this role.
    key = own_key_arn(ctx.args)
    aws.iam.RolePolicy(
        f"{owner.name}-scheduler-exec-policy",
        role=role.id,
        policy=pulumi.Output.all(fire_statements, target_dlq.arn, target_dlq.key_arn, key, group.arn).apply(
            lambda v: policies.scheduler_execution_policy(v[0], v[1], v[2], payload_key_arn=v[3], group_arn=v[4])
        ),
        opts=owner.child,
    )
    consumer_statements = pulumi.Output.all(group.arn, role.arn, key).apply(
        lambda v: policies.scheduling_statements(group_arn=v[0], scheduler_role_arn=v[1], payload_key_arn=v[2])
    )
    values: dict[str, pulumi.Input[str]] = {
        Value.SCHEDULE_GROUP: group.name,
        Value.SCHEDULER_ROLE_ARN: role.arn,
        Value.TARGET_DLQ_ARN: target_dlq.arn,
    }
    if key is not None:
        values[Value.SCHEDULE_KEY_ARN] = key
    return Scheduling(group=group, target_dlq=target_dlq, consumer_statements=consumer_statements, values=values)


def other_accounts_table(ctx: BuildContext) -> pulumi.Output[bool]:
    """Whether the functions name the table by its ARN (another account's): then no transaction may hold one of its
    items and one of the ledger's, which is in the deploying account."""
    return pulumi.Output.all(ctx.table.name, ctx.table.arn, ctx.home_arn).apply(
        lambda v: (table_reference(*v) or "").startswith("arn:")  # None: a name not known yet (minimal mocks)
    )


def handler_config(ctx: BuildContext, values: dict[str, pulumi.Input[str]]) -> pulumi.Output[str]:
    """The handler's config document, from the shared values and a mode's own (`runtime_config.needed_values`)."""
    shared = {
        Value.TABLE: pulumi.Output.all(ctx.table.name, ctx.table.arn, ctx.home_arn).apply(
            lambda v: table_reference(*v)
        ),
        Value.TARGET_ARN: ctx.target_arn,
        Value.POISON_QUEUE_URL: ctx.poison_queue.url,
    }
    return pulumi.Output.all(**shared, **values).apply(partial(handler_document, ctx.args))


def build_ledger(ctx: BuildContext) -> aws.dynamodb.Table:
    """The idempotency ledger: one small item per occurrence or record, expiring by TTL, no stream (so nothing
    written to it can trigger anything)."""
    a, owner = ctx.args, ctx.owner
    return aws.dynamodb.Table(
        f"{owner.name}-ledger",
        attributes=[aws.dynamodb.TableAttributeArgs(name="id", type="S")],
        hash_key="id",
        billing_mode="PAY_PER_REQUEST",
        ttl=aws.dynamodb.TableTtlArgs(attribute_name="expiresAt", enabled=True),
        point_in_time_recovery=aws.dynamodb.TablePointInTimeRecoveryArgs(enabled=a.point_in_time_recovery),
        server_side_encryption=aws.dynamodb.TableServerSideEncryptionArgs(
            enabled=a.server_side_encryption, kms_key_arn=a.kms_key_arn
        ),
        deletion_protection_enabled=a.deletion_protection,
        tags=dict(owner.tags),
        opts=owner.child,
    )
