"""Unit-test kit for Pulumi programs that use ScheduledTable: mocks that answer as AWS would, and one call that runs a
program under them and hands back everything it registered and exported as plain values.

Pulumi's minimal mocks echo each resource's inputs back as its outputs, so every ARN, URL and stream ARN a program
reads is None, and whatever is built from one (an IAM policy, the handlers' config) is built from nothing. These
mocks give each resource the id, name, ARN, URL and stream ARN AWS would give it, in AWS's own shapes, for every
resource type the component creates and the usual targets, so a test can assert what a deployment would really get:

    from scheduled_table.testing import run_with_mocks

    def test_reminders_table_is_retained() -> None:
        stack = run_with_mocks("__main__.py")
        assert stack.one("reminders-table").inputs["deletionProtectionEnabled"] is True

Only pulumi is imported here (no pytest, boto3 or moto), so it works wherever the component does.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import runpy
import sys
import threading
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pulumi
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.settings import get_root_resource, set_root_resource

__all__ = [
    "ACCOUNT",
    "REGION",
    "Backend",
    "DuplicateUrnError",
    "FabricatedTable",
    "MockedStack",
    "RecordingMonitor",
    "Registration",
    "ScheduledTableMocks",
    "fabricate",
    "fabricated_table",
    "first_cause",
    "run_with_mocks",
    "set_mocks",
]

ACCOUNT = "123456789012"
REGION = "eu-west-1"
STACK_TYPE = "pulumi:pulumi:Stack"
# DynamoDB names a stream after the time it was enabled; one fixed instant keeps test output stable.
STREAM_LABEL = "2026-01-01T00:00:00.000"

# (type token, logical name, inputs) -> (id, outputs): where a resource's outputs come from. The default fabricates
# them; the local cloud passes one that creates the resource in an emulator and returns what it answered.
Backend = Callable[[str, str, dict[str, Any]], tuple[str, dict[str, Any]]]
# A lookup's answer: its result, or a function of the call's arguments that returns it.
Invoke = Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]


@dataclass
class Registration:
    """One resource as the program registered it: inputs as the provider would receive them (camelCase, resolved),
    the id and outputs the mocks answered, and the URN of its parent ('' for the stack itself)."""

    type: str
    name: str
    inputs: dict[str, Any]
    parent: str
    outputs: dict[str, Any] = field(default_factory=dict)
    id: str = ""


@dataclass(frozen=True)
class _Resource:
    """What a resource's shape is computed from."""

    name: str
    inputs: dict[str, Any]
    region: str
    account: str

    @property
    def partition(self) -> str:
        for prefix, partition in (("cn-", "aws-cn"), ("us-gov-", "aws-us-gov"), ("us-iso-", "aws-iso")):
            if self.region.startswith(prefix):
                return partition
        return "aws"

    @property
    def physical(self) -> str:
        """The `name` the program set, else the provider's auto-name: the logical name plus seven hex characters
        (random on AWS; derived from the name here, so a test sees the same name every run)."""
        return str(self.inputs.get("name") or self.autoname)

    @property
    def autoname(self) -> str:
        return f"{self.name}-{hashlib.sha256(self.name.encode()).hexdigest()[:7]}"

    @property
    def uuid(self) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"scheduled-table-testing:{self.name}"))

    def arn(self, service: str, resource: str, *, regional: bool = True) -> str:
        return f"arn:{self.partition}:{service}:{self.region if regional else ''}:{self.account}:{resource}"


_Shape = Callable[[_Resource], tuple[str, dict[str, Any]]]


def _table(r: _Resource) -> tuple[str, dict[str, Any]]:
    arn = r.arn("dynamodb", f"table/{r.physical}")
    outputs: dict[str, Any] = {"name": r.physical, "arn": arn}
    if r.inputs.get("streamEnabled"):
        outputs.update(streamArn=f"{arn}/stream/{STREAM_LABEL}", streamLabel=STREAM_LABEL)
    return r.physical, outputs


def _queue(r: _Resource) -> tuple[str, dict[str, Any]]:
    name = r.physical
    if r.inputs.get("fifoQueue") and not name.endswith(".fifo"):
        name += ".fifo"
    url = f"https://sqs.{r.region}.amazonaws.com/{r.account}/{name}"
    return url, {"name": name, "arn": r.arn("sqs", name), "url": url}  # a queue's id is its URL


def _schedule_group(r: _Resource) -> tuple[str, dict[str, Any]]:
    arn = r.arn("scheduler", f"schedule-group/{r.physical}")
    return r.physical, {"name": r.physical, "arn": arn, "state": "ACTIVE"}


def _role(r: _Resource) -> tuple[str, dict[str, Any]]:
    path = str(r.inputs.get("path") or "/")
    unique = "AROA" + hashlib.sha256(r.name.encode()).hexdigest()[:17].upper()
    arn = r.arn("iam", f"role{path}{r.physical}", regional=False)
    return r.physical, {"name": r.physical, "arn": arn, "uniqueId": unique, "path": path}


def _role_policy(r: _Resource) -> tuple[str, dict[str, Any]]:
    return f"{r.inputs.get('role')}:{r.physical}", {"name": r.physical}  # role name ':' policy name


def _log_group(r: _Resource) -> tuple[str, dict[str, Any]]:
    return r.physical, {"name": r.physical, "arn": r.arn("logs", f"log-group:{r.physical}")}


def _function(r: _Resource) -> tuple[str, dict[str, Any]]:
    arn = r.arn("lambda", f"function:{r.physical}")
    invoke = f"arn:{r.partition}:apigateway:{r.region}:lambda:path/2015-03-31/functions/{arn}/invocations"
    return r.physical, {
        "name": r.physical,
        "arn": arn,
        "qualifiedArn": f"{arn}:$LATEST",
        "invokeArn": invoke,
        "version": "$LATEST",
    }


def _function_arn(r: _Resource, name_or_arn: object) -> str:
    text = str(name_or_arn)
    return text if text.startswith("arn:") else r.arn("lambda", f"function:{text}")


def _event_source_mapping(r: _Resource) -> tuple[str, dict[str, Any]]:
    return r.uuid, {
        "uuid": r.uuid,
        "arn": r.arn("lambda", f"event-source-mapping:{r.uuid}"),
        "functionArn": _function_arn(r, r.inputs.get("functionName")),
        "state": "Enabled",
    }


def _invoke_config(r: _Resource) -> tuple[str, dict[str, Any]]:
    function, qualifier = r.inputs.get("functionName"), r.inputs.get("qualifier")
    return f"{function}:{qualifier}" if qualifier else str(function), {}


def _permission(r: _Resource) -> tuple[str, dict[str, Any]]:
    statement = str(r.inputs.get("statementId") or r.autoname)
    return statement, {"statementId": statement}


def _event_rule(r: _Resource) -> tuple[str, dict[str, Any]]:
    bus = str(r.inputs.get("eventBusName") or "default")
    path = r.physical if bus == "default" else f"{bus}/{r.physical}"
    return path, {"name": r.physical, "arn": r.arn("events", f"rule/{path}"), "eventBusName": bus}


def _event_target(r: _Resource) -> tuple[str, dict[str, Any]]:
    target = str(r.inputs.get("targetId") or r.autoname)
    return f"{r.inputs.get('rule')}-{target}", {"targetId": target}


def _metric_alarm(r: _Resource) -> tuple[str, dict[str, Any]]:
    return r.physical, {"name": r.physical, "arn": r.arn("cloudwatch", f"alarm:{r.physical}")}


def _dashboard(r: _Resource) -> tuple[str, dict[str, Any]]:
    name = str(r.inputs.get("dashboardName") or r.autoname)
    return name, {"dashboardArn": r.arn("cloudwatch", f"dashboard/{name}", regional=False)}


def _key(r: _Resource) -> tuple[str, dict[str, Any]]:
    return r.uuid, {"arn": r.arn("kms", f"key/{r.uuid}"), "keyId": r.uuid}  # a key has no name: its id is a UUID


def _topic(r: _Resource) -> tuple[str, dict[str, Any]]:
    name = r.physical
    if r.inputs.get("fifoTopic") and not name.endswith(".fifo"):
        name += ".fifo"
    arn = r.arn("sns", name)
    return arn, {"name": name, "arn": arn, "owner": r.account}  # a topic's id is its ARN


def _event_bus(r: _Resource) -> tuple[str, dict[str, Any]]:
    return r.physical, {"name": r.physical, "arn": r.arn("events", f"event-bus/{r.physical}")}  # id: its name


def _state_machine(r: _Resource) -> tuple[str, dict[str, Any]]:
    arn = r.arn("states", f"stateMachine:{r.physical}")
    return arn, {"name": r.physical, "arn": arn, "status": "ACTIVE"}  # a state machine's id is its ARN


def _other(typ: str) -> _Shape:
    """Any other type: its name, and for an AWS type an ARN in the usual shape (the service from the module of the
    type token, which is right for most, not all: override `ScheduledTableMocks.outputs` where it matters)."""

    def shape(r: _Resource) -> tuple[str, dict[str, Any]]:
        outputs: dict[str, Any] = {"name": r.physical}
        package, _, rest = typ.partition(":")
        if package == "aws":
            module, _, kind = rest.partition(":")[0].partition("/")
            outputs["arn"] = r.arn(module, f"{kind}/{r.physical}")
        return r.physical, outputs

    return shape


# Every type the component creates (what `aws.<module>.<Type>(` constructs in components/), then the usual targets.
SHAPES: dict[str, _Shape] = {
    "aws:dynamodb/table:Table": _table,
    "aws:sqs/queue:Queue": _queue,
    "aws:scheduler/scheduleGroup:ScheduleGroup": _schedule_group,
    "aws:iam/role:Role": _role,
    "aws:iam/rolePolicy:RolePolicy": _role_policy,
    "aws:cloudwatch/logGroup:LogGroup": _log_group,
    "aws:lambda/function:Function": _function,
    "aws:lambda/eventSourceMapping:EventSourceMapping": _event_source_mapping,
    "aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig": _invoke_config,
    "aws:lambda/permission:Permission": _permission,
    "aws:cloudwatch/eventRule:EventRule": _event_rule,
    "aws:cloudwatch/eventTarget:EventTarget": _event_target,
    "aws:cloudwatch/metricAlarm:MetricAlarm": _metric_alarm,
    "aws:cloudwatch/dashboard:Dashboard": _dashboard,
    "aws:kms/key:Key": _key,
    "aws:sns/topic:Topic": _topic,
    "aws:sfn/stateMachine:StateMachine": _state_machine,
    "aws:cloudwatch/eventBus:EventBus": _event_bus,
}


def fabricate(
    typ: str, name: str, inputs: dict[str, Any], region: str = REGION, account: str = ACCOUNT
) -> tuple[str, dict[str, Any]]:
    """The id and outputs AWS would give resource `name` of type `typ`: its inputs, plus names, ARNs, URLs and
    stream ARNs shaped like the real ones (provider property names, camelCase)."""
    resource_id, shaped = SHAPES.get(typ, _other(typ))(_Resource(name, inputs, region, account))
    return resource_id, {**inputs, **shaped}


def _default_invokes(region: str, account: str) -> dict[str, Invoke]:
    """The lookups programs commonly make about where they deploy, answered for this account and region."""
    partition = _Resource("", {}, region, account).partition
    return {
        "aws:index/getCallerIdentity:getCallerIdentity": {
            "accountId": account,
            "arn": f"arn:{partition}:iam::{account}:user/test",
            "id": account,
            "userId": "AIDA" + "0" * 17,
        },
        "aws:index/getRegion:getRegion": {
            "id": region,
            "name": region,
            "region": region,
            "endpoint": f"ec2.{region}.amazonaws.com",
            "description": region,
        },
        # A key a program names is taken for its own, customer-managed one (ExistingTable's key check looks it up).
        "aws:kms/getKey:getKey": lambda args: {
            "arn": args["keyId"],
            "id": args["keyId"],
            "keyId": str(args["keyId"]).rsplit("/", 1)[-1],
            "keyManager": "CUSTOMER",
        },
        "aws:index/getPartition:getPartition": {
            "id": partition,
            "partition": partition,
            "dnsSuffix": "amazonaws.com",
            "reverseDnsPrefix": "com.amazonaws",
        },
    }


GET_TABLE = "aws:dynamodb/getTable:getTable"


@dataclass(frozen=True)
class _TableShape:
    name: str
    partition_key: str | None
    sort_key: str | None
    ttl_attribute: str | None
    due_index: bool
    stream_view_type: str | None
    kms_key_arn: str | None = None

    def render(self, region: str, account: str) -> dict[str, Any]:
        partition = _Resource("", {}, region, account).partition
        arn = f"arn:{partition}:dynamodb:{region}:{account}:table/{self.name}"
        found: dict[str, Any] = {
            "name": self.name,
            "arn": arn,
            "streamEnabled": self.stream_view_type is not None,
            "ttl": {"enabled": self.ttl_attribute is not None, "attributeName": self.ttl_attribute or ""},
            "globalSecondaryIndexes": [],
        }
        if self.stream_view_type is not None:
            found["streamViewType"] = self.stream_view_type
            found["streamArn"] = f"{arn}/stream/{STREAM_LABEL}"
        if self.kms_key_arn is not None:
            found["serverSideEncryption"] = {"enabled": True, "kmsKeyArn": self.kms_key_arn}
        if self.partition_key is not None:
            found["hashKey"] = self.partition_key
        if self.sort_key is not None:
            found["rangeKey"] = self.sort_key
        if self.due_index:
            from .packaging import runtime_module

            pending = runtime_module("pending")  # the names the handlers query, not a copy of them
            found["globalSecondaryIndexes"] = [
                {
                    "name": pending.INDEX_NAME,
                    "hashKey": pending.SHARD,
                    "rangeKey": pending.DUE,
                    "projectionType": "ALL",
                    "nonKeyAttributes": [],
                    "readCapacity": 0,
                    "writeCapacity": 0,
                }
            ]
        return found


class FabricatedTable(dict[str, Any]):
    """getTable's answer for one table (what `fabricated_table` returns): a plain mapping of the answer, which
    ScheduledTableMocks gives again in the region the lookup asks about (a stream ARN's), else the run's region,
    unless `region` was given."""

    def __init__(self, shape: _TableShape, region: str | None, account: str | None) -> None:
        super().__init__(shape.render(region or REGION, account or ACCOUNT))
        self.shape, self.region, self.account = shape, region, account

    def answer(self, args: Mapping[str, Any], region: str, account: str) -> dict[str, Any]:
        asked = args.get("name")
        if asked is not None and asked != self.shape.name:
            raise NotImplementedError(
                f"fabricated_table({self.shape.name!r}) answers the lookup of table {self.shape.name!r}, and the "
                f"program looked up {asked!r}: pass fabricated_table({asked!r}, ...) for it (several tables: "
                f"invokes={{{GET_TABLE!r}: lambda args: tables[args['name']]}})"
            )
        return self.shape.render(self.region or str(args.get("region") or region), self.account or account)


def fabricated_table(
    name: str,
    region: str | None = None,
    account: str | None = None,
    *,
    partition_key: str | None = None,
    sort_key: str | None = None,
    ttl_attribute: str | None = None,
    due_index: bool = False,
    stream_view_type: str | None = "NEW_AND_OLD_IMAGES",
    kms_key_arn: str | None = None,
) -> FabricatedTable:
    """An answer to the `aws.dynamodb.getTable` lookup an `ExistingTable` makes, for programs run without a cloud:
    `run_with_mocks(program, invokes={"aws:dynamodb/getTable:getTable": fabricated_table("orders", ...)})`.

    Describe the table as it is, and the component checks it as it would a real one: `partition_key`/`sort_key` its
    key names (left out: not checked), `ttl_attribute` the attribute TTL is enabled on (`ttl` mode needs it to be
    the time attribute), `due_index` whether it has the polling due index (`polling` mode needs it),
    `stream_view_type` its stream's view type (None: no stream), `kms_key_arn` the customer-managed key it is
    encrypted with (the component then needs it as its `kms_key_arn`; the mocks answer the key's lookup as a
    customer-managed key). Its ARNs are in the run's region and account (`run_with_mocks`'s `region`/`aws:region`
    config), or those given."""
    shape = _TableShape(name, partition_key, sort_key, ttl_attribute, due_index, stream_view_type, kms_key_arn)
    return FabricatedTable(shape, region, account)


class ScheduledTableMocks(pulumi.runtime.Mocks):
    """Pulumi mocks that answer each resource as AWS would (see `fabricate`, or the `backend` given) and record every
    registration, parent included, in `by_name`.

    `invokes`: results of data-source functions by token, each a mapping or a function of the call's arguments
    (`{"aws:dynamodb/getTable:getTable": lambda args: {...}}` answers the lookup an `ExistingTable` makes: by name,
    or by stream ARN in the deploying account, in the stream's region: `args` has `name` and `region`).
    getCallerIdentity, getRegion and getPartition are always answered for `account` and `region`, and getKey as a
    customer-managed key (an entry in `invokes` overrides one); any other lookup fails, naming its token. Pass `{}`
    to make every lookup fail.
    """

    def __init__(
        self,
        region: str = REGION,
        account: str = ACCOUNT,
        *,
        backend: Backend | None = None,
        invokes: Mapping[str, Invoke] | None = None,
    ) -> None:
        self.region = region
        self.account = account
        self.backend = backend
        # The usual lookups stay answered beside those given (an ExistingTable given by stream ARN asks who deploys
        # as well as for the table); `{}` answers none.
        usual = _default_invokes(region, account)
        self.invokes = dict(usual if invokes is None else ({**usual, **invokes} if invokes else {}))
        self.by_name: dict[str, Registration] = {}
        self._transforms: dict[str, list[Any]] = {}  # each resource's transforms, its ancestors' included
        # What the program exported (`pulumi.export`), resolved; filled in by run_with_mocks.
        self.stack_outputs: dict[str, Any] = {}

    def outputs(self, typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The id and outputs of one resource: override to answer a type differently."""
        if self.backend is not None:
            return self.backend(typ, name, inputs)
        return fabricate(typ, name, inputs, self.region, self.account)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        registration = self.by_name.setdefault(args.name, Registration(args.typ, args.name, args.inputs, ""))
        inputs = self.transformed(args, registration.parent)
        if args.custom is False:  # a component resource: nothing in the cloud, no id
            resource_id, outputs = "", dict(inputs)
        else:
            resource_id, outputs = self.outputs(args.typ, args.name, inputs)
        registration.inputs, registration.outputs, registration.id = inputs, outputs, resource_id
        return resource_id, outputs

    def transformed(self, args: pulumi.runtime.MockResourceArgs, parent: str) -> dict[str, Any]:
        """The inputs after the resource's transforms (`ResourceOptions(transforms=...)`), its own and then its
        ancestors', as the engine runs them (Pulumi's mock monitor runs none): a transform on a component reaches
        every child. Each gets the inputs as the engine would (camelCase wire names); its changed `props` are
        used, its changed `opts` are not (the kit records no options). Synchronous transforms only."""
        inherited = self._transforms.get(parent.rpartition("::")[2], []) if parent else []
        chain = [*args.transforms, *inherited]
        self._transforms[args.name] = chain
        props = dict(args.inputs)
        for transform in chain:
            given = pulumi.ResourceTransformArgs(
                custom=bool(args.custom), type_=args.typ, name=args.name, props=props, opts=pulumi.ResourceOptions()
            )
            result = transform(given)
            if result is not None and not isinstance(result, pulumi.ResourceTransformResult):
                raise TypeError(f"transform {transform!r} of {args.name}: the kit runs synchronous transforms only")
            if result is not None:
                props = dict(result.props)
        return props

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        if args.token not in self.invokes:
            if args.token == GET_TABLE:
                name = dict(args.args).get("name") or "orders"
                raise NotImplementedError(
                    f"ScheduledTableMocks has no answer for the lookup {args.token} (an ExistingTable's): pass "
                    f"invokes={{{args.token!r}: fabricated_table({name!r}, partition_key=..., sort_key=..., "
                    "ttl_attribute=..., due_index=...)}} describing the table (scheduled_table.testing)"
                )
            raise NotImplementedError(
                f"ScheduledTableMocks has no answer for the lookup {args.token}: pass "
                f"invokes={{{args.token!r}: {{...}}}} with the result to give"
            )
        answer = self.invokes[args.token]
        found = dict(args.args)
        result = answer(found) if callable(answer) else answer
        if isinstance(result, FabricatedTable):
            result = result.answer(found, self.region, self.account)
        return dict(result), []  # no check failures (None would break MockMonitor.Invoke)

    def registrations(self) -> list[Registration]:
        """Every resource except the stack, in registration order."""
        return [r for r in self.by_name.values() if r.type != STACK_TYPE]


class DuplicateUrnError(ValueError):
    """Two resources of one program with the same URN, which Pulumi's engine refuses."""


class RecordingMonitor(MockMonitor):
    """Also records each resource's parent URN, which the Mocks interface does not see."""

    def __init__(self, mocks: ScheduledTableMocks) -> None:
        super().__init__(mocks)
        self.recording = mocks
        self._urns: set[str] = set()
        self._registering = threading.Lock()

    def RegisterResource(self, request: Any) -> Any:  # the gRPC method's name
        # Pulumi's engine refuses a second resource with the same URN (its type, its parent's type and its name):
        # two `ScheduledTable("reminders")` in one program fail `pulumi up` with this message, so they fail here too
        # instead of being merged into one.
        urn = self.make_urn(request.parent, request.type, request.name)
        with self._registering:  # the SDK registers from several threads: one check-and-claim at a time
            taken = urn in self._urns
            self._urns.add(urn)
        if taken:
            shown = urn.replace(f"::{STACK_TYPE}$", "::")  # the engine's URN of a top-level resource
            raise DuplicateUrnError(
                f"Duplicate resource URN '{shown}'; try giving it a unique name (the name {request.name!r} is "
                f"given to two {request.type} resources)"
            )
        entry = self.recording.by_name.setdefault(request.name, Registration(request.type, request.name, {}, ""))
        entry.parent = request.parent
        return super().RegisterResource(request)


def set_mocks(
    region: str = REGION,
    *,
    account: str = ACCOUNT,
    project: str = "project",
    stack: str = "stack",
    backend: Backend | None = None,
    invokes: Mapping[str, Invoke] | None = None,
) -> ScheduledTableMocks:
    """`pulumi.runtime.set_mocks` with ScheduledTableMocks: every resource registered in this process from now on
    gets AWS-shaped outputs and is recorded. Starts a new root stack, so nothing exported earlier carries over."""
    mocks = ScheduledTableMocks(region, account, backend=backend, invokes=invokes)
    set_root_resource(cast(pulumi.Resource, None))
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=RecordingMonitor(mocks))
    return mocks


@dataclass
class MockedStack:
    """What a program did under ScheduledTableMocks, all resolved to plain values: every resource it registered, what
    it exported with `pulumi.export`, and what the program function returned."""

    mocks: ScheduledTableMocks
    exports: dict[str, Any]
    result: Any

    @property
    def resources(self) -> list[Registration]:
        """Every resource but the stack, in registration order."""
        return self.mocks.registrations()

    def one(self, name: str) -> Registration:
        """The resource with logical name `name` (a ScheduledTable's children are named `<table name>-<role>`)."""
        try:
            return self.mocks.by_name[name]
        except KeyError:
            known = ", ".join(sorted(r.name for r in self.resources))
            raise KeyError(f"no resource named {name!r}; the program registered: {known}") from None

    def of_type(self, token: str) -> list[Registration]:
        """Resources whose type token is or ends with `token`, e.g. "aws:lambda/function:Function" or ":Function"."""
        return [r for r in self.resources if r.type == token or r.type.endswith(token)]


Program = Callable[[], object] | str | os.PathLike[str]


def run_with_mocks(
    program: Program,
    *,
    config: Mapping[str, object] | None = None,
    region: str | None = None,
    account: str = ACCOUNT,
    project: str = "project",
    stack: str = "stack",
    invokes: Mapping[str, Invoke] | None = None,
    backend: Backend | None = None,
) -> MockedStack:
    """Run `program` under ScheduledTableMocks, the way `pulumi up` would run it, and return what it did.

    `program`: a function that creates resources (what it returns is resolved into `result`), or the path of a
    Pulumi program file such as `__main__.py` (run as `__main__`, with its folder importable, as the CLI does).
    `config`: stack configuration, as in `Pulumi.<stack>.yaml`: keys without a namespace belong to `project`;
    values that are not strings are passed as the CLI passes them (JSON, `true`/`false`). `region` defaults to the
    config's `aws:region`, else eu-west-1; every ARN is in that region and `account`.
    """
    settings = dict(config or {})
    region = region or str(settings.get("aws:region") or REGION)
    settings.setdefault("aws:region", region)
    mocks = set_mocks(region, account=account, project=project, stack=stack, backend=backend, invokes=invokes)
    pulumi.runtime.set_all_config(
        {(key if ":" in key else f"{project}:{key}"): config_string(value) for key, value in settings.items()}
    )
    resolved: dict[str, Any] = {}

    @pulumi.runtime.test
    def execute() -> pulumi.Output[Any]:
        returned = _run(program)
        # Under mocks the stack never registers its outputs: read what the program exported from the root stack.
        exported = dict(getattr(get_root_resource(), "outputs", None) or {})
        return pulumi.Output.all(pulumi.Output.from_input(returned), pulumi.Output.from_input(exported)).apply(
            lambda values: resolved.update(result=values[0], exports=values[1])
        )

    _quiet_reported_failures()
    try:
        execute()
    except Exception as exc:
        root = first_cause(exc)
        if root is exc:
            raise
        # A configuration error found inside an Output (a bad ARN given as an Output, say) reaches here wrapped
        # once per resource and input it flowed through: the component's own message goes first, Pulumi's chain
        # of where it flowed after it, and the copies other resources' futures hold stay quiet.
        _REPORTED.add(str(root))
        chain = [line for line in str(exc).splitlines() if line.strip() and str(root) not in line]
        root.add_note("Pulumi met it while resolving:\n  " + "\n  ".join(chain))
        raise root from None
    mocks.stack_outputs.update(resolved["exports"])
    return MockedStack(mocks, dict(resolved["exports"]), resolved["result"])


# Messages of errors run_with_mocks has raised to the caller: their copies in futures nothing awaited stay quiet.
_REPORTED: set[str] = set()
_WRAPPED = "While processing "  # how Pulumi's SDK wraps an error raised inside an input's Output


def first_cause(exc: BaseException) -> BaseException:
    """The error Pulumi's wrappers (`While processing input/resource ...`) were raised from, or `exc` itself."""
    seen = {id(exc)}
    while exc.__cause__ is not None and id(exc.__cause__) not in seen and str(exc).startswith(_WRAPPED):
        exc = exc.__cause__
        seen.add(id(exc))  # a chain can loop: the SDK wraps an error that already went round once
    return exc


def _quiet_reported_failures() -> None:
    """asyncio reports each failed future nothing awaited ("Future exception was never retrieved") when it is
    collected: after a failed run, one per resource that the failing input reached, each the error already raised.
    Those, and only those, are dropped; the loop is the one Pulumi's mocks run on (the thread's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loop = asyncio.get_event_loop()
    previous = loop.get_exception_handler()
    if getattr(previous, "scheduled_table", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if isinstance(error, BaseException) and str(first_cause(error)) in _REPORTED:
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.scheduled_table = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


def _run(program: Program) -> object:
    if callable(program):
        return program()
    path = Path(program).resolve()
    with _importable(path.parent):
        runpy.run_path(str(path), run_name="__main__")
    return None


@contextmanager
def _importable(folder: Path) -> Iterator[None]:
    """The program's folder on sys.path while it runs, so it imports its own modules as under the Pulumi CLI."""
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        sys.path.remove(entry)


def config_string(value: object) -> str:
    """A stack setting as the Pulumi CLI hands it to a program: text, booleans as true/false, objects as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)
