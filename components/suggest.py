"""Did-you-mean for names a user spells: a stack file's keys and the Python classes' keywords get the same hint from
the same matcher. A leaf module (it imports nothing of the component), so the option and target classes can use it
without a cycle through stack_config.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["closest", "keyword_hints", "unknown_key_hint"]

T = TypeVar("T")


def closest(text: str, names: Iterable[str]) -> str | None:
    """The valid name `text` most likely meant: a near miss (a typo), or the same name in another case."""
    valid = list(names)
    found = difflib.get_close_matches(text, valid, n=1, cutoff=0.6) or [n for n in valid if n.lower() == text.lower()]
    return found[0] if found else None


def unknown_key_hint(key: str, valid: Iterable[str]) -> str:
    """`did you mean X?` for a near miss, else the valid names."""
    names = sorted(set(valid))
    match = closest(key, names)
    return f"did you mean {match}?" if match else f"valid keys: {', '.join(names)}"


def keyword_hints(cls: type[T]) -> type[T]:
    """A dataclass whose constructor refuses an unknown keyword naming the closest one, as the stack file does
    (`ScheduledTableArgs: time_atribute: unknown keyword; did you mean time_attribute?`), instead of Python's bare
    `unexpected keyword argument`. Still a TypeError; the signature shown by help() and IDEs is unchanged."""
    valid = [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    init: Callable[..., None] = cls.__init__

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        for key in kwargs:
            if key not in valid:
                raise TypeError(f"{cls.__name__}: {key}: unknown keyword; {unknown_key_hint(key, valid)}")
        init(self, *args, **kwargs)

    setattr(cls, "__init__", checked)  # noqa: B010  (mypy refuses assigning to a method)
    return cls
