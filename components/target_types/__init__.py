"""The target registry: every kind of target the component can deliver to, one module each in this package (the
user's class: its options and their checks, its stack and provider name, its docs), beside its kind's declaration
in the handlers' runtime (handlers/st_core/target_types/: its ARN's shape, the actions each caller needs, the
request the functions send and Scheduler's target for it). The policies, checks, handler configuration, stack
files, provider schema and configuration reference all enumerate kinds from here; adding a kind is a module here
and one there (tests/components/test_target_registry.py shows it with a throwaway kind)."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..target_base import TargetBase

_REGISTERED: dict[str, type[TargetBase]] = {}


@cache
def _builtin() -> tuple[type[TargetBase], ...]:
    """The classes this package's modules define (each module defines one class deriving from TargetBase)."""
    from ..target_base import TargetBase

    found: list[type[TargetBase]] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [
            value
            for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, TargetBase) and value.__module__ == module.__name__
        ]
    return tuple(sorted(found, key=lambda cls: (cls.listed, cls.__name__)))


def classes() -> tuple[type[TargetBase], ...]:
    """Every target class: this package's, then any registered (`register`)."""
    return _builtin() + tuple(c for c in _REGISTERED.values() if c not in _builtin())


def by_stack_type() -> dict[str, type[TargetBase]]:
    """Target classes by their name in a stack file and the provider (`queue`, `function`, ...)."""
    return {cls.stack_type: cls for cls in classes()}


def register(cls: type[TargetBase]) -> None:
    """Add a target class defined outside this package (its kind's handler declaration is registered with the
    handlers' runtime: `st_core.target_types.register`)."""
    _REGISTERED[cls.kind] = cls


def unregister(kind: str) -> None:
    _REGISTERED.pop(kind, None)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def option_doc() -> str:
    """The `target` option's description (args.OPTION_DOCS), naming every class, stack type and ARN target's
    option."""
    names = [f"`{cls.__name__}`" for cls in classes()]
    options: list[str] = []
    for cls in classes():
        if cls.arn_field is not None:
            options += [f.name for f in _fields(cls) if f.name != cls.arn_field and f.name not in options]
    return (
        f"what receives the due event: {', '.join(names[:-1])} or {names[-1]} (their options below); `None`: a due "
        f"queue the component owns (1 MiB messages); stack: `{{type: {'|'.join(by_stack_type())}, arn: ...}}` plus "
        f"any target option in camelCase ({', '.join(f'`{_camel(o)}`' for o in options)})"
    )


def arn_doc() -> str:
    """The provider's and the reference's description of a target's `arn`, naming what each kind's ARN is of."""
    from ..target_base import declaration

    nouns = [declaration(cls.kind).NOUN for cls in classes() if cls.arn_field is not None]
    return f"the ARN of the {', '.join(nouns[:-1])} or {nouns[-1]} (its `arn` output)"


def _fields(cls: type) -> tuple[dataclasses.Field[object], ...]:
    return dataclasses.fields(cls)
