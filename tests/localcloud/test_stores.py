"""The local cloud's walks over ministack's stores survive a write from another thread mid-walk."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from localcloud.stores import ATTEMPTS, snapshot


class ChangedDuringWalk(dict[str, int]):
    """A dict another thread changes during the first `times` walks (what `list(d.items())` meets then)."""

    def __init__(self, times: int, **items: int) -> None:
        super().__init__(**items)
        self.times = times

    def items(self) -> Any:
        if self.times:
            self.times -= 1
            return self._changed()
        return super().items()

    def _changed(self) -> Iterator[tuple[str, int]]:
        raise RuntimeError("dictionary changed size during iteration")
        yield  # a generator: the error comes from the walk, as the real one does


def test_a_walk_that_meets_a_write_is_taken_again() -> None:
    store = ChangedDuringWalk(3, a=1, b=2)
    assert snapshot(store) == [("a", 1), ("b", 2)]


def test_a_store_changed_on_every_try_is_left_to_the_next_round() -> None:
    with pytest.raises(RuntimeError, match="changed size"):
        snapshot(ChangedDuringWalk(ATTEMPTS, a=1))
