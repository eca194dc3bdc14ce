"""Pulumi mocks that record every registration (parent included) and hand each resource to a backend: by default
one that fabricates plausible AWS identifiers, or the local cloud's provisioner, which creates it for real."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

ACCOUNT = "123456789012"
STACK_TYPE = "pulumi:pulumi:Stack"

Backend = Callable[[str, str, dict[str, Any]], tuple[str, dict[str, Any]]]


@dataclass
class Registration:
    type: str
    name: str
    inputs: dict[str, Any]
    parent: str
    outputs: dict[str, Any] = field(default_factory=dict)
    id: str = ""


def fabricate(typ: str, name: str, inputs: dict[str, Any], region: str) -> tuple[str, dict[str, Any]]:
    """The id and outputs AWS would return: names, ARNs and URLs shaped like the real ones (provider property
    names, camelCase)."""
    outputs = dict(inputs)
    physical = inputs.get("name") or f"{name}-0000000"
    prefix = f"arn:aws:{{}}:{region}:{ACCOUNT}"
    shapes: dict[str, dict[str, Any]] = {
        "aws:dynamodb/table:Table": {
            "arn": f"{prefix.format('dynamodb')}:table/{physical}",
            "streamArn": f"{prefix.format('dynamodb')}:table/{physical}/stream/2026-01-01T00:00:00.000",
        },
        "aws:sqs/queue:Queue": {
            "arn": f"{prefix.format('sqs')}:{physical}",
            "url": f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/{physical}",
        },
        "aws:scheduler/scheduleGroup:ScheduleGroup": {"arn": f"{prefix.format('scheduler')}:schedule-group/{physical}"},
        "aws:iam/role:Role": {"arn": f"arn:aws:iam::{ACCOUNT}:role/{physical}"},
        "aws:cloudwatch/logGroup:LogGroup": {"arn": f"{prefix.format('logs')}:log-group:{physical}"},
        "aws:lambda/function:Function": {"arn": f"{prefix.format('lambda')}:function:{physical}"},
        # A key has no name: its id stands in for the UUID AWS would give it.
        "aws:kms/key:Key": {"arn": f"{prefix.format('kms')}:key/{name}-id", "keyId": f"{name}-id"},
    }
    outputs.setdefault("name", physical)
    outputs.update(shapes.get(typ, {"arn": f"{prefix.format('unknown')}:{physical}"}))
    return f"{name}-id", outputs


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self, region: str = "eu-west-1", backend: Backend | None = None) -> None:
        self.region = region
        self.backend: Backend = backend or (lambda typ, name, inputs: fabricate(typ, name, inputs, region))
        self.by_name: dict[str, Registration] = {}
        self.stack_outputs: dict[str, Any] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        resource_id, outputs = self.backend(args.typ, args.name, args.inputs)
        registration = self.by_name.setdefault(args.name, Registration(args.typ, args.name, args.inputs, ""))
        registration.inputs, registration.outputs, registration.id = args.inputs, outputs, resource_id
        return resource_id, outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        raise NotImplementedError(f"unexpected invoke {args.token}: the component must not need lookups")

    def registrations(self) -> list[Registration]:
        """Every resource except the stack, in registration order."""
        return [r for r in self.by_name.values() if r.type != STACK_TYPE]


class RecordingMonitor(MockMonitor):
    """Also records each resource's parent URN which the Mocks interface does not see."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.recording = mocks

    def RegisterResource(self, request: Any) -> Any:  # the gRPC method name
        entry = self.recording.by_name.setdefault(request.name, Registration(request.type, request.name, {}, ""))
        entry.parent = request.parent
        return super().RegisterResource(request)


def install(
    region: str = "eu-west-1", *, project: str = "scheduled-table", stack: str = "test", backend: Backend | None = None
) -> RecordingMocks:
    """Route every Pulumi resource registration in this process to recording mocks."""
    mocks = RecordingMocks(region, backend)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=RecordingMonitor(mocks))
    return mocks
