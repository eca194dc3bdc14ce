"""The operator's own role: each command runs under exactly the policy `scheduled-table policy COMMAND` prints for
the stack, every call it makes checked as IAM would (tests/iam/operator.py), and is refused nothing; a policy of
one action less is refused that action. A refusal mid-run gives back what the run hid and says so; when even that is
refused, the command says until when the messages stay hidden, and exits 1 without a traceback.

Before: the docs' permission list left out lambda:GetFunctionConfiguration, lambda:ListEventSourceMappings,
sqs:GetQueueUrl, sqs:ChangeMessageVisibility and the target's send, and a refused visibility reset crashed the
command with the messages hidden for ten minutes."""

from __future__ import annotations

import copy
import json
from html import unescape
from typing import Any

import eventbridge
import pytest

from components.cli.command import main
from components.modes.eventbridge import eventbridge_filters
from components.targets import QueueTarget
from tests.handlers.conftest import Env
from tests.iam import requests
from tests.iam.operator import Calls, enforcing
from tests.iam.roles import ACCOUNT
from tests.redrive.conftest import Function, aws, bodies, queue
from tests.redrive.test_stream_and_target import on_failure, scheduler_dead_letter, stream_dlq_url

PAST = "2020-01-01T00:00:00Z"
FUTURE = "2099-01-01T00:00:00Z"


def policy(function: Function, command: str, *extra: str) -> dict[str, Any]:
    lines: list[str] = []
    status = main(["policy", command, "--function", function.name, *extra], client=aws(function), emit=lines.append)
    assert status == 0, lines
    document: dict[str, Any] = json.loads("\n".join(lines))
    return document


def without(document: dict[str, Any], action: str) -> dict[str, Any]:
    """The policy with one action taken out of every statement."""
    statements = []
    for statement in document["Statement"]:
        kept = [a for a in statement["Action"] if a != action]
        if kept:
            statements.append({**statement, "Action": kept})
    return {**document, "Statement": statements}


def as_operator(
    function: Function,
    argv: list[str],
    granted: dict[str, Any],
    encryption: requests.Encryption = requests.NO_KEYS,
    **overrides: Any,
) -> tuple[int, list[str], Calls]:
    client, calls = enforcing(aws(function, **overrides), granted, encryption)
    lines: list[str] = []
    status = main([*argv, "--function", function.name], client=client, emit=lines.append)
    return status, lines, calls


@pytest.fixture
def stack(env: Env) -> tuple[Env, Function, str]:
    """An eventbridge stack with a stream DLQ, whose target queue was missing: past-due items parked in the poison
    queue. Yields the env, its consumer and the target queue's name (create it to fix the target)."""
    name = f"fixed-{env.table}"
    env.configure(target=QueueTarget(queue_arn=f"arn:aws:sqs:eu-west-1:123456789012:{name}"))
    _, dlq_arn = queue(env, f"stream-dlq-{env.table}")
    function = Function(env, eventbridge.handle_batch, eventbridge_filters("dueAt"), dlq_arn)
    for pk in ("a", "b"):
        env.put({"PK": pk, "SK": "A", "dueAt": PAST})
    env.put({"PK": "later", "SK": "A", "dueAt": FUTURE})
    eventbridge.handle_batch(env.event(), env.config)
    return env, function, name


def test_redrive_poison_runs_under_its_policy_and_uses_every_action_it_grants(stack: Any) -> None:
    env, function, name = stack
    target, _ = queue(env, name)
    granted = policy(function, "redrive-poison")

    status, lines, calls = as_operator(function, ["redrive", "poison"], granted)

    assert (status, calls.refused) == (0, []), lines
    assert len(bodies(env, target)) == 2 and bodies(env, env.poison_url) == []
    assert {"lambda:GetFunctionConfiguration", "lambda:ListEventSourceMappings", "sqs:GetQueueUrl"} <= calls.actions
    assert {"dynamodb:GetItem", "lambda:InvokeFunction", "sqs:DeleteMessage"} <= calls.actions
    granted_actions = {a for s in granted["Statement"] for a in s["Action"]}
    # Not needed by this run: a superseded record's schedule lookup; giving back messages it kept (none here);
    # finding the consumer from the table's name (--function TABLE).
    unused = {"scheduler:GetSchedule", "sqs:ChangeMessageVisibility", "dynamodb:DescribeTable"}
    assert granted_actions - calls.actions == unused


@pytest.mark.parametrize(
    "action",
    [
        "lambda:GetFunctionConfiguration",
        "lambda:ListEventSourceMappings",
        "sqs:GetQueueUrl",
        "sqs:ReceiveMessage",
        "dynamodb:GetItem",
        "lambda:InvokeFunction",
    ],
)
def test_redrive_poison_is_refused_any_action_taken_out_and_loses_nothing(stack: Any, action: str) -> None:
    env, function, name = stack
    queue(env, name)

    granted = without(policy(function, "redrive-poison"), action)

    status, lines, calls = as_operator(function, ["redrive", "poison"], granted)

    assert action in {a for a, _ in calls.refused}
    assert status in (1, 2), lines
    assert len(bodies(env, env.poison_url)) == 2  # every message still there, visible: nothing hidden, nothing lost


def test_a_refused_visibility_reset_says_until_when_the_messages_stay_hidden(
    stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The replay still fails (a transient failure the fix has not cured): the run keeps the messages and must give
    them back; without sqs:ChangeMessageVisibility it cannot, and says until when they stay hidden."""
    env, function, _ = stack
    granted = without(policy(function, "redrive-poison"), "sqs:ChangeMessageVisibility")
    function.answer = lambda batch: {"batchItemFailures": [{"itemIdentifier": batch[0]["dynamodb"]["SequenceNumber"]}]}

    status, lines, calls = as_operator(function, ["redrive", "poison"], granted)

    assert status == 1 and ("sqs:ChangeMessageVisibility", calls.refused[0][1]) in calls.refused
    said = capsys.readouterr().err
    assert "could not be made visible again (ChangeMessageVisibilityBatch refused: AccessDenied" in said, said
    assert (
        "they stay hidden until " in said and "(600 s after they were received)" in said and "nothing is lost" in said
    )
    assert lines[-1].startswith("poison queue: ")
    assert bodies(env, env.poison_url) == []  # hidden for now, as said; SQS gives them back after the timeout


def test_a_refusal_mid_run_names_the_call_and_gives_back_what_it_hid(
    stack: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    env, function, name = stack
    queue(env, name)
    granted = without(policy(function, "redrive-poison"), "dynamodb:GetItem")

    status, lines, _ = as_operator(function, ["redrive", "poison"], granted)

    said = capsys.readouterr().err
    assert status == 1, (lines, said)
    assert "stopped: GetItem refused: AccessDeniedException" in said and "dynamodb:GetItem" in said, said
    assert "the messages it held are visible again; nothing is lost" in said
    assert len(bodies(env, env.poison_url)) == 2


def test_redrive_stream_runs_under_its_policy(stack: Any) -> None:
    env, function, name = stack
    queue(env, name)
    env.put({"PK": "c", "SK": "A", "dueAt": PAST})
    records = env.event()["Records"]
    env.sqs.send_message(QueueUrl=stream_dlq_url(env), MessageBody=on_failure(env, records))

    status, lines, calls = as_operator(function, ["redrive", "stream"], policy(function, "redrive-stream"))

    assert (status, calls.refused) == (0, []), lines
    assert {"dynamodb:GetShardIterator", "dynamodb:GetRecords", "sqs:DeleteMessage"} <= calls.actions


def test_redrive_target_runs_under_its_policy_which_grants_the_targets_own_send(stack: Any) -> None:
    env, function, name = stack
    target, _ = queue(env, name)
    body = json.dumps({"keys": {"PK": "a", "SK": "A"}, "dueAt": PAST, "occurrenceId": "a-A-occ"})
    scheduler_dead_letter(env, body)
    granted = policy(function, "redrive-target")

    status, lines, calls = as_operator(function, ["redrive", "target"], granted)

    assert (status, calls.refused) == (0, []), lines
    assert len(bodies(env, target)) == 1
    assert {"sqs:SendMessage", "sqs:GetQueueUrl"} <= calls.actions
    sends = [s for s in granted["Statement"] if "sqs:SendMessage" in s["Action"]]
    assert [s["Resource"] for s in sends] == [[f"arn:aws:sqs:eu-west-1:123456789012:{name}"]]  # the target only


def test_inspect_runs_under_its_policy(stack: Any) -> None:
    _, function, _ = stack

    status, lines, calls = as_operator(function, ["inspect"], policy(function, "inspect"))

    assert (status, calls.refused) == (0, []), lines
    assert {"sqs:GetQueueAttributes", "scheduler:ListSchedules", "dynamodb:Scan"} <= calls.actions


@pytest.mark.parametrize("command", ["backfill", "reconcile"])
def test_backfill_and_reconcile_run_under_their_policies(stack: Any, command: str) -> None:
    env, function, name = stack
    queue(env, name)
    env.stream.read()

    status, lines, calls = as_operator(function, [command, "--segments", "2"], policy(function, command))

    assert (status, calls.refused) == (0, []), lines
    assert "dynamodb:Scan" in calls.actions


def test_the_policy_is_scoped_to_the_stacks_resources(stack: Any) -> None:
    env, function, _ = stack
    statements = policy(function, "redrive-poison")["Statement"]
    resources = {r for s in statements for r in s["Resource"]}
    account = "arn:aws:{}:eu-west-1:123456789012:"
    assert resources == {
        "*",  # lambda:ListEventSourceMappings has no resource-level permission
        account.format("lambda") + f"function:{function.name}",
        account.format("sqs") + env.poison_url.rsplit("/", 1)[1],
        account.format("sqs") + f"stream-dlq-{env.table}",
        env.target_dlq_arn,
        account.format("dynamodb") + f"table/{env.table}",
        account.format("scheduler") + f"schedule/{env.group}/*",
    }
    [anything] = [s for s in statements if s["Resource"] == ["*"]]
    assert anything["Action"] == ["lambda:ListEventSourceMappings"]


@pytest.mark.parametrize("command", ["backfill", "reconcile"])
def test_the_fan_out_runs_under_its_policy_which_invokes_the_backfill_function(stack: Any, command: str) -> None:
    """`backfill --in-lambda` and `reconcile --in-lambda`: the operator checks the backfill function and invokes it
    per segment; the function scans and acts with its own role. reconcile's sweep of the schedule group then runs in
    the operator's process (it may feed the consumer a write it follows).
    Before: reconcile --in-lambda's policy left out the sweep, and it was refused scheduler:ListSchedules."""
    import io

    _, function, _ = stack
    invoked: list[str] = []

    class Lambda:
        """The consumer (for discovery) and the backfill function, which finishes each segment at once."""

        def __getattr__(self, name: str) -> Any:
            return getattr(function, name)

        def get_function_configuration(self, FunctionName: str) -> dict[str, Any]:
            if FunctionName != "items-backfill":
                return function.get_function_configuration(FunctionName)
            return {
                "FunctionArn": f"arn:aws:lambda:eu-west-1:123456789012:function:{FunctionName}",
                "Handler": "backfill.handler",
            }

        def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:
            invoked.append(FunctionName)
            answer: dict[str, Any] = {"done": True, "startKey": None, "tally": {}}
            return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}

    granted = policy(function, command, "--in-lambda", "items-backfill")
    argv = [command, "--segments", "2", "--in-lambda", "items-backfill"]

    status, lines, calls = as_operator(function, argv, granted, requests.NO_KEYS, **{"lambda": Lambda()})

    assert (status, calls.refused) == (0, []), lines
    assert invoked == ["items-backfill", "items-backfill"]
    invokes = [s["Resource"] for s in granted["Statement"] if "lambda:InvokeFunction" in s["Action"]]
    fanned = ["arn:aws:lambda:eu-west-1:123456789012:function:items-backfill"]
    fed = [f"arn:aws:lambda:eu-west-1:123456789012:function:{function.name}"]  # the sweep's feed: reconcile only
    assert sorted(invokes) == sorted([fanned, *([fed] if command == "reconcile" else [])])


def test_the_scan_commands_grant_what_the_engines_modules_declare() -> None:
    """The backfill engine (handlers/backfill/) runs in the operator's process with the operator's clients: what
    its modules declare they call (their AWS_ACTIONS, checked against their code by tests/iam/test_granted.py) is
    in reconcile's declaration, backfill's too but for the sweep's calls."""
    import importlib

    from components.cli.permissions import COMMANDS, Need
    from tests.iam.test_backfill_granted import backfill_modules

    declared = {name: set(getattr(importlib.import_module(name), "AWS_ACTIONS", ())) for name in backfill_modules()}
    assert declared["backfill.scan"] == {"dynamodb:Scan"}  # the modules are found and read

    def actions(command: str) -> set[str]:
        return {a for need in COMMANDS[command] if isinstance(need, Need) for a in need.actions}

    assert set().union(*declared.values()) <= actions("reconcile")
    assert set().union(*(v for k, v in declared.items() if k != "backfill.sweep")) <= actions("backfill")


def test_polling_inspect_and_redrive_target_run_under_their_policies(env: Env) -> None:
    """polling: the due index is scanned (inspect), a dead letter is sent to the target again (redrive target); no
    schedule group, so no Scheduler action is granted."""
    from polling import process
    from polling_assign import handle_assign_batch

    from components.modes.polling import polling_filters
    from tests.handlers.conftest import with_due_index

    env = with_due_index(env)
    name = f"late-{env.table}"
    env.configure(target=QueueTarget(queue_arn=f"arn:aws:sqs:eu-west-1:123456789012:{name}"))
    env.configure(max_attempts=1)
    function = Function(env, lambda event, config: None, polling_filters())
    env.put({"PK": "job", "SK": "T", "dueAt": PAST})
    env.put({"PK": "later", "SK": "T", "dueAt": FUTURE})
    handle_assign_batch(env.event(), env.config)
    process(env.config)  # the target queue is missing: dead-lettered
    target, _ = queue(env, name)

    made: dict[str, Calls] = {}
    for argv, command in ((["inspect"], "inspect"), (["redrive", "target"], "redrive-target")):
        granted = policy(function, command)
        status, lines, made[command] = as_operator(function, argv, granted)
        assert (status, made[command].refused) == (0, []), (command, lines)
        assert not any(a.startswith("scheduler:") for s in granted["Statement"] for a in s["Action"]), granted
    index = f"arn:aws:dynamodb:eu-west-1:123456789012:table/{env.table}/index/"
    assert any(a == "dynamodb:Scan" and r.startswith(index) for a, r, _ in made["inspect"].made)
    assert len(bodies(env, target)) == 1


def test_aggregate_redrive_stream_and_reconcile_run_under_their_policies(env: Env, monkeypatch: Any) -> None:
    import backfill.totals

    from tests.redrive.test_stream_and_target import scores

    monkeypatch.setattr(backfill.totals, "SETTLE_SECONDS", 0.0)  # the totals' settle wait (real time here)

    function = scores(env)
    env.put({"PK": "SCORE#1", "SK": "USER#1", "Score": 5})
    records = env.event()["Records"]
    env.sqs.send_message(QueueUrl=stream_dlq_url(env), MessageBody=on_failure(env, records))

    for argv, command in ((["redrive", "stream"], "redrive-stream"), (["reconcile"], "reconcile")):
        granted = policy(function, command)
        status, lines, calls = as_operator(function, argv, granted)
        assert (status, calls.refused) == (0, []), (command, lines)
        assert not any(a.startswith("scheduler:") for s in granted["Statement"] for a in s["Action"]), granted


def operator_calls() -> dict[str, set[str]]:
    """The IAM action of every boto3 call in the operator's code (components/cli), by module: on `client("svc")`
    itself, or on a name or attribute assigned from it; a paginator's operation too."""
    import ast
    from pathlib import Path

    from tests.iam import requests
    from tests.iam.operator import _operations

    def service_of(node: ast.AST) -> str | None:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "client"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            return str(node.args[0].value)
        return None

    def name_of(node: ast.AST) -> str | None:
        return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None

    found: dict[str, set[str]] = {}
    root = Path(__file__).resolve().parents[2] / "components" / "cli"
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        aliases = {
            name: service
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and (service := service_of(node.value))
            for name in (name_of(t) for t in node.targets)
            if name
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver = node.func.value
            service = service_of(receiver) or aliases.get(name_of(receiver) or "")
            if service is None:
                continue
            method = node.func.attr
            if method == "get_paginator" and node.args and isinstance(node.args[0], ast.Constant):
                method = str(node.args[0].value)
            operation = _operations(service).get(method)
            if operation is not None:
                found.setdefault(str(path.relative_to(root)), set()).add(requests.action_of(service, operation))
    return found


def test_every_call_of_the_operators_code_is_in_a_commands_declaration() -> None:
    """The declarations cover the code: a new call in components/cli fails here until a command declares it (only
    the wrong-name hint's ListFunctions is left out on purpose: refused, the hint says less)."""
    from components.cli.permissions import COMMANDS, Need

    calls = operator_calls()
    assert (
        "lambda:InvokeFunction" in calls["redrive/replay.py"]
        and "sqs:ChangeMessageVisibility" in calls["redrive/queues.py"]
    )  # the scan finds what it is checked on
    declared = {a for needs in COMMANDS.values() for n in needs if isinstance(n, Need) for a in n.actions}
    undeclared = {m: a - declared - {"lambda:ListFunctions"} for m, a in calls.items()}
    assert {m: a for m, a in undeclared.items() if a} == {}


# -- customer-managed keys: the operator's policy grants the use of the keys the services say encrypt the stack ------


def customer_key() -> str:
    """A customer-managed key (its ARN), with AWS's default key policy: the account's IAM policies decide its use."""
    import boto3

    from tests.conftest import REGION

    return str(boto3.client("kms", region_name=REGION).create_key()["KeyMetadata"]["Arn"])


def encrypted(*pairs: tuple[str, str]) -> requests.Encryption:
    """Resources (ARN) encrypted with keys (ARN), each key with the default key policy."""
    keys = {key for _, key in pairs}
    return requests.Encryption(tuple(pairs), tuple((k, requests.default_key_policy(ACCOUNT)) for k in sorted(keys)))


def test_redrive_target_to_a_queue_encrypted_with_a_customer_key_is_granted_that_keys_use(stack: Any) -> None:
    """The target queue is encrypted with a customer-managed key the configuration does not carry: `policy` asks SQS
    and KMS, and grants the send's use of it (GenerateDataKey, Decrypt: the queue kind's declaration). Without it,
    KMS refuses the send and the dead letter stays in the target DLQ, visible; with it, it is delivered.
    Before: the policy had no KMS statement, and the redrive was refused."""
    env, function, name = stack
    key = customer_key()
    target_url = env.sqs.create_queue(QueueName=name, Attributes={"KmsMasterKeyId": key})["QueueUrl"]
    target_arn = env.config["target"]["arn"]
    body = json.dumps({"keys": {"PK": "a", "SK": "A"}, "dueAt": PAST, "occurrenceId": "a-A-occ"})
    scheduler_dead_letter(env, body)
    keys = encrypted((target_arn, key))
    granted = policy(function, "redrive-target")
    through_sqs = {"StringEquals": {"kms:ViaService": f"sqs.{key.split(':')[3]}.amazonaws.com"}}
    assert [s for s in granted["Statement"] if s["Resource"] == [key]] == [
        {
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Resource": [key],
            "Condition": through_sqs,
        }
    ]

    status, lines, calls = as_operator(function, ["redrive", "target"], without(granted, "kms:GenerateDataKey"), keys)

    assert ("kms:GenerateDataKey", key) in calls.refused and status == 1, lines
    dead_letters = env.sqs.get_queue_url(QueueName=env.target_dlq_arn.rsplit(":", 1)[1])["QueueUrl"]
    assert bodies(env, target_url) == [] and len(bodies(env, dead_letters)) == 1

    status, lines, calls = as_operator(function, ["redrive", "target"], granted, keys)

    assert (status, calls.refused) == (0, []), lines
    assert ("kms:GenerateDataKey", key, True) in calls.made
    assert len(bodies(env, target_url)) == 1 and bodies(env, dead_letters) == []


class KeyedTable:
    """DynamoDB as it answers for a table made with a customer-managed key (moto keeps no key given after the table
    was made): DescribeTable reports the key; every other call is moto's."""

    def __init__(self, inner: Any, table: str, key: str) -> None:
        self._inner, self._table, self._key = inner, table, key

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def describe_table(self, TableName: str) -> Any:
        answer = self._inner.describe_table(TableName=TableName)
        if TableName == self._table:
            answer["Table"]["SSEDescription"] = {"Status": "ENABLED", "SSEType": "KMS", "KMSMasterKeyArn": self._key}
        return answer


@pytest.mark.parametrize(
    ("command", "argv", "uses"),
    [
        ("redrive-poison", ["redrive", "poison"], ["kms:Decrypt"]),  # reads the item to judge the order
        ("inspect", ["inspect"], ["kms:Decrypt"]),  # scans the table
        ("backfill", ["backfill", "--segments", "2"], ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"]),
    ],
)
def test_a_table_encrypted_with_a_customer_key_grants_its_use_to_commands_that_read_or_write_it(
    stack: Any, command: str, argv: list[str], uses: list[str]
) -> None:
    """The table's key (DescribeTable's SSEDescription, resolved by KMS): kms:Decrypt for a command that reads
    items, the writers' actions for one that writes them (backfill writes the ledger, which the table's key
    encrypts too). Without kms:Decrypt the command is refused by KMS and loses nothing."""
    import boto3

    from tests.conftest import REGION

    env, function, name = stack
    queue(env, name)
    env.stream.read()
    key = customer_key()
    table = KeyedTable(boto3.client("dynamodb", region_name=REGION), env.table, key)
    ledger = (env.config.get("eventbridge") or {}).get("ledgerTable")
    keys = encrypted(*((requests.table_arn(t, enforce_where()), key) for t in (env.table, ledger) if t))
    lines: list[str] = []
    status = main(
        ["policy", command, "--function", function.name], client=aws(function, dynamodb=table), emit=lines.append
    )
    granted = json.loads("\n".join(lines))
    assert status == 0 and [s["Action"] for s in granted["Statement"] if s["Resource"] == [key]] == [uses]

    status, lines, calls = as_operator(function, argv, without(granted, "kms:Decrypt"), keys, dynamodb=table)

    assert ("kms:Decrypt", key) in calls.refused and status in (1, 2), lines
    assert len(bodies(env, env.poison_url)) == 2

    status, lines, calls = as_operator(function, argv, granted, keys, dynamodb=table)

    assert (status, calls.refused) == (0, []), lines


def enforce_where() -> requests.Where:
    from tests.iam.enforce import WHERE

    return WHERE


# -- the redrive target paths that do not send to the target, and a queue named by --queue-url -----------------------


def test_redrive_target_of_precise_ttl_calls_scheduler_s_universal_target_again_under_its_policy(env: Env) -> None:
    """Precise ttl's dead letters are Scheduler's universal target `dynamodb:updateItem` (the item's fire): the
    policy grants UpdateItem on the table, and not the target's send (the executor sends when the fire reaches it)."""
    import ttl

    from components.modes.ttl import ttl_filters
    from tests.redrive.test_stream_and_target import scheduler_dead_letter

    env.configure(mode="ttl", precise=True)
    function = Function(env, ttl.handle_batch, ttl_filters("dueAt", precise=True))
    env.put({"PK": "a", "SK": "A", "dueAt": 100})
    keys = {"PK": {"S": "a"}, "SK": {"S": "A"}}
    user_target = env.config["target"]["arn"]
    env.config["target"]["arn"] = ttl.UPDATE_ITEM_UNIVERSAL_TARGET  # the dead letter's TARGET_ARN is Scheduler's
    scheduler_dead_letter(env, json.dumps(ttl.fire_request(env.table, keys, "dueAt", {"N": "100"})))
    env.config["target"]["arn"] = user_target
    granted = policy(function, "redrive-target")

    status, lines, calls = as_operator(function, ["redrive", "target"], granted)

    assert (status, calls.refused) == (0, []), lines
    table = f"arn:aws:dynamodb:eu-west-1:123456789012:table/{env.table}"
    assert ("dynamodb:UpdateItem", table, True) in calls.made
    item = env.ddb.get_item(TableName=env.table, Key=keys)["Item"]
    assert "dueAt" not in item and item[ttl.FIRED] == {"N": "100"}  # fired, as Scheduler would have
    assert not any(user_target in s["Resource"] for s in granted["Statement"])  # no send to the target


def test_redrive_target_of_second_precision_sends_to_the_release_queue_under_its_policy(env: Env) -> None:
    """A second-precision dead letter goes back into the release queue (held until its second, past here): the
    policy grants SendMessage on the release queue, and that is the send the run makes."""
    from datetime import UTC, datetime, timedelta

    from tests.redrive.test_ordering import consumer, release_dead_letter, release_setup

    url, tdlq = release_setup(env)
    function = consumer(env)
    due = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    release_dead_letter(env, tdlq, due)
    granted = policy(function, "redrive-target")

    status, lines, calls = as_operator(function, ["redrive", "target"], granted)

    assert (status, calls.refused) == (0, []), lines
    release = env.config["eventbridge"]["release"]["queueArn"]
    assert ("sqs:SendMessage", release, True) in calls.made
    assert len(bodies(env, url)) == 1 and bodies(env, tdlq) == []

    # Without the release queue's send: refused, and the dead letter is kept, visible.
    release_dead_letter(env, tdlq, due)
    status, lines, calls = as_operator(function, ["redrive", "target"], without(granted, "sqs:SendMessage"))
    assert ("sqs:SendMessage", release) in calls.refused and status == 1, lines
    assert len(bodies(env, tdlq)) == 1


def test_redrive_poison_from_a_queue_named_by_queue_url_runs_under_the_policy_printed_with_it(stack: Any) -> None:
    """`redrive poison --queue-url URL` reads that queue (a copy of the poison queue, say): the policy printed with
    the same --queue-url grants reading it, the stack's own is still looked up; without it the read is refused."""
    env, function, name = stack
    target, _ = queue(env, name)
    copy_url, copy_arn = queue(env, f"poison-copy-{env.table}")
    for message in env.sqs.receive_message(QueueUrl=env.poison_url, MaxNumberOfMessages=10)["Messages"]:
        env.sqs.send_message(QueueUrl=copy_url, MessageBody=message["Body"])
        env.sqs.delete_message(QueueUrl=env.poison_url, ReceiptHandle=message["ReceiptHandle"])
    argv = ["redrive", "poison", "--queue-url", copy_url]

    status, lines, calls = as_operator(function, argv, policy(function, "redrive-poison"))

    assert ("sqs:ReceiveMessage", copy_arn) in calls.refused and status in (1, 2), lines
    assert len(bodies(env, copy_url)) == 2

    granted = policy(function, "redrive-poison", "--queue-url", copy_url)
    status, lines, calls = as_operator(function, argv, granted)

    assert (status, calls.refused) == (0, []), lines
    assert len(bodies(env, target)) == 2 and bodies(env, copy_url) == []
    held = [s["Resource"] for s in granted["Statement"] if "sqs:ReceiveMessage" in s["Action"]]
    assert held == [[copy_arn]]  # the named queue only, not the stack's poison queue


# -- a refusal mid-run, for each queue a redrive reads: what it hid is given back, or it says until when -------------


def held_queue(env: Env, function: Function, source: str) -> str:
    """One message in the queue `redrive <source>` reads (poison: the fixture's two already are); its URL."""
    if source == "stream":
        env.put({"PK": "c", "SK": "A", "dueAt": PAST})
        env.sqs.send_message(QueueUrl=stream_dlq_url(env), MessageBody=on_failure(env, env.event()["Records"]))
        return stream_dlq_url(env)
    if source == "target":
        body = json.dumps({"keys": {"PK": "a", "SK": "A"}, "dueAt": PAST, "occurrenceId": "a-A-occ"})
        scheduler_dead_letter(env, body)
        return str(env.sqs.get_queue_url(QueueName=env.target_dlq_arn.rsplit(":", 1)[1])["QueueUrl"])
    return env.poison_url


@pytest.mark.parametrize(
    ("source", "action"),
    [("poison", "dynamodb:GetItem"), ("stream", "dynamodb:GetShardIterator"), ("target", "sqs:SendMessage")],
)
def test_a_refusal_mid_run_of_each_redrive_names_the_action_and_gives_back_what_it_held(
    stack: Any, source: str, action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each redrive, refused a call it makes once it holds messages (the item's read, the stream's read, the
    target's send): exits 1, the refused action is named, and every message it held is visible again."""
    env, function, name = stack
    queue(env, name)  # the target exists: what refuses is IAM
    url = held_queue(env, function, source)
    before = len(bodies(env, url))
    granted = without(policy(function, f"redrive-{source}"), action)

    status, lines, calls = as_operator(function, ["redrive", source], granted)

    said = capsys.readouterr().err + "\n".join(lines)
    assert status == 1 and action in {a for a, _ in calls.refused}, said
    assert f"not authorized to perform: {action}" in said, said
    assert len(bodies(env, url)) == before >= 1  # given back, visible: nothing hidden, nothing lost


@pytest.mark.parametrize("source", ["poison", "stream", "target"])
def test_each_redrive_refused_its_visibility_reset_says_until_when_its_messages_stay_hidden(
    stack: Any, source: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The work still fails (the target still missing; the replayed batch failing again): the run must give the
    messages back and may not (no sqs:ChangeMessageVisibility): it says until when they stay hidden, exits 1."""
    env, function, _ = stack
    url = held_queue(env, function, source)
    function.answer = lambda batch: {"batchItemFailures": [{"itemIdentifier": batch[0]["dynamodb"]["SequenceNumber"]}]}
    granted = without(policy(function, f"redrive-{source}"), "sqs:ChangeMessageVisibility")

    status, lines, calls = as_operator(function, ["redrive", source], granted)

    said = capsys.readouterr().err
    assert status == 1 and "sqs:ChangeMessageVisibility" in {a for a, _ in calls.refused}, (said, lines)
    assert "could not be made visible again" in said and "they stay hidden until " in said, said
    assert "nothing is lost" in said
    assert bodies(env, url) == []  # hidden for now, as said


def test_a_poison_queue_of_the_users_encrypted_with_a_customer_key_is_granted_that_keys_use(stack: Any) -> None:
    """A queue of the user's in place of the poison queue (`existing_poison_queue`), encrypted with a customer-managed
    key: `policy` asks SQS for its key and grants what each command does with it: a receive decrypts (inspect's peek,
    the redrive's read), a send makes a data key (backfill parks there). Without kms:Decrypt the redrive is refused
    at its first read, and nothing is hidden.
    Before: the policies had no statement for a queue's key."""
    env, function, name = stack
    target, _ = queue(env, name)
    key = customer_key()
    env.sqs.set_queue_attributes(QueueUrl=env.poison_url, Attributes={"KmsMasterKeyId": key})
    poison = f"arn:aws:sqs:eu-west-1:123456789012:{env.poison_url.rsplit('/', 1)[1]}"
    keys = encrypted((poison, key))

    def keyed(command: str) -> list[list[str]]:
        return [s["Action"] for s in policy(function, command)["Statement"] if s["Resource"] == [key]]

    assert keyed("inspect") == keyed("redrive-poison") == [["kms:Decrypt"]]
    assert keyed("backfill") == [["kms:Decrypt", "kms:GenerateDataKey"]]
    granted = policy(function, "redrive-poison")

    status, lines, calls = as_operator(function, ["redrive", "poison"], without(granted, "kms:Decrypt"), keys)

    assert ("kms:Decrypt", key) in calls.refused and status in (1, 2), lines
    assert len(bodies(env, env.poison_url)) == 2

    status, lines, calls = as_operator(function, ["redrive", "poison"], granted, keys)

    assert (status, calls.refused) == (0, []), lines
    assert len(bodies(env, target)) == 2 and bodies(env, env.poison_url) == []


def test_the_policy_command_runs_under_the_policy_it_prints_for_itself(stack: Any) -> None:
    """`scheduled-table policy policy` grants what printing a policy reads: the stack (as every command finds it),
    the table's and the queues' encryption, the target's, and the keys' metadata; printing redrive-target's policy
    for a stack whose target is encrypted runs under exactly that, and finds the key."""
    env, function, name = stack
    key = customer_key()
    env.sqs.create_queue(QueueName=name, Attributes={"KmsMasterKeyId": key})
    granted = policy(function, "policy")
    client, calls = enforcing(aws(function), granted)
    lines: list[str] = []

    status = main(["policy", "redrive-target", "--function", function.name], client=client, emit=lines.append)

    assert (status, calls.refused) == (0, []), lines
    assert {"dynamodb:DescribeTable", "sqs:GetQueueAttributes", "kms:DescribeKey"} <= calls.actions
    assert key in "\n".join(lines)


# -- a stack on another account's table: the configuration names the table by its ARN --------------------------------

OTHER_ACCOUNT = "210987654321"


class OtherAccountTable:
    """DynamoDB as it answers for another account's table, named by its ARN (moto knows tables by name in one
    account only): a request naming the ARN reaches moto's table of that name, and the answers keyed by table come
    back keyed by the ARN the request gave, as DynamoDB's do. Every other call is moto's as it is."""

    def __init__(self, inner: Any, arn: str, name: str) -> None:
        self._inner, self._arn, self._name = inner, arn, name

    def _to(self, value: Any) -> Any:
        return self._name if value == self._arn else value

    def _back(self, answer: Any) -> Any:
        for field in ("Responses", "UnprocessedKeys", "UnprocessedItems"):
            if isinstance(answer.get(field), dict) and self._name in answer[field]:
                answer[field] = {self._arn if k == self._name else k: v for k, v in answer[field].items()}
        return answer

    def _call(self, method: Any) -> Any:
        def call(**request: Any) -> Any:
            if "TableName" in request:
                request["TableName"] = self._to(request["TableName"])
            if isinstance(request.get("RequestItems"), dict):
                request["RequestItems"] = {self._to(k): v for k, v in request["RequestItems"].items()}
            return self._back(method(**request))

        return call

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._inner, name)
        if name == "get_paginator":
            return lambda operation: _Pages(found(operation), self._call)
        return self._call(found) if callable(found) and not name.startswith(("_", "meta", "exceptions")) else found


class _Pages:
    def __init__(self, inner: Any, call: Any) -> None:
        self._inner, self._call = inner, call

    def paginate(self, **request: Any) -> Any:
        return self._inner.paginate(**self._call(lambda **r: r)(**request))


@pytest.fixture
def other_account_stack(stack: Any) -> tuple[Env, Function, str, OtherAccountTable]:
    """The eventbridge stack above, deployed in this account on a table of another: the configuration names the
    table by its ARN (components/existing.py `table_reference`), as the functions call it. The consumer's own calls
    are not the operator's (its role's are tests/iam/test_other_account.py's): it runs on moto's table by name."""
    import boto3

    from tests.conftest import REGION

    env, function, name = stack
    table_arn = f"arn:aws:dynamodb:{REGION}:{OTHER_ACCOUNT}:table/{env.table}"
    by_name = copy.deepcopy(env.config)
    env.config = {**env.config, "table": table_arn}
    function.handle = lambda event, config: eventbridge.handle_batch(event, by_name)
    return env, function, name, OtherAccountTable(boto3.client("dynamodb", region_name=REGION), table_arn, env.table)


@pytest.mark.parametrize(
    ("command", "argv", "on_table"),
    [
        ("inspect", ["inspect"], {"dynamodb:Scan"}),
        ("redrive-poison", ["redrive", "poison"], {"dynamodb:GetItem"}),  # the item, to judge the record's order
        ("backfill", ["backfill", "--segments", "2"], {"dynamodb:Scan", "dynamodb:DescribeTable"}),
        ("reconcile", ["reconcile", "--segments", "2"], {"dynamodb:Scan", "dynamodb:DescribeTable"}),
        ("policy", ["policy", "backfill"], {"dynamodb:DescribeTable"}),
    ],
)
def test_a_stack_on_another_accounts_table_is_granted_that_table_by_its_own_arn(
    other_account_stack: Any, command: str, argv: list[str], on_table: set[str]
) -> None:
    """The configuration holds another account's table by its ARN: the policy names that ARN (and nothing under
    `table/` in the stack's account), and each command runs under exactly it, refused nothing, its calls on the
    table made on that ARN. Before: the policy named `table/arn:aws:dynamodb:...` in the stack's account, which IAM
    never matches, and every call on the table was refused."""
    env, function, name, table = other_account_stack
    queue(env, name)
    env.stream.read()
    table_arn = env.config["table"]
    lines: list[str] = []
    assert (
        main(["policy", command, "--function", function.name], client=aws(function, dynamodb=table), emit=lines.append)
        == 0
    )
    granted = json.loads("\n".join(lines))

    status, lines, calls = as_operator(function, argv, granted, dynamodb=table)

    assert (status, calls.refused) == (0, []), lines
    assert on_table <= {a for a, r, ok in calls.made if r == table_arn and ok}, calls.made
    resources = {r for s in granted["Statement"] for r in s["Resource"]}
    assert not any(":table/arn:" in r for r in resources), resources


def test_the_key_of_another_accounts_table_is_granted_where_its_stream_and_its_key_are_read() -> None:
    """An aggregate stack on another account's table, encrypted with that account's key: the stack as the commands
    find it (the configuration names the table by its ARN, the mapping its stream). The key's use is granted on the
    reads of the table's stream (redrive stream: aggregate reads no item, so the stream's reads are the only use), and
    `policy` itself may describe that account's keys (it asks KMS which key encrypts the table). Checked by the IAM
    evaluator, the key's policy allowing the stack's account.
    Before: the stream's reads lost the key's use (KMS refused them), and `policy` was refused the description."""
    from components import ScheduledTableArgs
    from components.cli.permissions import Keys, resources_of, statements
    from components.cli.redrive.discovery import Stack
    from components.runtime_config import Value
    from tests.iam import enforce
    from tests.iam.operator import operator_role
    from tests.support.handler_config import handler_config

    table = f"arn:aws:dynamodb:eu-west-1:{OTHER_ACCOUNT}:table/scores"
    # The document of a stack on another account's table, which the handlers name by its ARN.
    poison = f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/scores-poison"
    names = {Value.TABLE: table, Value.LEDGER_TABLE: "scores-ledger", Value.POISON_QUEUE_URL: poison}
    key = f"arn:aws:kms:eu-west-1:{OTHER_ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    found = Stack(
        function="scores-consumer",
        config=dict(handler_config(ScheduledTableArgs(mode="aggregate"), names)),
        poison_url=poison,
        stream_dlq_url=f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/scores-stream-dlq",
        target_dlq_url=None,
        filters=[],
        function_arn=f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:scores-consumer",
        stream_arn=f"{table}/stream/2026-11-01T00:00:00.000",
        stream_dlq_arn=f"arn:aws:sqs:eu-west-1:{ACCOUNT}:scores-stream-dlq",
    )
    resources = resources_of(found, keys=Keys(table=key))
    allowed = [f"arn:aws:iam::{OTHER_ACCOUNT}:root", f"arn:aws:iam::{ACCOUNT}:root"]
    key_policy = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": allowed}, "Action": "kms:*", "Resource": "*"}],
        }
    )
    encryption = requests.Encryption(((table, key),), ((key, key_policy),))

    def role(command: str) -> Any:
        return operator_role({"Version": "2012-10-17", "Statement": statements(command, resources)})

    reads = [requests.Request(f"dynamodb:{a}", str(found.stream_arn)) for a in ("GetShardIterator", "GetRecords")]
    enforce.check(role("redrive-stream"), reads, encryption)
    enforce.check(role("policy"), [requests.Request("kms:DescribeKey", key)], encryption)


# -- the console: read-only under `policy console`, its redrive under `policy console --redrive` --------------------


def console_of(client: Any, function: Function, reason: str | None) -> Any:
    from components.cli.console.guard import Guard
    from components.cli.console.server import Console
    from components.cli.redrive.discovery import discover

    return Console(client, {function.name: discover(client, function.name)}, Guard(8000, "t"), {function.name: reason})


HEADERS = {"host": "127.0.0.1:8000", "cookie": "scheduled_table_console_8000=t", "origin": "http://127.0.0.1:8000"}


def test_the_console_reads_every_view_under_its_read_only_policy_and_is_refused_only_its_redrive_check(
    stack: Any,
) -> None:
    """Under `policy console`: every view is read and nothing refused but the check whether it may redrive (a
    DryRun invocation, which runs nothing), so the page is read-only and says why."""
    from components.cli.console.server import may_redrive
    from components.cli.redrive.discovery import discover

    env, function, _ = stack
    client, calls = enforcing(aws(function), policy(function, "console"))
    reason = may_redrive(client, discover(client, function.name))
    assert reason == f"these credentials may not invoke {function.name} (lambda:InvokeFunction)"
    console = console_of(client, function, reason)
    for view in ("upcoming", "parked", "delivered", "drift"):
        answer = console.answer("GET", f"/{view}?stack={function.name}", HEADERS)
        assert answer.status == 200, (view, answer.body)
    assert [action for action, _ in calls.refused] == ["lambda:InvokeFunction"]
    assert {"sqs:ReceiveMessage", "scheduler:GetSchedule", "logs:FilterLogEvents"} <= calls.actions
    assert {"cloudwatch:GetMetricData", "dynamodb:Scan", "dynamodb:GetItem"} <= calls.actions  # Delivered, Drift
    assert not calls.actions & {"sqs:DeleteMessage", "sqs:SendMessage", "scheduler:DeleteSchedule"}
    writes = ("Put", "Update", "Delete", "Create", "Send", "Invoke", "ChangeMessageVisibility", "BatchWrite")
    granted = {a for s in policy(function, "console")["Statement"] for a in s["Action"]}
    assert not {a for a in granted if a.split(":")[1].startswith(writes)}  # read-only: no write is even granted
    posted = console.answer("POST", "/redrive", HEADERS, f"stack={function.name}&source=poison&step=dry-run&token=t")
    assert posted.status == 403 and "read-only: these credentials may not invoke" in posted.body
    assert len(bodies(env, env.config["poisonQueueUrl"])) == 2  # nothing taken


def test_the_consoles_redrive_runs_under_policy_console_redrive_after_its_dry_run(stack: Any) -> None:
    import re

    from components.cli.console.server import may_redrive
    from components.cli.redrive.discovery import discover

    env, function, name = stack
    target, _ = queue(env, name)  # the fix
    client, calls = enforcing(aws(function), policy(function, "console", "--redrive"))
    assert may_redrive(client, discover(client, function.name)) is None
    console = console_of(client, function, None)
    form = f"stack={function.name}&source=poison&token=t"
    dry = console.answer("POST", "/redrive", HEADERS, form + "&step=dry-run")
    assert dry.status == 200 and "dry run, nothing changed: all of it can be redriven (exit status 0)" in dry.body
    assert bodies(env, target) == []
    [confirm] = re.findall(r'name="confirm" value="([^"]+)"', dry.body)
    done = console.answer("POST", "/redrive", HEADERS, form + f"&step=confirm&confirm={confirm}")
    assert done.status == 200 and "done: everything in scope was redriven (exit status 0)" in done.body
    assert sorted(b["keys"]["PK"] for b in bodies(env, target)) == ["a", "b"]
    assert calls.refused == []


def test_the_consoles_drift_view_finds_a_schedule_deleted_behind_its_back_under_the_read_only_policy(
    stack: Any,
) -> None:
    """`reconcile --dry-run`'s finding on the page, read under `policy console` (nothing but its redrive check
    refused): the future item whose schedule someone deleted is the one "would schedule", and nothing is written
    (the schedule stays missing)."""
    from components.cli.redrive.discovery import discover

    env, function, _ = stack
    group = env.config["scheduler"]["group"]
    scheduler = aws(function)("scheduler")
    [name] = [s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]]  # the item "later"'s
    scheduler.delete_schedule(GroupName=group, Name=name)  # behind the component's back
    client, calls = enforcing(aws(function), policy(function, "console"))
    console = console_of(client, function, "read-only")
    assert discover(client, function.name).function == function.name

    answer = console.answer("GET", f"/drift?stack={function.name}", HEADERS)

    assert answer.status == 200, answer.body
    body = unescape(answer.body)
    assert '<tr class="drift"><td>would schedule</td><td class="number">1</td><td>{"PK": "later", "SK": "A"}' in body
    assert "dry run, nothing changed. reconcile: 3 scanned, 1 acted on" in body
    assert "read: the whole table (so the schedules no item asks for" in body and "took " in body
    assert calls.refused == []
    assert scheduler.list_schedules(GroupName=group)["Schedules"] == []  # nothing written


def test_the_drift_view_says_which_read_was_refused_and_reads_nothing_else(stack: Any) -> None:
    """A policy without the table's scan: the page names the refusal (the command's own words for a segment that
    stopped) instead of reporting a table without drift."""
    _, function, _ = stack
    client, calls = enforcing(aws(function), without(policy(function, "console"), "dynamodb:Scan"))
    console = console_of(client, function, "read-only")

    answer = console.answer("GET", f"/drift?stack={function.name}", HEADERS)

    body = unescape(answer.body)
    assert answer.status == 200 and [action for action, _ in calls.refused] == ["dynamodb:Scan"]
    assert '<p class="refused">segment 0 stopped: AccessDenied' in body and "dynamodb:Scan" in body
    assert "No drift in what was read" not in body and "The check stopped before the end of its sample" in body
