"""The operator's command follows the AWS CLI's habits on every subcommand: `--profile` (an unknown or broken one is
one line naming it and the fix), one region rule, `--table` beside `--function`, `--endpoint-url` checked and
explained alike, complete help texts and a description for each subcommand.

GIVEN an operator's AWS configuration (files in a temporary folder, the environment cleared) WHEN a command runs
THEN the session is made from the profile and region it names, in the AWS CLI's order, and what cannot be used is
said in one line with exit status 2.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from moto import mock_aws

from components.cli import aws as operator_aws
from components.cli.aws import RedriveError, clients
from components.cli.command import main, parser
from tests.handlers.conftest import Env
from tests.redrive.conftest import Function, aws
from tests.redrive.test_inspect import consumer

# Each operator command as an operator types it, up to the stack's name.
COMMANDS = {
    "inspect": ["inspect"],
    "redrive": ["redrive", "poison"],
    "backfill": ["backfill"],
    "reconcile": ["reconcile"],
    "policy": ["policy", "inspect"],
}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    [action] = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


@pytest.fixture
def aws_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An operator's ~/.aws: a default profile in us-west-1 and `ops` in eu-west-2, each with its own keys; no AWS
    variable in the environment (the test suite's fake ones removed)."""
    for name in (
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config").write_text("[default]\nregion = us-west-1\n\n[profile ops]\nregion = eu-west-2\n")
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = AKIADEFAULT\naws_secret_access_key = d\n\n"
        "[ops]\naws_access_key_id = AKIAOPS\naws_secret_access_key = o\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    return tmp_path


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_operator_command_takes_the_stack_and_aws_options(name: str) -> None:
    command = subcommands()[name]
    options = {o: a for a in command._actions for o in a.option_strings}
    assert {"--function", "--table", "--profile", "--region", "--endpoint-url"} <= set(options), name
    # one region rule, said in the same words everywhere
    assert options["--region"].help == operator_aws.REGION_RULE


def test_the_profile_names_the_credentials_and_the_region(aws_files: Path) -> None:
    ops = clients(None, None, "ops")("sqs")
    assert ops.meta.region_name == "eu-west-2"
    assert ops._request_signer._credentials.access_key == "AKIAOPS"
    default = clients(None, None)("sqs")
    assert (default.meta.region_name, default._request_signer._credentials.access_key) == ("us-west-1", "AKIADEFAULT")


def test_the_command_line_profile_reaches_aws_with_its_region(
    aws_files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through main: the call Lambda answers is made in the profile's region (moto names it in the ARN it looked
    for)."""
    with mock_aws():
        assert main(["inspect", "--profile", "ops", "--function", "nope"]) == 2
    err = capsys.readouterr().err
    assert "function 'nope': ResourceNotFoundException" in err and ":eu-west-2:" in err, err


@pytest.mark.parametrize(
    ("given", "environment", "region"),
    [
        (["--region", "ap-south-1"], {"AWS_REGION": "sa-east-1", "AWS_DEFAULT_REGION": "ca-central-1"}, "ap-south-1"),
        ([], {"AWS_REGION": "sa-east-1", "AWS_DEFAULT_REGION": "ca-central-1"}, "sa-east-1"),
        ([], {"AWS_DEFAULT_REGION": "ca-central-1"}, "ca-central-1"),
        ([], {"AWS_PROFILE": "ops"}, "eu-west-2"),
        ([], {}, "us-west-1"),
    ],
)
def test_one_region_rule_in_the_aws_clis_order(
    given: list[str], environment: dict[str, str], region: str, aws_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--region, else AWS_REGION (which botocore alone does not read), else AWS_DEFAULT_REGION, else the profile's."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    args = parser().parse_args(["inspect", "--function", "f", *given])
    assert clients(args.endpoint_url, args.region, args.profile)("sqs").meta.region_name == region


def test_a_local_endpoint_has_the_same_region_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --endpoint-url and no credentials the local cloud's dummy ones are used, but the region is still the
    rule's: none configured is the one-line error, not a region chosen in its place."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    with pytest.raises(RedriveError, match="no AWS region configured"):
        clients("http://127.0.0.1:4566", None)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    sqs = clients("http://127.0.0.1:4566", None)("sqs")
    assert sqs.meta.region_name == "eu-west-1" and sqs._request_signer._credentials.access_key == "test"


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("how", ["AWS_PROFILE", "--profile"])
def test_an_unknown_profile_is_one_line_naming_it_and_the_fix(
    name: str, how: str, aws_files: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--profile", "prod"] if how == "--profile" else []
    if how == "AWS_PROFILE":
        monkeypatch.setenv("AWS_PROFILE", "prod")
    assert main([*COMMANDS[name], "--function", "f", *extra]) == 2
    unset = ", or unset AWS_PROFILE" if how == "AWS_PROFILE" else ""
    assert capsys.readouterr().err.splitlines() == [
        f"scheduled-table: AWS profile 'prod' (from {how}) is not in {aws_files}/config or {aws_files}/credentials "
        f"(profiles there: default, ops); pass --profile with one of them{unset}, or create it: aws configure "
        "--profile prod"
    ]


def test_a_profile_that_gives_no_credentials_is_one_line(aws_files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A profile that is there but whose source profile is not (a broken role profile) fails as the credentials
    are resolved, before any call."""
    with (aws_files / "config").open("a") as config:
        config.write("\n[profile admin]\nrole_arn = arn:aws:iam::123456789012:role/admin\nsource_profile = base\n")
    assert main(["inspect", "--profile", "admin", "--function", "f"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == (
        "scheduled-table: AWS profile 'admin' gives no credentials: The source_profile \"base\" referenced in the "
        'profile "admin" does not exist; fix it (aws configure --profile admin, or aws sso login --profile admin) '
        "or pass --profile with another"
    )


def test_no_credentials_at_all_is_one_line(aws_files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (aws_files / "credentials").write_text("")
    assert main(["inspect", "--function", "f"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("scheduled-table: no AWS credentials found; run `aws configure`"), line


# -- --table beside --function


def test_the_table_names_the_stack(env: Env) -> None:
    function = consumer(env)
    lines: list[str] = []
    assert main(["inspect", "--table", env.table], client=aws(function), emit=lines.append) == 0, lines
    assert lines[0] == f"table {env.table} (mode eventbridge), consumer {function.name}", lines
    policy: list[str] = []
    assert main(["policy", "redrive-poison", "--table", env.table], client=aws(function), emit=policy.append) == 0
    assert function.name in "".join(policy)


def test_a_table_no_consumer_reads_is_one_line_listing_the_functions(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    function = consumer(env)
    assert main(["redrive", "poison", "--table", "orders"], client=aws(function), emit=print) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("scheduled-table: table 'orders': no ScheduledTable consumer reads its stream here"), line
    assert f"the ScheduledTable functions here: {function.name} (table {env.table}, mode eventbridge)" in line


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_function_and_table_together_are_refused_in_one_line(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*COMMANDS[name], "--function", "f", "--table", "t"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"scheduled-table {name}: give --function or --table, not both: --function 'f' names the consumer function, "
        "--table 't' the table whose stream it reads"
    ]


def test_one_of_function_and_table_is_required_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "scheduled-table inspect: name the stack: --function (its consumer function, the function_name output) or "
        "--table (its table)"
    ]


# -- help texts


# A help text that ends on one of these was cut off mid-sentence.
DANGLING = {"a", "an", "the", "of", "to", "for", "by", "with", "e.g.", "or", "and", "its"}


def test_every_subcommand_has_a_description_and_no_help_is_cut_off() -> None:
    for name, command in subcommands().items():
        assert command.description, f"{name} has no description"
        for action in command._actions:
            words = str(action.help or "").rstrip(").").split()
            assert words, f"{name} {action.option_strings or action.dest} has no help"
            last = words[-1].lower()
            assert last not in DANGLING and not last.endswith("'s"), f"{name} {action.option_strings}: {action.help!r}"


def test_the_endpoint_option_is_one_text_and_one_check_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    helps = {
        name: next(a for a in command._actions if "--endpoint-url" in a.option_strings).help
        for name, command in subcommands().items()
        if name in COMMANDS
    }
    assert len(set(helps.values())) == 1, helps
    for name in COMMANDS:  # a URL without its scheme is a usage error naming the fix, in policy too
        with pytest.raises(SystemExit):
            main([*COMMANDS[name], "--function", "f", "--endpoint-url", "127.0.0.1:4566"])
        assert "write it with its scheme, e.g. http://127.0.0.1:4566" in capsys.readouterr().err


def test_a_stand_in_function_is_still_found_by_its_name(env: Env) -> None:
    """--function keeps taking the consumer function's name."""
    function: Function = consumer(env)
    lines: list[str] = []
    assert main(["inspect", "--function", function.name], client=aws(function), emit=lines.append) == 0, lines
