"""The checks every rule of the options is written with (args.py's and each mode's, components/modes/): a failure
names the field and the fix. A leaf: it reads the options' defaults from the instance checked, so the rules of a
mode need not import the options' class."""

from __future__ import annotations

import dataclasses
from typing import Any


def fail(field_name: str, problem: str, fix: str) -> None:
    raise ValueError(f"{field_name}: {problem}; {fix}")


def between(args: object, name: str, low: int, high: int, why: str = "") -> None:
    """A whole number within [low, high], not a bool (which Python counts as one)."""
    value = getattr(args, name)
    if isinstance(value, bool) or not isinstance(value, int):
        fail(name, f"expected a whole number, got {value!r}", f"use a whole number from {low} to {high}{why}")
    if not low <= value <= high:
        fail(name, f"{value!r} is out of range", f"use a whole number from {low} to {high}{why}")


_DEFAULTS: dict[type, dict[str, Any]] = {}


def defaults(cls: type) -> dict[str, Any]:
    """Every field of the options' class with its default (`mode`, which has none, left out); read once a class."""
    if cls in _DEFAULTS:
        return _DEFAULTS[cls]
    result: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            continue
        factory: Any = f.default_factory
        result[f.name] = factory() if f.default is dataclasses.MISSING else f.default
    _DEFAULTS[cls] = result
    return result


def is_set(args: object, name: str) -> bool:
    """Whether option `name` differs from its default (what "not set" looks like)."""
    return bool(getattr(args, name) != defaults(type(args))[name])
