"""Escape hatches (docs/escape-hatches.md): the child resources ScheduledTable exposes, typed, and Pulumi transforms
on the component reaching its children to change their settings, here through the Python API (the provider's own
test is tests/provider/test_transforms.py). The kit's mocks run transforms as the engine does."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws
import pytest

from components import ExistingTable, ScheduledTable, ScheduledTableArgs
from components.testing import fabricated_table, run_with_mocks

FUNCTION = "aws:lambda/function:Function"
TABLE = "aws:dynamodb/table:Table"


def roomier(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    """A user's transform: every function gets 2048 MB and the table the infrequent-access class."""
    if args.type_ == FUNCTION:
        return pulumi.ResourceTransformResult(props={**args.props, "memorySize": 2048}, opts=args.opts)
    if args.type_ == TABLE:
        return pulumi.ResourceTransformResult(
            props={**args.props, "tableClass": "STANDARD_INFREQUENT_ACCESS"}, opts=args.opts
        )
    return None


@pytest.mark.parametrize("mode", ["eventbridge", "ttl", "polling", "aggregate"])
def test_a_transform_on_the_component_changes_its_children(mode: str) -> None:
    def program() -> Any:
        ScheduledTable("r", ScheduledTableArgs(mode=mode), opts=pulumi.ResourceOptions(transforms=[roomier]))  # type: ignore[arg-type]

    stack = run_with_mocks(program)
    functions = stack.of_type(FUNCTION)
    assert functions and {f.inputs["memorySize"] for f in functions} == {2048}
    # The items' table and any ledger table of the mode: every table the component makes.
    assert {t.inputs["tableClass"] for t in stack.of_type(TABLE)} == {"STANDARD_INFREQUENT_ACCESS"}
    assert stack.one("r-table").inputs["tableClass"] == "STANDARD_INFREQUENT_ACCESS"
    assert stack.one("r-poison").inputs["maxMessageSize"] == 1024 * 1024  # untouched: the transform left it


def test_without_a_transform_the_defaults_stay() -> None:
    stack = run_with_mocks(lambda: ScheduledTable("r", ScheduledTableArgs(mode="ttl")))
    (function,) = stack.of_type(FUNCTION)
    assert function.inputs["memorySize"] != 2048 and "tableClass" not in stack.one("r-table").inputs


def test_the_children_are_exposed_typed_by_role() -> None:
    made: dict[str, ScheduledTable] = {}

    def program() -> None:
        made["polling"] = ScheduledTable("p", ScheduledTableArgs(mode="polling"))
        made["existing"] = ScheduledTable(
            "e", ScheduledTableArgs(mode="eventbridge", existing_table=ExistingTable("orders"))
        )

    run_with_mocks(program, invokes={"aws:dynamodb/getTable:getTable": fabricated_table("orders")})
    polling, existing = made["polling"], made["existing"]
    assert isinstance(polling.table_resource, aws.dynamodb.Table) and polling.table.resource is polling.table_resource
    assert existing.table_resource is None  # a table the component did not make is not its child
    assert set(polling.functions) == {"assigner", "processor"} and polling.function is polling.functions["assigner"]
    assert all(isinstance(f, aws.lambda_.Function) for f in polling.functions.values())
    assert set(polling.queues) == {"due", "poison", "stream-dlq", "target-dlq"}
    assert polling.poison_queue is polling.queues["poison"] and polling.due_queue is polling.queues["due"]
    assert isinstance(polling.tick_rule, aws.cloudwatch.EventRule) and existing.tick_rule is None
    assert set(existing.functions) == {"scheduler"}
    with pytest.raises(TypeError):
        polling.functions["x"] = polling.function  # type: ignore[index]  # read-only: the component's record
