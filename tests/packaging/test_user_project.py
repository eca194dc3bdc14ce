"""The user's project in examples/user_project, run as a user would: from a folder outside this repo, against the
installed wheel.

GIVEN a venv with the wheel installed WHEN the example's own unit tests run (they use scheduled_table.testing) THEN
they pass; WHEN mypy checks the example strictly THEN it is clean and misuse of the API is caught, so the types
come from the wheel (py.typed), not from Any. And GIVEN the newest boto3 on the package index installed beside the
wheel by pip's resolver THEN the same tests still build their stacks.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localcloud.provision import clients
from localcloud.scenarios import queue_depth
from tests.e2e.conftest import snapshot
from tests.localcloud.test_stay import (
    EFFECT_POLL_SECONDS,
    EFFECT_SECONDS,
    Localcloud,
    echoed,
    option,
    sh,
    until,
)

from .conftest import EXAMPLE, REPO, fresh_venv, pip_into, python_of

# A user's mistakes, each on its own line, and the mypy error code each must get.
MISUSE = """\
from scheduled_table import ScheduledTable, ScheduledTableArgs
from scheduled_table.testing import run_with_mocks

args = ScheduledTableArgs(mode="eventbridge", batch_size="100")
name: int = ScheduledTable("t", ScheduledTableArgs(mode="ttl")).table_name
stack = run_with_mocks(42)
region: int = stack.mocks.region
"""
MISUSE_ERRORS = {(4, "arg-type"), (5, "assignment"), (6, "arg-type"), (7, "assignment")}

# mypy reading all of pulumi_aws (every AWS service, each a large module) takes about a minute and 240 MB of cache
# on a cold run; what is checked here is scheduled_table's annotations, so the test skips pulumi_aws's.
SKIP_PULUMI_AWS = """
[[tool.mypy.overrides]]
module = ["pulumi_aws", "pulumi_aws.*"]
follow_imports = "skip"
"""


def copy_example(destination: Path) -> Path:
    project = destination / "user_project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".mypy_cache"))
    return project


def example_test_count() -> int:
    tree = ast.parse((EXAMPLE / "test_stack.py").read_text())
    return sum(isinstance(node, ast.FunctionDef) and node.name.startswith("test_") for node in tree.body)


def run_example_tests(env_dir: Path, where: Path) -> None:
    project = copy_example(where)
    result = subprocess.run(
        [str(python_of(env_dir)), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(where)},
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert f"{example_test_count()} passed" in output, output[-2000:]


def test_example_project_passes_its_own_tests_outside_the_repo(installed: Path, tmp_path: Path) -> None:
    run_example_tests(installed, tmp_path)


def test_example_project_type_checks_strictly_against_the_wheel(installed: Path, tmp_path: Path) -> None:
    project = copy_example(tmp_path)
    with (project / "pyproject.toml").open("a") as config:
        config.write(SKIP_PULUMI_AWS)
    (project / "misuse.py").write_text(MISUSE)
    mypy = [sys.executable, "-m", "mypy", "--python-executable", str(python_of(installed)), "--cache-dir", "/dev/null"]
    result = subprocess.run(
        [*mypy, "__main__.py", "test_stack.py", "misuse.py"],
        cwd=project,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        check=False,
    )
    errors = re.findall(r"^(\S+?):(\d+): error: .*\[([a-z-]+)\]$", result.stdout, re.MULTILINE)
    assert [e for e in errors if e[0] != "misuse.py"] == [], result.stdout
    assert {(int(line), code) for _, line, code in errors} == MISUSE_ERRORS, result.stdout + result.stderr


def test_example_requirements_name_the_package_as_published_and_need_nothing_else(installed: Path) -> None:
    """The requirements a user copies name the package as PyPI will (no URL, tag or placeholder); `pulumi up` needs
    nothing else; the local cloud comes with the `local` extra, for tests only."""
    version = subprocess.run(
        [str(installed / "bin" / "scheduled-table"), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert version[0] == "scheduled-table" and re.fullmatch(r"\d+\.\d+\.\d+", version[1]), version

    def requirements(name: str) -> list[str]:
        return [x for x in (EXAMPLE / name).read_text().splitlines() if x and not x.startswith("#")]

    assert requirements("requirements.txt") == ["scheduled-table"]
    assert requirements("requirements-dev.txt") == ["-r requirements.txt", "scheduled-table[local]", "pytest>=8"]
    readme = (EXAMPLE / "README.md").read_text()
    for step in ("pip install -r requirements-dev.txt", "pytest", "scheduled-table local up --stay", "pulumi up"):
        assert step in readme, step
    assert "pulumi config set protect false" in readme and "pulumi destroy" in readme


def test_local_up_deploys_the_example_from_its_own_folder_with_the_installed_wheel(
    installed: Path, tmp_path: Path
) -> None:
    """`scheduled-table local up`, run in a copy of the example outside this repo with only the wheel installed
    (the `local` extra's ministack, PyYAML and boto3 borrowed from the dev venv, as pip would install them): the
    user's program, its own `jobs` queue included, is deployed into a local AWS started for the command."""
    project = copy_example(tmp_path)
    result = subprocess.run(
        [str(installed / "bin" / "scheduled-table"), "local", "up"],
        cwd=project,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        check=False,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert f"deployed stack 'local' of {project}" in output, output[-2000:]
    assert '"jobs_queue_url": "http://127.0.0.1:' in output and '"work_table": "work-table"' in output


def test_local_without_its_extra_says_how_to_install_it(installed: Path, tmp_path: Path) -> None:
    """Without what the extra brings (here botocore, which pulumi does not need), `scheduled-table local` names the
    extra instead of a traceback."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "botocore.py").write_text("raise ModuleNotFoundError('no botocore', name='botocore')\n")
    result = subprocess.run(
        [str(installed / "bin" / "scheduled-table"), "local", "preview"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(blocker)},
        check=False,
    )
    assert result.returncode != 0
    assert 'pip install "scheduled-table[local]"' in result.stderr and "Traceback" not in result.stderr


def newest_on_index(package: str) -> str:
    """The newest release on the package index, as pip sees it (the index's answer, not a remembered one)."""
    command = [sys.executable, "-m", "pip", "index", "versions", package, "--timeout", "60"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    found = re.match(rf"{package} \(([^)]+)\)", result.stdout)
    if result.returncode != 0 or found is None:
        pytest.fail(
            f"cannot tell the newest {package}: the package index did not answer `{' '.join(command[2:])}`. This "
            f"test needs the index (PyPI) reachable; pip said:\n{(result.stdout + result.stderr)[-2000:]}"
        )
    return found.group(1)


def test_wheel_installs_beside_the_newest_boto3_and_still_builds_stacks(wheel: Path, tmp_path: Path) -> None:
    """Needs the package index, and fails (does not skip) without it. pip's own cache keeps the downloads, so a rerun
    only asks the index which boto3 is newest."""
    newest = newest_on_index("boto3")
    env_dir = fresh_venv(tmp_path / "venv", wheel)
    # pip resolves the wheel's requirements together with boto3==newest: a boto3 ceiling in them fails here.
    # Everything else the wheel needs is already there (borrowed), so only boto3 and what it needs are fetched.
    result = pip_into(env_dir, "--only-binary", ":all:", "--timeout", "60", str(wheel), f"boto3=={newest}")
    assert result.returncode == 0, f"pip could not install the wheel beside boto3 {newest}:\n{result.stderr[-3000:]}"
    where = subprocess.run(
        [str(python_of(env_dir)), "-c", "import boto3; print(boto3.__version__, boto3.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where[0] == newest and Path(where[1]).is_relative_to(env_dir), where
    run_example_tests(env_dir, tmp_path)


def newcomers_shell(tmp_path: Path) -> dict[str, str]:
    """A shell as a newcomer's: no venv activated (PATH has neither it nor this repo's tools), no AWS settings or
    files, only the AWS CLI on PATH (the one installed here, else the botocore stand-in, tests/localcloud/aws_cli)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    real = shutil.which("aws")
    stand_in = f'PYTHONPATH="{REPO}" exec "{sys.executable}" -m tests.localcloud.aws_cli "$@"'
    run = f'exec "{real}" "$@"' if real else stand_in
    (tools / "aws").write_text(f"#!/bin/sh\n{run}\n")
    (tools / "aws").chmod(0o755)
    return {
        "PATH": f"{tools}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }


def test_a_newcomer_runs_every_printed_command_as_printed_and_the_due_events_arrive(
    installed: Path, tmp_path: Path
) -> None:
    """The first hour: a copy of examples/user_project, `scheduled-table local up --stay` run in it with the installed
    wheel, and every command it prints run verbatim, in bash, in the project's folder, by a shell without the venv;
    then an item written with the wrong time attribute. Failed before: the reminder item lacked `title` (its
    subject's attribute) and was parked, so no email came; the printed `scheduled-table local fire` and `emails` were
    "command not found"; and the item without `dueAt` was ignored without a word."""
    project = copy_example(tmp_path)
    scheduled_table = [str(installed / "bin" / "scheduled-table"), "local"]
    running = Localcloud(["up", "--stay"], {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, scheduled_table, project)
    shell = newcomers_shell(tmp_path)

    def as_printed(command: str) -> str:
        result = sh(command, printed.export, shell, cwd=project)
        assert (result.returncode, result.stderr) == (0, ""), command
        return result.stdout

    try:
        printed = running.ready()
        # WHEN each printed command runs, in order, as printed
        seen = {command: as_printed(command) for command in printed.commands}
        endpoint = option(printed.down, "endpoint-url")
        # THEN the work item's due event reaches the user's jobs queue (the printed tick may come before the item is
        # indexed: tick again, as printed, until the printed receive shows it)
        [(_, work)] = [(h, c) for h, c in printed.tables if h.startswith("work ")]
        fire, receive = next(c for c in work if " fire " in c), next(c for c in work if "receive-message" in c)
        bodies = echoed(seen[receive])

        def job_arrived() -> bool:
            if any(body.get("keys") == {"PK": "try-1", "SK": "try-1"} for body in bodies):
                return True
            as_printed(fire)
            bodies.extend(echoed(as_printed(receive)))
            return False

        until(job_arrived, EFFECT_SECONDS, "the work item's due event", every=EFFECT_POLL_SECONDS)
        # AND the reminder is emailed, its subject filled from the item (a Scheduler schedule: within two minutes)
        [(_, reminders)] = [(h, c) for h, c in printed.tables if h.startswith("reminders ")]
        emails = next(c for c in reminders if " emails " in c)
        until(
            lambda: "to you@example.com: Reminder: your title" in as_printed(emails),
            EFFECT_SECONDS,
            "the reminder email",
            every=EFFECT_POLL_SECONDS,
        )
        # AND nothing written was parked or dead-lettered
        client = clients(endpoint, "eu-west-1")
        for url in snapshot(endpoint)["queues"]:
            if "poison" in url or "dlq" in url:
                assert queue_depth(client, url) == 0, url
        # WHEN the app writes an item with its due time under another name than the table's time_attribute
        put = next(c for c in work if "put-item" in c)
        as_printed(put.replace('"dueAt"', '"runAt"').replace('"try-1"', '"app-1"', 1))
        # THEN `up --stay`, still running, says so and names the fix (it looks every few seconds)
        note = re.compile(
            r"note: table work-table: 1 of \d+ items? sampled has no `dueAt`; it has `runAt` \(1\): "
            r"set time_attribute='runAt'\?"
        )
        noted = lambda: any(note.fullmatch(line) for line in running.out)  # noqa: E731
        running.wait_for(noted, EFFECT_SECONDS, "the note on the item without dueAt")
        # AND the printed `down` removes the stack
        assert as_printed(printed.down).startswith("removed ")
    finally:
        running.close()


def test_local_demo_is_not_offered_by_the_installed_package(installed: Path, tmp_path: Path) -> None:
    """The demo deploys this repository's own stack (its stack files and `__main__.py`), which the wheel does not
    hold; a user's own program has `local up --stay`. Failed before: `local --help` offered it and it failed with a
    path inside site-packages."""
    command = [str(installed / "bin" / "scheduled-table"), "local"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    shown = subprocess.run([*command, "--help"], capture_output=True, text=True, env=env, check=True).stdout
    assert re.search(r"^\s+up\s", shown, re.MULTILINE) and not re.search(r"^\s+demo\s", shown, re.MULTILINE), shown
    result = subprocess.run(
        [*command, "demo"], cwd=tmp_path, capture_output=True, text=True, env=env, check=False, timeout=300
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        "error: scheduled-table local demo: the demo deploys the scheduled-table repository's own stack, which an "
        "installed package does not hold; run `make demo` in a clone of the repository, or try your own program "
        "with `up --stay`"
    ]
