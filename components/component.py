"""ScheduledTable: a DynamoDB table whose items name times, and the machinery that acts at those times."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import pulumi
import pulumi_aws as aws

from . import aggregate, arns, descriptions, eventbridge, operations, policies, polling, ttl
from .args import Mode, ScheduledTableArgs
from .existing import (
    WRONG_VIEW_TYPE_FILTER,
    existing_table_problem,
    latest_stream_problem,
    looked_up,
    stream_region_and_account,
    table_arn_of,
    table_problems,
)
from .filters import filter_patterns
from .packaging import handler_archive, runtime_module
from .parts import Consumer, Scheduling
from .provider_inputs import ScheduledTableInputs
from .runtime_config import (
    OWNED_QUEUE_MAX_MESSAGE_BYTES,
    Value,
    function_environment,
    handler_document,
    target_kind,
)
from .targets import (
    EmailTarget,
    FunctionTarget,
    QueueTarget,
    StateMachineTarget,
    TopicTarget,
    checked_arn,
    topic_arn_problem,
)


@dataclasses.dataclass(frozen=True)
class TableRef:
    """What the component needs of its table, whether it made it or was given it."""

    name: pulumi.Output[str]
    arn: pulumi.Output[str]
    stream_arn: pulumi.Output[str]


TYPE = "scheduled-table:index:ScheduledTable"
DLQ_RETENTION_SECONDS = 14 * 24 * 3600


class ScheduledTable(pulumi.ComponentResource):
    """One DynamoDB table plus, per `mode`, the stream consumers, schedules, queues and least-privilege roles that
    deliver a due event to `target` at the time each item names."""

    table_name: pulumi.Output[str]
    table_arn: pulumi.Output[str]
    stream_arn: pulumi.Output[str]
    function_name: pulumi.Output[str]
    schedule_group_name: pulumi.Output[str] | None
    due_queue_url: pulumi.Output[str] | None
    due_queue_arn: pulumi.Output[str] | None
    stream_dlq_url: pulumi.Output[str]
    target_dlq_url: pulumi.Output[str] | None
    ledger_table_name: pulumi.Output[str] | None
    processor_function_name: pulumi.Output[str] | None
    tick_rule_name: pulumi.Output[str] | None
    # The topic alarms go to: the one given (an encrypted one needs a key policy that lets cloudwatch.amazonaws.com
    # use the key, see policies.alarm_topic_key_policy) or the one created, with such a key.
    alarm_topic_arn: pulumi.Output[str] | None
    poison_queue_url: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: ScheduledTableArgs | ScheduledTableInputs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """Create the table and, for `args.mode`, everything that acts on its items' times.

        name: the prefix of every child resource (`{name}-table`, `{name}-scheduler`, ...), unique in the stack.
        args: a ScheduledTableArgs; `help(ScheduledTableArgs)` lists every option with its default. Invalid values
            and conflicting options raise ValueError here, before anything is created. Or the provider form (a
            ScheduledTableInputs dict, what other Pulumi languages send): the same validation, its messages naming
            the camelCase inputs.
        opts: Pulumi resource options for the component (provider, protect, depends_on, ...).

        Outputs: table_name, table_arn, stream_arn, function_name, stream_dlq_url, poison_queue_url, and per mode
        schedule_group_name, due_queue_url/due_queue_arn, target_dlq_url, ledger_table_name,
        processor_function_name, tick_rule_name, alarm_topic_arn; all of them in `outputs`.
        """
        # How a message names the options: as written in Python, or as the provider's camelCase inputs.
        self._rename: Callable[[str], str] = str
        if not isinstance(args, ScheduledTableArgs):
            from .provider import args_from_inputs, provider_message  # here: provider.py subclasses this class

            args = args_from_inputs(args)
            self._rename = provider_message
        args = self._checked_keys(args)
        super().__init__(TYPE, name, {}, opts)
        self._name = name
        self._args = args
        self._tags = {**args.tags, "scheduled-table:component": name}
        self._child = pulumi.ResourceOptions(parent=self)
        # Every function and queue made, by role, for the alarms and the dashboard.
        self._functions: dict[str, aws.lambda_.Function] = {}
        self._stream_functions: dict[str, aws.lambda_.Function] = {}
        self._queues: dict[str, aws.sqs.Queue] = {}

        self.table = self._table()
        self.table_name = self.table.name
        self.table_arn = self.table.arn
        self.stream_arn = self.table.stream_arn

        self.stream_dlq = self._queue("stream-dlq")
        self.poison_queue = self._queue("poison")
        self.stream_dlq_url = self.stream_dlq.url
        self.poison_queue_url = self.poison_queue.url

        self.due_queue: aws.sqs.Queue | None = None
        self.due_queue_url = self.due_queue_arn = None
        self.target_kind = target_kind(args)
        self.target_arn: pulumi.Input[str] = ""  # aggregate: totals are written to the table itself, no target
        if args.mode is not Mode.AGGREGATE and args.target is None:
            self.due_queue = self._queue("due", retention=4 * 24 * 3600)
            self.due_queue_url, self.due_queue_arn = self.due_queue.url, self.due_queue.arn
            self.target_arn = self.due_queue.arn
        elif args.target is not None:
            self.target_arn = checked_arn(
                args.target, scheduler_delivers=args.mode is Mode.EVENTBRIDGE, rename=self._rename
            )

        self.schedule_group_name = None
        self.target_dlq_url = None
        self.ledger_table_name = None
        self.processor_function_name = None
        self.tick_rule_name = None
        consumer = _MODE_BUILDERS[Mode(args.mode)](self)
        self.alarm_topic_arn: pulumi.Output[str] | None = None
        self._operations()
        self.function = consumer.function
        self.function_name = consumer.function.name

        self.name = name
        outputs: dict[str, Any] = {
            "table_name": self.table_name,
            "table_arn": self.table_arn,
            "stream_arn": self.stream_arn,
            "function_name": self.function_name,
            "stream_dlq_url": self.stream_dlq_url,
            "poison_queue_url": self.poison_queue_url,
        }
        optional = (
            "schedule_group_name",
            "due_queue_url",
            "due_queue_arn",
            "target_dlq_url",
            "ledger_table_name",
            "processor_function_name",
            "tick_rule_name",
            "alarm_topic_arn",
        )
        for key in optional:
            if getattr(self, key) is not None:
                outputs[key] = getattr(self, key)
        self.outputs: dict[str, pulumi.Output[str]] = outputs
        self.register_outputs(outputs)

    # -- operations ------------------------------------------------------------------------------------------------

    def _operations(self) -> None:
        """Alarms on every dead-letter and poison queue, every function's errors and each stream consumer's
        iterator age (to the alarm topic, if any), and one dashboard for the table."""
        a = self._args
        if a.alarms:
            topic: pulumi.Input[str] | None = a.alarm_topic_arn
            if topic is not None and not isinstance(topic, str):
                topic = pulumi.Output.all(topic).apply(lambda v: self._checked_topic(v[0]))
            if a.create_alarm_topic:
                topic = self._alarm_topic().arn
            if topic is not None:
                self.alarm_topic_arn = pulumi.Output.from_input(topic)
            # (logical name suffix, spec): names are known now, the specs once the resources have names.
            specs: list[tuple[str, pulumi.Output[operations.AlarmSpec]]] = []
            for role, queue in self._queues.items():
                if role != "due":  # the due queue is the target: messages there are the point
                    specs.append((f"{role}-not-empty", queue.name.apply(partial(operations.queue_alarm, role))))
            for role, function in self._functions.items():
                specs.append((f"{role}-errors", function.name.apply(partial(operations.function_errors_alarm, role))))
            for role, function in self._stream_functions.items():
                age = partial(_iterator_age, role, a.iterator_age_alarm_seconds)
                specs.append((f"{role}-iterator-age", function.name.apply(age)))
            for suffix, spec in specs:
                self._alarm(suffix, spec, topic)
        if a.dashboard:
            names = {role: q.name for role, q in self._queues.items() if role != "due"}
            body = pulumi.Output.all(
                self.table.name,
                self.table.arn,
                [f.name for f in self._functions.values()],
                [f.name for f in self._stream_functions.values()],
                pulumi.Output.all(**names),
            ).apply(
                lambda v: operations.dashboard_body(
                    region=arns.arn_parts(v[1])[2],
                    table=v[0],
                    mode=str(a.mode),
                    functions=list(v[2]),
                    stream_functions=list(v[3]),
                    queues=dict(v[4]),
                )
            )
            aws.cloudwatch.Dashboard(
                f"{self._name}-dashboard",
                dashboard_name=operations.dashboard_name(self._name, pulumi.get_stack()),
                dashboard_body=body,
                opts=self._child,
            )

    def _checked_keys(self, args: ScheduledTableArgs) -> ScheduledTableArgs:
        """`args` with each KMS key given as an Output checked when it resolves, as a plain one is at construction
        (raising then fails `pulumi up`, naming the option)."""

        def checked(field_name: str, key: pulumi.Input[str]) -> pulumi.Output[str]:
            def check(value: str | None) -> str:
                problem = arns.kms_key_problem(field_name, value) if value is not None else None  # None: echoing mocks
                if problem:
                    raise ValueError(self._rename(problem))
                return cast(str, value)

            return pulumi.Output.all(key).apply(lambda v: check(v[0]))

        changes: dict[str, Any] = {}
        if args.kms_key_arn is not None and not isinstance(args.kms_key_arn, str):
            changes["kms_key_arn"] = checked("kms_key_arn", args.kms_key_arn)
        target = args.target
        if isinstance(target, QueueTarget | FunctionTarget | StateMachineTarget | TopicTarget):
            key = target.kms_key_arn
            if key is not None and not isinstance(key, str):
                owner = type(target).__name__
                changes["target"] = dataclasses.replace(target, kms_key_arn=checked(f"{owner}.kms_key_arn", key))
        return dataclasses.replace(args, **changes) if changes else args

    def _checked_topic(self, value: str | None) -> str:
        """alarm_topic_arn given as an Output, once it resolves: refused as a plain string would be at construction
        (raising here fails `pulumi up`, naming the option). None: mocks that echo inputs."""
        problem = topic_arn_problem("alarm_topic_arn", value) if value is not None else None
        if problem:
            raise ValueError(self._rename(problem))
        return cast(str, value)

    def _alarm_topic(self) -> aws.sns.Topic:
        """An SNS topic encrypted with a key of its own whose policy lets CloudWatch publish to it (the AWS-managed
        alias/aws/sns key cannot: alarms to a topic encrypted with it never arrive)."""
        key = aws.kms.Key(
            f"{self._name}-alarms-key",
            description=f"Encrypts the alarm topic of scheduled table {self._name}; CloudWatch and SNS may use it",
            enable_key_rotation=True,
            policy=self.table.arn.apply(policies.alarm_topic_key_policy),
            tags=self._tags,
            opts=self._child,
        )
        return aws.sns.Topic(f"{self._name}-alarms", kms_master_key_id=key.arn, tags=self._tags, opts=self._child)

    def _alarm(self, suffix: str, spec: pulumi.Output[operations.AlarmSpec], topic: pulumi.Input[str] | None) -> None:
        actions = [topic] if topic is not None else []
        aws.cloudwatch.MetricAlarm(
            f"{self._name}-{suffix}-alarm",
            alarm_description=spec.apply(lambda s: s.description),
            namespace=spec.apply(lambda s: s.namespace),
            metric_name=spec.apply(lambda s: s.metric),
            dimensions=spec.apply(lambda s: s.dimensions),
            statistic=spec.apply(lambda s: s.statistic),
            period=spec.apply(lambda s: s.period),
            evaluation_periods=spec.apply(lambda s: s.evaluation_periods),
            threshold=spec.apply(lambda s: s.threshold),
            comparison_operator=spec.apply(lambda s: s.comparison),
            treat_missing_data="notBreaching",
            alarm_actions=actions,
            ok_actions=actions,
            tags=self._tags,
            opts=self._child,
        )

    # -- shared pieces: every mode's module (components/<mode>.py, `build`) makes its resources with these ---------

    def _table(self) -> TableRef:
        """The table acted on: the one given (`existing_table`), or a new one."""
        given = self._args.existing_table
        if given is not None:
            if given.stream_arn is None:
                return self._looked_up_table(given.name)
            return self._given_table(given.name, given.stream_arn)
        table = self._new_table()
        return TableRef(name=table.name, arn=table.arn, stream_arn=table.stream_arn)

    def _fail(self, message: str) -> None:
        """Fail `pulumi up` from inside an apply, naming the field as the user wrote it (Python or provider input)."""
        raise ValueError(self._rename(message))

    def _checked_table(self, result: Any, stream_arn: str | None = None) -> dict[str, Any]:
        """A looked-up table, refused if it lacks what the mode needs (or, given by stream ARN, if that is not its
        latest stream): the deploy fails naming each setting to change."""
        a = self._args
        table = looked_up(result)
        problems = table_problems(
            table,
            mode=str(a.mode),
            partition_key=a.partition_key,
            sort_key=a.sort_key,
            time_attribute=a.time_attribute,
        )
        if problems:
            self._fail("existing_table: " + "; ".join(problems))
        stale = latest_stream_problem(table, stream_arn) if stream_arn is not None else None
        if stale:
            self._fail(stale)
        return table

    def _looked_up_table(self, name: pulumi.Input[str]) -> TableRef:
        """An existing table given by name only: looked up when the stack deploys, and refused (failing the deploy
        with the settings to change) if it lacks what the mode needs."""
        found = aws.dynamodb.get_table_output(name=name, opts=pulumi.InvokeOutputOptions(parent=self))
        table = found.apply(self._checked_table)
        return TableRef(
            name=table.apply(lambda t: str(t["name"])),
            arn=table.apply(lambda t: str(t["arn"])),
            stream_arn=table.apply(lambda t: str(t["stream_arn"])),
        )

    def _given_table(self, name: pulumi.Input[str], stream_arn: pulumi.Input[str]) -> TableRef:
        """An existing table given by name and stream ARN, either of them plain or an Output. Once both are known
        they must be one table's (as plain strings are checked at construction); the table the stream ARN names is
        then looked up in its region and checked as a table given by name is, when it is in the deploying account
        (another account's cannot be described: its records are parked at run time instead, see
        existing.WRONG_VIEW_TYPE_FILTER). Everything built on the table waits for these checks, so a failed one
        fails the deploy before anything reads the stream."""
        caller = aws.get_caller_identity_output(opts=pulumi.InvokeOutputOptions(parent=self))

        def check(values: list[Any]) -> Any:
            table, stream, account = values
            if table is None or stream is None:  # mocks that echo inputs: nothing to check
                return [table, stream]
            problem = existing_table_problem(table, stream)
            if problem:
                self._fail(problem)
            region, owner = stream_region_and_account(stream)
            if owner != account:
                return [table, stream]
            found = aws.dynamodb.get_table_output(
                name=table, region=region, opts=pulumi.InvokeOutputOptions(parent=self)
            )
            return found.apply(lambda result: [self._checked_table(result, stream)["name"], stream])

        pair = pulumi.Output.all(name, stream_arn, caller.account_id).apply(check)
        return TableRef(
            name=pair.apply(lambda p: p[0]),
            arn=pair.apply(lambda p: table_arn_of(p[1]) if p[1] is not None else arns.UNKNOWN_ARN),
            stream_arn=pair.apply(lambda p: p[1]),
        )

    def _new_table(self) -> aws.dynamodb.Table:
        a = self._args
        attributes = [aws.dynamodb.TableAttributeArgs(name=a.partition_key, type=a.partition_key_type)]
        if a.sort_key:
            attributes.append(aws.dynamodb.TableAttributeArgs(name=a.sort_key, type=a.sort_key_type))
        indexes: list[aws.dynamodb.TableGlobalSecondaryIndexArgs] = []
        if a.mode is Mode.POLLING:
            # The sparse due index: only items waiting to run carry its keys (shard, due epoch seconds).
            pending = runtime_module("pending")
            attributes += [
                aws.dynamodb.TableAttributeArgs(name=pending.SHARD, type="N"),
                aws.dynamodb.TableAttributeArgs(name=pending.DUE, type="N"),
            ]
            indexes.append(
                aws.dynamodb.TableGlobalSecondaryIndexArgs(
                    name=pending.INDEX_NAME,
                    key_schemas=[
                        aws.dynamodb.TableGlobalSecondaryIndexKeySchemaArgs(
                            attribute_name=pending.SHARD, key_type="HASH"
                        ),
                        aws.dynamodb.TableGlobalSecondaryIndexKeySchemaArgs(
                            attribute_name=pending.DUE, key_type="RANGE"
                        ),
                    ],
                    projection_type="ALL",
                    read_capacity=a.read_capacity,
                    write_capacity=a.write_capacity,
                )
            )
        return aws.dynamodb.Table(
            f"{self._name}-table",
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
            # ttl mode: DynamoDB deletes each item once its time attribute (epoch seconds) has passed.
            global_secondary_indexes=indexes or None,
            ttl=aws.dynamodb.TableTtlArgs(attribute_name=a.time_attribute, enabled=True)
            if a.mode is Mode.TTL
            else None,
            tags=self._tags,
            opts=self._child,
        )

    def _queue(self, role: str, retention: int = DLQ_RETENTION_SECONDS) -> aws.sqs.Queue:
        """Encrypted standard queue taking messages up to 1 MiB; a DLQ has no DLQ of its own (its messages are the
        end of the line)."""
        queue = aws.sqs.Queue(
            f"{self._name}-{role}",
            sqs_managed_sse_enabled=True,
            max_message_size=OWNED_QUEUE_MAX_MESSAGE_BYTES,
            message_retention_seconds=retention,
            tags=self._tags,
            opts=self._child,
        )
        self._queues[role] = queue
        return queue

    def _email(self) -> EmailTarget | None:
        return self._args.target if isinstance(self._args.target, EmailTarget) else None

    def _function(
        self,
        *,
        role: str,
        handler: str,
        extra_statements: pulumi.Output[list[policies.Statement]],
        config: pulumi.Output[str],
        stream: bool,
        send_queues: list[aws.sqs.Queue],
    ) -> Consumer:
        """Log group, role, least-privilege policy and function; `stream` adds reading this table's stream."""
        a = self._args
        log_group = aws.cloudwatch.LogGroup(
            f"{self._name}-{role}-logs", retention_in_days=a.log_retention_days, tags=self._tags, opts=self._child
        )
        lambda_role = aws.iam.Role(
            f"{self._name}-{role}-role",
            description=descriptions.role(self._name, role, str(a.mode)),
            assume_role_policy=policies.assume_role_policy("lambda.amazonaws.com"),
            tags=self._tags,
            opts=self._child,
        )
        statements = pulumi.Output.all(
            self.table.arn,
            log_group.arn,
            pulumi.Output.from_input(a.kms_key_arn),
            extra_statements,
            *[q.arn for q in send_queues],
        ).apply(
            lambda v: (
                policies.stream_consumer_statements(
                    table_arn=v[0] if stream else None,
                    log_group_arn=v[1],
                    send_queue_arns=list(v[4:]),
                    kms_key_arn=v[2],
                )
                + v[3]
                + policies.tracing_statements(a.tracing)
            )
        )
        policy = aws.iam.RolePolicy(
            f"{self._name}-{role}-policy",
            role=lambda_role.id,
            policy=statements.apply(policies.document),
            opts=self._child,
        )
        function = aws.lambda_.Function(
            f"{self._name}-{role}",
            code=handler_archive(),
            handler=handler,
            description=descriptions.function(self._name, role, str(a.mode)),
            tracing_config=aws.lambda_.FunctionTracingConfigArgs(mode=a.tracing),
            runtime=a.lambda_runtime,
            architectures=[a.lambda_architecture],
            memory_size=a.lambda_memory_mb,
            timeout=a.lambda_timeout_seconds,
            role=lambda_role.arn,
            # Checked against Lambda's 4 KB again with the real names (raising here fails `pulumi up`).
            environment=aws.lambda_.FunctionEnvironmentArgs(variables=config.apply(partial(function_environment, a))),
            logging_config=aws.lambda_.FunctionLoggingConfigArgs(log_format="Text", log_group=log_group.name),
            tags=self._tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy, log_group]),
        )
        self._functions[role] = function
        return Consumer(function=function, role=lambda_role, log_group=log_group, policy=policy)

    def _consumer(
        self,
        *,
        role: str,
        handler: str,
        filters: list[dict[str, Any]],
        extra_statements: pulumi.Output[list[policies.Statement]],
        config: pulumi.Output[str],
    ) -> Consumer:
        """A function fed by this table's stream through a filtered event source mapping."""
        a = self._args
        consumer = self._function(
            role=role,
            handler=handler,
            extra_statements=extra_statements,
            config=config,
            stream=True,
            send_queues=[self.stream_dlq, self.poison_queue],
        )
        function, policy = consumer.function, consumer.policy
        self._stream_functions[role] = function
        given = a.existing_table
        if given is not None and given.stream_arn is not None:
            filters = [*filters, WRONG_VIEW_TYPE_FILTER]
        mapping = aws.lambda_.EventSourceMapping(
            f"{self._name}-{role}-mapping",
            event_source_arn=self.table.stream_arn,
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
                on_failure=aws.lambda_.EventSourceMappingDestinationConfigOnFailureArgs(
                    destination_arn=self.stream_dlq.arn
                )
            ),
            filter_criteria=aws.lambda_.EventSourceMappingFilterCriteriaArgs(
                filters=[
                    aws.lambda_.EventSourceMappingFilterCriteriaFilterArgs(pattern=p) for p in filter_patterns(filters)
                ]
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]),
        )
        return dataclasses.replace(consumer, mapping=mapping)

    def _target_statements(self, build: Callable[..., list[policies.Statement]]) -> pulumi.Output[list[Any]]:
        email = self._email()
        target_key = getattr(self._args.target, "kms_key_arn", None)
        return pulumi.Output.all(self.target_arn, self.table.arn, target_key).apply(
            lambda v: build(
                self.target_kind, v[0], table_arn=v[1], sender=email.sender if email else None, target_key_arn=v[2]
            )
        )

    # -- shared by several modes: schedules, the handler config, the ledger ------------------------------------

    def _scheduling(
        self, fire_statements: pulumi.Output[list[policies.Statement]], target_dlq: aws.sqs.Queue | None = None
    ) -> Scheduling:
        """Schedule group, target DLQ (`target_dlq`, if the mode made it first) and the role Scheduler assumes
        (allowed `fire_statements` and the DLQ), plus what the consumer needs to manage schedules in that group and
        pass that role."""
        group = aws.scheduler.ScheduleGroup(f"{self._name}-schedules", tags=self._tags, opts=self._child)
        self.schedule_group_name = group.name
        target_dlq = target_dlq or self._queue("target-dlq")
        self.target_dlq_url = target_dlq.url
        role = aws.iam.Role(
            f"{self._name}-scheduler-exec-role",
            description=descriptions.scheduler_role(self._name),
            assume_role_policy=self.table.arn.apply(
                lambda arn: policies.assume_role_policy("scheduler.amazonaws.com", policies.account_of(arn))
            ),
            tags=self._tags,
            opts=self._child,
        )
        aws.iam.RolePolicy(
            f"{self._name}-scheduler-exec-policy",
            role=role.id,
            policy=pulumi.Output.all(fire_statements, target_dlq.arn).apply(
                lambda v: policies.scheduler_execution_policy(v[0], v[1])
            ),
            opts=self._child,
        )
        consumer_statements = pulumi.Output.all(group.arn, role.arn).apply(
            lambda v: policies.scheduling_statements(group_arn=v[0], scheduler_role_arn=v[1])
        )
        values: dict[str, pulumi.Input[str]] = {
            Value.SCHEDULE_GROUP: group.name,
            Value.SCHEDULER_ROLE_ARN: role.arn,
            Value.TARGET_DLQ_ARN: target_dlq.arn,
        }
        return Scheduling(consumer_statements=consumer_statements, values=values)

    def _config(self, values: dict[str, pulumi.Input[str]]) -> pulumi.Output[str]:
        """The handler's config document, from the shared values and a mode's own (`runtime_config.needed_values`)."""
        shared = {
            Value.TABLE: self.table.name,
            Value.TARGET_ARN: self.target_arn,
            Value.POISON_QUEUE_URL: self.poison_queue.url,
        }
        return pulumi.Output.all(**shared, **values).apply(partial(handler_document, self._args))

    def _ledger(self) -> aws.dynamodb.Table:
        """The idempotency ledger: one small item per occurrence or record, expiring by TTL, no stream (so nothing
        written to it can trigger anything)."""
        a = self._args
        ledger = aws.dynamodb.Table(
            f"{self._name}-ledger",
            attributes=[aws.dynamodb.TableAttributeArgs(name="id", type="S")],
            hash_key="id",
            billing_mode="PAY_PER_REQUEST",
            ttl=aws.dynamodb.TableTtlArgs(attribute_name="expiresAt", enabled=True),
            point_in_time_recovery=aws.dynamodb.TablePointInTimeRecoveryArgs(enabled=a.point_in_time_recovery),
            server_side_encryption=aws.dynamodb.TableServerSideEncryptionArgs(
                enabled=a.server_side_encryption, kms_key_arn=a.kms_key_arn
            ),
            deletion_protection_enabled=a.deletion_protection,
            tags=self._tags,
            opts=self._child,
        )
        self.ledger_table_name = ledger.name
        return ledger


def _iterator_age(role: str, seconds: int, function_name: str) -> operations.AlarmSpec:
    return operations.iterator_age_alarm(role, function_name, seconds)


_MODE_BUILDERS: dict[Mode, Callable[[ScheduledTable], Consumer]] = {
    Mode.EVENTBRIDGE: eventbridge.build,
    Mode.TTL: ttl.build,
    Mode.POLLING: polling.build,
    Mode.AGGREGATE: aggregate.build,
}
