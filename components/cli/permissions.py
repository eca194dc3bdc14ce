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
from dataclasses import dataclass, field
from typing import Any

from .. import modes
from ..arns import arn_parts
from ..modes.base import Operated
from ..policies import (
    QUEUE_KEY_SERVICE,
    TABLE_KEY_ACTIONS,
    TABLE_KEY_SERVICE,
    Statement,
    direct_dispatch_statements,
    document,
    key_statements,
    target_type,
)
from .aws import Client, Emit, add_stack_options
from .redrive.discovery import RedriveError, Stack, discover, queue_url

ANY = "*"  # IAM has no resource-level permission for the action (ListEventSourceMappings, ListSchedules)


@dataclass(frozen=True)
class Keys:
    """The customer-managed keys of the stack's resources, as their services report them (`keys_of`; None: none, or
    AWS's own): the table's (its stream, indexes and the ledger are encrypted with it too), the target's, and the
    key of each queue the commands read or send to that has one (a queue of the user's, `existing_*`), by ARN."""

    table: str | None = None
    target: str | None = None
    queues: tuple[tuple[str, str], ...] = ()  # (queue ARN, key ARN)


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
    operated: Operated = field(default_factory=Operated)  # what the commands do in its mode (components/modes/)
    target: dict[str, Any] | None = None
    backfill_function: str | None = None  # --in-lambda
    keys: Keys = Keys()  # the customer-managed keys its resources are encrypted with
    given_queue: str | None = None  # --queue-url: the queue a redrive reads instead of its stack's own (ARN)
    log_groups: tuple[str, ...] = ()  # the console: the log groups of the stack's functions (ARNs), its deliveries


def resources_of(
    stack: Stack,
    *,
    backfill_function: str | None = None,
    keys: Keys = Keys(),
    queue_url: str | None = None,
    log_groups: tuple[str, ...] = (),
) -> Resources:
    """What the command finds from the consumer function, as ARNs (account and region from the function's); `keys`:
    the customer-managed keys of its resources (`keys_of`); `queue_url`: the queue a redrive is told to read instead
    of its stack's (`--queue-url`); `log_groups`: the names of its functions' log groups (the console reads them)."""
    partition, _, region, account, _ = arn_parts(stack.function_arn)
    config = stack.config

    def arn(service: str, resource: str) -> str:
        return f"arn:{partition}:{service}:{region}:{account}:{resource}"

    def queue(url_or_arn: str) -> str:
        return queue_arn(stack.function_arn, url_or_arn)

    section = config.get(str(config.get("mode", ""))) or {}
    group = (config.get("scheduler") or {}).get("group")
    release = (config.get("eventbridge") or {}).get("release") or {}
    scheduler_dlq = (config.get("scheduler") or {}).get("deadLetterArn")
    dead_letter = scheduler_dlq or stack.target_dlq_url or (config.get("polling") or {}).get("deadLetterUrl")
    backfill = None
    if backfill_function:
        named = backfill_function.startswith("arn:")
        backfill = backfill_function if named else arn("lambda", f"function:{backfill_function}")
    # Another account's table is named by its ARN in the configuration (components/existing.py, table_reference):
    # IAM matches that ARN itself, never `table/<the ARN>` in the function's account.
    table = str(config["table"])
    return Resources(
        function=stack.function_arn,
        table=table if table.startswith("arn:") else arn("dynamodb", f"table/{table}"),
        poison=queue(stack.poison_url),
        stream=stack.stream_arn,
        stream_dlq=stack.stream_dlq_arn,
        target_dlq=queue(str(dead_letter)) if dead_letter else None,
        target_dlq_by_arn=bool(scheduler_dlq),
        release=release.get("queueArn"),
        ledger=arn("dynamodb", f"table/{section['ledgerTable']}") if section.get("ledgerTable") else None,
        schedules=arn("scheduler", f"schedule/{group}/*") if group else None,
        operated=modes.operated(config),
        target=config.get("target"),
        backfill_function=backfill,
        keys=keys,
        given_queue=queue(queue_url) if queue_url else None,
        log_groups=tuple(arn("logs", f"log-group:{name}:*") for name in log_groups),
    )


def queue_arn(function_arn: str, url_or_arn: str) -> str:
    """A queue of the stack by ARN; one named by URL is the function's account's and region's (the URL's host is
    another endpoint's in the local cloud)."""
    if url_or_arn.startswith("arn:"):
        return url_or_arn
    partition, _, region, account, _ = arn_parts(function_arn)
    return f"arn:{partition}:sqs:{region}:{account}:{url_or_arn.rstrip('/').rsplit('/', 1)[-1]}"


# -- the keys: what the services say encrypts the table, the queues and the target ---------------------------------


def keys_of(
    client: Client, stack: Stack, *, target: bool, warn: Callable[[str], None], queue_url: str | None = None
) -> Keys:
    """The customer-managed keys of the stack's table (DescribeTable's SSEDescription), of its poison queue, stream
    DLQ and target DLQ and the queue `queue_url` (each queue's KmsMasterKeyId) and, with `target`, of its target
    (the queue's or topic's KmsMasterKeyId, the state machine's encryptionConfiguration), each resolved to its ARN by
    KMS (DescribeKey), None when AWS manages it (its key policy lets the account's callers use it through the
    service: no grant needed). The configuration does not carry the keys, and a key the user never named to the
    component is refused all the same: the services are asked. A lookup refused or failing is `warn`ed about (what
    to add by hand if the resource is encrypted) and leaves that key out."""
    config = stack.config
    queues: dict[str, str] = {}
    for url in dict.fromkeys(u for u in (stack.poison_url, stack.stream_dlq_url, stack.target_dlq_url, queue_url) if u):
        try:
            answer = client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["KmsMasterKeyId"])
            named = (answer.get("Attributes") or {}).get("KmsMasterKeyId")
            key = _customer_key(client, str(named)) if named else None
        except Exception as error:
            if not isinstance(getattr(error, "response", None), dict):
                raise
            warn(_unread(f"queue {url}", error))
            continue
        if key:
            queues[queue_arn(stack.function_arn, url)] = key
    table, found = _table_key(client, stack, warn), tuple(sorted(queues.items()))
    kind, arn = str((config.get("target") or {}).get("kind", "")), str((config.get("target") or {}).get("arn", ""))
    if not target or not arn or not target_type(kind).KMS_ACTIONS:
        return Keys(table, None, found)
    try:
        named = _target_key_id(client, kind, arn)
        return Keys(table, _customer_key(client, named) if named else None, found)
    except Exception as error:
        if not isinstance(getattr(error, "response", None), dict):
            raise
        warn(_unread(f"target {arn}", error))
        return Keys(table, None, found)


def _table_key(client: Client, stack: Stack, warn: Callable[[str], None]) -> str | None:
    table = stack.config["table"]
    try:
        sse = client("dynamodb").describe_table(TableName=table)["Table"].get("SSEDescription") or {}
        if sse.get("SSEType") == "KMS" and sse.get("KMSMasterKeyArn"):
            return _customer_key(client, str(sse["KMSMasterKeyArn"]))
    except Exception as error:
        if not isinstance(getattr(error, "response", None), dict):
            raise
        warn(_unread(f"table {table}", error))
    return None


def _target_key_id(client: Client, kind: str, arn: str) -> str | None:
    """The key the target names (an ID, alias or ARN), by the kinds whose senders use their target's key."""
    if kind == "sqs":
        url = queue_url(client, arn)
        attributes = client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["KmsMasterKeyId"])
        return (attributes.get("Attributes") or {}).get("KmsMasterKeyId") or None
    if kind == "sns":
        return (client("sns").get_topic_attributes(TopicArn=arn).get("Attributes") or {}).get("KmsMasterKeyId") or None
    if kind == "stepfunctions":
        encryption = client("stepfunctions").describe_state_machine(stateMachineArn=arn).get("encryptionConfiguration")
        customer = (encryption or {}).get("type") == "CUSTOMER_MANAGED_KMS_KEY"
        return str(encryption["kmsKeyId"]) if customer and encryption.get("kmsKeyId") else None
    raise LookupError(f"no key lookup for the target kind {kind!r}, whose senders use its key")


def _customer_key(client: Client, key: str) -> str | None:
    """The key's ARN when the customer manages it; None for an AWS managed key (`alias/aws/...` is one by name)."""
    if key.startswith("alias/aws/") or ":alias/aws/" in key:
        return None
    metadata = client("kms").describe_key(KeyId=key)["KeyMetadata"]
    return str(metadata["Arn"]) if metadata.get("KeyManager") == "CUSTOMER" else None


def _unread(what: str, error: Exception) -> str:
    return (
        f"could not read the encryption of the {what} ({error}); if a customer-managed key encrypts it, add that "
        "key's use to the policy (kms:Decrypt to read, and kms:GenerateDataKey to write or send)"
    )


Resolve = Callable[[Resources], list[str | None]]


@dataclass(frozen=True)
class Need:
    """Some of a command's calls: these actions, on these of the stack's resources."""

    actions: tuple[str, ...]
    on: Resolve


def _ordered(r: Resources) -> list[str | None]:
    """The table, where a redrive reads the item to judge a record's order (not aggregate, not plain ttl)."""
    return [r.table] if r.operated.ordered_by_item else []


def _inspected(r: Resources) -> list[str | None]:
    """The table, where inspect scans it: a sample for items without the time attribute (every mode but aggregate,
    which reads no time), and for due attributes no filter can match (eventbridge, precise ttl)."""
    return [r.table] if r.operated.reads_due_time else []


def _aggregate_table(r: Resources) -> list[str | None]:
    return [r.table] if r.operated.totals else []


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
MARKED_LEDGER: Resolve = lambda r: [r.ledger] if r.operated.backfill_marks_ledger else []  # noqa: E731
SCHEDULES: Resolve = lambda r: [r.schedules]  # noqa: E731
REPLAYED_SCHEDULES: Resolve = lambda r: [r.schedules] if r.operated.replay_reads_schedule else []  # noqa: E731
ANY_IF_GROUP: Resolve = lambda r: [ANY] if r.schedules else []  # noqa: E731
ALWAYS: Resolve = lambda r: [ANY]  # noqa: E731
DUE_INDEX: Resolve = lambda r: [f"{r.table}/index/*"] if r.operated.due_index else []  # noqa: E731
FIRED_TABLE: Resolve = lambda r: [r.table] if r.operated.fires_items else []  # noqa: E731
BACKFILL_FUNCTION: Resolve = lambda r: [r.backfill_function]  # noqa: E731


def _held(queue: Resolve) -> Resolve:
    """The queue a redrive reads: its stack's, or the one named by --queue-url instead (the stack's own is still
    looked up, by DISCOVER, as the command finds the stack)."""
    return lambda r: [r.given_queue] if r.given_queue else queue(r)


def _target_of(kind: str) -> Resolve:
    """The target, when it is of this kind."""
    return lambda r: [str(r.target["arn"])] if r.target and r.target.get("kind") == kind else []


def _account_keys(r: Resources) -> list[str | None]:
    """Any key of the stack's account and region, and of the table's when it is another account's (its key is that
    account's): which keys encrypt the stack is what `policy` asks KMS."""
    found: list[str | None] = []
    for owner in (r.function, r.table):
        partition, _, region, account, _ = arn_parts(owner)
        found.append(f"arn:{partition}:kms:{region}:{account}:key/*")
    return list(dict.fromkeys(found))


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
    Need(("scheduler:GetSchedule",), REPLAYED_SCHEDULES),
    Need(("lambda:InvokeFunction",), FUNCTION),
)


def engine_needs(on: dict[str, Resolve], *, without: tuple[str, ...] = ()) -> tuple[Need, ...]:
    """The backfill engine's own calls (handlers/backfill/*.py, each module's actions per resource in its
    `AWS_ACTIONS_ON`) on the resources `on` names (by handlers/backfill/resources.py's names), but for the modules in
    `without`."""
    from ..backfill_function import declared

    return tuple(Need(actions, on[resource]) for resource, actions in declared(without).items() if resource in on)


# The engine's resources as the operator's run finds them. Not the checkpoint: only the backfill function runs
# `reconcile_every` (handlers/backfill/every.py).
ENGINE_ON: dict[str, Resolve] = {
    "table": TABLE,
    "marker": LEDGER,
    "totals": _aggregate_table,
    "schedules": SCHEDULES,
    "poison": POISON,
    "*": ANY_IF_GROUP,
}
# A scan run by the operator (cli.backfill.run with handlers/backfill/; the sweep is reconcile's): read the
# table, look schedules and the ledger up, park what cannot be fed, feed the consumer. The ledger's own class
# (st_core.idempotency, through backfill.timed and the sweep) reads, releases and forgets occurrences.
LEDGER_CLASS = Need(("dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:UpdateItem"), LEDGER)
FEED = Need(("lambda:InvokeFunction",), FUNCTION)
SCAN = (*engine_needs(ENGINE_ON, without=("backfill.every", "backfill.sweep")), LEDGER_CLASS, FEED)
RECONCILE_SCAN = (*engine_needs(ENGINE_ON, without=("backfill.every",)), LEDGER_CLASS, FEED)


def _swept(resolve: Resolve) -> Resolve:
    """`resolve`, in the modes whose reconcile sweeps the schedule group (eventbridge, precise ttl)."""
    return lambda r: resolve(r) if r.operated.sweeps_schedules else []


# reconcile --in-lambda: after the function's segments, the operator's process sweeps the schedule group for
# schedules no item asks for (cli.backfill.run, handlers/backfill/sweep.py): the engine's calls but the scan's, each
# on its resource in the modes that sweep, and the deletes.
SWEEP = (
    *engine_needs({k: _swept(v) for k, v in ENGINE_ON.items()}, without=("backfill.every", "backfill.scan")),
    Need(LEDGER_CLASS.actions, _swept(LEDGER)),
    Need(FEED.actions, _swept(FUNCTION)),
    Need(("scheduler:DeleteSchedule",), _swept(SCHEDULES)),
)
# --in-lambda: the function scans; the operator settles aggregate's totals once every segment is done.
FANOUT = (
    *DISCOVER,
    Need(("dynamodb:DescribeTable",), TABLE),
    *engine_needs({"totals": _aggregate_table}),
    Need(("lambda:GetFunctionConfiguration", "lambda:InvokeFunction"), BACKFILL_FUNCTION),  # checked, then invoked
)
READ_VERBS = ("BatchGet", "Describe", "Get", "List", "Query", "Scan")


def reads_of(needs: tuple[Need, ...]) -> tuple[Need, ...]:
    """Only the reads of these needs (what a dry run calls): each need's actions that change nothing."""
    kept = ((tuple(a for a in n.actions if a.split(":", 1)[1].startswith(READ_VERBS)), n.on) for n in needs)
    return tuple(Need(actions, on) for actions, on in kept if actions)


# The console: inspect's reads of the queues and the schedules, the due index read by due time (Query, never a
# scan), plain ttl's sample of the table, the stack's functions and their logs (deliveries, published metrics),
# Scheduler's own counts in CloudWatch, and the reads of `reconcile --dry-run` (Drift: a sample of the table, the
# schedules and the ledger looked up). Never a write: a redrive is `console-redrive`'s. Its check of whether it may
# redrive (a DryRun invoke, a DeleteMessage of no message) is refused under this policy, which is how the page knows
# to be read-only.
SAMPLED_TABLE: Resolve = lambda r: [r.table] if r.operated.sampled_by_scan else []  # noqa: E731
CONSOLE = (
    *DISCOVER,
    Need(("lambda:ListFunctions",), ALWAYS),
    Need(("sqs:GetQueueAttributes", "sqs:ReceiveMessage"), PARKED),
    Need(("sqs:GetQueueAttributes",), RELEASE),
    Need(("scheduler:ListSchedules",), ANY_IF_GROUP),
    Need(("scheduler:GetSchedule",), SCHEDULES),
    Need(("dynamodb:Query",), DUE_INDEX),
    Need(("dynamodb:Scan",), SAMPLED_TABLE),
    Need(("logs:FilterLogEvents",), lambda r: list(r.log_groups)),
    Need(("cloudwatch:GetMetricData",), ANY_IF_GROUP),  # Scheduler's counts (no resource-level permission)
    *reads_of(RECONCILE_SCAN),
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
        Need(("dynamodb:Scan",), _inspected),
    ),
    "redrive-poison": (*DISCOVER, Need(HOLD, _held(POISON)), *REPLAY),
    "redrive-stream": (
        *DISCOVER,
        Need(HOLD, _held(STREAM_DLQ)),
        Need(("dynamodb:GetRecords", "dynamodb:GetShardIterator"), STREAM),
        *REPLAY,
    ),
    "redrive-target": (
        *DISCOVER,
        Need(HOLD, _held(TARGET_DLQ)),
        TARGET,
        Need(("sqs:SendMessage",), RELEASE),  # second precision: a release envelope goes back into its queue
        Need(("dynamodb:UpdateItem",), FIRED_TABLE),  # precise ttl: Scheduler's universal target, called again
    ),
    "backfill": (*DISCOVER, *SCAN),
    "console": CONSOLE,
    "reconcile": (
        *DISCOVER,
        *RECONCILE_SCAN,
        Need(("scheduler:DeleteSchedule",), SCHEDULES),  # a schedule its item no longer holds
    ),
    # --in-lambda: the backfill function scans and acts with its own role; the operator invokes it, and settles
    # aggregate's totals once every segment is done.
    "reconcile-in-lambda": (*FANOUT, *SWEEP),
    # A first backfill of an eventbridge table also reads and then writes its marker in the ledger.
    "backfill-in-lambda": (*FANOUT, *engine_needs({"marker": MARKED_LEDGER})),
    # `scheduled-table policy` itself: finds the stack, then asks what encrypts the table and the target (keys_of).
    "policy": (
        *DISCOVER,
        Need(("dynamodb:DescribeTable",), TABLE),
        Need(("lambda:ListFunctions",), ALWAYS),  # console: the stack's functions, whose log groups it reads
        Need(("sqs:GetQueueAttributes",), lambda r: [*PARKED(r), r.given_queue]),
        Need(("sqs:GetQueueAttributes", "sqs:GetQueueUrl"), _target_of("sqs")),
        Need(("sns:GetTopicAttributes",), _target_of("sns")),
        Need(("states:DescribeStateMachine",), _target_of("stepfunctions")),
        Need(("kms:DescribeKey",), _account_keys),
    ),
}


# `policy console --redrive`: the console and each redrive its page can run.
COMMANDS["console-redrive"] = (
    *CONSOLE,
    *(need for name in ("redrive-poison", "redrive-stream", "redrive-target") for need in COMMANDS[name]),
)


def statements(command: str, resources: Resources) -> list[Statement]:
    """The statements of one command's policy for this stack: one per declared need the stack has resources for;
    then the use of the customer-managed keys its calls make (`_key_statements`)."""
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
    return found + _key_statements(found, resources)


# What a call does with the key of the resource it acts on. The table's (the same key encrypts the table's indexes,
# its stream and the ledger): a read decrypts; a write also encrypts, under a new data key (the functions' writers
# get the same, components.policies.TABLE_KEY_ACTIONS); DescribeTable and GetShardIterator read no item. A queue's:
# a receive decrypts; a send is a queue sender's (the queue kind's KMS_ACTIONS, st_core/target_types/sqs.py).
TABLE_KEY_READS = frozenset(f"dynamodb:{a}" for a in ("BatchGetItem", "GetItem", "GetRecords", "Query", "Scan"))
TABLE_KEY_WRITES = frozenset(f"dynamodb:{a}" for a in ("BatchWriteItem", "DeleteItem", "PutItem", "UpdateItem"))


def key_uses(action: str, *, table: bool) -> tuple[str, ...]:
    """The kms: actions `action` makes with the key of a table (`table`) or of a queue it acts on."""
    if table and action in TABLE_KEY_WRITES:
        return tuple(TABLE_KEY_ACTIONS)
    if (table and action in TABLE_KEY_READS) or (not table and action == "sqs:ReceiveMessage"):
        return ("kms:Decrypt",)
    if table:
        return ()
    return tuple(target_type("sqs").KMS_ACTIONS) if action == "sqs:SendMessage" else ()


def _key_statements(found: list[Statement], r: Resources) -> list[Statement]:
    """The use of each customer-managed key the command's calls make, one statement per key and service: derived
    from the statements the command's declarations gave, so a new call on a keyed resource brings its key use."""
    queues = dict(r.keys.queues)

    def key_of(arn: str) -> tuple[str | None, bool]:
        if arn in (r.table, r.ledger) or arn.startswith(f"{r.table}/"):
            return r.keys.table, True
        return queues.get(arn), False

    # One statement per key and service that uses it for the command (kms:ViaService): DynamoDB for the table's,
    # SQS for a queue's (one key may encrypt both).
    uses: dict[tuple[str, str], set[str]] = {}
    for statement in found:
        for arn in statement["Resource"]:
            key, table = key_of(arn)
            if key is not None:
                service = TABLE_KEY_SERVICE if table else QUEUE_KEY_SERVICE
                uses.setdefault((key, service), set()).update(
                    a for action in statement["Action"] for a in key_uses(action, table=table)
                )
    return [
        s for (key, service), actions in sorted(uses.items()) for s in key_statements(key, sorted(actions), service)
    ]


def _target_statements(command: str, r: Resources) -> list[Statement]:
    """The target's send, where a redrive sends to it: not precise ttl (its dead letters are the item's fire) and
    not aggregate (no target); with the use of the target's customer-managed key its kind declares (KMS_ACTIONS)."""
    if r.target is None or not r.operated.redrives_to_target:
        return []
    kind, arn = str(r.target["kind"]), str(r.target["arn"])
    email = r.target.get("email") or {}
    return direct_dispatch_statements(
        kind,
        arn,
        home_arn=r.function,
        sender=email.get("sender"),
        configuration_set=email.get("configurationSet"),
        target_key_arn=r.keys.target,
    )


def policy(command: str, resources: Resources) -> str:
    """The policy document (JSON) of one command for this stack."""
    return document(statements(command, resources))


def pretty(command: str, resources: Resources) -> str:
    """The policy as the command prints it: indented JSON, one statement's actions and resources on a line each."""
    return json.dumps(json.loads(policy(command, resources)), indent=2, sort_keys=True)


# The commands as `scheduled-table policy` names them (with --in-lambda, backfill and reconcile are the fan-out's).
NAMED = (
    "inspect",
    "redrive-poison",
    "redrive-stream",
    "redrive-target",
    "backfill",
    "reconcile",
    "console",
    "policy",
)


def add_parser(commands: Any) -> None:
    """`scheduled-table policy COMMAND --function NAME`."""
    command = commands.add_parser(
        "policy",
        help="print the least-privilege IAM policy an operator needs to run a command on this stack",
        description="Print the IAM policy (JSON) that lets an operator run COMMAND on the stack of --function and "
        "nothing else: its calls on this stack's resources only (its queues, table, stream, schedule group; "
        "redrive-target: the target's own send), and the use of the customer-managed keys that encrypt the table and "
        "the target. Reads the function's configuration and event source mapping, the table's and the target's "
        "encryption and the keys' metadata (run it with credentials that may: `scheduled-table policy policy` prints "
        "what). Exit status 0 printed, 2 the function or its stack could not be read.",
    )
    command.add_argument("for_command", metavar="COMMAND", choices=NAMED, help=" | ".join(NAMED))
    add_stack_options(command)
    command.add_argument(
        "--in-lambda",
        metavar="BACKFILL_FUNCTION",
        help="backfill/reconcile fanned out over the stack's backfill function (its backfill_function_name)",
    )
    command.add_argument(
        "--queue-url", help="redrive-*: the queue the redrive is told to read instead of its stack's (its --queue-url)"
    )
    command.add_argument(
        "--redrive", action="store_true", help="console: also the redrives its page can run (else read-only)"
    )


def main(args: Any, client: Client, emit: Emit) -> int:
    """Print the policy; 2 when the stack cannot be read or --in-lambda is given to a command without a fan-out."""
    import sys

    name = str(args.for_command)
    if args.queue_url and not name.startswith("redrive-"):
        print(f"scheduled-table: --queue-url is for the redrive commands, not {name}", file=sys.stderr)
        return 2
    if args.in_lambda:
        if name not in ("backfill", "reconcile"):
            print(f"scheduled-table: --in-lambda is for backfill and reconcile, not {name}", file=sys.stderr)
            return 2
        name += "-in-lambda"
    if args.redrive:
        if name != "console":
            print(f"scheduled-table: --redrive is for console, not {name}", file=sys.stderr)
            return 2
        name = "console-redrive"
    try:
        stack = discover(client, args.function)
    except RedriveError as error:
        print(f"scheduled-table: {error}", file=sys.stderr)
        return 2
    except Exception as error:  # refused, say: the one who runs this needs to read the function
        print(f"scheduled-table: cannot read the stack of {args.function!r}: {error}", file=sys.stderr)
        return 2

    def warn(text: str) -> None:
        print(f"scheduled-table: {text}", file=sys.stderr)

    keys = keys_of(client, stack, target=TARGET in COMMANDS[name], warn=warn, queue_url=args.queue_url)
    groups: tuple[str, ...] = ()
    if name.startswith("console"):
        from .console.views import stack_functions

        groups = tuple(group for _, group in stack_functions(client).get(str(stack.config["table"]), []))
    resources = resources_of(
        stack, backfill_function=args.in_lambda, keys=keys, queue_url=args.queue_url, log_groups=groups
    )
    emit(pretty(name, resources))
    return 0


# docs/operations.md shows each command's policy for an example stack, generated here (tests/house/test_generated.py
# checks the page is current; `python -m components.cli.permissions` in a checkout writes it).
PAGE_START = "<!-- policies: generated by `python -m components.cli.permissions`; do not edit by hand -->"
PAGE_END = "<!-- end of generated policies -->"
EXAMPLE_REGION, EXAMPLE_ACCOUNT = "us-east-1", "111122223333"


def example() -> Resources:
    """The example stack of the docs: `reminders`, eventbridge mode, an SQS target, a stream DLQ; the table and the
    target encrypted with customer-managed keys."""

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
        operated=modes.by_name("eventbridge").operated({}),
        target={"kind": "sqs", "arn": arn("sqs", "reminder-jobs")},
        backfill_function=arn("lambda", "function:reminders-backfill-4b5c6d"),
        log_groups=(arn("logs", "log-group:/aws/lambda/reminders-scheduler-1a2b3c:*"),),
        keys=Keys(
            table=arn("kms", "key/1234abcd-12ab-34cd-56ef-1234567890ab"),
            target=arn("kms", "key/0987dcba-09fe-87dc-65ba-ab0987654321"),
        ),
    )


def compact(document: str) -> str:
    """A policy with one statement a line, for the docs."""
    statements = json.loads(document)["Statement"]
    lines = ",\n".join(f"  {json.dumps(s, sort_keys=True)}" for s in statements)
    return '{"Version": "2012-10-17", "Statement": [\n' + lines + "\n]}"


def page_section() -> str:
    """The generated part of docs/operations.md: each command's policy for the example stack."""
    shown = [
        ("inspect", "`scheduled-table inspect`"),
        ("redrive-poison", "`scheduled-table redrive poison`"),
        ("redrive-stream", "`scheduled-table redrive stream`"),
        ("redrive-target", "`scheduled-table redrive target`"),
        ("backfill", "`scheduled-table backfill`"),
        ("reconcile", "`scheduled-table reconcile`"),
        ("backfill-in-lambda", "`scheduled-table backfill --in-lambda`"),
        ("reconcile-in-lambda", "`scheduled-table reconcile --in-lambda` (the sweep of the schedule group runs here)"),
        ("console", "`scheduled-table console`, read-only (`scheduled-table policy console`)"),
        ("console-redrive", "`scheduled-table console` with its redrive (`scheduled-table policy console --redrive`)"),
        ("policy", "`scheduled-table policy` itself (`scheduled-table policy policy`: what printing the others reads)"),
    ]
    parts = [PAGE_START]
    for name, title in shown:
        parts += [f"{title}:", "", "```json", compact(policy(name, example())), "```", ""]
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
