"""The docs' examples for other languages (docs/other-languages.md) are the inputs tests/provider builds
(examples.json): the TypeScript program holds each table exactly as rendered here, the YAML program's properties are
the fixture's, and the Go and C# sketches build the fixture's `scores` table."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from components.provider import input_name

from .support import EXAMPLES, ROOT, reference

SECTION = "# From other Pulumi languages (TypeScript, YAML, Go, C#)"
PAGE = ROOT / "docs" / "other-languages.md"
TABLES: dict[str, dict[str, Any]] = EXAMPLES["tables"]


def _section() -> str:
    text = PAGE.read_text()
    assert text.startswith(SECTION), f"{PAGE} should open with {SECTION!r}"
    return text


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _section(), flags=re.S)


def _ts(value: Any, indent: int = 0) -> str:
    """A value as TypeScript source (a `${x.arn}` reference as the expression x.arn)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return reference(value) or json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_ts(item) for item in value) + "]"
    if isinstance(value, dict):
        pad = " " * indent
        fields = "".join(f"{pad}    {key}: {_ts(item, indent + 4)},\n" for key, item in value.items())
        return "{\n" + fields + pad + "}"
    return json.dumps(value)


def ts_table(name: str, inputs: dict[str, Any]) -> str:
    return f'const {name} = new scheduledTable.ScheduledTable("{name}", {_ts(inputs)});'


def _references() -> set[str]:
    """Every `${x.arn}` the fixture's tables use, as `x.arn`."""
    return {name for value in json.dumps(TABLES).split('"') if (name := reference(value))}


def _enum_member(value: str) -> str:
    return value[:1].upper() + value[1:]


def test_the_typescript_example_builds_every_table_of_the_fixture() -> None:
    (program,) = _blocks("typescript")
    for name, inputs in TABLES.items():
        expected = ts_table(name, inputs)
        assert expected in program, f"README's TypeScript example should hold, as tests/provider builds it:\n{expected}"
    assert program.count("new scheduledTable.ScheduledTable(") == len(TABLES)
    assert 'import * as scheduledTable from "@pulumi/scheduled-table";' in program
    for name in _references():
        assert f"const {name.split('.')[0]} = new aws." in program  # each referenced resource is declared


def test_the_yaml_example_builds_every_table_of_the_fixture() -> None:
    (program,) = _blocks("yaml")
    resources = yaml.safe_load(program)["resources"]
    tables = {
        name: spec.get("properties", {})
        for name, spec in resources.items()
        if spec["type"] == "scheduled-table:index:ScheduledTable"
    }
    assert tables == TABLES
    for name in _references():
        assert name.split(".")[0] in resources


def test_the_go_and_csharp_sketches_build_the_fixtures_scores_table() -> None:
    scores = TABLES["scores"]
    assert list(scores) == ["mode"], "the Go and C# sketches show only `mode`: keep the scores table that small"
    member = _enum_member(scores["mode"])
    (go,) = _blocks("go")
    assert 'scheduledtable.NewScheduledTable(ctx, "scores", &scheduledtable.ScheduledTableArgs{' in go
    assert f"Mode: scheduledtable.Mode{member}," in go
    (csharp,) = _blocks("csharp")
    assert 'new Pulumi.ScheduledTable.ScheduledTable("scores", new Pulumi.ScheduledTable.ScheduledTableArgs' in csharp
    assert f"Mode = Pulumi.ScheduledTable.Mode.{member}," in csharp


def test_the_examples_use_only_inputs_the_schema_has() -> None:
    from .support import schema

    inputs = schema()["resources"]["scheduled-table:index:ScheduledTable"]["inputProperties"]
    target = schema()["types"]["scheduled-table:index:Target"]["properties"]
    for table in TABLES.values():
        assert set(table) <= set(inputs)
        assert set(table.get("target", {})) <= set(target)
    assert input_name("lambda_memory_mb") in inputs
