"""Build a ScheduledTable under recording Pulumi mocks and hand back what it registered."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from components import ScheduledTable, ScheduledTableArgs
from components.testing import Registration, ScheduledTableMocks, run_with_mocks

COMPONENT_TYPE = "scheduled-table:index:ScheduledTable"
OUTPUT_NAMES = (
    "table_name",
    "table_arn",
    "stream_arn",
    "function_name",
    "stream_dlq_url",
    "poison_queue_url",
    "schedule_group_name",
    "due_queue_url",
    "due_queue_arn",
    "target_dlq_url",
    "ledger_table_name",
    "processor_function_name",
    "tick_rule_name",
    "alarm_topic_arn",
    "backfill_function_name",
)


class NoConfig:
    """A stack configuration that sets nothing (the fallback of a `tables` entry read with DictConfig)."""

    def get(self, key: str) -> None:
        return None

    def get_bool(self, key: str) -> None:
        return None

    def get_int(self, key: str) -> None:
        return None

    def get_object(self, key: str) -> None:
        return None


class Built:
    def __init__(self, mocks: ScheduledTableMocks, component: ScheduledTable, outputs: dict[str, Any]) -> None:
        self.mocks = mocks
        self.component = component
        self.outputs = outputs

    def of_type(self, suffix: str) -> list[Registration]:
        return [r for r in self.mocks.by_name.values() if r.type.endswith(suffix)]

    def one(self, name: str) -> Registration:
        return self.mocks.by_name[name]

    def policy(self, name: str) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.one(name).inputs["policy"])
        return document

    def statements(self, name: str) -> list[dict[str, Any]]:
        """The statements of the role policy `name`."""
        return list(self.policy(name)["Statement"])

    def handler_config(self) -> dict[str, Any]:
        function = next(f for f in self.of_type(":Function") if "processor" not in f.name)
        config: dict[str, Any] = json.loads(function.inputs["environment"]["variables"]["SCHEDULED_TABLE_CONFIG"])
        return config


@pytest.fixture(autouse=True)
def _collect_failed_deploys() -> Iterator[None]:
    """Collect what a test left behind now. A deploy that fails (a check in an apply) leaves Pulumi futures whose
    exception nobody retrieved; if the garbage collector finalizes them later, inside an `ast.parse` (pytest
    importing a module at the end of the session), CPython 3.11 raises "SystemError: AST constructor recursion depth
    mismatch" and the run ends in an INTERNALERROR. Then everything still alive is frozen out of later collections: a
    full collection walks every tracked object, and a worker that has run a few hundred tests holds millions
    (pulumi_aws's modules, moto's, hypothesis's), so without the freeze each test's collection took seconds."""
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture
def build() -> Callable[..., Built]:
    def _build(name: str = "rem", invokes: dict[str, Any] | None = None, **kwargs: Any) -> Built:
        kwargs.setdefault("mode", "eventbridge")
        holder: dict[str, ScheduledTable] = {}

        def program() -> dict[str, Any]:
            component = holder["component"] = ScheduledTable(name, ScheduledTableArgs(**kwargs))
            return {n: getattr(component, n) for n in OUTPUT_NAMES if getattr(component, n) is not None}

        # invokes={}: the component must not need lookups (but an existing table given by name is looked up).
        stack = run_with_mocks(program, project="scheduled-table", stack="test", invokes=invokes or {})
        return Built(stack.mocks, holder["component"], stack.result)

    return _build
