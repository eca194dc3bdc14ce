"""What the mode modules build with and hand back: the parts every mode's consumer has, and small helpers."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from . import policies


@dataclass(frozen=True)
class Consumer:
    """A stream-consuming function and the pieces every mode's consumer has."""

    function: aws.lambda_.Function
    role: aws.iam.Role
    log_group: aws.cloudwatch.LogGroup
    policy: aws.iam.RolePolicy
    mapping: aws.lambda_.EventSourceMapping | None = None


@dataclass(frozen=True)
class Scheduling:
    """What a per-item-schedule mode adds to its consumer: IAM statements and the values of the handler's
    `scheduler` config."""

    consumer_statements: pulumi.Output[list[policies.Statement]]
    values: dict[str, pulumi.Input[str]]


def flatten(parts: list[list[policies.Statement]]) -> list[policies.Statement]:
    return [statement for part in parts for statement in part]
