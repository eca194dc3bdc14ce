"""`offsets`: several occurrences per item in eventbridge mode, checked at construction and handed to the handler."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from components import ScheduledTableArgs
from components.stack_config import DictConfig, args_from_config
from tests.components.conftest import Built
from tests.components.test_stack_config import FakeConfig


def test_offsets_reach_the_handler_config(build: Callable[..., Built]) -> None:
    built = build(offsets=[-86400, -3600, 0], alarms=False, dashboard=False)
    assert built.handler_config()["eventbridge"]["offsets"] == [-86400, -3600, 0]
    assert "offsets" not in build(alarms=False, dashboard=False).handler_config()["eventbridge"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"offsets": []}, r"offsets: expected a non-empty list of whole seconds, got \[\]"),
        ({"offsets": [0, "1h"]}, "offsets: expected a non-empty list of whole seconds"),
        ({"offsets": [0, 0]}, r"offsets: \[0, 0\] names an offset twice"),
        ({"offsets": list(range(11))}, "offsets: 11 offsets; use at most 10"),
        ({"offsets": [-40000000]}, "offsets: .* has an offset beyond a year"),
        ({"mode": "polling", "offsets": [-60, 0]}, "offsets: only applies to mode='eventbridge'"),
    ],
)
def test_bad_offsets_are_refused_with_the_fix(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScheduledTableArgs(**{"mode": "eventbridge", **kwargs})


def test_offsets_from_a_stack_file() -> None:
    config = DictConfig({"mode": "eventbridge", "offsets": [-3600, 0]}, FakeConfig({}))
    assert args_from_config(config).offsets == [-3600, 0]
    assert json.dumps(ScheduledTableArgs(mode="eventbridge").offsets) == "[0]"


@pytest.mark.parametrize("name", ["stIds12", "stLedgerUntil"])
def test_the_totals_bookkeeping_attributes_are_reserved(name: str) -> None:
    with pytest.raises(ValueError, match=f"total_attribute: '{name}' is reserved"):
        ScheduledTableArgs(mode="aggregate", total_attribute=name)
