"""The mode registry: each mode declared once (its module in components/modes/), and the options, their checks, the
handler configuration, the builders, the component, the provider's schema and the generated docs enumerating modes
from there. A mode added to the registry alone (tests/support/throwaway_mode.py) is validated, configured, built
and documented with no other module of the component touched."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from components import FunctionOverrides, ScheduledTableArgs, modes, provider, reference
from components.args import OPTION_DOCS
from components.runtime_config import estimated_document
from components.types import Mode
from tests.components.conftest import Built
from tests.support.throwaway_mode import Archive


def test_the_built_in_modes_are_the_registry_s() -> None:
    # The static `Mode` enum (the public API's, the provider's SDKs') names exactly this package's modes.
    assert modes.names() == tuple(m.value for m in Mode)
    for mode in modes.every():
        assert f"`{mode.name}`" in OPTION_DOCS["mode"]
        assert mode.stream_roles <= set(mode.roles) and mode.sqs_roles <= set(mode.roles)
    # No option belongs to two modes unless both make schedules (eventbridge, precise ttl).
    owners: dict[str, list[str]] = {}
    for mode in modes.every():
        for option in mode.options:
            owners.setdefault(option, []).append(mode.name)
    shared = {o for o, names in owners.items() if len(names) > 1}
    assert shared == {"schedule_retry_attempts", "schedule_max_event_age_seconds"}


@pytest.fixture
def archive() -> Iterator[None]:
    """The throwaway mode registered with the component; removed again afterwards."""
    modes.register(Archive())
    yield
    modes.unregister("archive")


def test_an_unregistered_mode_is_refused_naming_the_registry_s() -> None:
    with pytest.raises(
        ValueError, match=r"^mode: 'archive' is not a mode; use one of 'eventbridge', 'ttl', 'polling', 'aggregate'$"
    ):
        ScheduledTableArgs(mode="archive")  # type: ignore[arg-type]


def test_a_mode_added_through_the_registry_alone_is_validated(archive: None) -> None:
    args = ScheduledTableArgs(mode="archive")  # type: ignore[arg-type]
    assert args.mode == "archive"
    # Its own rule.
    with pytest.raises(ValueError, match=r"^batch_size: 500 is too many for mode 'archive' \(one send a record\); "):
        ScheduledTableArgs(mode="archive", batch_size=500)  # type: ignore[arg-type]
    # Another mode's options, refused by name.
    with pytest.raises(
        ValueError, match=r"^shards: only applies to mode='polling' \(mode is 'archive'\); remove shards$"
    ):
        ScheduledTableArgs(mode="archive", shards=4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^mode: 'archivee' is not a mode; use one of .*'aggregate', 'archive'$"):
        ScheduledTableArgs(mode="archivee")  # type: ignore[arg-type]
    # Its function roles: overrides of its own are taken, a stream role's reservation of 0 refused, others refused.
    ScheduledTableArgs(mode="archive", function_overrides={"archiver": FunctionOverrides(memory_mb=256)})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"reserved_concurrency: 0 stops the 'archiver' function reading"):
        ScheduledTableArgs(mode="archive", function_overrides={"archiver": FunctionOverrides(reserved_concurrency=0)})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"\(mode 'archive'\) makes no function 'scheduler'; use one of 'archiver'$"):
        ScheduledTableArgs(mode="archive", function_overrides={"scheduler": FunctionOverrides(memory_mb=256)})  # type: ignore[arg-type]


def test_a_mode_added_through_the_registry_alone_is_configured(archive: None) -> None:
    args = ScheduledTableArgs(mode="archive")  # type: ignore[arg-type]
    config = json.loads(estimated_document(args))
    assert config["mode"] == "archive"
    assert set(config["archive"]) == {"ledgerTable", "leaseSeconds", "windowSeconds"}
    assert config["target"]["kind"] == "sqs"  # the component's own due queue
    # The 4 KB check covers it too.
    with pytest.raises(ValueError, match=r"^time_attribute: the function environment would be about "):
        ScheduledTableArgs(mode="archive", time_attribute="t" * 4000)  # type: ignore[arg-type]


def test_a_mode_added_through_the_registry_alone_is_built(archive: None, build: Callable[..., Built]) -> None:
    built = build(mode="archive")
    function = built.one("rem-archiver")
    assert function.inputs["handler"] == "archive.handler"
    assert (
        function.inputs["description"]
        == "scheduled-table rem (archive mode): sends each item a user deletes to the target, once"
    )
    mapping = built.one("rem-archiver-mapping")
    (pattern,) = [json.loads(f["pattern"]) for f in mapping.inputs["filterCriteria"]["filters"]]
    assert pattern == Archive().filters(ScheduledTableArgs(mode="archive"))[0]  # type: ignore[arg-type]
    config = built.handler_config()
    assert config["mode"] == "archive" and config["archive"]["ledgerTable"] == built.outputs["ledger_table_name"]
    # Its consumer sends to the target (the owned due queue) and claims in the ledger; the table is made as for any
    # mode, with no TTL and no due index (it asked for neither).
    actions = {a for s in built.statements("rem-archiver-policy") for a in s["Action"]}
    assert {"sqs:SendMessage", "dynamodb:PutItem"} <= actions
    table = built.one("rem-table").inputs
    assert "ttl" not in table and "globalSecondaryIndexes" not in table
    assert built.component.function_name is not None and "function_name" in built.outputs
    assert {"schedule_group_name", "processor_function_name", "tick_rule_name"}.isdisjoint(built.outputs)


def test_a_mode_added_through_the_registry_alone_is_documented(archive: None) -> None:
    # (OPTION_DOCS is read once, with the modes registered when the options load; the generated page reads the
    # registry as it is now.)
    assert "`archive`" in reference.page().split("| `mode` |")[1].split("\n")[0]
    assert '    Archive = "archive"' in provider.render_inputs()
