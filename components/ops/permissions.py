"""The operator's own role: the least-privilege IAM policy of each command (`scheduled-table policy COMMAND`).

One declaration per command (`COMMANDS`): the calls it makes, each on which of the stack's resources (`Resources`,
found from the consumer function as the command finds them). The statements are built by the same builders as the
functions' roles (components/policies.py); the target's send is the handlers' own (`direct_dispatch_statements`,
what `dispatch.send_now` calls). A resource the stack does not have drops its statement (no release queue, no
schedule group), so each stack's policy names only what it has. The tests run every command under exactly this
policy, every boto3 call it makes checked as IAM would (tests/redrive/test_operator_policy.py); the handler
modules a command runs in-process (the backfill engine) declare their own calls, and the tests check this table
covers them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..arns import arn_parts
from ..policies import Statement, direct_dispatch_statements, document
from .aws import Client, Emit
from .redrive.discovery import RedriveError, Stack, discover

ANY = "*"  # IAM has no resource-level permission for the action (ListEventSourceMappings, ListSchedules)


@dataclass(frozen=True)
class Resources:
    """The stack's resources by ARN (None: the stack has none), and what of its configuration shapes the calls."""

    function: str
    table: str
    poison: str
    stream: str | None = None
    stream_dlq: str | None = None
    target_dlq: str | None = None
    target_dlq_by_arn: bool = False  # named by ARN in the configuration (Scheduler's): looked up by its URL
    release: str | None = None
    ledger: str | None = None
    schedules: str | None = None  # every schedule of the table's group
    mode: str = ""
    precise: bool = False
    target: dict[str, Any] | None = None
    backfill_function: str | None = None  # --in-lambda


def resources_of(stack: Stack, *, backfill_function: str | None = None) -> Resources:
    """What the command finds from the consumer function, as ARNs (account and region from the function's)."""
    partition, _, region, account, _ = arn_parts(stack.function_arn)
    config = stack.config

    def arn(service: str, resource: str) -> str:
        return f"arn:{partition}:{service}:{region}:{account}:{resource}"

    def queue(url_or_arn: str) -> str:
        """A queue of the stack by ARN; one named by URL is the function's account's and region's (the URL's host is
        another endpoint's in the local cloud)."""
        return url_or_arn if url_or_arn.startswith("arn:") else arn("sqs", url_or_arn.rstrip("/").rsplit("/", 1)[-1])

    section = config.get(config.get("mode", "")) or {}
    group = (config.get("scheduler") or {}).get("group")
    release = (config.get("eventbridge") or {}).get("release") or {}
    scheduler_dlq = (config.get("scheduler") or {}).get("deadLetterArn")
    dead_letter = scheduler_dlq or stack.target_dlq_url or (config.get("polling") or {}).get("deadLetterUrl")
    backfill = None
    if backfill_function:
        named = backfill_function.startswith("arn:")
        backfill = backfill_function if named else arn("lambda", f"function:{backfill_function}")
    return Resources(
        function=stack.function_arn,
        table=arn("dynamodb", f"table/{config['table']}"),
        poison=queue(stack.poison_url),
        stream=stack.stream_arn,
        stream_dlq=stack.stream_dlq_arn,
        target_dlq=queue(str(dead_letter)) if dead_letter else None,
        target_dlq_by_arn=bool(scheduler_dlq),
        release=release.get("queueArn"),
        ledger=arn("dynamodb", f"table/{section['ledgerTable']}") if section.get("ledgerTable") else None,
        schedules=arn("scheduler", f"schedule/{group}/*") if group else None,
        mode=str(config.get("mode", "")),
        precise=bool((config.get("ttl") or {}).get("precise")),
        target=config.get("target"),
        backfill_function=backfill,
    )


Resolve = Callable[[Resources], list[str | None]]


@dataclass(frozen=True)
class Need:
    """Some of a command's calls: these actions, on these of the stack's resources."""

    actions: tuple[str, ...]
    on: Resolve


def _ordered(r: Resources) -> list[str | None]:
    """The table, where a redrive reads the item to judge a record's order (not aggregate, not plain ttl)."""
    stateless = r.mode == "aggregate" or (r.mode == "ttl" and not r.precise)
    return [] if stateless else [r.table]


def _filtered_by_type(r: Resources) -> list[str | None]:
    """The table, where inspect scans it for due attributes no filter can match (eventbridge, precise ttl)."""
    return [r.table] if r.mode == "eventbridge" or (r.mode == "ttl" and r.precise) else []


def _aggregate_table(r: Resources) -> list[str | None]:
    return [r.table] if r.mode == "aggregate" else []


def _looked_up(r: Resources) -> list[str | None]:
    """The queues the configuration or the mapping names by ARN, whose URLs the command looks up."""
    return [r.stream_dlq, r.target_dlq if r.target_dlq_by_arn else None]


FUNCTION: Resolve = lambda r: [r.function]  # noqa: E731 (a table of one-line resolvers)
TABLE: Resolve = lambda r: [r.table]  # noqa: E731
STREAM: Resolve = lambda r: [r.stream]  # noqa: E731
POISON: Resolve = lambda r: [r.poison]  # noqa: E731
STREAM_DLQ: Resolve = lambda r: [r.stream_dlq]  # noqa: E731
TARGET_DLQ: Resolve = lambda r: [r.target_dlq]  # noqa: E731
PARKED: Resolve = lambda r: [r.poison, r.stream_dlq, r.target_dlq]  # noqa: E731
RELEASE: Resolve = lambda r: [r.release]  # noqa: E731
LEDGER: Resolve = lambda r: [r.ledger]  # noqa: E731
EVENTBRIDGE_LEDGER: Resolve = lambda r: [r.ledger] if r.mode == "eventbridge" else []  # noqa: E731
SCHEDULES: Resolve = lambda r: [r.schedules]  # noqa: E731
EVENTBRIDGE_SCHEDULES: Resolve = lambda r: [r.schedules] if r.mode == "eventbridge" else []  # noqa: E731
ANY_IF_GROUP: Resolve = lambda r: [ANY] if r.schedules else []  # noqa: E731
ALWAYS: Resolve = lambda r: [ANY]  # noqa: E731
DUE_INDEX: Resolve = lambda r: [f"{r.table}/index/*"] if r.mode == "polling" else []  # noqa: E731
FIRED_TABLE: Resolve = lambda r: [r.table] if r.mode == "ttl" and r.precise else []  # noqa: E731
BACKFILL_FUNCTION: Resolve = lambda r: [r.backfill_function]  # noqa: E731

# Finding the stack from the consumer function (redrive.discovery.discover): every command does it first. Given the
# table's name instead, it reads the table's stream to find its consumer (DescribeTable). Listing the region's
# functions is only a hint for a wrong name, left out when refused: not granted.
DISCOVER = (
    Need(("lambda:GetFunctionConfiguration",), FUNCTION),
    Need(("lambda:ListEventSourceMappings",), ALWAYS),
    Need(("sqs:GetQueueUrl",), _looked_up),
    Need(("dynamodb:DescribeTable",), TABLE),
)
# Reading a queue once through (redrive.queues.Queue): received and hidden, deleted once done, the rest made visible.
HOLD = ("sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:ReceiveMessage")
# What a replay through the consumer needs (redrive.ordering.judge, redrive.replay.replay).
REPLAY = (
    Need(("dynamodb:GetItem",), _ordered),
    Need(("scheduler:GetSchedule",), EVENTBRIDGE_SCHEDULES),
    Need(("lambda:InvokeFunction",), FUNCTION),
)


def engine_needs(on: dict[str, Resolve], *, without: tuple[str, ...] = ()) -> tuple[Need, ...]:
    """The backfill engine's own calls (handlers/backfill*.py, each module's actions per resource in its
    `AWS_ACTIONS_ON`) on the resources `on` names (by handlers/backfill_resources.py's names), but for the modules in
    `without`."""
    from ..backfill_function import declared

    return tuple(Need(actions, on[resource]) for resource, actions in declared(without).items() if resource in on)


# The engine's resources as the operator's run finds them. Not the checkpoint: only the backfill function runs
# `reconcile_every` (handlers/backfill_every.py).
ENGINE_ON: dict[str, Resolve] = {
    "table": TABLE,
    "marker": LEDGER,
    "totals": _aggregate_table,
    "schedules": SCHEDULES,
    "poison": POISON,
    "*": ANY_IF_GROUP,
}
# A scan run by the operator (ops.backfill.run with handlers/backfill*.py; the sweep is reconcile's): read the
# table, look schedules and the ledger up, park what cannot be fed, feed the consumer. The ledger's own class
# (st_core.idempotency, through backfill_timed and the sweep) reads, releases and forgets occurrences.
LEDGER_CLASS = Need(("dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:UpdateItem"), LEDGER)
FEED = Need(("lambda:InvokeFunction",), FUNCTION)
SCAN = (*engine_needs(ENGINE_ON, without=("backfill_every", "backfill_sweep")), LEDGER_CLASS, FEED)
RECONCILE_SCAN = (*engine_needs(ENGINE_ON, without=("backfill_every",)), LEDGER_CLASS, FEED)
# --in-lambda: the function scans; the operator settles aggregate's totals once every segment is done.
FANOUT = (
    *DISCOVER,
    Need(("dynamodb:DescribeTable",), TABLE),
    *engine_needs({"totals": _aggregate_table}),
    Need(("lambda:GetFunctionConfiguration", "lambda:InvokeFunction"), BACKFILL_FUNCTION),  # checked, then invoked
)
TARGET = "target"  # the target's own send (dispatch.send_now), built as the functions' (direct_dispatch_statements)

COMMANDS: dict[str, tuple[Need | str, ...]] = {
    "inspect": (
        *DISCOVER,
        Need(("sqs:GetQueueAttributes", "sqs:ReceiveMessage"), PARKED),
        Need(("sqs:GetQueueAttributes",), RELEASE),
        Need(("scheduler:ListSchedules",), ANY_IF_GROUP),
        Need(("scheduler:GetSchedule",), SCHEDULES),  # when each sampled schedule fires
        Need(("dynamodb:Scan",), DUE_INDEX),
        Need(("dynamodb:Scan",), _filtered_by_type),
    ),
    "redrive-poison": (*DISCOVER, Need(HOLD, POISON), *REPLAY),
    "redrive-stream": (
        *DISCOVER,
        Need(HOLD, STREAM_DLQ),
        Need(("dynamodb:GetRecords", "dynamodb:GetShardIterator"), STREAM),
        *REPLAY,
    ),
    "redrive-target": (
        *DISCOVER,
        Need(HOLD, TARGET_DLQ),
        TARGET,
        Need(("sqs:SendMessage",), RELEASE),  # second precision: a release envelope goes back into its queue
        Need(("dynamodb:UpdateItem",), FIRED_TABLE),  # precise ttl: Scheduler's universal target, called again
    ),
    "backfill": (*DISCOVER, *SCAN),
    "reconcile": (
        *DISCOVER,
        *RECONCILE_SCAN,
        Need(("scheduler:DeleteSchedule",), SCHEDULES),  # a schedule its item no longer holds
    ),
    # --in-lambda: the backfill function scans and acts with its own role; the operator invokes it, and settles
    # aggregate's totals once every segment is done.
    "reconcile-in-lambda": FANOUT,
    # A first backfill of an eventbridge table also reads and then writes its marker in the ledger.
    "backfill-in-lambda": (*FANOUT, *engine_needs({"marker": EVENTBRIDGE_LEDGER})),
}


def statements(command: str, resources: Resources) -> list[Statement]:
    """The statements of one command's policy for this stack: one per declared need the stack has resources for."""
    found: list[Statement] = []
    for need in COMMANDS[command]:
        if isinstance(need, str):
            found += _target_statements(command, resources)
            continue
        arns = sorted({a for a in need.on(resources) if a})
        same = next((s for s in found if s["Resource"] == arns and "Condition" not in s), None)
        if same is not None:  # one statement per set of resources
            same["Action"] = sorted({*same["Action"], *need.actions})
        elif arns:
            found.append({"Effect": "Allow", "Action": sorted(need.actions), "Resource": arns})
    return found


def _target_statements(command: str, r: Resources) -> list[Statement]:
    """The target's send, where a redrive sends to it: not precise ttl (its dead letters are the item's fire) and
    not aggregate (no target)."""
    if r.target is None or r.mode == "aggregate" or (r.mode == "ttl" and r.precise):
        return []
    kind, arn = str(r.target["kind"]), str(r.target["arn"])
    email = r.target.get("email") or {}
    return direct_dispatch_statements(
        kind, arn, home_arn=r.function, sender=email.get("sender"), configuration_set=email.get("configurationSet")
    )


def policy(command: str, resources: Resources) -> str:
    """The policy document (JSON) of one command for this stack."""
    return document(statements(command, resources))


def pretty(command: str, resources: Resources) -> str:
    """The policy as the command prints it: indented JSON, one statement's actions and resources on a line each."""
    return json.dumps(json.loads(policy(command, resources)), indent=2, sort_keys=True)


# The commands as `scheduled-table policy` names them (with --in-lambda, backfill and reconcile are the fan-out's).
NAMED = ("inspect", "redrive-poison", "redrive-stream", "redrive-target", "backfill", "reconcile")


def add_parser(commands: Any) -> None:
    """`scheduled-table policy COMMAND --function NAME`."""
    command = commands.add_parser(
        "policy",
        help="print the least-privilege IAM policy an operator needs to run a command on this stack",
        description="Print the IAM policy (JSON) that lets an operator run COMMAND on the stack of --function and "
        "nothing else: its calls on this stack's resources only (its queues, table, stream, schedule group; "
        "redrive-target: the target's own send). Reads the function's configuration and event source mapping (run "
        "it with credentials that may). Exit status 0 printed, 2 the function or its stack could not be read.",
    )
    command.add_argument("for_command", metavar="COMMAND", choices=NAMED, help=" | ".join(NAMED))
    command.add_argument("--function", required=True, help="the consumer function (the stack's function_name)")
    command.add_argument(
        "--in-lambda",
        metavar="BACKFILL_FUNCTION",
        help="backfill/reconcile fanned out over the stack's backfill function (its backfill_function_name)",
    )
    command.add_argument("--endpoint-url", help="another AWS endpoint, e.g. the local cloud's")
    command.add_argument("--region", help="AWS region (default: your AWS configuration's)")


def main(args: Any, client: Client, emit: Emit) -> int:
    """Print the policy; 2 when the stack cannot be read or --in-lambda is given to a command without a fan-out."""
    import sys

    name = str(args.for_command)
    if args.in_lambda:
        if name not in ("backfill", "reconcile"):
            print(f"scheduled-table: --in-lambda is for backfill and reconcile, not {name}", file=sys.stderr)
            return 2
        name += "-in-lambda"
    try:
        stack = discover(client, args.function)
    except RedriveError as error:
        print(f"scheduled-table: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # refused, say: the one who runs this needs to read the function
        print(f"scheduled-table: cannot read the stack of {args.function!r}: {error}", file=sys.stderr)
        return 2
    emit(pretty(name, resources_of(stack, backfill_function=args.in_lambda)))
    return 0


# docs/operations.md shows each command's policy for an example stack, generated here (tests/house/test_generated.py
# checks the page is current; `python -m components.ops.permissions` in a checkout writes it).
PAGE_START = "<!-- policies: generated by `python -m components.ops.permissions`; do not edit by hand -->"
PAGE_END = "<!-- end of generated policies -->"
EXAMPLE_REGION, EXAMPLE_ACCOUNT = "us-east-1", "111122223333"


def example() -> Resources:
    """The example stack of the docs: `reminders`, eventbridge mode, an SQS target, a stream DLQ."""

    def arn(service: str, resource: str) -> str:
        return f"arn:aws:{service}:{EXAMPLE_REGION}:{EXAMPLE_ACCOUNT}:{resource}"

    return Resources(
        function=arn("lambda", "function:reminders-scheduler-1a2b3c"),
        table=arn("dynamodb", "table/reminders-4d5e6f"),
        poison=arn("sqs", "reminders-poison-7a8b9c"),
        stream=arn("dynamodb", "table/reminders-4d5e6f/stream/2026-11-27T09:00:00.000"),
        stream_dlq=arn("sqs", "reminders-stream-dlq-1c2d3e"),
        target_dlq=arn("sqs", "reminders-target-dlq-4f5a6b"),
        target_dlq_by_arn=True,
        ledger=arn("dynamodb", "table/reminders-ledger-7c8d9e"),
        schedules=arn("scheduler", "schedule/reminders-schedules-1f2a3b/*"),
        mode="eventbridge",
        target={"kind": "sqs", "arn": arn("sqs", "reminder-jobs")},
        backfill_function=arn("lambda", "function:reminders-backfill-4b5c6d"),
    )


def compact(document: str) -> str:
    """A policy with one statement a line, for the docs."""
    statements = json.loads(document)["Statement"]
    lines = ",\n".join(f"  {json.dumps(s, sort_keys=True)}" for s in statements)
    return '{"Version": "2012-10-17", "Statement": [\n' + lines + "\n]}"


def page_section() -> str:
    """The generated part of docs/operations.md: each command's policy for the example stack."""
    shown = [
        ("inspect", "inspect"),
        ("redrive-poison", "redrive poison"),
        ("redrive-stream", "redrive stream"),
        ("redrive-target", "redrive target"),
        ("backfill", "backfill"),
        ("reconcile", "reconcile"),
        ("backfill-in-lambda", "backfill --in-lambda (reconcile --in-lambda: the same without the ledger statement)"),
    ]
    parts = [PAGE_START]
    for name, title in shown:
        parts += [f"`scheduled-table {title}`:", "", "```json", compact(policy(name, example())), "```", ""]
    return "\n".join([*parts, PAGE_END])


def page(text: str) -> str:
    """docs/operations.md with its generated part replaced by the current one."""
    before, _, rest = text.partition(PAGE_START)
    _, _, after = rest.partition(PAGE_END)
    return before + page_section() + after


if __name__ == "__main__":
    import sys
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
    docs.write_text(page(docs.read_text()))
    print(f"wrote {docs}", file=sys.stderr)
