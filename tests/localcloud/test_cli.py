"""The local cloud's command line (`python -m localcloud`, `scheduled-table local`): one name for the endpoint,
the AWS CLI's `--endpoint-url`, on every subcommand that takes one; help for every option; the program's folder
checked before anything starts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from localcloud.__main__ import main, parser


def subcommands() -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


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


STACK_FILE_PROGRAM = """\
import pulumi
from scheduled_table import ScheduledTable
from scheduled_table.stack_config import StackConfig, tables_from_config

for name, args in tables_from_config(StackConfig()):
    pulumi.export(name, ScheduledTable(name, args).outputs)
"""


def test_the_stack_file_route_reads_the_users_own_project_namespace(tmp_path: Path) -> None:
    """A user's program that builds its tables from its stack file (`tables:` under the project's own namespace,
    `shop:` here, as `pulumi config set` writes it) gets them, and the local cloud reads the same entries."""
    from localcloud.program import run_program, stack_tables

    (tmp_path / "Pulumi.yaml").write_text("name: shop\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(STACK_FILE_PROGRAM)
    (tmp_path / "Pulumi.local.yaml").write_text(
        "config:\n  aws:region: eu-west-1\n  shop:deletionProtection: 'false'\n  shop:tables:\n"
        "    - name: orders\n      mode: ttl\n    - name: jobs\n      mode: polling\n"
    )
    assert [(name, str(args.mode)) for name, args in stack_tables("local", tmp_path)] == [
        ("orders", "ttl"),
        ("jobs", "polling"),
    ]
    mocks = run_program("local", tmp_path)
    tables = [r for r in mocks.registrations() if r.type == "aws:dynamodb/table:Table" and r.name.endswith("-table")]
    assert sorted(r.name for r in tables) == ["jobs-table", "orders-table"]
    assert not any(r.inputs["deletionProtectionEnabled"] for r in tables)


def test_a_users_program_imports_its_own_modules_from_its_folder(tmp_path: Path) -> None:
    """As `pulumi up` runs it (its folder first on the import path): a program's helper module beside it imports,
    and the folder leaves the path afterwards. Failed before: `scheduled-table local demo` could not import this
    repo's own `components`."""
    import sys

    from localcloud.program import run_program

    (tmp_path / "Pulumi.yaml").write_text("name: shop\nruntime: python\n")
    (tmp_path / "shop_tables.py").write_text(
        "from scheduled_table import ScheduledTable, ScheduledTableArgs\n\n"
        "def build() -> ScheduledTable:\n    return ScheduledTable('orders', ScheduledTableArgs(mode='ttl'))\n"
    )
    (tmp_path / "__main__.py").write_text("import shop_tables\n\nshop_tables.build()\n")
    mocks = run_program("local", tmp_path)
    assert "orders-table" in [r.name for r in mocks.registrations()]
    assert str(tmp_path) not in sys.path
