"""ScheduledTable for every Pulumi language: the provider form of its options, and the component Pulumi hosts.

Pulumi runs a Python ComponentResource as a component provider (`component_provider_host`, provider/__main__.py)
and infers the package schema from type annotations. Its analyzer reads real annotations only (this module has no
`from __future__ import annotations`), accepts no union but `X | None`, turns a field with a default but no
optional marker into a required input, takes each description from the string literal written after an
annotation, and hands `construct` a dict. ScheduledTableArgs is none of that, so the provider form is a set of
TypedDicts (provider_inputs.py) generated from ScheduledTableArgs, the target classes and OPTION_DOCS:
`python -m components.provider` rewrites it, and tests/provider fails while it is stale, so a new option cannot
ship without its input. `args_from_inputs` turns the dict back into ScheduledTableArgs, so both forms run the same
validation; its messages name the camelCase inputs a TypeScript, YAML, Go or C# user wrote.
"""

import dataclasses
import inspect
import json
import re
import sys
import tomllib
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pulumi

from . import args as args_module
from . import component, modes, target_types
from .args import OPTION_DOCS, Mode, ScheduledTableArgs
from .existing import ExistingTable
from .inputs import NO_SORT_KEY, args_from_inputs, input_name, provider_message, target_fields
from .overrides import FUNCTION_OVERRIDES_DOCS, OVERRIDES_DOC, VPC_CONFIG_DOCS, FunctionOverrides, VpcConfig
from .provider_inputs import ScheduledTableInputs
from .queues import EXISTING_QUEUE_DOC, EXISTING_QUEUE_DOCS, QUEUE_OPTIONS, ExistingQueue
from .targets import TARGET_TYPES

__all__ = [
    "NO_SORT_KEY",
    "PACKAGE",
    "ScheduledTable",
    "args_from_inputs",
    "input_name",
    "package_version",
    "provider_message",
    "target_fields",
]

PACKAGE = "scheduled-table"
INPUTS_FILE = Path(__file__).with_name("provider_inputs.py")

# Descriptions of what only the provider form has, or says differently from OPTION_DOCS (which speaks Python).
PROVIDER_DOCS: dict[str, str] = {
    "existing_table": (
        "a table you already have (`{name, streamArn}`, or `{name}` to have it looked up when deploying; its stream "
        "on, view type `NEW_AND_OLD_IMAGES`): act on it instead of creating one; refuses the table-shaping options "
        "(billing, capacities, PITR, encryption, deletion protection, key types)"
    ),
    "function_overrides": provider_message(
        "per function, by role: `{role: {memoryMb, reservedConcurrency, vpc: {subnetIds, securityGroupIds}, layers, "
        "logRetentionDays, architecture}}`, " + OVERRIDES_DOC
    ),
    **{
        option: provider_message(f"{what}: `{{queueArn, kmsKeyArn, maxMessageBytes}}`, " + EXISTING_QUEUE_DOC)
        for option, what in QUEUE_OPTIONS.items()
    },
    "sort_key": 'the table\'s sort key attribute; `"none"` for a table without one',
    "target": (
        'what receives the due event: `{kind, ...}` with that kind\'s fields (`{kind: "queue", arn: queue.arn}`); '
        "not set: a due queue the component creates (exported as `dueQueueUrl`)"
    ),
}
# What every kind's `kind` and shared fields mean; each kind's own fields are described by its class
# (components/target_types/, `docs`), the `arn` from the kinds' nouns.
COMMON_TARGET_DOCS: dict[str, str] = {
    "kind": "what receives the due event",
    "kms_key_arn": (
        "the customer-managed KMS key encrypting the target, if any: whoever sends to it gets `kms:GenerateDataKey` "
        "and `kms:Decrypt` on it"
    ),
}


def target_field_docs() -> dict[str, str]:
    """The description of each field of the provider's `target` object (and the reference's Targets table)."""
    docs = {**COMMON_TARGET_DOCS, "arn": target_types.arn_doc()}
    for cls in target_types.classes():
        for key, text in cls.docs.items():
            if docs.setdefault(key, text) != text:
                raise ValueError(f"target.{key}: {cls.__name__} describes it differently from another kind")
    return docs


EXISTING_TABLE_DOCS: dict[str, str] = {
    "name": "the table's name",
    "stream_arn": (
        "the table's latest stream ARN, view type `NEW_AND_OLD_IMAGES`; not set: the component looks the table up by "
        "name when it deploys and checks what its mode needs"
    ),
}


def package_version() -> str:
    """The installed package's version (the plugin's venv installs it), or pyproject's in a bare checkout: the
    schema's version, which consumers pin as the git tag `v<version>`."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text())["project"]["version"])


# -- the hosted component ------------------------------------------------------------------------------------------


class ScheduledTable(component.ScheduledTable):
    """A DynamoDB table whose items name times, and what acts at those times: per `mode`, the stream consumers,
    schedules, queues and least-privilege roles that deliver a due event to `target` when an item's time comes
    (`eventbridge`, `ttl`, `polling`), or keep running totals of items (`aggregate`). Invalid or conflicting inputs
    fail at `pulumi up`, before anything is created, naming the input and the fix."""

    def __init__(self, name: str, args: ScheduledTableInputs, opts: pulumi.ResourceOptions | None = None) -> None:
        """The provider's constructor: `args` is the provider form, which ScheduledTable also accepts."""
        super().__init__(name, args, opts)


# The schema's description of the resource: the docstring as one paragraph (the analyzer keeps its indentation).
ScheduledTable.__doc__ = " ".join((ScheduledTable.__doc__ or "").split())
# The analyzer reads the outputs from the class's annotations, which component.py (under `from __future__ import
# annotations`) keeps as strings: this class carries them evaluated, so a new output needs nothing here.
ScheduledTable.__annotations__ = inspect.get_annotations(component.ScheduledTable, eval_str=True)


# -- generating provider_inputs.py ---------------------------------------------------------------------------------

_LINE = 120
# `pulumi.Input[X]` is a Union of X, Awaitable[X] and Output[X]; a field so typed is an Input in the schema.
_INPUT_TYPES: dict[str, Any] = {
    "str": pulumi.Input[str],  # type: ignore[misc]  # a runtime value here, not an annotation
    "int": pulumi.Input[int],  # type: ignore[misc]
    "bool": pulumi.Input[bool],  # type: ignore[misc]
}


@dataclasses.dataclass
class _Enum:
    name: str
    values: tuple[str, ...]
    fields: list[str]


class _Inputs:
    """Renders provider_inputs.py: one TypedDict line and description per field; Literal types become string enums,
    `X | None` stays optional, a field's default goes into its description (the schema has no defaults)."""

    def __init__(self) -> None:
        self.enums: dict[str, _Enum] = {}

    def annotation(self, hint: Any, field_name: str, where: str) -> str:
        origin, hint_args = get_origin(hint), get_args(hint)
        if hint in (str, int, bool):
            return str(hint.__name__)
        if origin in (Union, types.UnionType):
            union = self.union(tuple(a for a in hint_args if a is not type(None)), field_name, where)
            if union is not None:
                return union if type(None) not in hint_args else f"{union} | None"
        if origin is Literal:
            aliases = [n for n, v in vars(args_module).items() if not n.startswith("_") and v == hint]
            name = aliases[0] if aliases else "".join(part.title() for part in field_name.split("_"))
            return self.enum(name, tuple(str(v) for v in hint_args), field_name)
        if origin in (list, Sequence) and len(hint_args) == 1:
            return f"list[{self.annotation(hint_args[0], field_name, where)}]"
        if origin is dict and hint_args[:1] == (str,):
            return f"dict[str, {self.annotation(hint_args[1], field_name, where)}]"
        if hint in (ExistingTable, FunctionOverrides, VpcConfig, ExistingQueue):
            return str(hint.__name__)
        raise TypeError(
            f"{where}.{field_name}: no provider input type for {hint!r}; teach components/provider.py "
            "(_Inputs.annotation) to map it"
        )

    def union(self, members: tuple[Any, ...], field_name: str, where: str) -> str | None:
        """The annotation of a union's members (None left out), or None if it is not one the provider can take."""
        if len(members) == 1:
            return self.annotation(members[0], field_name, where)
        if Mode in members:  # Mode | ModeName: a string enum of the modes' values
            return self.enum("Mode", modes.names(), field_name)
        for base, input_type in _INPUT_TYPES.items():
            if set(members) == set(get_args(input_type)):
                return f"pulumi.Input[{base}]"
        if set(members) == set(TARGET_TYPES):
            return "Target"
        return None

    def enum(self, name: str, values: tuple[str, ...], field_name: str) -> str:
        """A string enum (a Literal type's is named after its alias in args.py, KeyType, or its field, BillingMode)."""
        known = self.enums.setdefault(name, _Enum(name, values, []))
        if known.values != values:
            raise TypeError(f"{field_name}: enum {name} already has the values {known.values}, not {values}")
        known.fields.append(field_name)
        return name

    def render(self) -> str:
        scheduled = self.typed_dict(
            "ScheduledTableInputs",
            "ScheduledTableArgs as the provider takes it (camelCase in the schema); ScheduledTable also accepts it.",
            _hints(ScheduledTableArgs),
            [(f, _doc(f)) for f in dataclasses.fields(ScheduledTableArgs)],
        )
        target = self.target()
        existing = self.typed_dict(
            "ExistingTable",
            "A DynamoDB table you already have, for ScheduledTable to act on.",
            _hints(ExistingTable),
            [(f, EXISTING_TABLE_DOCS[f.name]) for f in dataclasses.fields(ExistingTable)],
        )
        vpc = self.typed_dict(
            "VpcConfig",
            "The VPC a function runs in: its subnets and security groups.",
            _hints(VpcConfig),
            [(f, VPC_CONFIG_DOCS[f.name]) for f in dataclasses.fields(VpcConfig)],
        )
        overrides = self.typed_dict(
            "FunctionOverrides",
            "One function's settings that differ from the component-wide ones.",
            _hints(FunctionOverrides),
            [(f, provider_message(FUNCTION_OVERRIDES_DOCS[f.name])) for f in dataclasses.fields(FunctionOverrides)],
        )
        queue = self.typed_dict(
            "ExistingQueue",
            "A standard SQS queue of yours, used instead of one the component would make.",
            _hints(ExistingQueue),
            [(f, provider_message(EXISTING_QUEUE_DOCS[f.name])) for f in dataclasses.fields(ExistingQueue)],
        )
        kinds = _Enum("TargetKind", tuple(target_types.by_stack_type()), ["kind"])
        enums = [self.render_enum(e) for e in [*self.enums.values(), kinds]]
        header = [
            '"""The provider form of ScheduledTableArgs: what TypeScript, YAML, Go and C# programs pass (camelCase in',
            "the package schema). Generated from ScheduledTableArgs, OPTION_DOCS and the target classes by",
            "`python -m components.provider`; do not edit (tests/provider fails while it is stale). No",
            '`from __future__ import annotations`: Pulumi\'s schema analyzer reads these annotations."""',
            "",
            "from enum import StrEnum",
            "from typing import Required, TypedDict",
            "",
            "import pulumi",
        ]
        blocks = [*enums, target, existing, vpc, overrides, queue, scheduled]
        return "\n".join(header) + "\n\n\n" + "\n\n\n".join(blocks) + "\n"

    def target(self) -> str:
        lines = [
            "class Target(TypedDict, total=False):",
            '    """What receives the due event: a `kind` and that kind\'s fields; the others are refused."""',
            "",
            "    kind: Required[TargetKind]",
            *_docstring(_target_doc("kind", [])),
        ]
        seen: dict[str, tuple[str, list[str], set[str]]] = {}
        for kind, cls in target_types.by_stack_type().items():
            hints = _hints(cls)
            for f in dataclasses.fields(cls):
                key = "arn" if f.name == cls.arn_field else f.name
                annotation = self.annotation(hints[f.name], key, cls.__name__)
                if key == "arn":
                    annotation = annotation.removesuffix(" | None")  # required by the kinds that have one
                default = "" if f.default is dataclasses.MISSING else _default(f.default)
                entry = seen.setdefault(key, (annotation, [], set()))
                if entry[0] != annotation:
                    raise TypeError(f"target.{key}: {cls.__name__} types it {annotation}, another kind {entry[0]}")
                entry[1].append(kind)
                entry[2].add(default)
        for key, (annotation, kinds, defaults) in seen.items():
            doc = _target_doc(key, kinds, defaults.pop() if len(defaults) == 1 else "")
            lines += [f"    {key}: {annotation}", *_docstring(doc)]
        return "\n".join(lines)

    def typed_dict(self, name: str, doc: str, hints: Mapping[str, Any], fields: Iterable[tuple[Any, str]]) -> str:
        lines = [f"class {name}(TypedDict, total=False):", f'    """{doc}"""', ""]
        for f, text in fields:
            annotation = self.annotation(hints[f.name], f.name, name)
            description = _sentence(text)
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            if required:
                annotation = f"Required[{annotation}]"
                description += " Required."
            else:
                factory: Callable[[], Any] = f.default_factory
                default = f.default if factory is dataclasses.MISSING else factory()
                description += f" Default: {_default(default)}."
            lines += [f"    {f.name}: {annotation}", *_docstring(description)]
        return "\n".join(lines)

    def render_enum(self, spec: _Enum) -> str:
        inputs = " and ".join(f"`{input_name(f)}`" for f in spec.fields)
        lines = [f"class {spec.name}(StrEnum):", f'    """The values of {inputs}."""', ""]
        lines += [f"    {_member(value)} = {json.dumps(value)}" for value in spec.values]
        return "\n".join(lines)


def _hints(cls: type) -> dict[str, Any]:
    """A dataclass's field types. Its annotations are strings (`from __future__ import annotations`): each class's
    own are evaluated in its module, as typing.get_type_hints would also chase pulumi.Input's inner forward
    reference (`Output[T]`) and fail."""
    hints: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            hints.update(inspect.get_annotations(klass, eval_str=True))
    return hints


def _doc(f: dataclasses.Field[Any]) -> str:
    return PROVIDER_DOCS.get(f.name) or provider_message(OPTION_DOCS[f.name]).replace("`None`", "not set")


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _target_doc(key: str, kinds: list[str], default: str = "") -> str:
    docs = target_field_docs()
    if key not in docs:
        raise KeyError(f"target.{key}: no description; add one to its target class's `docs` (components/target_types/)")
    text = _sentence(provider_message(docs[key]))
    if kinds and len(kinds) < len(target_types.classes()):
        text += " Only for " + ", ".join(f"`{k}`" for k in kinds) + "."
    if key == "kind":
        text += " Required."
    elif default:
        text += f" Default: {default}."
    elif key == "arn":
        text += " Required for every kind that has one."
    return text


def _default(value: Any) -> str:
    return "not set" if value is None else f"`{json.dumps(value)}`"


def _member(value: str) -> str:
    """An enum member's name, which the SDKs use (TypeScript `Mode.Eventbridge`, Go `ModeEventbridge`, C#
    `Mode.Eventbridge`): each word capitalized, `_` only between digits (`python3.12` -> `Python3_12`)."""
    name = ""
    for part in re.split(r"[^0-9A-Za-z]+", value):
        word = part.capitalize() if part.isupper() or part.islower() else part[:1].upper() + part[1:]
        name += ("_" if name[-1:].isdigit() and word[:1].isdigit() else "") + word
    return name


def _docstring(text: str, indent: int = 4) -> list[str]:
    """A field's description as the analyzer reads it: the string literal after the annotation, on one line if it
    fits, else implicitly concatenated pieces (one string constant, without the newlines of a wrapped docstring)."""
    pad = " " * indent
    escaped = text.replace("\\", "\\\\")
    if len(pad) + len(escaped) + 6 <= _LINE and '"""' not in escaped and not escaped.endswith('"'):
        return [f'{pad}"""{escaped}"""']
    pieces, piece = [], ""
    for word in text.split(" "):
        candidate = f"{piece} {word}" if piece else word
        if piece and len(pad) + 4 + len(_quoted(candidate + " ")) > _LINE:
            pieces.append(piece + " ")
            piece = word
        else:
            piece = candidate
    pieces.append(piece)
    return [f"{pad}(", *(f"{pad}    {_quoted(p)}" for p in pieces), f"{pad})"]


def _quoted(text: str) -> str:
    """A string literal as ruff format writes it: double quotes, unless that needs more escapes than single ones."""
    quote = "'" if text.count('"') > text.count("'") else '"'
    return quote + text.replace("\\", "\\\\").replace(quote, "\\" + quote) + quote


def render_inputs() -> str:
    """The source provider_inputs.py must have for today's ScheduledTableArgs and targets."""
    return _Inputs().render()


def main(argv: list[str]) -> int:
    """`python -m components.provider`: rewrite provider_inputs.py; `--check`: exit 1 if it is stale."""
    source = render_inputs()
    current = INPUTS_FILE.read_text() if INPUTS_FILE.exists() else ""
    if "--check" in argv:
        print("up to date" if source == current else f"{INPUTS_FILE} is stale; run python -m components.provider")
        return 0 if source == current else 1
    if source != current:
        INPUTS_FILE.write_text(source)
        print(f"wrote {INPUTS_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
