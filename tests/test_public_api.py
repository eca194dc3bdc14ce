"""The public API is what `__all__` says, and nothing slips in or out unnoticed."""

from __future__ import annotations

import components


def test_public_api_is_exactly_this() -> None:
    assert sorted(components.__all__) == [
        "DueEvent",
        "EmailTarget",
        "EventBusTarget",
        "ExistingQueue",
        "ExistingTable",
        "FunctionOverrides",
        "FunctionTarget",
        "Mode",
        "QueueTarget",
        "ScheduledTable",
        "ScheduledTableArgs",
        "StateMachineTarget",
        "Target",
        "TopicTarget",
        "VpcConfig",
        "due_event_schema",
        "pending_attributes",
    ]
    assert all(hasattr(components, name) for name in components.__all__)


def test_the_version_is_the_installed_distributions_and_the_command_prints_it(capsys) -> None:
    """`scheduled_table.__version__` and `scheduled-table --version` both come from pyproject.toml's version."""
    import tomllib
    from pathlib import Path

    import pytest

    from components.cli.command import main

    declared = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["version"]
    assert components.__version__ == declared
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"scheduled-table {declared}"
