"""The role policies the component renders for a handler configuration, with the names of the test's resources.

The component is built under the recording Pulumi mocks (components/testing.py) with args equivalent to the
handler configuration a test runs (mode, target kind and ARN, email sender, precision, precise, on_done), once per
such option set; every policy document it registers is read back, and the fabricated physical names of the
resources the configuration also names (table, ledger, poison queue, target DLQ, release queue, schedule group,
Scheduler's role, the target) are replaced by the test's real ones. So the policy a test is checked against is the
one the component deploys, not a copy of it."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from ministack.core.iam_evaluator import ParsedStatement, parse_policy_document

from tests.conftest import REGION

ACCOUNT = "123456789012"
NAME = "st"
# The function each handler entry point is, by the component's role name for it.
FUNCTION_ROLES = ("scheduler", "releaser", "executor", "processor", "assigner", "aggregator")
SCHEDULER_EXEC = "scheduler-exec"

STANDIN = "STANDINTARGET"


def standin_arn(kind: str) -> str:
    """A stand-in for the target in the build (the real ARN replaces it): the kind's example ARN
    (st_core/target_types/), in the test's region and account, its resource's name `STANDINTARGET`."""
    from st_core import target_types

    declared = target_types.of(kind)
    resource = re.sub(r"[A-Za-z0-9_.-]+$", STANDIN, declared.ARN_EXAMPLE.split(":", 5)[5])
    return f"arn:aws:{declared.SERVICE}:{REGION}:{ACCOUNT}:{resource}"


# Stand-ins for the customer-managed keys an option set names (the test's keys replace them).
TABLE_KEY_STANDIN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/STANDINTABLEKEY"
TARGET_KEY_STANDIN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/STANDINTARGETKEY"
QUEUE_KEY_STANDIN = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/STANDINQUEUEKEY"
# The targets whose option names their key (`kms_key_arn`), and whose senders use it: a queue, a topic, a state
# machine (an event bus's key is used by EventBridge itself).
KEYED_TARGETS = ("sns", "sqs", "stepfunctions")


@dataclass(frozen=True)
class Options:
    """What of a handler configuration changes the component's policies."""

    mode: str
    kind: str
    fifo: bool = False
    sender: str | None = None
    configuration_set: str | None = None
    precision_second: bool = False
    precise: bool = False
    on_done: str = "mark"
    shard_groups: int = 1
    table_key: bool = False  # the table (and so the ledger) encrypted with a customer-managed key: `kms_key_arn`
    target_key: bool = False  # the target encrypted with one, named by the target's `kms_key_arn`
    vpc: bool = False  # every function in a VPC (`function_overrides` with a VpcConfig for each role)
    own_queues: bool = False  # the user's poison queue, stream DLQ and target DLQ (ExistingQueue), not the component's
    queue_key: bool = False  # those encrypted with a customer-managed key, named by each one's `kms_key_arn`
    table_account: str | None = None  # the table is this other account's (ExistingTable by its stream ARN)


@dataclass(frozen=True)
class Role:
    """One role as deployed: its ARN, the session name its calls are made in (the function's name), and its
    policy (parsed, and the document as rendered)."""

    name: str
    arn: str
    session: str
    document: dict[str, Any]
    statements: tuple[ParsedStatement, ...]

    @property
    def principal(self) -> str:
        """How AWS names the caller: the role's assumed-role session."""
        return f"arn:aws:sts::{ACCOUNT}:assumed-role/{self.arn.rsplit('/', 1)[-1]}/{self.session}"


@dataclass(frozen=True)
class Keys:
    """The customer-managed keys of one test's resources, as the component is told them: the table's
    (`kms_key_arn`, also the ledger's) and the target's (its `kms_key_arn`), by ARN."""

    table: str | None = None
    target: str | None = None


NO_KEYS = Keys()


def options_of(config: dict[str, Any], keys: Keys = NO_KEYS) -> Options:
    target = config["target"]
    return Options(
        table_key=keys.table is not None,
        target_key=keys.target is not None and target["kind"] in KEYED_TARGETS,  # (a bus's key is no option)
        mode=config["mode"],
        kind=target["kind"],
        fifo=str(target.get("arn", "")).endswith(".fifo"),
        sender=target.get("email", {}).get("sender"),
        configuration_set=target.get("email", {}).get("configurationSet"),
        precision_second="release" in config.get("eventbridge", {}),
        precise=bool(config.get("ttl", {}).get("precise")),
        on_done=config.get("polling", {}).get("onDone", "mark"),
        shard_groups=config.get("polling", {}).get("shardGroups", 1),
        # the handlers name another account's table by its ARN (and only such a table)
        table_account=config["table"].split(":")[4] if config["table"].startswith("arn:") else None,
    )


# Another account's table as the component is given it, and the ARN its policies name it by.
OTHER_TABLE = "others-table"


def other_table_arn(account: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{account}:table/{OTHER_TABLE}"


def _target(options: Options) -> Any:
    from components import target_types, targets

    if options.kind == "email":
        return targets.EmailTarget(sender=options.sender or "", configuration_set=options.configuration_set)
    key = TARGET_KEY_STANDIN if options.target_key else None
    if options.kind == "sqs":
        arn = standin_arn("sqs") + (".fifo" if options.fifo else "")
        return targets.QueueTarget(queue_arn=arn, content_based_deduplication=options.fifo, kms_key_arn=key)
    (cls,) = [c for c in target_types.classes() if c.kind == options.kind]
    make: Any = cls
    return make(standin_arn(options.kind) + (".fifo" if options.fifo else ""), **({"kms_key_arn": key} if key else {}))


def args_of(options: Options) -> dict[str, Any]:
    """ScheduledTableArgs keywords equivalent to the options (what does not change a policy is left default)."""
    args: dict[str, Any] = {"mode": options.mode, "partition_key": "PK", "sort_key": "SK", "time_attribute": "dueAt"}
    if options.mode != "aggregate":
        args["target"] = _target(options)
    if options.precision_second:
        args["precision"] = "second"
    if options.precise:
        args["precise"] = True
    if options.mode == "polling":
        args["on_done"] = options.on_done
        args["shard_groups"] = options.shard_groups
    if options.table_key:
        args["kms_key_arn"] = TABLE_KEY_STANDIN
    if options.table_account:
        from components import ExistingTable

        stream = f"{other_table_arn(options.table_account)}/stream/2026-01-01T00:00:00.000"
        args["existing_table"] = ExistingTable(name=OTHER_TABLE, stream_arn=stream)
    if options.own_queues:
        args.update(_own_queues(options))
    if options.vpc:
        from components import ScheduledTableArgs, modes
        from components.overrides import FunctionOverrides, VpcConfig

        vpc = VpcConfig(subnet_ids=["subnet-0a1b2c3d"], security_group_ids=["sg-0a1b2c3d"])
        roles = modes.by_name(options.mode).function_roles(ScheduledTableArgs(**args))
        args["function_overrides"] = {role: FunctionOverrides(vpc=vpc) for role in roles}
    return args


def _own_queues(options: Options) -> dict[str, Any]:
    """The user's queues for every option the mode takes (the polling processor's dead letters need 1 MiB)."""
    from components.queues import ExistingQueue

    key = QUEUE_KEY_STANDIN if options.queue_key else None
    found = {
        "existing_poison_queue": ExistingQueue(f"arn:aws:sqs:{REGION}:{ACCOUNT}:users-poison", key),
        "existing_stream_dlq": ExistingQueue(f"arn:aws:sqs:{REGION}:{ACCOUNT}:users-stream-dlq", key),
    }
    if options.mode in ("eventbridge", "polling") or options.precise:
        found["existing_target_dlq"] = ExistingQueue(f"arn:aws:sqs:{REGION}:{ACCOUNT}:users-target-dlq", key, 1048576)
    return found


@dataclass(frozen=True)
class Rendered:
    """What the mocked build registered: each role policy document by role (as text, fabricated names), each
    role's ARN and function name, and the fabricated physical name of every resource by logical suffix."""

    documents: dict[str, str]
    role_arns: dict[str, str]
    sessions: dict[str, str]
    physical: dict[str, str]
    mapping_destinations: dict[str, str]
    config: dict[str, Any]


_BUILD_LOCK = threading.Lock()


@cache
def rendered(options: Options) -> Rendered:
    """Build the component once per option set (about 0.1 s) and keep what IAM needs of it."""
    from components import ScheduledTable, ScheduledTableArgs
    from components.testing import run_with_mocks

    with _BUILD_LOCK:
        stack = run_with_mocks(
            lambda: ScheduledTable(NAME, ScheduledTableArgs(**args_of(options))),
            project="scheduled-table",
            stack="iam",
            region=REGION,
            account=ACCOUNT,
        )
    prefix = f"{NAME}-"
    documents: dict[str, str] = {}
    role_arns: dict[str, str] = {}
    sessions: dict[str, str] = {}
    physical: dict[str, str] = {}
    destinations: dict[str, str] = {}
    config: dict[str, Any] = {}
    for r in stack.resources:
        suffix = r.name.removeprefix(prefix)
        if "name" in r.outputs:
            physical[suffix] = str(r.outputs["name"])
        if r.type.endswith(":RolePolicy"):
            # A role's further policies (`{role}-policy-{what}`, e.g. the processor's fan-out) join its main one.
            role = suffix.partition("-policy")[0]
            documents[role] = _joined(documents.get(role), str(r.inputs["policy"]))
        elif r.type.endswith(":Role"):
            role_arns[suffix.removesuffix("-role")] = str(r.outputs["arn"])
        elif r.type.endswith(":Function"):
            sessions[suffix] = str(r.outputs["name"])
            variables = r.inputs.get("environment", {}).get("variables", {})
            config = json.loads(variables["SCHEDULED_TABLE_CONFIG"])
        elif r.type.endswith(":EventSourceMapping"):
            on_failure = r.inputs.get("destinationConfig", {}).get("onFailure", {})
            destinations[suffix.removesuffix("-mapping")] = str(on_failure.get("destinationArn", ""))
    return Rendered(documents, role_arns, sessions, physical, destinations, config)


def _joined(first: str | None, second: str) -> str:
    """Two policy documents of one role as one (AWS allows what any of a role's policies allows)."""
    if first is None:
        return second
    joined = json.loads(first)
    joined["Statement"] = joined["Statement"] + json.loads(second)["Statement"]
    return json.dumps(joined)


def _queue_name(url_or_arn: str) -> str:
    return url_or_arn.rstrip("/").replace(":", "/").split("/")[-1]


def real_names(config: dict[str, Any], built: Rendered) -> dict[str, str]:
    """Fabricated physical name -> the test's name, for every resource the configuration names."""
    names: dict[str, str] = {built.physical["poison"]: ""}
    if "table" in built.physical:
        names[built.physical["table"]] = config["table"]
    else:  # another account's table, which the handlers name by its ARN
        names[other_table_arn(config["table"].split(":")[4])] = config["table"]
    names[built.physical["poison"]] = _queue_name(config["poisonQueueUrl"])
    section = config.get(config["mode"], {})
    if "ledger" in built.physical and section.get("ledgerTable"):
        names[built.physical["ledger"]] = section["ledgerTable"]
    scheduler = config.get("scheduler")
    if scheduler and "schedules" in built.physical:
        names[built.physical["schedules"]] = scheduler["group"]
        names[built.physical["scheduler-exec-role"]] = scheduler["roleArn"].rsplit("/", 1)[-1]
        names[built.physical["target-dlq"]] = _queue_name(scheduler["deadLetterArn"])
    release = config.get("eventbridge", {}).get("release")
    if release:
        names[built.physical["release"]] = _queue_name(release["queueArn"])
        names[built.physical["target-dlq"]] = _queue_name(release["deadLetterUrl"])
    if config["mode"] == "polling":
        names[built.physical["target-dlq"]] = _queue_name(config["polling"]["deadLetterUrl"])
    return names


def _substitute(text: str, names: dict[str, str], target: tuple[str, str] | None) -> str:
    if target is not None:
        text = text.replace(*target)
    for fabricated in sorted(names, key=len, reverse=True):
        text = text.replace(fabricated, names[fabricated])
    return text


@lru_cache(maxsize=4096)
def _role(key: str, role: str, keys: Keys) -> Role:
    config = json.loads(key)
    options = options_of(config, keys)
    built = rendered(options)
    if role not in built.documents:
        raise LookupError(
            f"the component deploys no {role!r} role for {options}: roles {sorted(built.documents)} (is the test "
            "running a handler the configuration's mode does not deploy?)"
        )
    names = real_names(config, built)
    names.update({TABLE_KEY_STANDIN: keys.table or "", TARGET_KEY_STANDIN: keys.target or ""})
    target = None
    if options.kind not in ("email", "none"):  # a kind with an ARN of its own
        target = (standin_arn(options.kind) + (".fifo" if options.fifo else ""), config["target"]["arn"])
    document = json.loads(_substitute(built.documents[role], names, target))
    arn = _substitute(built.role_arns[role], names, None)
    session = built.sessions.get(role, role)
    return Role(role, arn, session, document, tuple(parse_policy_document(document)))


def mapping_destination(config: Mapping[str, Any], role: str, keys: Keys = NO_KEYS) -> str | None:
    """The on-failure destination (the stream DLQ's ARN) of the function `role`'s event source mapping, as the
    component deploys it for this configuration; None when the function has no stream mapping."""
    built = rendered(options_of(dict(config), keys))
    destination = built.mapping_destinations.get(role)
    return _substitute(destination, real_names(dict(config), built), None) if destination else None


def role_for(config: Mapping[str, Any], role: str, keys: Keys = NO_KEYS) -> Role:
    """The deployed role `role` ("scheduler", "executor", ..., "scheduler-exec") for this configuration, with the
    test's resource names and keys (cached per configuration)."""
    return _role(json.dumps(config, sort_keys=True, default=str), role, keys)


def rerender() -> None:
    """Forget every rendered role: the next `role_for` builds the component again (after a test changed how it
    renders a policy, and when it puts it back)."""
    rendered.cache_clear()
    _role.cache_clear()
