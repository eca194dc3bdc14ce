"""The mode registry: every mode the component can run, one module each in this package (its rules, the roles of
its functions, its part of the handler configuration, its stream filters, what it needs of a table and its build;
components/modes/base.py says what a mode answers). The options, their checks, the handler configuration, the
builders, the component and the configuration reference all ask the registry instead of naming a mode; adding a
mode is a module here and its handler (tests/components/test_mode_registry.py shows it with a throwaway mode)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ..args import ScheduledTableArgs
    from .base import ModeBase, Operated

_REGISTERED: dict[str, ModeBase] = {}


@cache
def _builtin() -> tuple[ModeBase, ...]:
    """One instance of the mode class each module of this package defines (deriving from ModeBase)."""
    from .base import ModeBase

    found: list[ModeBase] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [
            value()
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, ModeBase)
            and value is not ModeBase
            and value.__module__ == module.__name__
        ]
    return tuple(sorted(found, key=lambda mode: (mode.listed, mode.name)))


def every() -> tuple[ModeBase, ...]:
    """Every mode: this package's, then any registered (`register`)."""
    return tuple(_by_name().values())


@cache
def _by_name() -> dict[str, ModeBase]:
    """Every mode by name, read once until `register` or `unregister` changes them (the options ask per rule)."""
    found = {mode.name: mode for mode in _builtin()}
    return found | {name: mode for name, mode in _REGISTERED.items() if name not in found}


def names() -> tuple[str, ...]:
    return tuple(_by_name())


def by_name(name: str) -> ModeBase:
    """The mode called `name`; KeyError if there is none."""
    return _by_name()[name]


def of(args: ScheduledTableArgs) -> ModeBase:
    """The mode of validated options (`ScheduledTableArgs.mode`)."""
    return by_name(str(args.mode))


def of_config(config: Mapping[str, Any]) -> ModeBase:
    """The mode of a deployed stack's handler configuration; a mode not registered here (or none): one that knows
    only what every mode has."""
    from .base import ModeBase

    return _by_name().get(str(config.get("mode", ""))) or ModeBase()


def operated(config: Mapping[str, Any]) -> Operated:
    """What the operator's commands do on a deployed stack, from its handler configuration."""
    return of_config(config).operated(config)


def register(mode: ModeBase) -> None:
    """Add a mode defined outside this package."""
    _REGISTERED[mode.name] = mode
    _by_name.cache_clear()


def unregister(name: str) -> None:
    _REGISTERED.pop(name, None)
    _by_name.cache_clear()


def option_doc() -> str:
    """The `mode` option's description, naming every mode."""
    quoted = [f"`{name}`" for name in names()]
    return f"{', '.join(quoted[:-1])} or {quoted[-1]}"
