"""The optional backfill function (`backfill_function=True`): `handlers/backfill/` deployed beside the consumer, so
`scheduled-table backfill --in-lambda` fans a scan's segments out over Lambda.

It runs the mode's own handler in-process on synthetic stream records, so it needs what the consumer needs to act (its
policy's statements, the same configuration document) but not the stream: the statement that reads the table's stream,
and the send to the stream DLQ (the consumer's mapping's, not its code's), are dropped, and what a backfill adds is
granted on this table and group only, as the backfill modules declare it (handlers/backfill/*.py, each module's
actions per resource in its `AWS_ACTIONS_ON`): the scan and the consistent reads that follow live writes on the table,
reading the schedules the consumer manages, listing them (reconcile's sweep; IAM has no resource for it: "*"), the
checkpoint of `reconcile_every` in the ledger, aggregate's totals. Nothing is created when the option is off.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import modes
from .policies import STREAM_READ_ACTIONS, VPC_ACCESS_ACTIONS, Statement

if TYPE_CHECKING:
    import pulumi_aws as aws

    from .overrides import FunctionOverrides
    from .parts import Consumer, Owner

HANDLER = "backfill.handler"
# Each invocation runs one slice of a segment until its last 30 s (backfill.scan.MARGIN_SECONDS): the longest
# Lambda allows, so a chain needs the fewest invocations.
TIMEOUT_SECONDS = 900
STREAM_ACTIONS = frozenset(STREAM_READ_ACTIONS)


def backfill_modules() -> dict[str, Path]:
    """Module name (`backfill`, the entry point, and `backfill.<part>`, as the Lambda imports them) -> file, for every
    module of the backfill package (handlers/backfill/): the ones whose declared calls the role grants."""
    from .packaging import handlers_dir

    package = handlers_dir() / "backfill"
    return {
        package.name if path.stem == "__init__" else f"{package.name}.{path.stem}": path
        for path in sorted(package.glob("*.py"))
    }


def declared(without: Collection[str] = ()) -> dict[str, tuple[str, ...]]:
    """Resource (handlers/backfill/resources.py, in its order) -> the actions the backfill modules declare they call
    on it (each module's `AWS_ACTIONS_ON`), but for the modules named in `without` (`backfill.every`)."""
    from .packaging import handler_module

    found: dict[str, set[str]] = {}
    for name in backfill_modules():
        if name not in without:
            for resource, actions in getattr(handler_module(name), "AWS_ACTIONS_ON", {}).items():
                found.setdefault(resource, set()).update(actions)
    order = handler_module("backfill.resources").RESOURCES
    return {r: tuple(sorted(found[r])) for r in sorted(found, key=order.index)}


def own_statements(
    *, mode: str, table_arn: str, managed: list[str], checkpoint_ledger_arn: str | None
) -> list[Statement]:
    """What the backfill modules' own calls need on this stack's resources (each resource the modules name, by
    ARN): one statement per set of ARNs."""
    from .packaging import handler_module

    named = handler_module("backfill.resources")
    arns = {
        named.TABLE: [table_arn],
        named.TOTALS: [table_arn]
        if modes.by_name(str(mode)).keeps_totals
        else [],  # settled after reconciling its items
        named.MARKER: [],  # the operator's: `scheduled-table backfill` reads and writes it around the fan-out
        named.CHECKPOINT: [checkpoint_ledger_arn] if checkpoint_ledger_arn else [],
        named.POISON: [],  # the consumer's send statement names it (kept)
        named.SCHEDULES: managed,
        named.ANY: ["*"] if managed else [],  # listed by the sweep of the modes that make schedules
    }
    found: list[Statement] = []
    for resource, actions in declared().items():
        if not arns[resource]:
            continue
        same = next((s for s in found if s["Resource"] == arns[resource]), None)
        if same is None:
            found.append({"Effect": "Allow", "Action": sorted(actions), "Resource": list(arns[resource])})
        else:
            same["Action"] = sorted({*same["Action"], *actions})
    return found


def backfill_statements(
    consumer: list[Statement],
    *,
    mode: str,
    table_arn: str,
    stream_dlq_arn: str,
    checkpoint_ledger_arn: str | None = None,
    stream_dlq_key_arn: str | None = None,
) -> list[Statement]:
    """The backfill function's statements from the consumer's: the same, without reading the stream or sending to
    the stream DLQ (the consumer's event source mapping sends there, with the consumer's role; a backfill has no
    mapping), plus what the backfill modules declare on this table, the schedules the consumer manages (the same
    resources) and the checkpoint ledger."""
    kept = [_without_resource(s, "sqs:SendMessage", stream_dlq_arn) for s in consumer]
    kept = [s for s in kept if s["Resource"] and not (set(_actions(s)) & STREAM_ACTIONS)]
    # A stream DLQ of the user's with a key of its own (`stream_dlq_key_arn`: not the poison queue's): its use too.
    kept = [s for s in kept if not (stream_dlq_key_arn and _resources(s) == [stream_dlq_key_arn])]
    # A consumer in a VPC: its network-interface actions are its own (build_lambda grants the backfill's if it is).
    kept = [s for s in kept if not set(_actions(s)) <= set(VPC_ACCESS_ACTIONS)]
    managed = sorted({r for s in consumer if "scheduler:CreateSchedule" in _actions(s) for r in _resources(s)})
    return kept + own_statements(
        mode=mode, table_arn=table_arn, managed=managed, checkpoint_ledger_arn=checkpoint_ledger_arn
    )


def backfill_policy(
    consumer_document: str,
    *,
    mode: str,
    table_arn: str,
    stream_dlq_arn: str,
    checkpoint_ledger_arn: str | None = None,
    stream_dlq_key_arn: str | None = None,
) -> str:
    """The policy document, from the consumer's (a JSON policy document, as its RolePolicy holds it)."""
    from .policies import document

    statements = json.loads(consumer_document)["Statement"]
    kept = backfill_statements(
        statements,
        mode=mode,
        table_arn=table_arn,
        stream_dlq_arn=stream_dlq_arn,
        checkpoint_ledger_arn=checkpoint_ledger_arn,
        stream_dlq_key_arn=stream_dlq_key_arn,
    )
    return document(kept)


def ledger_arn(home_arn: str, ledger_name: str) -> str:
    """The ledger table's ARN: in the deploying account and region (`home_arn`, any ARN of them), by its name."""
    from .arns import arn_parts

    partition, _, region, account, _ = arn_parts(home_arn)
    return f"arn:{partition}:dynamodb:{region}:{account}:table/{ledger_name}"


def _without_resource(statement: Statement, action: str, resource: str) -> Statement:
    """`statement` without `resource`, when `action` is its only action (the consumer's send statement)."""
    if _actions(statement) != [action]:
        return statement
    return {**statement, "Resource": [r for r in _resources(statement) if r != resource]}


def _resources(statement: Statement) -> list[str]:
    resource = statement.get("Resource", [])
    return [resource] if isinstance(resource, str) else list(resource)


def _actions(statement: Statement) -> list[str]:
    action = statement.get("Action", [])
    return [action] if isinstance(action, str) else list(action)


def build_backfill(
    *,
    owner: Owner,
    consumer: Consumer,
    mode: str,
    table_arn: Any,
    stream_dlq_arn: Any,
    log_retention_days: int,
    checkpoint_ledger_arn: Any = None,
    overrides: FunctionOverrides | None = None,
    stream_dlq_key_arn: Any = None,
) -> aws.lambda_.Function:
    """The backfill function of one ScheduledTable (`{name}-backfill`), made as every function is
    (builders.build_lambda): the consumer's code, runtime, memory and configuration, the handler `backfill.handler`,
    15 minutes per slice, its policy from the consumer's; `overrides`: the user's for the `backfill` role."""
    import pulumi

    from .builders import build_lambda

    def policy(log_group_arn: pulumi.Output[str]) -> pulumi.Output[str]:
        return pulumi.Output.all(
            consumer.policy.policy, table_arn, stream_dlq_arn, log_group_arn, checkpoint_ledger_arn, stream_dlq_key_arn
        ).apply(
            lambda v: _with_own_logs(
                backfill_policy(
                    v[0],
                    mode=mode,
                    table_arn=v[1],
                    stream_dlq_arn=v[2],
                    checkpoint_ledger_arn=v[4],
                    stream_dlq_key_arn=v[5],
                ),
                v[3],
            )
        )

    function = consumer.function
    return build_lambda(
        owner,
        "backfill",
        log_retention_days=log_retention_days,
        role_description=f"scheduled-table {owner.name}: backfill and reconcile (scan the table, act as the consumer "
        "would)",
        policy=policy,
        overrides=overrides,
        code=function.code,
        handler=HANDLER,
        description=f"scheduled-table {owner.name}: backfill and reconcile, one scan segment slice per invocation",
        runtime=function.runtime,
        architectures=function.architectures,
        memory_size=function.memory_size,
        timeout=TIMEOUT_SECONDS,
        environment=function.environment.apply(_same_environment),
    ).function


def _same_environment(environment: Any) -> Any:
    """The consumer's environment (its configuration document) for the backfill function."""
    import pulumi_aws as aws

    variables = (
        environment.get("variables") if isinstance(environment, dict) else getattr(environment, "variables", None)
    )
    return aws.lambda_.FunctionEnvironmentArgs(variables=variables or {})


def _with_own_logs(document_text: str, log_group_arn: str) -> str:
    """The consumer's log statement names the consumer's log group: the backfill function writes to its own."""
    from .policies import document

    statements = json.loads(document_text)["Statement"]
    for statement in statements:
        if "logs:PutLogEvents" in _actions(statement):
            statement["Resource"] = [log_group_arn, f"{log_group_arn}:*"]
    return document(statements)


# The event `reconcile_every`'s rule sends the backfill function (handlers/backfill.handler -> backfill.every).
RECONCILE_EVENT = json.dumps({"scheduledReconcile": True})


def build_reconcile_every(
    *, name: str, function: aws.lambda_.Function, expression: str, tags: dict[str, str], parent: Any
) -> aws.cloudwatch.EventRule:
    """`reconcile_every`: an EventBridge rule on the expression that invokes the backfill function with the
    scheduled reconcile's event (`{name}-reconcile`, its target and Lambda's permission for the rule)."""
    import pulumi
    import pulumi_aws as aws

    child = pulumi.ResourceOptions(parent=parent)
    rule = aws.cloudwatch.EventRule(
        f"{name}-reconcile",
        schedule_expression=expression,
        description=f"scheduled-table {name}: reconcile by itself (reconcile_every)",
        tags=tags,
        opts=child,
    )
    permission = aws.lambda_.Permission(
        f"{name}-reconcile-permission",
        action="lambda:InvokeFunction",
        function=function.name,
        principal="events.amazonaws.com",
        source_arn=rule.arn,
        opts=child,
    )
    aws.cloudwatch.EventTarget(
        f"{name}-reconcile-target",
        rule=rule.name,
        arn=function.arn,
        input=RECONCILE_EVENT,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[permission]),
    )
    return rule
