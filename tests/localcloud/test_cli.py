"""The local cloud's command line (`python -m localcloud`, `scheduled-table local`): one name for the endpoint,
the AWS CLI's `--endpoint-url`, on every subcommand that takes one; help for every option; the program's folder
checked before anything starts."""

from __future__ import annotations

import argparse
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.cli.command import main as operator_main
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


# -- issue 39: first-contact mistakes answered with one line naming the fix, not a traceback


@pytest.fixture
def failed_deploy() -> Iterator[None]:
    """Collect the futures a failed deploy leaves now, not inside a later `ast.parse` (see tests/components/conftest.py
    `_collect_failed_deploys`: CPython 3.11 can then end the session in an INTERNALERROR)."""
    yield
    gc.collect()


def users_project(folder: Path, program: str) -> Path:
    (folder / "Pulumi.yaml").write_text("name: shop\nruntime: python\n")
    (folder / "__main__.py").write_text("from scheduled_table import *\n" + program)
    return folder


@pytest.mark.usefixtures("failed_deploy")
def test_two_tables_with_one_name_are_refused_as_pulumis_engine_refuses_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = (
        "ScheduledTable('reminders', ScheduledTableArgs(mode='eventbridge'))\n"
        "ScheduledTable('reminders', ScheduledTableArgs(mode='eventbridge'))\n"
    )
    assert main(["preview"], prog="scheduled-table local", default_program=users_project(tmp_path, program)) == 2
    err = capsys.readouterr().err
    # The program, not a stack file it does not have: the engine finds the duplicate after the program ran, so no
    # line of it is on the stack
    assert err.splitlines() == [
        f"error: {tmp_path / '__main__.py'}: Duplicate resource URN "
        "'urn:pulumi:local::shop::scheduled-table:index:ScheduledTable::reminders'; try giving it a unique name (the "
        "name 'reminders' is given to two scheduled-table:index:ScheduledTable resources)"
    ]


@pytest.mark.usefixtures("failed_deploy")
def test_a_check_made_when_an_arn_resolves_is_one_line_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = "QueueTarget('arn:aws:sqs:us-east-1:123456789012:q')"
    program = f"ScheduledTable('jobs', ScheduledTableArgs(mode='ttl', target={target}))\n"
    assert main(["preview"], prog="scheduled-table local", default_program=users_project(tmp_path, program)) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert "QueueTarget.queue_arn: 'arn:aws:sqs:us-east-1:123456789012:q' is in us-east-1" in line


@pytest.mark.usefixtures("failed_deploy")
def test_an_existing_table_missing_from_a_fresh_local_cloud_names_the_option_that_makes_it(tmp_path: Path) -> None:
    import boto3
    from moto import mock_aws

    from localcloud.program import ConfigError, run_program
    from localcloud.provision import Provisioner

    program = (
        "ScheduledTable('orders', ScheduledTableArgs(mode='eventbridge', existing_table=ExistingTable('orders')))\n"
    )
    with mock_aws():
        # The local cloud's lookups (what `up` and `down` answer getTable with), against an AWS without the table.
        provisioner = Provisioner("http://127.0.0.1:4566", "eu-west-1")
        provisioner.client = lambda service: boto3.client(service, region_name="eu-west-1")
        with pytest.raises(ConfigError) as raised:
            run_program(
                "local", users_project(tmp_path, program), backend=provisioner.plan, lookups=provisioner.lookups()
            )
    assert str(raised.value) == (
        f"{tmp_path / '__main__.py'}: existing_table: table 'orders' is not in the local cloud, which starts "
        "with none of your tables; have `up` make it first: scheduled-table local up --existing-table orders:PK:SK "
        "(NAME:PK:SK with your table's partition and sort key names; NAME:PK without a sort key)"
    )


@pytest.mark.parametrize(
    "command",
    [
        "local up",
        "local down",
        "local fire --rule r",
        "local emails",
        "inspect --function f",
        "redrive poison --function f",
        "backfill --function f",
        "reconcile --function f",
    ],
)
def test_an_endpoint_without_its_scheme_is_a_usage_error_naming_the_fix(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both command lines, the local cloud's (`scheduled-table local`) and the operator's."""
    with pytest.raises(SystemExit) as stopped:
        operator_main([*command.split(), "--endpoint-url", "127.0.0.1:4566"])
    assert stopped.value.code == 2
    assert (
        "argument --endpoint-url: '127.0.0.1:4566' is not a URL; write it with its scheme, e.g. http://127.0.0.1:4566"
        in capsys.readouterr().err
    )


# -- a newcomer's first hour: the printed item is delivered, the printed commands run, errors point at the mistake


def test_every_subcommand_has_a_description_and_a_one_line_help() -> None:
    """Failed before: `scheduled-table local up --help` (and every other) had no description."""
    from localcloud.__main__ import SUBCOMMANDS

    listed = " ".join(parser().format_help().split())
    for name, command in subcommands().items():
        summary, description = SUBCOMMANDS[name]
        assert f"{name} {summary}" in listed, name
        assert command.description == description and len(description) > len(summary), name


EMAIL_PROGRAM = """\
import pulumi
from scheduled_table import EmailTarget, ScheduledTable, ScheduledTableArgs

target = EmailTarget("Team <team@example.org>", recipient_attribute="to", subject="Hi {name}", body="{title} at {when}")
ScheduledTable("notes", ScheduledTableArgs(mode="eventbridge", time_attribute="sendAt", target=target))
"""


def test_the_printed_item_carries_every_attribute_the_email_templates_and_recipient_use(tmp_path: Path) -> None:
    """Failed before: the item had the recipient and the time only, so the handler parked it ("template needs
    attribute(s) name that the item lacks") and nothing arrived. The templates are read from the deployed function's
    configuration, as the handler reads them."""
    from localcloud.deploy import Deployment
    from localcloud.guide import program_instructions
    from localcloud.program import run_program
    from tests.localcloud.test_stay import item_of, parse_printed

    (tmp_path / "Pulumi.yaml").write_text("name: shop\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(EMAIL_PROGRAM)
    mocks = run_program("local", tmp_path)
    deployment = Deployment("local", "http://127.0.0.1:1", "eu-west-1", mocks.registrations(), mocks.stack_outputs)
    printed = parse_printed(program_instructions(deployment, "/venv/bin/scheduled-table local", []).splitlines())
    [put] = [c for c in printed.commands if "put-item" in c]
    item = item_of(put)
    assert {name for name in item if name not in ("PK", "SK")} == {"to", "name", "title", "when", "sendAt"}
    assert item["to"] == {"S": "you@example.org"}  # at the sender's domain, which `up --stay` verifies
    [emails] = [c for c in printed.commands if " emails " in c]
    assert emails.startswith("/venv/bin/scheduled-table local emails --endpoint-url ")


def test_printed_commands_name_the_running_executable_by_its_path(tmp_path: Path) -> None:
    """Failed before: they began `scheduled-table local`, which a shell without the venv activated does not find."""
    from scheduled_table.cli.local import invocation  # as the installed command imports it

    script = tmp_path / "my venv" / "bin" / "scheduled-table"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    assert invocation(str(script)) == f"'{script}' local"
    # Run as `python -m scheduled_table`: the interpreter, which finds the package wherever the shell is
    assert invocation("/x/scheduled_table/__main__.py", "/opt/venv/bin/python") == (
        "/opt/venv/bin/python -m scheduled_table local"
    )


@pytest.fixture
def no_aws_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")


@pytest.mark.usefixtures("no_aws_configuration")
def test_fire_takes_its_region_as_every_command_does(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Failed before: `--region` defaulted to eu-west-1 whatever the AWS configuration said."""
    from localcloud.__main__ import configured_region

    fire = ["fire", "--rule", "jobs-tick", "--endpoint-url", "http://127.0.0.1:9"]
    # WHEN nothing names a region THEN one line says how to give one, before any call is made
    assert main(fire, prog="scheduled-table local") == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: no AWS region configured; pass --region (the stack's region"), line
    # WHEN AWS_PROFILE names a profile that is not there THEN one line names it and the fix
    monkeypatch.setenv("AWS_PROFILE", "nosuch")
    assert main(fire, prog="scheduled-table local") == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: AWS profile 'nosuch' (from AWS_PROFILE) is not in /dev/null"), line
    monkeypatch.delenv("AWS_PROFILE")
    # WHEN the AWS configuration names one THEN that is the region, in the AWS CLI's order; --region still wins
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    assert configured_region(parser().parse_args(fire).region) == "us-east-2"
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    assert configured_region(parser().parse_args(fire).region) == "us-west-2"
    assert configured_region(parser().parse_args([*fire, "--region", "ap-south-1"]).region) == "ap-south-1"
    profile = tmp_path / "config"
    profile.write_text("[profile shop]\nregion = ca-central-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(profile))
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    options = parser().parse_args([*fire, "--profile", "shop"])
    assert configured_region(options.region, options.profile) == "ca-central-1"


PROGRAM_MISTAKES = {
    "misspelled keyword": (
        "ScheduledTable('t', ScheduledTableArgs(mode='ttl', time_atribute='remindAt'))\n",
        "__main__.py:3: ScheduledTableArgs: time_atribute: unknown keyword; did you mean time_attribute?",
    ),
    "None as a template": (
        "target = EmailTarget('r@example.com', subject=None)\n",
        "__main__.py:3: EmailTarget.subject: None is not a template; pass text, e.g. 'Reminder: {title}', or leave it "
        "out for the default ('Reminder')",
    ),
    "a value out of range": (
        "ScheduledTable('t', ScheduledTableArgs(mode='polling', shards=0))\n",
        "__main__.py:3: shards: 0 is out of range; use a whole number from 1 to 100 (one index partition each; 8 by "
        "default)",
    ),
    "in a module of the program's own": (
        "import shop_helpers\n\nshop_helpers.build()\n",
        "shop_helpers.py:5: ScheduledTableArgs: batch: unknown keyword; did you mean batch_size?",
    ),
}


@pytest.mark.usefixtures("failed_deploy")
@pytest.mark.parametrize("mistake", PROGRAM_MISTAKES)
def test_a_mistake_in_the_program_is_one_line_naming_its_file_and_line_and_the_fix(
    mistake: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Failed before: every error was put on `Pulumi.local.yaml` (which these projects do not have), and a
    misspelled keyword or a None template came out as a 40-line traceback."""
    program, expected = PROGRAM_MISTAKES[mistake]
    (tmp_path / "shop_helpers.py").write_text(
        "from scheduled_table import ScheduledTable, ScheduledTableArgs\n\n\ndef build() -> None:\n"
        "    ScheduledTable('t', ScheduledTableArgs(mode='ttl', batch=10))\n"
    )
    project = users_project(tmp_path, "import pulumi\n" + program)
    # (`up` meets the mistake as it runs the program, before the program's first call to the cloud)
    for command in (["preview"], ["up", "--endpoint-url", "http://127.0.0.1:9"]):
        assert main(command, prog="scheduled-table local", default_program=project) == 2
        assert capsys.readouterr().err.splitlines() == [f"error: {tmp_path}/{expected}"]


@pytest.mark.usefixtures("failed_deploy")
def test_a_mistake_in_the_stack_file_still_names_the_stack_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: shop\nruntime: python\n")
    (tmp_path / "__main__.py").write_text(STACK_FILE_PROGRAM)
    (tmp_path / "Pulumi.local.yaml").write_text("config:\n  shop:tables:\n    - name: orders\n      mode: sometimes\n")
    assert main(["preview"], prog="scheduled-table local", default_program=tmp_path) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: {tmp_path / 'Pulumi.local.yaml'}: "), line
    assert "'sometimes' is not a mode" in line, line


def test_the_try_it_header_says_how_long_to_wait_and_warns_when_the_aws_cli_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A newcomer's first receive comes back empty, and a machine may have no AWS CLI: both said before the
    commands, not discovered by running them."""
    from localcloud import try_it

    monkeypatch.setattr(try_it.shutil, "which", lambda name: None)
    without = "\n".join(try_it.try_it_header("http://127.0.0.1:4566", "eu-west-1"))
    assert "need the AWS CLI, which is not on PATH" in without
    assert "run it again" in without and "scheduled-table inspect --table TABLE" in without
    monkeypatch.setattr(try_it.shutil, "which", lambda name: "/usr/bin/aws")
    assert "not on PATH" not in "\n".join(try_it.try_it_header("http://127.0.0.1:4566", "eu-west-1"))


def test_a_missing_project_file_says_what_to_write(tmp_path: Path) -> None:
    from localcloud.program import ConfigError, stack_config

    with pytest.raises(ConfigError, match=r"name: my-app.*runtime: python.*--program DIR"):
        stack_config("local", tmp_path)
