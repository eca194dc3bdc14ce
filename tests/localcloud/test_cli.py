"""The local cloud's command line (`python -m localcloud`, `scheduled-table local`): one name for the endpoint,
the AWS CLI's `--endpoint-url`, on every subcommand that takes one; help for every option; the program's folder
checked before anything starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from localcloud.__main__ import main, parser


def subcommands() -> dict[str, Any]:
    return dict(parser()._subparsers._group_actions[0].choices)


def test_every_option_of_every_subcommand_has_help() -> None:
    for name, command in subcommands().items():
        for action in command._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"


@pytest.mark.parametrize("command", ["up", "down", "fire", "emails"])
def test_the_endpoint_is_endpoint_url_everywhere(command: str) -> None:
    options = {o for action in subcommands()[command]._actions for o in action.option_strings}
    assert "--endpoint-url" in options and "--endpoint" not in options


def test_a_folder_without_pulumi_yaml_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["preview", "--program", str(tmp_path)], prog="scheduled-table local")
    assert stopped.value.code == 2
    assert "has no Pulumi.yaml" in capsys.readouterr().err


def test_preview_of_a_users_program_without_a_stack_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A user's project may have no Pulumi.<stack>.yaml yet (as after `pulumi stack init`): no configuration."""
    (tmp_path / "Pulumi.yaml").write_text("name: shop\nruntime: python\n")
    program = (
        "import pulumi\nfrom scheduled_table import ScheduledTable, ScheduledTableArgs\n"
        "t = ScheduledTable('orders', ScheduledTableArgs(mode='ttl'))\n"
        "pulumi.export('project', pulumi.get_project())\n"
    )
    (tmp_path / "__main__.py").write_text(program)
    # As `scheduled-table local preview` run in the project's folder
    assert main(["preview"], prog="scheduled-table local", default_program=tmp_path) == 0
    out = capsys.readouterr().out
    assert "Pulumi.local.yaml absent: no configuration" in out and "orders-table" in out
