"""The provider form of ScheduledTable's options (what other Pulumi languages send: a dict of snake_case inputs) ->
ScheduledTableArgs, so both forms run the same validation; its messages name the camelCase inputs a TypeScript,
YAML, Go or C# user wrote. A leaf the component and the provider both import (the component takes either form; the
provider hosts the component), so neither imports the other for it."""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping
from typing import Any, cast

from pulumi.provider.experimental.util import camel_case

from . import target_types
from .args import ScheduledTableArgs
from .existing import ExistingTable
from .overrides import FunctionOverrides, VpcConfig
from .queues import QUEUE_OPTIONS, ExistingQueue
from .stack_config import check_keys
from .targets import Target

# The stack configuration's spelling of "no sort key" (stack_config.args_from_config), also accepted here: a
# provider input that is not set keeps its default ("SK"), so "none" is how a TypeScript or YAML user says None.
NO_SORT_KEY = ("", "none", "None")


def input_name(field_name: str) -> str:
    """The schema's name of a Python field: the analyzer's own camelCase, so messages name what users wrote."""
    return camel_case(field_name)


def args_from_inputs(inputs: Mapping[str, Any]) -> ScheduledTableArgs:
    """ScheduledTableArgs from the provider form (snake_case keys, as `construct` maps them: enum members, numbers
    that came over the wire as floats, nested dicts for `target` and `existing_table`). ScheduledTableArgs then
    validates it exactly as it does a Python user's; a ValueError names the camelCase input and the fix."""
    try:
        return _args(inputs)
    except ValueError as exc:
        raise ValueError(provider_message(str(exc))) from exc


def _args(inputs: Mapping[str, Any]) -> ScheduledTableArgs:
    if not isinstance(inputs, Mapping):
        raise ValueError(f"args: {type(inputs).__name__} is not ScheduledTableArgs or a dict of its inputs")
    fields = dataclasses.fields(ScheduledTableArgs)
    inputs = python_keys(inputs, [f.name for f in fields])
    check_keys(inputs, [f.name for f in fields])
    for f in fields:
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING and inputs.get(f.name) is None:
            raise ValueError(f"{f.name}: missing; it is required")
    values: dict[str, Any] = {}
    for name, value in inputs.items():
        if value is None:  # not set: the default, as the schema says
            continue
        if name == "target":
            values[name] = _target(value)
        elif name == "existing_table":
            values[name] = _existing(value)
        elif name == "sort_key" and value in NO_SORT_KEY:
            values[name] = None
        else:
            values[name] = _plain(value)
    return ScheduledTableArgs(**values)


def _plain(value: Any) -> Any:
    """What ScheduledTableArgs takes: an enum member's value, and a whole number that came as a float (JSON numbers
    cross the wire as doubles; the SDK converts top-level integers only, not a list's items)."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _target(value: Any) -> Target:
    if not isinstance(value, Mapping):
        raise ValueError(f"target: {value!r} is not an object; pass {{kind: ..., ...}} with the kind's fields")
    kind = _plain(value.get("kind"))
    known = target_types.by_stack_type()
    if kind not in known:
        kinds = ", ".join(repr(k) for k in known)
        raise ValueError(f"target.kind: {kind!r} is not a target kind; use one of {kinds}")
    cls = known[kind]
    arn_field = cls.arn_field
    own = {f.name: f for f in dataclasses.fields(cls)}
    value = python_keys(value, target_fields(), where="target.")
    check_keys(value, ["kind", *target_fields()], where="target.")
    given: dict[str, Any] = {}
    for key, item in value.items():
        if key == "kind" or item is None:
            continue
        field_name = arn_field if key == "arn" else key
        if field_name is None or field_name not in own or (key != "arn" and field_name == arn_field):
            users = ", ".join(repr(k) for k, c in known.items() if _target_field(c, c.arn_field, key))
            raise ValueError(f"target.{key}: does not apply to a {kind!r} target (only to {users}); remove it")
        given[field_name] = item if key == "arn" else _plain(item)
    for name, f in own.items():
        if f.default is dataclasses.MISSING and name not in given:
            raise ValueError(f"target.{'arn' if name == arn_field else name}: a {kind!r} target needs it; set it")
    target = cast(Target, cls(**given))
    return target


def _existing(value: Any) -> ExistingTable:
    if not isinstance(value, Mapping):
        raise ValueError(f"existing_table: {value!r} is not an object; pass {{name: ..., stream_arn: ...}}")
    fields = dataclasses.fields(ExistingTable)
    value = python_keys(value, [f.name for f in fields], where="existing_table.")
    check_keys(value, [f.name for f in fields], where="existing_table.")
    for f in fields:
        if f.default is dataclasses.MISSING and value.get(f.name) is None:
            raise ValueError(f"existing_table.{f.name}: missing; it is required")
    return ExistingTable(**{f.name: value[f.name] for f in fields if value.get(f.name) is not None})


def python_keys(given: Mapping[str, Any], names: list[str], where: str = "") -> dict[str, Any]:
    """`given` with each key written as its input name (`batchSize`, as the schema, a stack file and the messages
    spell it) under its Python name (`batch_size`), so a dict a Python user writes either way reads the same; the
    provider's own inputs arrive in Python names already. A key given both ways is refused."""
    python = {input_name(name): name for name in names}
    result: dict[str, Any] = {}
    for key, value in given.items():
        name = python.get(key, key)
        if name in result:
            raise ValueError(f"{where}{key}: given twice, in snake_case and in camelCase; keep one")
        result[name] = value
    return result


def _target_field(cls: type, arn_field: str | None, key: str) -> bool:
    """Whether input `key` of the target object applies to target class `cls`."""
    if key == "arn":
        return arn_field is not None
    return key != arn_field and key in {f.name for f in dataclasses.fields(cls)}


def target_fields() -> list[str]:
    """The target object's fields besides `kind`, in order: `arn`, then every target class's own fields."""
    names = ["arn"]
    for cls in target_types.classes():
        names += [f.name for f in dataclasses.fields(cls) if f.name != cls.arn_field and f.name not in names]
    return names


def _renames() -> list[tuple[str, str]]:
    """(Python name, provider name) for every name a validation message may use, most specific first."""
    pairs: list[tuple[str, str]] = []
    for cls in target_types.classes():
        for f in dataclasses.fields(cls):
            provider = "arn" if f.name == cls.arn_field else input_name(f.name)
            pairs += [(f"{cls.__name__}.{f.name}", f"target.{provider}"), (f.name, provider)]
    pairs += [(f.name, input_name(f.name)) for f in dataclasses.fields(ExistingTable)]
    pairs += [(f.name, input_name(f.name)) for f in dataclasses.fields(FunctionOverrides)]
    pairs += [(f.name, input_name(f.name)) for f in dataclasses.fields(VpcConfig)]
    # `queue_arn` alone is a QueueTarget's `arn`: an ExistingQueue's is named with its option.
    pairs += [
        (f"{option}.{f.name}", f"{input_name(option)}.{input_name(f.name)}")
        for option in QUEUE_OPTIONS
        for f in dataclasses.fields(ExistingQueue)
    ]
    pairs += [(f.name, input_name(f.name)) for f in dataclasses.fields(ScheduledTableArgs)]
    return sorted({p for p in pairs if p[0] != p[1]}, key=lambda p: -len(p[0]))


_RENAMES = dict(_renames())
_NAMES = re.compile(r"(?<!\w)(" + "|".join(re.escape(name) for name in _RENAMES) + r")(?![\w])")


def provider_message(text: str) -> str:
    """A validation message in the provider's terms: `lambda_memory_mb: ...` -> `lambdaMemoryMb: ...`,
    `QueueTarget.queue_arn` -> `target.arn`, `x=True` -> `x: true`."""
    text = _NAMES.sub(lambda m: _RENAMES[m.group(1)], text)
    return re.sub(r"\b(\w+)=(True|False)\b", lambda m: f"{m.group(1)}: {m.group(2).lower()}", text)
