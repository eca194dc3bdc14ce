"""`function_overrides`: each typed override of one function role reaches that function (and its log group and
role policy) under mocks, the other functions keep the component-wide settings, and each bad value is refused at
construction naming the field and the fix."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components import FunctionOverrides, ScheduledTable, ScheduledTableArgs, VpcConfig
from components.inputs import args_from_inputs
from components.policies import VPC_ACCESS_ACTIONS
from components.stack_config import DictConfig, args_from_config
from components.testing import run_with_mocks
from tests.components.conftest import NoConfig

LAYER = "arn:aws:lambda:eu-west-1:123456789012:layer:powertools:3"
VPC = VpcConfig(subnet_ids=["subnet-0a", "subnet-0b"], security_group_ids=["sg-0a"])
EVERYTHING = FunctionOverrides(
    memory_mb=2048,
    reserved_concurrency=5,
    vpc=VPC,
    layers=[LAYER],
    log_retention_days=90,
    architecture="x86_64",
)


def _built(**args: Any) -> Any:
    return run_with_mocks(lambda: ScheduledTable("r", ScheduledTableArgs(**args)))


def _actions(stack: Any, role: str) -> set[str]:
    document = json.loads(stack.one(f"r-{role}-policy").inputs["policy"])
    found: set[str] = set()
    for statement in document["Statement"]:
        action = statement["Action"]
        found.update([action] if isinstance(action, str) else action)
    return found


def test_each_override_reaches_its_function_and_log_group_only() -> None:
    stack = _built(mode="polling", function_overrides={"processor": EVERYTHING})
    processor = stack.one("r-processor").inputs
    assert processor["memorySize"] == 2048
    assert processor["reservedConcurrentExecutions"] == 5
    assert processor["vpcConfig"] == {"subnetIds": ["subnet-0a", "subnet-0b"], "securityGroupIds": ["sg-0a"]}
    assert processor["layers"] == [LAYER]
    assert processor["architectures"] == ["x86_64"]
    assert stack.one("r-processor-logs").inputs["retentionInDays"] == 90
    assigner = stack.one("r-assigner").inputs
    assert assigner["memorySize"] == 1024 and assigner["architectures"] == ["arm64"]
    assert not {"reservedConcurrentExecutions", "vpcConfig", "layers"} & set(assigner)
    assert stack.one("r-assigner-logs").inputs["retentionInDays"] == 30


def test_a_vpc_grants_that_role_the_network_interface_actions_and_no_other_role() -> None:
    stack = _built(mode="polling", function_overrides={"processor": FunctionOverrides(vpc=VPC)})
    document = json.loads(stack.one("r-processor-policy").inputs["policy"])
    assert {"Effect": "Allow", "Action": list(VPC_ACCESS_ACTIONS), "Resource": "*"} in document["Statement"]
    assert not set(VPC_ACCESS_ACTIONS) & _actions(stack, "assigner")


def test_without_overrides_every_function_is_as_before() -> None:
    stack = _built(mode="eventbridge", precision="second", backfill_function=True)
    functions = stack.of_type(":Function")
    assert {f.name for f in functions} == {"r-scheduler", "r-releaser", "r-backfill"}
    for function in functions:
        assert not {"reservedConcurrentExecutions", "vpcConfig", "layers"} & set(function.inputs)
        assert not any(a.startswith("ec2:") for a in _actions(stack, function.name.removeprefix("r-")))


def test_the_backfill_function_takes_its_own_override_and_not_the_consumers_vpc() -> None:
    stack = _built(
        mode="ttl",
        backfill_function=True,
        function_overrides={"executor": FunctionOverrides(vpc=VPC), "backfill": FunctionOverrides(memory_mb=4096)},
    )
    assert stack.one("r-backfill").inputs["memorySize"] == 4096
    assert "vpcConfig" not in stack.one("r-backfill").inputs
    assert set(VPC_ACCESS_ACTIONS) <= _actions(stack, "executor")
    assert not set(VPC_ACCESS_ACTIONS) & _actions(stack, "backfill")
    in_vpc = _built(mode="ttl", backfill_function=True, function_overrides={"backfill": FunctionOverrides(vpc=VPC)})
    assert set(VPC_ACCESS_ACTIONS) <= _actions(in_vpc, "backfill")


def test_reserved_concurrency_zero_is_allowed_where_no_stream_stops() -> None:
    args = ScheduledTableArgs(
        mode="polling", function_overrides={"processor": FunctionOverrides(reserved_concurrency=0)}
    )
    assert args.function_overrides["processor"].reserved_concurrency == 0


def test_a_dict_in_either_spelling_is_a_function_overrides() -> None:
    """As a stack file or an untyped program gives it."""
    given: Any = {"executor": {"memoryMb": 512, "vpc": {"subnetIds": ["subnet-0a"], "security_group_ids": ["sg-0a"]}}}
    args = ScheduledTableArgs(mode="ttl", function_overrides=given)
    assert args.function_overrides == {
        "executor": FunctionOverrides(memory_mb=512, vpc=VpcConfig(["subnet-0a"], ["sg-0a"]))
    }


def test_the_provider_form_is_read_and_its_messages_name_its_inputs() -> None:
    inputs = {"mode": "ttl", "function_overrides": {"executor": {"memory_mb": 512.0, "architecture": "x86_64"}}}
    assert args_from_inputs(inputs).function_overrides == {
        "executor": FunctionOverrides(memory_mb=512, architecture="x86_64")
    }
    with pytest.raises(ValueError) as error:
        args_from_inputs({"mode": "ttl", "function_overrides": {"executor": {"reserved_concurrency": 0}}})
    assert str(error.value).startswith("functionOverrides['executor'].reservedConcurrency: 0 stops")


MISTAKES: list[tuple[dict[str, Any], str]] = [
    (
        {"mode": "ttl", "function_overrides": {"processor": FunctionOverrides()}},
        "function_overrides['processor']: this ScheduledTable (mode 'ttl') makes no function 'processor'; use one of "
        "'executor'",
    ),
    (
        {"mode": "eventbridge", "function_overrides": {"releaser": FunctionOverrides()}},
        "function_overrides['releaser']: this ScheduledTable (mode 'eventbridge') makes no function 'releaser'; use "
        "one of 'scheduler'",
    ),
    (
        {"mode": "eventbridge", "backfill_function": True, "function_overrides": {"x": FunctionOverrides()}},
        "function_overrides['x']: this ScheduledTable (mode 'eventbridge') makes no function 'x'; use one of "
        "'scheduler', 'backfill'",
    ),
    (
        {"mode": "aggregate", "function_overrides": {"aggregator": FunctionOverrides(reserved_concurrency=0)}},
        "function_overrides['aggregator'].reserved_concurrency: 0 stops the 'aggregator' function reading the "
        "table's stream (records age out unprocessed); use at least 1, or None for no reservation",
    ),
    (
        {
            "mode": "eventbridge",
            "precision": "second",
            "function_overrides": {"releaser": FunctionOverrides(reserved_concurrency=50)},
        },
        "function_overrides['releaser'].reserved_concurrency: the 'releaser' function is fed by an SQS event source, "
        "whose throttled batches would send due events to the target DLQ; remove it (no reservation)",
    ),
    (
        {"mode": "polling", "function_overrides": {"processor": FunctionOverrides(reserved_concurrency=-1)}},
        "function_overrides['processor'].reserved_concurrency: -1 is not a number of executions; use a whole number "
        ">= 0, or None for no reservation",
    ),
    (
        {"mode": "ttl", "function_overrides": {"executor": FunctionOverrides(memory_mb=64)}},
        "function_overrides['executor'].memory_mb: 64 is out of range; use a whole number from 128 to 10240",
    ),
    (
        {"mode": "ttl", "function_overrides": {"executor": FunctionOverrides(architecture="arm")}},  # type: ignore[arg-type]
        "function_overrides['executor'].architecture: 'arm' is not supported; use 'arm64' or 'x86_64'",
    ),
    (
        {"mode": "ttl", "function_overrides": {"executor": FunctionOverrides(log_retention_days=10)}},
        "function_overrides['executor'].log_retention_days: 10 is not a CloudWatch period; use e.g. 7, 30 or 90",
    ),
    (
        {"mode": "ttl", "function_overrides": {"executor": FunctionOverrides(layers=["powertools"])}},
        "function_overrides['executor'].layers: 'powertools' is not a layer version ARN; give "
        "arn:aws:lambda:REGION:ACCOUNT:layer:NAME:VERSION (a LayerVersion's `arn` output)",
    ),
    (
        {"mode": "ttl", "function_overrides": {"executor": FunctionOverrides(layers=[LAYER] * 6)}},
        "function_overrides['executor'].layers: 6 layers; Lambda takes at most 5, merge some",
    ),
    (
        {"mode": "ttl", "function_overrides": {"executor": FunctionOverrides(layers=LAYER)}},
        f"function_overrides['executor'].layers: expected a list of layer version ARNs, got {LAYER!r}; pass "
        "layers=[layer.arn]",
    ),
    (
        {"mode": "ttl", "function_overrides": {"executor": FunctionOverrides(vpc=VpcConfig([], ["sg-0a"]))}},
        "function_overrides['executor'].vpc.subnet_ids: expected a list of 1 to 16 ids, got []; give the subnet ids",
    ),
    (
        {"mode": "ttl", "function_overrides": {"executor": FunctionOverrides(vpc=VpcConfig(["subnet-0a"], []))}},
        "function_overrides['executor'].vpc.security_group_ids: expected a list of 1 to 5 ids, got []; give the "
        "security group ids",
    ),
    (
        {"mode": "ttl", "function_overrides": {"executor": {"memory": 512}}},
        "function_overrides['executor'].memory: unknown key; use one of memory_mb, reserved_concurrency, vpc, layers, "
        "log_retention_days, architecture",
    ),
    (
        {"mode": "ttl", "function_overrides": {"executor": {"vpc": {"subnet_ids": ["subnet-0a"]}}}},
        "function_overrides['executor'].vpc.security_group_ids: missing; give the security group ids",
    ),
    (
        {"mode": "ttl", "function_overrides": {"executor": 512}},
        "function_overrides['executor']: int is not a FunctionOverrides; pass FunctionOverrides(...)",
    ),
    (
        {"mode": "ttl", "function_overrides": [FunctionOverrides()]},
        "function_overrides: expected a mapping of function role to FunctionOverrides, got [FunctionOverrides("
        "memory_mb=None, reserved_concurrency=None, vpc=None, layers=(), log_retention_days=None, "
        "architecture=None)]; e.g. {'processor': FunctionOverrides(memory_mb=2048)}",
    ),
]


@pytest.mark.parametrize(("args", "message"), MISTAKES, ids=lambda v: v if isinstance(v, str) else "")
def test_each_mistake_names_the_field_and_the_fix(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as error:
        ScheduledTableArgs(**args)
    assert str(error.value) == message


def test_a_stack_files_overrides_are_read() -> None:
    """`functionOverrides:` in Pulumi.<stack>.yaml (or a `tables` entry), as YAML gives it."""
    entry = {"mode": "polling", "functionOverrides": {"processor": {"memoryMb": 3008, "reservedConcurrency": 2}}}
    args = args_from_config(DictConfig(entry, NoConfig()))
    assert args.function_overrides == {"processor": FunctionOverrides(memory_mb=3008, reserved_concurrency=2)}
