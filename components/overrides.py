"""Typed overrides of the functions the component makes, one per function role (Solutions Constructs'
`lambdaFunctionProps`, narrowed to the settings users ask for): a role's memory, reserved concurrency, VPC, layers,
log retention and architecture. Keyed by role because the functions differ (a stream consumer and the polling
processor want different memory or concurrency), and typed, not a free dict of Function arguments, so each value is
checked at construction with the field and the fix, and a setting the component relies on (handler, role, timeout,
environment) cannot be overridden by accident. The component-wide `lambda_*` and `log_retention_days` options stay the
defaults; an override wins for its role only."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import pulumi

from . import modes
from .types import LambdaArchitecture

# The backfill function's role, made with backfill_function or reconcile_every (each mode names its own roles:
# components/modes/).
BACKFILL_ROLE = "backfill"
# Lambda's limits: 5 layers a function, 16 subnets and 5 security groups a VPC configuration.
MAX_LAYERS = 5
MAX_SUBNETS = 16
MAX_SECURITY_GROUPS = 5
_LAYER_ARN = re.compile(r"arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+")


@dataclass(frozen=True)
class VpcConfig:
    """Run a function in your VPC: its subnets and security groups (at least one of each). The role then also gets
    the ENI actions of AWSLambdaVPCAccessExecutionRole; the subnets need a route to DynamoDB, SQS, Scheduler and the
    target (NAT or VPC endpoints), or every call times out."""

    subnet_ids: Sequence[pulumi.Input[str]]
    security_group_ids: Sequence[pulumi.Input[str]]


@dataclass(frozen=True)
class FunctionOverrides:
    """One function's settings that differ from the component-wide ones; `None` (or no layers) keeps the
    component's."""

    memory_mb: int | None = None
    reserved_concurrency: int | None = None
    vpc: VpcConfig | None = None
    layers: Sequence[pulumi.Input[str]] = field(default_factory=tuple)
    log_retention_days: int | None = None
    architecture: LambdaArchitecture | None = None


# What each field means, written once: the provider's inputs (provider_inputs.py) and the docs are generated from it.
FUNCTION_OVERRIDES_DOCS: dict[str, str] = {
    "memory_mb": "this function's memory, 128-10240 (over `lambda_memory_mb`)",
    "reserved_concurrency": (
        "executions reserved for (and the most allowed to) this function; not 0 for a stream consumer (it would "
        "stop its stream), none for `releaser` (SQS throttling would send due events to the target DLQ); not set: "
        "no reservation"
    ),
    "vpc": "run this function in your VPC (its role then gets the ENI actions of AWSLambdaVPCAccessExecutionRole)",
    "layers": f"layer version ARNs (a LayerVersion's `arn` output), at most {MAX_LAYERS}",
    "log_retention_days": "this function's log group's retention, a CloudWatch period (over `log_retention_days`)",
    "architecture": "`arm64` or `x86_64` (over `lambda_architecture`)",
}
# The option's description after its syntax (args.OPTION_DOCS, provider.PROVIDER_DOCS).
OVERRIDES_DOC = (
    "each winning over the component-wide setting for that function only. Roles: "
    + "".join(f"{mode.overrides_doc()} (`{mode.name}`), " for mode in modes.every())
    + "`backfill` (with `backfill_function` or `reconcile_every`); another role is refused. A VPC adds "
    "the ENI actions of AWSLambdaVPCAccessExecutionRole to that function's role (IAM grants them on `*` only); its "
    "subnets need a route to DynamoDB, SQS, Scheduler and the target. Reserved concurrency 0 is refused for the "
    "stream consumers (it would stop the stream), and any for `releaser` (throttled SQS batches would send due "
    "events to the target DLQ)"
)
VPC_CONFIG_DOCS: dict[str, str] = {
    "subnet_ids": f"the subnets' ids, 1-{MAX_SUBNETS}, each with a route to DynamoDB, SQS, Scheduler and the target",
    "security_group_ids": f"the security groups' ids, 1-{MAX_SECURITY_GROUPS}",
}


def overrides_problem(
    overrides: Any,
    *,
    mode: str,
    roles: tuple[str, ...],
    retention_days: frozenset[int],
    name: str = "function_overrides",
) -> str | None:
    """What is wrong with `overrides` (a mapping of role to FunctionOverrides, `from_mappings`'), as `field: problem;
    fix`, or None."""
    for role, given in overrides.items():
        where = f"{name}[{role!r}]"
        if role not in roles:
            valid = ", ".join(repr(r) for r in roles)
            return f"{where}: this ScheduledTable (mode {mode!r}) makes no function {role!r}; use one of {valid}"
        if not isinstance(given, FunctionOverrides):
            return f"{where}: {type(given).__name__} is not a FunctionOverrides; pass FunctionOverrides(...)"
        problem = _problem(given, role, where, retention_days)
        if problem:
            return problem
    return None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _problem(o: FunctionOverrides, role: str, where: str, retention_days: frozenset[int]) -> str | None:
    if o.memory_mb is not None and not (_whole(o.memory_mb) and 128 <= o.memory_mb <= 10240):
        return f"{where}.memory_mb: {o.memory_mb!r} is out of range; use a whole number from 128 to 10240"
    concurrency = o.reserved_concurrency
    if concurrency is not None and not (_whole(concurrency) and concurrency >= 0):
        return (
            f"{where}.reserved_concurrency: {concurrency!r} is not a number of executions; use a whole number >= 0, "
            "or None for no reservation"
        )
    # Fed by the table's stream: reserved concurrency 0 would stop reading it, and the records would age out.
    if concurrency == 0 and any(role in m.stream_roles for m in modes.every()):
        return (
            f"{where}.reserved_concurrency: 0 stops the {role!r} function reading the table's stream (records age "
            "out unprocessed); use at least 1, or None for no reservation"
        )
    # Fed by an SQS event source mapping, whose pollers do not heed a reservation: batches they cannot hand over are
    # throttled, count as receives, and after the release queue's maxReceiveCount land in the target DLQ (AWS's
    # advice: limit the mapping's maximum concurrency instead, never reserve below 1,000 for a standard queue).
    if concurrency is not None and any(role in m.sqs_roles for m in modes.every()):
        return (
            f"{where}.reserved_concurrency: the {role!r} function is fed by an SQS event source, whose throttled "
            "batches would send due events to the target DLQ; remove it (no reservation)"
        )
    if o.architecture is not None and o.architecture not in ("arm64", "x86_64"):
        return f"{where}.architecture: {o.architecture!r} is not supported; use 'arm64' or 'x86_64'"
    if o.log_retention_days is not None and o.log_retention_days not in retention_days:
        return f"{where}.log_retention_days: {o.log_retention_days!r} is not a CloudWatch period; use e.g. 7, 30 or 90"
    return _layers_problem(o.layers, where) or _vpc_problem(o.vpc, where)


def _layers_problem(layers: Any, where: str) -> str | None:
    if isinstance(layers, str) or not isinstance(layers, Sequence):
        return f"{where}.layers: expected a list of layer version ARNs, got {layers!r}; pass layers=[layer.arn]"
    if len(layers) > MAX_LAYERS:
        return f"{where}.layers: {len(layers)} layers; Lambda takes at most {MAX_LAYERS}, merge some"
    for layer in layers:
        if isinstance(layer, str) and not _LAYER_ARN.fullmatch(layer):
            return (
                f"{where}.layers: {layer!r} is not a layer version ARN; give "
                "arn:aws:lambda:REGION:ACCOUNT:layer:NAME:VERSION (a LayerVersion's `arn` output)"
            )
    return None


def _vpc_problem(vpc: Any, where: str) -> str | None:
    if vpc is None:
        return None
    if not isinstance(vpc, VpcConfig):
        return f"{where}.vpc: {type(vpc).__name__} is not a VpcConfig; pass VpcConfig(subnet_ids, security_group_ids)"
    for key, limit in (("subnet_ids", MAX_SUBNETS), ("security_group_ids", MAX_SECURITY_GROUPS)):
        ids = getattr(vpc, key)
        if isinstance(ids, str) or not isinstance(ids, Sequence) or not 1 <= len(ids) <= limit:
            return f"{where}.vpc.{key}: expected a list of 1 to {limit} ids, got {ids!r}; give the {_noun(key)} ids"
    return None


def from_mappings(overrides: Any) -> Any:
    """`function_overrides` as given, with each role's plain mapping (a stack file's, the provider's, a Python user's
    dict; keys in snake_case or camelCase) made a FunctionOverrides, and its `vpc` a VpcConfig; other values are left
    for `overrides_problem` to name."""
    if not isinstance(overrides, Mapping):
        raise ValueError(
            f"function_overrides: expected a mapping of function role to FunctionOverrides, got {overrides!r}; "
            "e.g. {'processor': FunctionOverrides(memory_mb=2048)}"
        )
    return {
        role: _typed(FunctionOverrides, given, f"function_overrides[{role!r}]") for role, given in overrides.items()
    }


def _typed(cls: Any, given: Any, where: str) -> Any:
    if not isinstance(given, Mapping):
        return given
    names = [f.name for f in fields(cls)]
    values: dict[str, Any] = {}
    for key, value in given.items():
        name = _snake(key)
        if name not in names:
            valid = ", ".join(names)
            raise ValueError(f"{where}.{key}: unknown key; use one of {valid}")
        if value is not None:
            values[name] = _typed(VpcConfig, value, f"{where}.vpc") if name == "vpc" else value
    missing = [name for name in names if name not in values and cls is VpcConfig]
    if missing:
        raise ValueError(f"{where}.{missing[0]}: missing; give the {_noun(missing[0])} ids")
    return cls(**values)


def _noun(key: str) -> str:
    return key.removesuffix("_ids").replace("_", " ")


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def function_settings(overrides: FunctionOverrides | None) -> dict[str, Any]:
    """The aws.lambda_.Function arguments an override sets (nothing for None: the function is as before)."""
    if overrides is None:
        return {}
    settings: dict[str, Any] = {}
    if overrides.memory_mb is not None:
        settings["memory_size"] = overrides.memory_mb
    if overrides.architecture is not None:
        settings["architectures"] = [overrides.architecture]
    if overrides.reserved_concurrency is not None:
        settings["reserved_concurrent_executions"] = overrides.reserved_concurrency
    if overrides.layers:
        settings["layers"] = list(overrides.layers)
    if overrides.vpc is not None:
        settings["vpc_config"] = {
            "subnet_ids": list(overrides.vpc.subnet_ids),
            "security_group_ids": list(overrides.vpc.security_group_ids),
        }
    return settings
