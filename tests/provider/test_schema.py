"""The package schema, generated in-process exactly as `pulumi package add` gets it from the plugin: every option of
ScheduledTableArgs is an input with its type, description, required-ness and default; every target class is a
`kind`; the outputs are the component's; and the schema does not change by accident.

Changed the schema on purpose? `UPDATE_SCHEMA_SNAPSHOT=1 .venv/bin/python -m pytest tests/provider` rewrites
tests/provider/schema.json; commit it with the change.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import types
from typing import Any, ClassVar, Literal, Union, get_args, get_origin

import pulumi
import pytest

from components import ScheduledTableArgs, component, provider, target_types
from components.args import OPTION_DOCS, Mode, describe_defaults
from components.existing import ExistingTable
from components.overrides import FunctionOverrides
from components.queues import ExistingQueue
from components.target_base import TargetBase
from components.targets import TARGET_TYPES

from .support import HERE, schema

SNAPSHOT = HERE / "schema.json"
RESOURCE = "scheduled-table:index:ScheduledTable"


def _resource() -> dict[str, Any]:
    resource: dict[str, Any] = schema()["resources"][RESOURCE]
    return resource


def _type(name: str) -> dict[str, Any]:
    found: dict[str, Any] = schema()["types"][f"scheduled-table:index:{name}"]
    return found


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _expected(hint: Any) -> dict[str, Any]:
    """The schema property a Python type should become (type, or enum values, or object), whether it is plain."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        members = tuple(a for a in args if a is not type(None))
        if Mode in members:
            return {"enum": sorted(m.value for m in Mode), "plain": True}
        if len(members) == 1:
            return _expected(members[0])
        if str in members and any(get_origin(m) is not None for m in members):  # pulumi.Input[str]
            return {"type": "string", "plain": None}
        if set(members) == set(TARGET_TYPES):
            return {"ref": "Target", "plain": True}
    if origin is Literal:
        return {"enum": sorted(args), "plain": True}
    if hint in (str, int, bool):
        return {"type": {str: "string", int: "integer", bool: "boolean"}[hint], "plain": True}
    if origin is list:
        return {"type": "array", "items": _expected(args[0])["type"], "plain": True}
    if origin is dict:
        values = _expected(args[1])
        return {"type": "object", "values": values.get("type") or values["ref"], "plain": True}
    if hint in (ExistingTable, FunctionOverrides, ExistingQueue):
        return {"ref": hint.__name__, "plain": True}
    raise AssertionError(f"no expectation for {hint!r}: extend tests/provider/test_schema.py")


def _actual(prop: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in prop:
        name = prop["$ref"].rsplit(":", 1)[1]
        target = _type(name)
        if "enum" in target:
            return {"enum": sorted(v["value"] for v in target["enum"]), "plain": prop.get("plain")}
        return {"ref": name, "plain": prop.get("plain")}
    if prop["type"] == "array":
        return {"type": "array", "items": prop["items"]["type"], "plain": prop.get("plain")}
    if prop["type"] == "object":
        values = prop["additionalProperties"]
        kind = values.get("type") or values["$ref"].rsplit(":", 1)[1]
        return {"type": "object", "values": kind, "plain": prop.get("plain")}
    return {"type": prop["type"], "plain": prop.get("plain")}


def _default_text(value: Any) -> str:
    return "Default: not set." if value is None else f"Default: `{json.dumps(value)}`."


def test_every_option_is_an_input_with_its_type() -> None:
    hints = inspect.get_annotations(ScheduledTableArgs, eval_str=True)
    inputs = _resource()["inputProperties"]
    expected = {_camel(f.name): _expected(hints[f.name]) for f in dataclasses.fields(ScheduledTableArgs)}
    assert {name: _actual(prop) for name, prop in inputs.items()} == expected


def test_every_input_is_optional_but_mode_and_says_its_default() -> None:
    inputs = _resource()["inputProperties"]
    assert _resource()["requiredInputs"] == ["mode"]
    assert inputs["mode"]["description"].endswith(" Required.")
    for name, default in describe_defaults().items():
        assert inputs[_camel(name)]["description"].endswith(_default_text(default)), name


def test_every_input_is_described_by_its_option_docs_in_camel_case() -> None:
    inputs = _resource()["inputProperties"]
    for name, doc in OPTION_DOCS.items():
        if name in provider.PROVIDER_DOCS:
            continue  # Python-only wording (ExistingTable(...), None): said for other languages instead
        description = inputs[_camel(name)]["description"]
        words = [w.strip("`.,;:()") for w in doc.split() if "_" in w and w.strip("`.,;:()") in OPTION_DOCS]
        assert all(_camel(w) in description for w in words), (name, description)
        assert description[1:].startswith(provider.provider_message(doc)[1:].replace("`None`", "not set")), name
    assert "None" not in json.dumps(inputs) and "True" not in json.dumps(inputs)  # Python's spellings


def test_target_is_one_object_with_a_kind_for_every_target_class_and_every_field() -> None:
    target = _type("Target")
    kinds = [v["value"] for v in _type("TargetKind")["enum"]]
    assert {target_types.by_stack_type()[k] for k in kinds} == set(TARGET_TYPES)
    assert target["required"] == ["kind"]
    for kind in kinds:
        cls = target_types.by_stack_type()[kind]
        for f in dataclasses.fields(cls):
            name = "arn" if f.name == cls.arn_field else _camel(f.name)
            description = target["properties"][name]["description"]
            assert description, name
            if f.default is not dataclasses.MISSING:
                assert description.endswith(_default_text(f.default)), name
    assert target["properties"]["arn"]["type"] == "string" and "plain" not in target["properties"]["arn"]


def test_existing_table_is_an_object_of_two_inputs() -> None:
    existing = _type("ExistingTable")
    assert set(existing["properties"]) == {_camel(f.name) for f in dataclasses.fields(ExistingTable)}
    assert all("plain" not in p for p in existing["properties"].values())  # other resources' outputs welcome


def test_the_outputs_are_the_components_outputs() -> None:
    annotations = inspect.get_annotations(component.ScheduledTable, eval_str=True)
    resource = _resource()
    assert set(resource["properties"]) == {_camel(name) for name in annotations}
    always = sorted(_camel(name) for name, hint in annotations.items() if type(None) not in get_args(hint))
    assert resource["required"] == always
    assert {"tableName", "tableArn", "streamArn", "functionName", "poisonQueueUrl"} <= set(always)


def test_the_resource_is_described() -> None:
    description = _resource()["description"]
    assert description.startswith("A DynamoDB table whose items name times") and "\n" not in description


def test_the_schema_version_is_the_package_version() -> None:
    import tomllib

    pyproject = tomllib.loads((HERE.parent.parent / "pyproject.toml").read_text())
    assert schema()["version"] == provider.package_version() == pyproject["project"]["version"]
    assert schema()["name"] == "scheduled-table"


def test_the_schema_matches_its_snapshot() -> None:
    current = json.dumps({**schema(), "version": "<package version>"}, indent=2, sort_keys=True) + "\n"
    if os.environ.get("UPDATE_SCHEMA_SNAPSHOT") == "1":
        SNAPSHOT.write_text(current)
    if not SNAPSHOT.exists() or SNAPSHOT.read_text() != current:
        pytest.fail(
            "the package schema changed (what TypeScript, YAML, Go and C# users get); if that is intended, run "
            "`UPDATE_SCHEMA_SNAPSHOT=1 .venv/bin/python -m pytest tests/provider` and commit tests/provider/schema.json"
        )


def test_provider_inputs_match_the_dataclasses() -> None:
    """The parity check: a field added to ScheduledTableArgs or a target class (or a target class added) without
    regenerating the provider form fails here, naming the command."""
    assert provider.INPUTS_FILE.read_text() == provider.render_inputs(), (
        "components/provider_inputs.py is stale: run `.venv/bin/python -m components.provider`, then "
        "`UPDATE_SCHEMA_SNAPSHOT=1 .venv/bin/python -m pytest tests/provider`"
    )


def test_the_parity_check_sees_a_new_option(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Grown(ScheduledTableArgs):
        new_option: int = 3

    monkeypatch.setattr(provider, "ScheduledTableArgs", Grown)
    monkeypatch.setitem(OPTION_DOCS, "new_option", "a new option")
    rendered = provider.render_inputs()
    assert rendered != provider.INPUTS_FILE.read_text()
    assert '    new_option: int\n    """A new option. Default: `3`."""' in rendered


def test_the_parity_check_sees_a_new_target_class_and_field(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass(frozen=True)
    class PagerTarget(TargetBase):
        pager_arn: pulumi.Input[str]
        urgency: str = "high"
        kind: ClassVar[str] = "pager"
        stack_type: ClassVar[str] = "pager"
        arn_field: ClassVar[str | None] = "pager_arn"

    monkeypatch.setattr(target_types, "_REGISTERED", {"pager": PagerTarget})
    monkeypatch.setattr(target_types, "arn_doc", lambda: "the ARN")  # the kind's handler declaration is not needed here
    with pytest.raises(KeyError, match=r"target\.urgency: no description; add one to its target class's `docs`"):
        provider.render_inputs()
    monkeypatch.setattr(PagerTarget, "docs", {"urgency": "how loud"})
    rendered = provider.render_inputs()
    assert '    Pager = "pager"' in rendered and "    urgency: str" in rendered


def test_an_option_of_a_type_the_provider_cannot_take_fails_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Grown(ScheduledTableArgs):
        ratio: float = 0.5

    monkeypatch.setattr(provider, "ScheduledTableArgs", Grown)
    monkeypatch.setitem(OPTION_DOCS, "ratio", "a ratio")
    with pytest.raises(TypeError, match=r"ScheduledTableInputs\.ratio: no provider input type"):
        provider.render_inputs()


def test_every_arn_input_takes_another_resources_output() -> None:
    """An ARN is another resource's output (`topic.arn`); a plain input would refuse it (issue 24.2)."""
    found = schema()
    objects = {"ScheduledTable": _resource()["inputProperties"]}
    objects.update({token: spec.get("properties", {}) for token, spec in found["types"].items()})
    arns = [(where, name, spec) for where, props in objects.items() for name, spec in props.items()]
    arns = [(where, name, spec) for where, name, spec in arns if name.lower().endswith("arn")]
    assert {name for _, name, _ in arns} >= {"alarmTopicArn", "kmsKeyArn", "arn", "streamArn"}
    assert [f"{where}.{name}" for where, name, spec in arns if spec.get("plain")] == []
