"""Every AWS action a handler's code can call is declared next to the code, and granted to the function's role by
the component in every mode and option combination that runs that code; and the role is granted nothing else.

1. Declarations match the code: an AST scan of each handler module finds its boto3 calls (clients from
   `CLIENTS`/`clients.get("svc")`, directly or through a variable) and maps each operation to its IAM action
   (tests/iam/requests.py); the module's AWS_ACTIONS must be exactly those (a transaction may justify any item
   action: which ones it performs is checked per call, in every handler test, by tests/iam/enforce.py).
2. Granted: for each option combination, each function's role (as the component renders it) allows every action
   the modules it runs declare (the modules its entry module imports, transitively), except where a module's
   action is on a path that function never takes (`NOT_TAKEN`, each with its reason).
3. Tight: the role allows no action beyond those, and beyond what Lambda itself does with the role
   (`LAMBDA_ACTIONS`). Scheduler's execution role: exactly its targets' actions and the DLQ send.
KMS is an action like any other: with a customer-managed key on the table or the target (option sets with keys),
each role must be allowed exactly the kms: actions its calls (and its mapping's reads) make with those keys
(`requests.KEY_ACTIONS`), and none without a key.
Resources and conditions are checked per call (tests/iam/enforce.py); tests/policy checks resource tightness."""

from __future__ import annotations

import ast
import fnmatch
import functools
import importlib
import itertools
from collections.abc import Callable
from pathlib import Path

import botocore.session
import pytest
from botocore import xform_name
from st_core import target_types

from components.policies import QUEUE_KEY_ACTIONS, SCHEDULE_WRITER_KEY_ACTIONS, VPC_ACCESS_ACTIONS
from tests.iam import requests
from tests.iam.roles import KEYED_TARGETS, Options, rendered

HANDLERS = Path(__file__).resolve().parents[2] / "handlers"
ENTRY = {
    "scheduler": "eventbridge",
    "releaser": "release",
    "executor": "ttl",
    "processor": "polling",
    "assigner": "polling_assign",
    "aggregator": "aggregate",
}
# Every target kind, and the FIFO variant of each kind that has one (components/target_types/).
KINDS = tuple(name for t in target_types.every() for name in (t.KIND, *((f"{t.KIND}.fifo",) if t.FIFO else ())))
PASS_ROLE_OPERATIONS = {"CreateSchedule", "UpdateSchedule"}
ITEM_ACTIONS = {f"dynamodb:{a}" for a in requests.TRANSACT_ITEM_ACTIONS.values()}
# What Lambda does with a function's role, not the handler code: logs, X-Ray, an event source mapping reading its
# stream or queue (its use of the table's key is expected below, per key).
LAMBDA_ACTIONS = (
    "logs:*",
    "xray:*",
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:ListStreams",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
)
# What a function calls only to deliver to its target: its kinds' send actions, less the poison queue's send, which
# every function makes.
TARGET_ACTIONS = tuple(
    sorted(
        {a for t in target_types.every() for a in t.SEND_ACTIONS}
        - set(importlib.import_module("st_core.poison").AWS_ACTIONS)
    )
)
SCHEDULING = {"scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule", "iam:PassRole"}
LEDGER = {"dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:UpdateItem"}

Condition = Callable[[Options], bool]
# (function role, action) -> (when the function never takes the path that calls it, why).
NOT_TAKEN: dict[tuple[str, str], tuple[Condition, str]] = {
    **{
        ("releaser", a): (lambda o: True, "st_core.release makes release schedules in the scheduling function only")
        for a in SCHEDULING
    },
    ("releaser", "dynamodb:BatchWriteItem"): (
        lambda o: True,
        "schedule markers (Ledger.scheduled_many) are the scheduling function's",
    ),
    **{("executor", a): (lambda o: not o.precise, "only precise ttl makes delete schedules") for a in SCHEDULING},
    ("executor", "dynamodb:BatchWriteItem"): (lambda o: True, "ttl marks occurrences one at a time"),
    **{
        (role, a): (
            lambda o: True,
            "polling and aggregate use the ledger through marker_put, in a transaction; outside one only on another "
            "account's table (tests/iam/test_other_account.py), which this matrix does not build",
        )
        for role in ("processor", "assigner", "aggregator")
        for a in ("dynamodb:BatchWriteItem", "dynamodb:GetItem")
        # the processor reads the ledger's record of the shard count in use (polling.Processor.index_shards)
        if (role, a) != ("processor", "dynamodb:GetItem")
    },
    ("aggregator", "dynamodb:BatchGetItem"): (
        lambda o: True,
        "aggregate reads the ledger's markers only on another account's table (tests/iam/test_other_account.py)",
    ),
    ("processor", "lambda:InvokeFunction"): (
        lambda o: o.shard_groups == 1 and o.kind != "lambda",
        "only shard_groups > 1 invokes the processor itself (a Lambda target is invoked by the dispatch)",
    ),
    ("assigner", "dynamodb:DeleteItem"): (lambda o: True, "the assigner only indexes items"),
    ("aggregator", "dynamodb:DeleteItem"): (lambda o: True, "totals are updated, never deleted"),
    **{
        ("assigner", a): (lambda o: True, "the assigner indexes items; the processor delivers them")
        for a in TARGET_ACTIONS
    },
}


# -- 1. the declarations match the code ---------------------------------------------------------------------------


def module_files() -> dict[str, Path]:
    files = {p.stem: p for p in HANDLERS.glob("*.py")}
    # A handler package (polling/, eventbridge/, aggregate/, backfill/): the package (its __init__) and each module.
    for package in sorted(p.parent for p in HANDLERS.glob("*/__init__.py") if p.parent.name != "st_core"):
        files |= {package.name if p.stem == "__init__" else f"{package.name}.{p.stem}": p for p in package.glob("*.py")}
    files |= {f"st_core.{p.stem}": p for p in (HANDLERS / "st_core").glob("*.py") if p.stem != "__init__"}
    kinds = HANDLERS / "st_core" / "target_types"
    files |= {f"st_core.target_types.{p.stem}": p for p in kinds.glob("*.py") if p.stem != "__init__"}
    return files


def _is_clients_get(node: ast.AST) -> str | None:
    """`clients.get("svc")` / `self.clients.get("svc")` / `CLIENTS.get("svc")` -> "svc"; any registry whose name
    ends in `clients` (`self.send_clients`)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"):
        return None
    receiver = node.func.value
    name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
    if not name.lower().endswith("clients") or not node.args or not isinstance(node.args[0], ast.Constant):
        return None
    return str(node.args[0].value)


_SESSION = botocore.session.get_session()


def _operations(service: str) -> dict[str, str]:
    return {xform_name(op): op for op in _SESSION.get_service_model(service).operation_names}


@functools.cache
def _parsed(path: Path) -> ast.Module:
    """A handler file's tree, parsed once a run (read, never changed, by every check)."""
    return ast.parse(path.read_text())


def client_operations(path: Path) -> set[tuple[str, str]]:
    """(service, operation) of every boto3 call the module's code makes: on `clients.get("svc")` itself, on a
    variable assigned from it, or on any other name (a parameter the client is passed as) when the method is an
    operation of a service whose client the module gets."""
    tree = _parsed(path)
    aliases: dict[str, str] = {}
    services: set[str] = set()
    for node in ast.walk(tree):
        if service := _is_clients_get(node):
            services.add(service)
        if isinstance(node, ast.Assign) and (service := _is_clients_get(node.value)):
            aliases.update({t.id: service for t in node.targets if isinstance(t, ast.Name)})
    found = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = node.func.value
        direct = _is_clients_get(receiver)
        if direct is not None:
            candidates = {direct}
        elif isinstance(receiver, ast.Name):
            candidates = {aliases[receiver.id]} if receiver.id in aliases else services
        else:
            continue
        for service in candidates:
            operation = _operations(service).get(node.func.attr)
            if operation is not None:
                found.add((service, operation))
    return found


def _declared(module: str) -> tuple[str, ...]:
    return tuple(getattr(importlib.import_module(module), "AWS_ACTIONS", ()))


@pytest.mark.parametrize("module", sorted(module_files()))
def test_a_modules_declared_actions_are_exactly_what_its_code_calls(module: str) -> None:
    operations = client_operations(module_files()[module])
    declared = set(_declared(module))
    needed: set[str] = set()
    transactions = False
    for service, operation in operations:
        if operation.startswith("Transact"):
            transactions = True
            assert declared & ITEM_ACTIONS, f"{module} runs {operation} but declares no item action"
            continue
        needed.add(requests.action_of(service, operation))
        if operation in PASS_ROLE_OPERATIONS:
            needed.add("iam:PassRole")
    assert needed <= declared, f"{module} calls {sorted(needed - declared)} without declaring them in AWS_ACTIONS"
    stale = declared - needed - (ITEM_ACTIONS if transactions else set())
    assert not stale, f"{module} declares {sorted(stale)} in AWS_ACTIONS, which its code never calls"


def test_the_scan_finds_the_calls_it_is_checked_on() -> None:
    """The scan is not vacuous: it finds the ledger's batch write and the transactions."""
    files = module_files()
    assert ("dynamodb", "BatchWriteItem") in client_operations(files["st_core.idempotency"])
    assert ("dynamodb", "TransactWriteItems") in client_operations(files["aggregate.ledger"])
    assert ("dynamodb", "GetItem") in client_operations(files["eventbridge.context"])
    assert {"aggregate.ledger", "eventbridge.context"} <= imported("aggregate") | imported("eventbridge")
    assert ("scheduler", "CreateSchedule") in client_operations(files["st_core.schedules"])
    assert ("sqs", "GetQueueUrl") in client_operations(files["st_core.target_types.sqs"])
    # and in a handler package's modules: the lease's put
    assert ("dynamodb", "PutItem") in client_operations(files["polling.lease"])
    assert "polling.lease" in imported("polling")


# -- 2. and 3. granted, and nothing more -----------------------------------------------------------------------------


@functools.cache
def imported(module: str) -> frozenset[str]:
    """The handler modules `module` runs: itself and what it imports from handlers/, transitively. Cached: the files
    do not change during a run, and every role and option asks again."""
    files = module_files()
    seen: set[str] = set()
    todo = [module]
    while todo:
        current = todo.pop()
        if current in seen or current not in files:
            continue
        seen.add(current)
        for node in ast.walk(ast.parse(files[current].read_text())):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level and current.startswith("st_core."):
                    base = f"st_core.{base}" if base else "st_core"
                todo.append(base)
                todo += [f"{base}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names]
    return frozenset(seen)


def expected_actions(role: str, options: Options) -> set[str]:
    actions: set[str] = set()
    for module in imported(ENTRY[role]):
        loaded = importlib.import_module(module)
        if module == "st_core.dispatch":
            # dispatch imports the configured kind's module on first use (target_types.of): its declared actions.
            kind = target_types.module_name(options.kind)
            actions |= set(_declared(f"st_core.target_types.{kind}")) if options.mode != "aggregate" else set()
        elif hasattr(loaded, "AWS_ACTIONS_BY_ROLE"):
            actions |= set(loaded.AWS_ACTIONS_BY_ROLE[role])
        else:
            actions |= set(getattr(loaded, "AWS_ACTIONS", ()))
    taken = {a for a in actions if not ((role, a) in NOT_TAKEN and NOT_TAKEN[(role, a)][0](options))}
    return taken | key_actions(taken | mapping_actions(role), options)


STREAM_FUNCTIONS = ("scheduler", "executor", "assigner", "aggregator")


def mapping_actions(role: str) -> set[str]:
    """What the function's event source mapping does with its role on the table (reads the stream)."""
    return {"dynamodb:GetRecords"} if role in STREAM_FUNCTIONS else set()


def key_actions(actions: set[str], options: Options) -> set[str]:
    """The kms: actions `actions` make with the option set's keys: the table's (and the ledger's) by every
    DynamoDB action (`requests.KEY_ACTIONS`); the target's by a send to it (the target's KMS_ACTIONS,
    st_core/target_types/)."""
    found: set[str] = set()
    for action in actions:
        if action.startswith("dynamodb:") and options.table_key:
            found |= set(requests.KEY_ACTIONS.get(action, ()))
    if options.queue_key and "sqs:SendMessage" in actions:  # every role writes to one of the user's queues
        found |= set(QUEUE_KEY_ACTIONS)
    if options.table_key and not options.own_queues and "sqs:SendMessage" in actions:
        found |= set(QUEUE_KEY_ACTIONS)  # the component's own queues are under the table's key
    if options.table_key and "scheduler:CreateSchedule" in actions:  # Scheduler encrypts the payload as the caller
        found |= {"kms:DescribeKey", *SCHEDULE_WRITER_KEY_ACTIONS}
    if options.target_key and options.kind in KEYED_TARGETS:
        declared = target_types.of(options.kind)
        if actions & {*declared.SEND_ACTIONS, *declared.SCHEDULER_ACTIONS}:
            found |= set(declared.KMS_ACTIONS)
    return found


def allowed_actions(document: dict[str, object]) -> list[str]:
    statements = document["Statement"]
    assert isinstance(statements, list)
    found: list[str] = []
    for statement in statements:
        assert statement["Effect"] == "Allow", statement
        action = statement["Action"]
        found += [action] if isinstance(action, str) else list(action)
    return found


def allows(patterns: list[str], action: str) -> bool:
    return any(fnmatch.fnmatchcase(action.lower(), p.lower()) for p in patterns)


# Each mode with a target, and its variants whose functions or roles differ (a releaser, Scheduler's role in ttl).
TARGETED_VARIANTS: tuple[tuple[str, dict[str, bool]], ...] = (
    ("eventbridge", {}),
    ("eventbridge", {"precision_second": True}),
    ("ttl", {}),
    ("ttl", {"precise": True}),
    ("polling", {}),
)


def option_sets() -> list[Options]:
    found: list[Options] = []
    for kind in KINDS:
        base = {"kind": kind.split(".")[0], "fifo": kind.endswith(".fifo")}
        if kind == "email":
            base["sender"] = "Reminders <reminders@example.com>"
        scheduled = not base["fifo"] or target_types.of(kind.split(".")[0]).SCHEDULER_FIFO
        for second in (False, True) if scheduled else ():
            if not (second and kind == "email"):
                found.append(Options(mode="eventbridge", precision_second=second, **base))
        for precise in (False, True):
            found.append(Options(mode="ttl", precise=precise, **base))
        for on_done in ("mark", "delete"):
            found.append(Options(mode="polling", on_done=on_done, **base))
        found.append(Options(mode="polling", shard_groups=4, **base))
    found.append(Options(mode="aggregate", kind="none"))
    # Customer-managed keys on the table and on the target (a queue, a topic), in every mode.
    for kind in KEYED_TARGETS:
        for mode, extra in TARGETED_VARIANTS:
            found.append(Options(mode=mode, kind=kind, table_key=True, target_key=True, **extra))  # type: ignore[arg-type]
        found.append(Options(mode="eventbridge", kind=kind, target_key=True))
    found.append(Options(mode="ttl", kind="sqs", precise=True, table_key=True))
    found.append(Options(mode="aggregate", kind="none", table_key=True))
    # Every function in a VPC: each role also gets the network-interface actions, and only then.
    found.append(Options(mode="eventbridge", kind="sqs", precision_second=True, vpc=True))
    found.append(Options(mode="ttl", kind="sqs", precise=True, vpc=True))
    found.append(Options(mode="polling", kind="sqs", vpc=True))
    found.append(Options(mode="aggregate", kind="none", vpc=True))
    # The user's own poison queue and DLQs (ExistingQueue), with and without their customer-managed key.
    for mode, extra in TARGETED_VARIANTS:
        for key in (False, True):
            found.append(Options(mode=mode, kind="sqs", own_queues=True, queue_key=key, **extra))  # type: ignore[arg-type]
    found += [Options(mode="aggregate", kind="none", own_queues=True, queue_key=key) for key in (False, True)]
    return found


def option_id(options: Options) -> str:
    extra = [n for n, on in (("second", options.precision_second), ("precise", options.precise)) if on]
    kind = options.kind + (".fifo" if options.fifo else "")
    polling = [options.on_done, *([f"groups{options.shard_groups}"] if options.shard_groups > 1 else [])]
    keys = [n for n, on in (("table-key", options.table_key), ("target-key", options.target_key)) if on]
    keys += ["vpc"] if options.vpc else []
    keys += ["own-queues"] if options.own_queues else []
    keys += ["queue-key"] if options.queue_key else []
    return "-".join([options.mode, kind, *extra, *(polling if options.mode == "polling" else []), *keys])


@pytest.mark.parametrize("options", option_sets(), ids=option_id)
def test_each_function_is_granted_what_its_code_calls_and_nothing_more(options: Options) -> None:
    import json

    built = rendered(options)
    functions = [r for r in built.documents if r in ENTRY]
    assert functions, built.documents.keys()
    for role in functions:
        granted = allowed_actions(json.loads(built.documents[role]))
        # Lambda's, not the code's: it makes the function's network interfaces in the VPC with the function's role.
        expected = expected_actions(role, options) | (set(VPC_ACCESS_ACTIONS) if options.vpc else set())
        missing = sorted(a for a in expected if not allows(granted, a))
        assert not missing, f"the {role} role is not granted {missing}, which its code calls"
        excess = sorted({a for a in granted if not allows(list(LAMBDA_ACTIONS), a) and not allows(sorted(expected), a)})
        assert not excess, f"the {role} role is granted {excess}, which its code never calls"


def scheduler_expected(options: Options) -> set[str]:
    if options.mode == "ttl":
        fire = {"dynamodb:UpdateItem"}  # the item's fire (stFiredAt)
        dlq = set(QUEUE_KEY_ACTIONS) if options.queue_key or options.table_key else set()  # the DLQ's key
        return fire | {"sqs:SendMessage"} | key_actions(fire, options) | dlq  # and the DLQ
    actions = set(target_types.of(options.kind).SCHEDULER_ACTIONS)
    delivered = key_actions(actions, options)  # the target's key, by the target's action (not the release queue's)
    if options.precision_second:
        actions.add("sqs:SendMessage")  # one-time occurrences go to the release queue
    # The DLQ's key (a user's, or the table's on the component's own); the payload's, the table's
    dlq = set(QUEUE_KEY_ACTIONS) if options.queue_key or options.table_key else set()
    payload = {"kms:Decrypt"} if options.table_key else set()
    return actions | {"sqs:SendMessage"} | delivered | dlq | payload


@pytest.mark.parametrize("options", [o for o in option_sets() if o.mode == "eventbridge" or o.precise], ids=option_id)
def test_the_scheduler_role_is_granted_its_targets_and_its_dlq_only(options: Options) -> None:
    import json

    granted = allowed_actions(json.loads(rendered(options).documents["scheduler-exec"]))
    expected = scheduler_expected(options)
    assert all(allows(granted, a) for a in expected), (granted, expected)
    assert all(allows(sorted(expected), a) for a in granted), (granted, expected)


def test_the_option_matrix_builds_every_function() -> None:
    roles = {r for o in option_sets() for r in rendered(o).documents}
    assert roles == {*ENTRY, "scheduler-exec"}
    assert len(list(itertools.chain(option_sets()))) > 30
