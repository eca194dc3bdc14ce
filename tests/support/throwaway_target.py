"""A target kind declared in this one module and nowhere else (tests/components/test_target_registry.py registers
it): a Kinesis data stream, as the component's class (`KinesisTarget`) and, at module level, as the handlers'
declaration (st_core.target_types.TargetType). It shows a new kind needs no other file changed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import pulumi

from components.suggest import keyword_hints
from components.target_base import TargetBase

if TYPE_CHECKING:
    from st_core.clients import Clients
    from st_core.config import TargetConfig

# -- the handlers' declaration ---------------------------------------------------------------------------------------

KIND = "kinesis"
SERVICE = "kinesis"
NOUN = "data stream"
ARN_RESOURCE = r"stream/[A-Za-z0-9_.-]{1,128}"
ARN_EXAMPLE = "arn:aws:kinesis:eu-west-1:123456789012:stream/due"
FIFO = False
SCHEDULER_FIFO = False
GRANT = "arn"
SEND_ACTIONS = ("kinesis:PutRecord",)
SCHEDULER_ACTIONS = ("kinesis:PutRecord",)
SCHEDULER_ARN = ""
KMS_ACTIONS = ("kms:GenerateDataKey",)
PAYLOAD_BYTES = 1024 * 1024


def request(target: TargetConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    return None


def send(clients: Clients, target: TargetConfig, payload: str, occurrence: str) -> None:
    clients.get("kinesis").put_record(StreamARN=target["arn"], Data=payload.encode(), PartitionKey=occurrence)


def scheduler_parameters(target: TargetConfig, payload: str) -> dict[str, Any]:
    return {"KinesisParameters": {"PartitionKey": "scheduled-table"}}


# -- the component's class -------------------------------------------------------------------------------------------


@keyword_hints
@dataclass(frozen=True)
class KinesisTarget(TargetBase):
    """A Kinesis data stream receives the due event as a record."""

    stream_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str] | None = None
    kind: ClassVar[str] = KIND
    stack_type: ClassVar[str] = "kinesisStream"
    arn_field: ClassVar[str | None] = "stream_arn"
    docs: ClassVar[Mapping[str, str]] = {}
