"""Stack configuration -> ScheduledTableArgs. Every option is settable as its camelCase key (`batchSize`), so
the config reference is the args reference; `target` is an object with a `type`."""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from .args import ScheduledTableArgs, describe_defaults
from .targets import EmailTarget, FunctionTarget, QueueTarget, StateMachineTarget, Target, TopicTarget


class ConfigSource(Protocol):
    """The part of `pulumi.Config` this module reads (a dict-backed fake satisfies it in tests)."""

    def get(self, key: str) -> str | None: ...
    def get_bool(self, key: str) -> bool | None: ...
    def get_int(self, key: str) -> int | None: ...
    def get_object(self, key: str) -> Any: ...


_TARGETS: dict[str, tuple[type, str]] = {
    "queue": (QueueTarget, "queue_arn"),
    "function": (FunctionTarget, "function_arn"),
    "stateMachine": (StateMachineTarget, "state_machine_arn"),
    "topic": (TopicTarget, "topic_arn"),
}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def target_from_config(value: Any) -> Target | None:
    """`{"type": "queue", "arn": ...}`; `{"type": "email", "sender": ..., "subject": ..., "body": ...}`; or none."""
    if value is None or value == {} or (isinstance(value, dict) and value.get("type") in (None, "dueQueue")):
        return None
    if not isinstance(value, dict):
        raise ValueError("target: must be an object with a 'type' (queue, function, stateMachine, topic, email)")
    kind = value.get("type")
    if kind == "email":
        fields = {camel(f.name): f.name for f in dataclasses.fields(EmailTarget)}
        unknown = set(value) - set(fields) - {"type"}
        if unknown:
            raise ValueError(f"target: unknown key(s) {sorted(unknown)} for an email target; use {sorted(fields)}")
        return EmailTarget(**{fields[k]: v for k, v in value.items() if k != "type"})
    if kind not in _TARGETS:
        raise ValueError(f"target.type: {kind!r} is not a target type; use one of {[*_TARGETS, 'email', 'dueQueue']}")
    if not value.get("arn"):
        raise ValueError(f"target.arn: a {kind} target needs the ARN of the {kind}")
    cls, field_name = _TARGETS[kind]
    target: Target = cls(**{field_name: value["arn"]})
    return target


def args_from_config(config: ConfigSource) -> ScheduledTableArgs:
    """Read every option that is set; what is not set keeps the component's default."""
    values: dict[str, Any] = {"mode": config.get("mode") or "eventbridge"}
    for name, default in describe_defaults().items():
        key = camel(name)
        if name == "target":
            values[name] = target_from_config(config.get_object(key))
        elif name == "sort_key":
            raw = config.get(key)
            if raw is not None:
                values[name] = None if raw in ("", "none", "None") else raw
        elif isinstance(default, bool):
            _set(values, name, config.get_bool(key))
        elif isinstance(default, int) or name in ("read_capacity", "write_capacity"):
            _set(values, name, config.get_int(key))
        elif isinstance(default, dict):
            _set(values, name, config.get_object(key))
        else:
            _set(values, name, config.get(key))
    return ScheduledTableArgs(**values)


def _set(values: dict[str, Any], name: str, value: Any) -> None:
    if value is not None:
        values[name] = value
