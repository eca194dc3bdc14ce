"""ScheduledTable: a DynamoDB table whose items name times, and the machinery that acts at those times."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, cast

import pulumi
import pulumi_aws as aws

from . import modes
from .alarms import build_alarms
from .args import ScheduledTableArgs
from .arns import kms_key_problem
from .backfill_function import build_backfill, build_reconcile_every, ledger_arn
from .builders import build_dead_letter_queue, build_queue, build_table, deploying_arn
from .inputs import args_from_inputs, provider_message
from .parts import BuildContext, Made, Owner, TableRef
from .provider_inputs import ScheduledTableInputs
from .queues import QUEUE_OPTIONS
from .runtime_config import own_key_arn, target_kind
from .targets import checked_arn, topic_arn_problem

TYPE = "scheduled-table:index:ScheduledTable"
__all__ = ["TYPE", "ScheduledTable", "TableRef"]


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
    backfill_function_name: pulumi.Output[str] | None

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
            the camelCase inputs; a dict's keys may be written either way (`batch_size` or `batchSize`).
        opts: Pulumi resource options for the component (provider, protect, depends_on, ...).

        Outputs: table_name, table_arn, stream_arn, function_name, stream_dlq_url, poison_queue_url, and per mode
        schedule_group_name, due_queue_url/due_queue_arn, target_dlq_url, ledger_table_name,
        processor_function_name, tick_rule_name, alarm_topic_arn; all of them in `outputs`.
        """
        # How a message names the options: as written in Python, or as the provider's camelCase inputs.
        rename: Callable[[str], str] = str
        if not isinstance(args, ScheduledTableArgs):
            args, rename = args_from_inputs(args), provider_message
        args = checked_outputs(args, rename)
        super().__init__(TYPE, name, {}, opts)
        owner = Owner(name=name, parent=self, tags={**args.tags, "scheduled-table:component": name}, made=Made())

        # name, ARN, stream ARN, made or given; `.resource`: the aws.dynamodb.Table made (an escape hatch, see below)
        self.table: TableRef = build_table(owner, args, rename)
        self.table_name = self.table.name
        self.table_arn = self.table.arn
        self.stream_arn = self.table.stream_arn
        # The poison queue and the stream DLQ: the user's (ExistingQueue) or the component's own. An owned poison
        # queue's ARN tells the deploying account and Region (every child is made there), with no lookup; with the
        # user's, the caller identity and Region are looked up instead (the queues are checked against them).
        poison_given = args.existing_poison_queue
        home: pulumi.Output[str] | None = deploying_arn(owner) if poison_given is not None else None
        key = own_key_arn(args)  # the table's key, for the queues that hold its items whole
        poison = build_dead_letter_queue(
            owner, "poison", poison_given, option="existing_poison_queue", home_arn=home, rename=rename, key_arn=key
        )
        home = home if home is not None else poison.arn
        stream_dlq = build_dead_letter_queue(
            owner,
            "stream-dlq",
            args.existing_stream_dlq,
            option="existing_stream_dlq",
            home_arn=home,
            rename=rename,
            key_arn=key,
        )
        # The queues the component made (None for one the user gave).
        self.stream_dlq: aws.sqs.Queue | None = stream_dlq.resource
        self.poison_queue: aws.sqs.Queue | None = poison.resource
        self.stream_dlq_url = stream_dlq.url
        self.poison_queue_url = poison.url

        # The target: the one given, a queue of the component's own (the due queue), or none (aggregate writes its
        # totals to the table itself).
        self.due_queue: aws.sqs.Queue | None = None
        self.due_queue_url = self.due_queue_arn = None
        self.target_kind = target_kind(args)
        self.target_arn: pulumi.Input[str] = ""
        mode = modes.of(args)
        if mode.has_target and args.target is None:
            self.due_queue = build_queue(owner, "due", retention=4 * 24 * 3600)
            self.due_queue_url, self.due_queue_arn = self.due_queue.url, self.due_queue.arn
            self.target_arn = self.due_queue.arn
        elif args.target is not None:
            # `home` is in the deploying region: the target must be too (targets.region_problem).
            self.target_arn = checked_arn(
                args.target,
                scheduler_delivers=mode.scheduler_delivers(args),
                rename=rename,
                stack_region_of=home,
            )

        ctx = BuildContext(
            owner=owner,
            args=args,
            table=self.table,
            stream_dlq=stream_dlq,
            poison_queue=poison,
            target_kind=self.target_kind,
            target_arn=self.target_arn,
            # The deploying account's own, whoever's the table is (and whoever's the queues are: checked to be it).
            home_arn=home,
            rename=rename,
        )
        built = mode.build(ctx)
        self.schedule_group_name = built.schedule_group_name
        self.target_dlq_url = built.target_dlq_url
        self.ledger_table_name = built.ledger_table_name
        self.processor_function_name = built.processor_function_name
        self.tick_rule_name = built.tick_rule_name
        # Off by default: the function `scheduled-table backfill/reconcile --in-lambda` fans a scan out over.
        self.backfill_function_name: pulumi.Output[str] | None = None
        if args.backfill_function or args.reconcile_every is not None:
            backfill = build_backfill(
                owner=owner,
                consumer=built.consumer,
                mode=args.mode,
                table_arn=self.table.arn,
                stream_dlq_arn=stream_dlq.arn,
                # Its key is the consumer's mapping's to use, unless the backfill uses the same key for something
                # else too: the poison queue (it parks), the table, the target (one company key for all of them).
                stream_dlq_key_arn=pulumi.Output.all(
                    stream_dlq.key_arn, poison.key_arn, args.kms_key_arn, getattr(args.target, "kms_key_arn", None)
                ).apply(lambda keys: keys[0] if keys[0] not in keys[1:] else None),
                log_retention_days=args.log_retention_days,
                overrides=args.function_overrides.get("backfill"),
                checkpoint_ledger_arn=None
                if args.reconcile_every is None or built.ledger_table_name is None
                else pulumi.Output.all(home, built.ledger_table_name).apply(lambda v: ledger_arn(*v)),
            )
            self.backfill_function_name = backfill.name
            if args.reconcile_every is not None:  # reconcile run by itself, in slices, through the backfill function
                build_reconcile_every(
                    name=name, function=backfill, expression=args.reconcile_every, tags=dict(owner.tags), parent=self
                )
        self.alarm_topic_arn: pulumi.Output[str] | None = build_alarms(ctx)
        self.function_name = built.consumer.function.name

        # Escape hatches (docs/escape-hatches.md): the child resources themselves, to reference (`depends_on`,
        # another resource's input, a policy of your own) or read. To change a child's settings, pass
        # `opts=pulumi.ResourceOptions(transforms=[...])`: Pulumi runs a component's transforms on all its children.
        # Annotated here, not on the class: the provider's schema takes the class's annotations as its outputs.
        self.table_resource: aws.dynamodb.Table | None = self.table.resource  # None with `existing_table`
        self.function: aws.lambda_.Function = built.consumer.function  # the stream consumer (`function_name`)
        # Every function and queue, by role ("scheduler", "processor", ...; "poison", "due", "target-dlq", ...).
        self.functions: Mapping[str, aws.lambda_.Function] = MappingProxyType(owner.made.functions)
        self.queues: Mapping[str, aws.sqs.Queue] = MappingProxyType(owner.made.queues)
        self.tick_rule: aws.cloudwatch.EventRule | None = built.tick_rule  # polling's rule that runs the processor

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
            "backfill_function_name",
        )
        for key in optional:
            if getattr(self, key) is not None:
                outputs[key] = getattr(self, key)
        self.outputs: dict[str, pulumi.Output[str]] = outputs
        self.register_outputs(outputs)


def checked_outputs(args: ScheduledTableArgs, rename: Callable[[str], str]) -> ScheduledTableArgs:
    """`args` with each ARN option given as an Output (a KMS key, the alarm topic) checked when it resolves, as a
    plain one is at construction: raising then fails `pulumi up`, naming the option as the user wrote it."""

    def checked(field_name: str, value: pulumi.Input[str], problem_of: Callable[[str, str], str | None]) -> Any:
        def check(resolved: str | None) -> str:
            problem = problem_of(field_name, resolved) if resolved is not None else None  # None: echoing mocks
            if problem:
                raise ValueError(rename(problem))
            return cast(str, resolved)

        return pulumi.Output.all(value).apply(lambda v: check(v[0]))

    changes: dict[str, Any] = {}
    if args.kms_key_arn is not None and not isinstance(args.kms_key_arn, str):
        changes["kms_key_arn"] = checked("kms_key_arn", args.kms_key_arn, kms_key_problem)
    if args.alarm_topic_arn is not None and not isinstance(args.alarm_topic_arn, str):
        changes["alarm_topic_arn"] = checked("alarm_topic_arn", args.alarm_topic_arn, topic_arn_problem)
    for option in QUEUE_OPTIONS:
        given = getattr(args, option)
        if given is not None and given.kms_key_arn is not None and not isinstance(given.kms_key_arn, str):
            key = checked(f"{option}.kms_key_arn", given.kms_key_arn, kms_key_problem)
            changes[option] = dataclasses.replace(given, kms_key_arn=key)
    target = args.target
    if target is not None:
        key = getattr(target, "kms_key_arn", None)  # the kinds a customer key can encrypt have the option
        if key is not None and not isinstance(key, str):
            owner = type(target).__name__
            changes["target"] = dataclasses.replace(
                target, kms_key_arn=checked(f"{owner}.kms_key_arn", key, kms_key_problem)
            )
    return dataclasses.replace(args, **changes) if changes else args
