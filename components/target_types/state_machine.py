"""StateMachineTarget: a Step Functions state machine (handlers/st_core/target_types/stepfunctions.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pulumi

from ..suggest import keyword_hints
from ..target_base import TargetBase


@keyword_hints
@dataclass(frozen=True)
class StateMachineTarget(TargetBase):
    """A Step Functions state machine starts one execution with the due event as input.

    `kms_key_arn`: the customer-managed KMS key encrypting it, if any (see QueueTarget).
    """

    state_machine_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str] | None = None
    kind: ClassVar[str] = "stepfunctions"
    stack_type: ClassVar[str] = "stateMachine"
    arn_field: ClassVar[str | None] = "state_machine_arn"
    listed: ClassVar[int] = 3
