"""Escape hatches through the provider (what a TypeScript, YAML, Go or C# program gets): transforms given with the
component's options reach the children the provider makes, as they do through the Python API
(tests/components/test_escape_hatches.py). The engine runs a component's transforms on its descendants; the kit's
mocks do the same."""

from __future__ import annotations

from typing import Any

import pulumi

from components.testing import run_with_mocks

from .support import EXAMPLES, TYPE, lookups, provider, wire_inputs

FUNCTION = "aws:lambda/function:Function"


def smaller(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    if args.type_ == FUNCTION:
        return pulumi.ResourceTransformResult(props={**args.props, "memorySize": 512, "timeout": 120}, opts=args.opts)
    if args.type_ == "aws:dynamodb/table:Table":
        return pulumi.ResourceTransformResult(
            props={**args.props, "tableClass": "STANDARD_INFREQUENT_ACCESS"}, opts=args.opts
        )
    return None


def constructed(name: str, inputs: dict[str, Any], transforms: list[Any]) -> Any:
    def program() -> Any:
        opts = pulumi.ResourceOptions(transforms=transforms)
        return provider().construct(name, TYPE, wire_inputs(inputs), opts).state

    return run_with_mocks(program, project="scheduled-table", stack="test", invokes=lookups())


def test_transforms_on_the_provider_component_reach_its_functions_and_table() -> None:
    inputs = {"mode": "ttl"}
    stack = constructed("reminders", inputs, [smaller])
    functions = stack.of_type(FUNCTION)
    assert functions and all((f.inputs["memorySize"], f.inputs["timeout"]) == (512, 120) for f in functions)
    assert stack.one("reminders-table").inputs["tableClass"] == "STANDARD_INFREQUENT_ACCESS"
    plain = constructed("reminders", inputs, [])
    assert {f.inputs["memorySize"] for f in plain.of_type(FUNCTION)} != {512}


def test_an_example_program_of_the_docs_takes_transforms_too() -> None:
    name, inputs = next(iter(EXAMPLES["tables"].items()))
    stack = constructed(name, inputs, [smaller])
    assert {f.inputs["memorySize"] for f in stack.of_type(FUNCTION)} == {512}
