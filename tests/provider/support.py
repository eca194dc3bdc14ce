"""The provider in-process, as the Pulumi CLI would drive it: the schema it serves, and `construct` fed inputs exactly
as the engine delivers a TypeScript program's (camelCase, numbers as doubles, other resources' outputs as output
values), under the component's mocks."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import struct_pb2
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.runtime import rpc

from components import ScheduledTable, ScheduledTableArgs
from components import provider as hosted
from components.testing import MockedStack, run_with_mocks

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
TYPE = "scheduled-table:index:ScheduledTable"
EXAMPLES: dict[str, Any] = json.loads((HERE / "examples.json").read_text())
REFERENCES: dict[str, str] = EXAMPLES["references"]


@functools.cache
def provider() -> ComponentProvider:
    """The provider `component_provider_host` serves (provider/__main__.py), analyzed once per test session."""
    return ComponentProvider([hosted.ScheduledTable], "scheduled-table", None, hosted.package_version())


def schema() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(provider().schema or "{}")
    return document


def reference(value: str) -> str | None:
    """`x.arn` for a `${x.arn}` value (another resource's output, YAML's syntax), else None."""
    if value.startswith("${") and value.endswith("}"):
        return value[2:-1]
    return None


def _wire(value: Any) -> Any:
    """A value as the engine sends it: a `${x.arn}` reference becomes an output value (known, depending on x)."""
    if isinstance(value, dict):
        return {key: _wire(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_wire(item) for item in value]
    name = reference(value) if isinstance(value, str) else None
    if name is None:
        return value
    resource = name.split(".")[0]
    return {
        rpc._special_sig_key: rpc._special_output_value_sig,
        "value": REFERENCES[name],
        "dependencies": [f"urn:pulumi:test::scheduled-table::aws:index:Resource::{resource}"],
    }


def wire_inputs(inputs: dict[str, Any]) -> dict[str, Any]:
    """What `construct` receives for `inputs` (camelCase JSON): through a protobuf Struct, so every number is a
    double, and through the SDK's own deserialization, so references are Outputs."""
    struct = struct_pb2.Struct()
    struct.update(_wire(inputs))
    deserialized: dict[str, Any] = rpc.deserialize_properties(struct, keep_unknowns=True)
    return deserialized


ACCOUNT = "123456789012"
# A table of the deployer's account given by stream ARN is looked up (its stream view type, keys, ...): the lookups
# answered here, for the examples' `orders` table (what its stream ARN names; `changes` alter the answer).
ORDERS_STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2026-01-01T00:00:00.000"


def lookups(**changes: Any) -> dict[str, Any]:
    orders = {
        "name": "orders",
        "arn": ORDERS_STREAM.split("/stream/")[0],
        "hashKey": "PK",
        "rangeKey": "SK",
        "streamEnabled": True,
        "streamViewType": "NEW_AND_OLD_IMAGES",
        "streamArn": ORDERS_STREAM,
        "ttl": {"enabled": False, "attributeName": ""},
        "globalSecondaryIndexes": [],
    }
    caller = {
        "accountId": ACCOUNT,
        "arn": f"arn:aws:iam::{ACCOUNT}:user/ci",
        "id": ACCOUNT,
        "userId": "AIDA" + "0" * 17,
    }
    return {
        "aws:index/getCallerIdentity:getCallerIdentity": caller,
        "aws:dynamodb/getTable:getTable": {**orders, **changes},
    }


def construct(name: str, inputs: dict[str, Any], invokes: dict[str, Any] | None = None) -> MockedStack:
    """The provider builds table `name` from `inputs` under the mocks; `result` is the state it returns."""

    def program() -> Any:
        result = provider().construct(name, TYPE, wire_inputs(inputs), pulumi.ResourceOptions())
        return result.state

    return run_with_mocks(
        program, project="scheduled-table", stack="test", invokes=lookups() if invokes is None else invokes
    )


def build(name: str, args: ScheduledTableArgs) -> MockedStack:
    """The Python API builds table `name` from `args` under the same mocks."""
    return run_with_mocks(
        lambda: ScheduledTable(name, args).outputs, project="scheduled-table", stack="test", invokes=lookups()
    )


def resources(stack: MockedStack) -> list[tuple[str, str, str]]:
    """Every resource registered, by name: type, name and inputs (as the provider would receive them, as JSON). Not
    in registration order, which follows when the Outputs it waits for resolve."""
    found = [(r.type, r.name, json.dumps(r.inputs, sort_keys=True, default=_content)) for r in stack.resources]
    return sorted(found, key=lambda r: r[1])


def _content(value: Any) -> Any:
    """An asset or archive (the Lambda code) by what it holds, not by its identity."""
    if isinstance(value, pulumi.AssetArchive):
        return {"archive": value.assets}
    for kind in ("path", "text", "uri"):
        if isinstance(getattr(value, kind, None), str):
            return {type(value).__name__: getattr(value, kind)}
    raise TypeError(f"cannot compare {value!r}")
