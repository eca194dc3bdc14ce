"""FunctionTarget: a Lambda function, invoked asynchronously (handlers/st_core/target_types/lambda_.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pulumi

from ..suggest import keyword_hints
from ..target_base import TargetBase


@keyword_hints
@dataclass(frozen=True)
class FunctionTarget(TargetBase):
    """A Lambda function is invoked asynchronously with the due event.

    There is no `kms_key_arn`: invoking a function uses no key of its (its key encrypts its environment, which
    only Lambda reads), so the senders are granted no KMS action for it.
    """

    function_arn: pulumi.Input[str]
    kind: ClassVar[str] = "lambda"
    stack_type: ClassVar[str] = "function"
    arn_field: ClassVar[str | None] = "function_arn"
    listed: ClassVar[int] = 2
