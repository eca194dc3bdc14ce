"""The README's quick start, taken verbatim from the README and run as a new user would: in a new directory outside
this repo (a `pulumi new python` project: Pulumi.yaml + __main__.py), against the installed wheel.

There is no Pulumi CLI or AWS account here, so `pulumi up` itself cannot run: the program runs under the package's
own testing kit (`scheduled_table.testing.run_with_mocks`, the engine's mocks) and then deploys for real into the
local cloud (`scheduled-table local up`, the `local` extra's ministack), which creates every resource it declares
with IAM enforced. GIVEN the README's code blocks WHEN they are the whole program THEN both accept it, and the
install line the README gives for a published release names what the example project requires.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .conftest import EXAMPLE, REPO, python_of

PULUMI_YAML = "name: quickstart\nruntime:\n  name: python\n"


def quick_start_program() -> str:
    """The Python blocks of the README's quick start section, in order: the first program and 'the other modes'."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) >= 2, "the quick start should show the first program and the other modes"
    return "\n".join(blocks)


def run_in(project: Path, *command: str) -> str:
    """`command` run in the new folder as a user's shell would (no variables of this repo's), its output; it must
    succeed."""
    result = subprocess.run(
        list(command),
        cwd=project,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(project.parent)},
        check=False,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    return output


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "quickstart"
    folder.mkdir()
    (folder / "Pulumi.yaml").write_text(PULUMI_YAML)
    (folder / "__main__.py").write_text(quick_start_program())
    return folder


def test_quick_start_program_builds_every_table_it_names_under_the_testing_kit(installed: Path, project: Path) -> None:
    check = (
        "from scheduled_table.testing import run_with_mocks\n"
        "stack = run_with_mocks('__main__.py')\n"
        "tables = sorted(r.name for r in stack.resources if r.type == 'scheduled-table:index:ScheduledTable')\n"
        "print('TABLES', tables)\n"
        "print('EXPORTS', sorted(stack.exports))\n"
    )
    output = run_in(project, str(python_of(installed)), "-c", check)
    assert "TABLES ['jobs', 'reminders', 'scores', 'sessions']" in output, output[-2000:]
    assert "EXPORTS ['table']" in output, output[-2000:]


def test_the_published_install_line_names_what_the_example_project_requires() -> None:
    readme = (REPO / "README.md").read_text()
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    (published,) = re.findall(r"```text\n(.*?)\n```", install, re.DOTALL)
    pinned = [x for x in (EXAMPLE / "requirements.txt").read_text().splitlines() if x and not x.startswith("#")]
    assert published.splitlines()[0] == f"pip install {pinned[0]}"


def test_quick_start_program_deploys_into_the_local_cloud_from_its_own_folder(installed: Path, project: Path) -> None:
    """`scheduled-table local up` in the new folder: every resource of the four tables created in a local AWS with IAM
    enforced, as `pulumi up` would create them (the same command the example project's test runs)."""
    output = run_in(project, str(installed / "bin" / "scheduled-table"), "local", "up")
    assert f"deployed stack 'local' of {project}" in output, output[-2000:]
    assert '"table": "reminders-table"' in output, output[-2000:]
