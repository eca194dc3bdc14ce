"""Stack configuration -> ScheduledTableArgs. Every option is settable as its camelCase key (`batchSize`), so
the config reference is the args reference; `target` is an object with a `type`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any, Protocol, cast

from . import modes, target_types
from .args import ScheduledTableArgs, describe_defaults
from .existing import TABLE_OPTIONS, ExistingTable
from .queues import QUEUE_OPTIONS
from .suggest import closest, unknown_key_hint
from .target_base import declaration
from .targets import Target


class ConfigSource(Protocol):
    """The part of `pulumi.Config` this module reads (a dict-backed fake satisfies it in tests)."""

    def get(self, key: str) -> str | None: ...
    def get_bool(self, key: str) -> bool | None: ...
    def get_int(self, key: str) -> int | None: ...
    def get_object(self, key: str) -> Any: ...


# Keys of options that were removed: a stack that still sets one fails with the reason instead of being ignored.
REMOVED_KEYS: dict[str, tuple[str, str]] = {
    "dispatchNowWithinSeconds": (
        "was removed: it delivered items up to that many seconds before their due time, and delivery is now never "
        "early (an item is delivered at its due time or, if that has passed, at once)",
        "delete the key from the stack configuration",
    ),
}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# What a stack file's `type` may be besides the target classes' (components/target_types/): the queue the component
# creates, as when `target` is left out.
DUE_QUEUE = "dueQueue"


def target_type_names() -> tuple[str, ...]:
    """What a stack file's `type` may be."""
    return (*target_types.by_stack_type(), DUE_QUEUE)


def target_from_config(value: Any) -> Target | None:
    """`{"type": "queue", "arn": ..., "maxMessageBytes": ...}` (each target's options in camelCase, its ARN as
    `arn`: a FIFO queue's `messageGroupAttribute`, an event bus's `detailType` and `source`); `{"type": "email",
    "sender": ..., "subject": ..., "body": ...}`; `{"type": "dueQueue"}`; or none. A mapping without a `type`, or
    with a key that type does not read, is refused: dropping it would send every due event to a new due queue that
    nobody reads."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"target: must be an object with a 'type' (one of {list(target_type_names())})")
    kind = value.get("type")
    if kind is None:
        if "kind" in value:
            raise ValueError(
                "target.kind: unknown key; a stack file names the target's kind with `type` (`kind` is the provider "
                f"input's name): write `type: {value['kind']}`"
            )
        raise ValueError(f"target.type: missing; set it to one of {list(target_type_names())}")
    if kind == DUE_QUEUE:
        for key in sorted(k for k in value if k != "type"):
            raise ValueError(
                f"target.{key}: unknown key; a dueQueue target (the queue the component creates) takes no other keys; "
                f"remove {key}, or set type to the kind of resource the ARN names"
            )
        return None
    cls = target_types.by_stack_type().get(kind)
    if cls is None:
        raise ValueError(f"target.type: {kind!r} is not a target type; {_closest(kind, target_type_names())}")
    arn_field = cls.arn_field
    fields = {camel(f.name): f.name for f in dataclasses.fields(cls) if f.name != arn_field}
    if arn_field is not None:
        fields["arn"] = arn_field
    check_keys(value, [*fields, "type"], where="target.")
    if arn_field is not None and not value.get("arn"):
        what = declaration(cls.kind).NOUN
        raise ValueError(f"target.arn: a {kind} target needs the ARN of the {what}")
    target = cast(Target, cls(**{fields[k]: v for k, v in value.items() if k != "type"}))
    return target


def _closest(value: object, choices: Iterable[str]) -> str:
    """`did you mean X? (all of them)` for a near miss (a typo, another case), else `use one of ...`."""
    names = list(choices)
    match = closest(str(value), names)
    if match:
        return f"did you mean {match}? (one of {names})"
    return f"use one of {names}"


# Keys a stack may set besides the options: `name` (the component's name) and `tables` (several components).
STACK_KEYS = ("name", "tables")


def existing_from_config(value: Any) -> ExistingTable | None:
    """`{"name": ..., "streamArn": ...}`: a table the stack already has (without `streamArn`: looked up by name)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("existingTable: must be an object with 'name' (and 'streamArn', or it is looked up)")
    check_keys(value, ["name", "streamArn"], where="existingTable.")
    if not value.get("name"):
        raise ValueError(
            "existingTable.name: missing; set it to the table's name ('streamArn' is looked up if left out)"
        )
    return ExistingTable(name=value["name"], stream_arn=value.get("streamArn"))


def option_keys() -> list[str]:
    """Every option's stack key (camelCase), `mode` included."""
    return ["mode", *(camel(name) for name in describe_defaults())]


def check_keys(keys: Iterable[str], allowed: Iterable[str], where: str = "") -> None:
    """Refuse a key nobody reads, naming the closest valid one: a misspelt key silently keeping its default is the
    worst kind of configuration error. `where` says which object the keys are in (`tables[1].`, `target.`)."""
    valid = sorted(set(allowed))
    for key in sorted(keys):
        if key in valid or key in REMOVED_KEYS:
            continue
        raise ValueError(f"{where}{key}: unknown key; {unknown_key_hint(key, valid)}")


def args_from_config(config: ConfigSource) -> ScheduledTableArgs:
    """Read every option that is set; what is not set keeps the component's default. A removed option is an error,
    and so is a missing `mode`: there is no sensible default for what the table is for."""
    for key, (problem, fix) in REMOVED_KEYS.items():
        if config.get(key) is not None:
            raise ValueError(f"{key}: {problem}; {fix}")
    mode = config.get("mode")
    if not mode:
        raise ValueError(
            "mode: missing; set it in the stack configuration (`pulumi config set mode eventbridge`, or `mode:` in a "
            f"tables entry) to one of {', '.join(repr(name) for name in modes.names())}"
        )
    values: dict[str, Any] = {"mode": mode}
    for name, default in describe_defaults().items():
        key = camel(name)
        if name == "target":
            values[name] = target_from_config(config.get_object(key))
        elif name == "existing_table":
            _set(values, name, existing_from_config(config.get_object(key)))
        elif name in QUEUE_OPTIONS:  # `{queueArn, kmsKeyArn, maxMessageBytes}`, made an ExistingQueue by the args
            _set(values, name, config.get_object(key))
        elif name == "sort_key":
            raw = config.get(key)
            if raw is not None:
                values[name] = None if raw in ("", "none", "None") else raw
        elif isinstance(default, bool):
            _set(values, name, config.get_bool(key))
        elif isinstance(default, int) or name in ("read_capacity", "write_capacity"):
            _set(values, name, config.get_int(key))
        elif isinstance(default, dict | list):
            _set(values, name, config.get_object(key))
        else:
            _set(values, name, config.get(key))
    return ScheduledTableArgs(**values)


class DictConfig:
    """One entry of the `tables` list, read like `pulumi.Config` (YAML gives typed values; strings are accepted
    too, as the CLI would pass them), falling back to the stack's top-level keys for what the entry leaves out."""

    def __init__(self, values: dict[str, Any], fallback: ConfigSource, own: Iterable[str] = ()) -> None:
        """`own`: keys read from the entry only, never inherited (see `tables_from_config`)."""
        self.values = values
        self.fallback: ConfigSource = _Without(fallback, set(own)) if own else fallback

    def get(self, key: str) -> str | None:
        if key not in self.values:
            return self.fallback.get(key)
        value = self.values[key]
        if value is None:
            return None
        return ("true" if value else "false") if isinstance(value, bool) else str(value)

    def get_bool(self, key: str) -> bool | None:
        if key not in self.values:
            return self.fallback.get_bool(key)
        value = self.values[key]
        if value is None or isinstance(value, bool):
            return value
        if str(value).lower() in ("true", "false"):
            return str(value).lower() == "true"
        raise ValueError(f"{key}: {value!r} is not a boolean; use true or false")

    def get_int(self, key: str) -> int | None:
        if key not in self.values:
            return self.fallback.get_int(key)
        value = self.values[key]
        if value is None:
            return None
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ValueError(f"{key}: {value!r} is not an integer") from None

    def get_object(self, key: str) -> Any:
        if key not in self.values:
            return self.fallback.get_object(key)
        value = self.values[key]
        if isinstance(value, str) and value[:1] in ("{", "["):
            return json.loads(value)
        return value


class _Without:
    """A config source that answers None for some keys."""

    def __init__(self, source: ConfigSource, hidden: set[str]) -> None:
        self.source = source
        self.hidden = hidden

    def get(self, key: str) -> str | None:
        return None if key in self.hidden else self.source.get(key)

    def get_bool(self, key: str) -> bool | None:
        return None if key in self.hidden else self.source.get_bool(key)

    def get_int(self, key: str) -> int | None:
        return None if key in self.hidden else self.source.get_int(key)

    def get_object(self, key: str) -> Any:
        return None if key in self.hidden else self.source.get_object(key)


def tables_from_config(config: ConfigSource, default_name: str = "reminders") -> list[tuple[str, ScheduledTableArgs]]:
    """One table from the top-level keys, or, when `tables` is set, one per entry (each needs a unique `name`;
    top-level keys are the defaults every entry inherits)."""
    names = getattr(config, "names", None)
    if callable(names):  # the stack's own keys (a pulumi.Config cannot list them; `StackConfig` can)
        check_keys(names(), [*option_keys(), *STACK_KEYS])
    entries = config.get_object("tables")
    if not entries:
        return [(config.get("name") or default_name, args_from_config(config))]
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError("tables: must be a list of objects, each with a 'name' and the same keys as a single table")
    names = [entry.get("name") for entry in entries]
    if not all(isinstance(n, str) and n for n in names):
        raise ValueError("tables[].name: every entry needs a name; add `name: <resource prefix>` to each")
    if len(set(names)) != len(names):
        raise ValueError(f"tables[].name: names must be unique, got {names}; rename the duplicates")
    for index, entry in enumerate(entries):
        check_keys(entry, [*option_keys(), "name"], where=f"tables[{index}].")
    # The top level's table-shaping keys (deletionProtection, billingMode, ...) are defaults for the tables the stack
    # creates: an entry with an existing table does not inherit them (it would be refused for having them).
    table_keys = [camel(name) for name in TABLE_OPTIONS]
    return [
        (
            str(entry["name"]),
            args_from_config(DictConfig(entry, config, table_keys if "existingTable" in entry else ())),
        )
        for entry in entries
    ]


class StackConfig:
    """`pulumi.Config` for the project's namespace, plus the one thing it cannot do: list the keys the stack sets
    (from the configuration Pulumi hands the program), so unknown ones are refused instead of ignored."""

    def __init__(self, config: Any = None) -> None:
        import pulumi

        self.config = config if config is not None else pulumi.Config()

    def names(self) -> list[str]:
        from pulumi.runtime import config as runtime

        prefix = f"{self.config.name}:"
        every = {**runtime.get_config_env(), **dict(runtime.CONFIG.get() or {})}
        return [key.removeprefix(prefix) for key in every if key.startswith(prefix)]

    def get(self, key: str) -> str | None:
        value: str | None = self.config.get(key)
        return value

    def get_bool(self, key: str) -> bool | None:
        value: bool | None = self.config.get_bool(key)
        return value

    def get_int(self, key: str) -> int | None:
        value: int | None = self.config.get_int(key)
        return value

    def get_object(self, key: str) -> Any:
        return self.config.get_object(key)


def _set(values: dict[str, Any], name: str, value: Any) -> None:
    if value is not None:
        values[name] = value
