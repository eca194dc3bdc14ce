"""Pulumi mocks that fabricate plausible AWS identifiers and record every registration, parent included."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor

ACCOUNT = "123456789012"


@dataclass
class Registration:
    type: str
    name: str
    inputs: dict[str, Any]
    parent: str
    outputs: dict[str, Any] = field(default_factory=dict)


def fabricate(typ: str, name: str, inputs: dict[str, Any], region: str) -> dict[str, Any]:
    """Outputs AWS would return: names, ARNs and URLs shaped like the real ones."""
    outputs = dict(inputs)
    physical = inputs.get("name") or f"{name}-0000000"
    prefix = f"arn:aws:{{}}:{region}:{ACCOUNT}"
    shapes: dict[str, dict[str, Any]] = {
        "aws:dynamodb/table:Table": {
            "arn": f"{prefix.format('dynamodb')}:table/{physical}",
            "stream_arn": f"{prefix.format('dynamodb')}:table/{physical}/stream/2026-01-01T00:00:00.000",
        },
        "aws:sqs/queue:Queue": {
            "arn": f"{prefix.format('sqs')}:{physical}",
            "url": f"https://sqs.{region}.amazonaws.com/{ACCOUNT}/{physical}",
        },
        "aws:scheduler/scheduleGroup:ScheduleGroup": {"arn": f"{prefix.format('scheduler')}:schedule-group/{physical}"},
        "aws:iam/role:Role": {"arn": f"arn:aws:iam::{ACCOUNT}:role/{physical}"},
        "aws:cloudwatch/logGroup:LogGroup": {"arn": f"{prefix.format('logs')}:log-group:{physical}"},
        "aws:lambda/function:Function": {"arn": f"{prefix.format('lambda')}:function:{physical}"},
    }
    outputs.setdefault("name", physical)
    outputs.update(shapes.get(typ, {"arn": f"{prefix.format('unknown')}:{physical}"}))
    return outputs


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self, region: str = "eu-west-1") -> None:
        self.region = region
        self.by_name: dict[str, Registration] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        outputs = fabricate(args.typ, args.name, args.inputs, self.region)
        registration = self.by_name.setdefault(args.name, Registration(args.typ, args.name, args.inputs, ""))
        registration.inputs, registration.outputs = args.inputs, outputs
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        raise NotImplementedError(f"unexpected invoke {args.token}: the component must not need lookups")


class RecordingMonitor(MockMonitor):
    """Also records each resource's parent URN, which the Mocks interface does not see."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.recording = mocks

    def RegisterResource(self, request: Any) -> Any:  # the gRPC method name
        entry = self.recording.by_name.setdefault(request.name, Registration(request.type, request.name, {}, ""))
        entry.parent = request.parent
        return super().RegisterResource(request)


def install(region: str = "eu-west-1", *, project: str = "scheduled-table", stack: str = "test") -> RecordingMocks:
    """Route every Pulumi resource registration in this process to recording mocks."""
    mocks = RecordingMocks(region)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=RecordingMonitor(mocks))
    return mocks
