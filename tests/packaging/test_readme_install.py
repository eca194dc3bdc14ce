"""The README's install commands, run as written, in new folders: then the example project's tests pass.

GIVEN a copy of the repository as a clone has it (tracked and new files, nothing ignored) WHEN the README's "from
the clone" commands run there, line by line as a shell would, THEN the venv they make beside the clone holds the
package; GIVEN a new folder holding the `dist/` that `make dist` writes WHEN the "from the wheel" commands run
there THEN the same. Either way the example project (examples/user_project) then installs its own requirements
into that venv with pip finding the package already there, and its tests pass.

The commands are read from the README, so a changed command is the command tested. One thing is added, not
changed: each venv a command creates borrows this dev venv's installed dependencies (pulumi, pulumi-aws,
ministack, pytest, ...; not scheduled-table itself) through a .pth file, so pip finds them installed and the test
needs seconds and no network instead of minutes of downloads (a real first install from the index took
several minutes on this machine: docs/testing.md).
"""

from __future__ import annotations

import re
import shlex
import shutil
import site
import subprocess
from pathlib import Path

import pytest

from .conftest import EXAMPLE, REPO
from .test_quick_start import run_in
from .test_user_project import example_test_count


def install_blocks() -> tuple[list[str], list[str]]:
    """The shell blocks of the README's Install section: from the clone, then from the wheel."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    blocks = [block.strip().splitlines() for block in re.findall(r"```sh\n(.*?)```", section, re.DOTALL)]
    assert len(blocks) == 2, "the Install section should give the commands from a clone, then from the wheel"
    return blocks[0], blocks[1]


def test_the_install_section_has_no_placeholder_and_no_tag() -> None:
    """What a user copies must work as written: no `<owner>`-style blank to fill, no git URL or release tag (the
    repository has no public home and no tag yet)."""
    section = (REPO / "README.md").read_text().split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"<[A-Za-z_ -]+>|git\+|@v\d", section) == []


def clean_clone(destination: Path) -> Path:
    """The repository's files as `git clone` of the working state would give them: tracked and untracked, not the
    ignored ones (.venv, build/, dist/, caches)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


@pytest.fixture(scope="module")
def borrowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This dev venv's installed distributions, less scheduled-table (installed here in editable mode): links to
    them in one folder, for a new venv's .pth file."""
    folder = tmp_path_factory.mktemp("borrowed")
    for packages in map(Path, site.getsitepackages()):
        for entry in packages.iterdir():
            own = entry.name.startswith(("scheduled_table", "__editable__", "_scheduled_table"))
            if not own and not entry.name.endswith(".pth") and not (folder / entry.name).exists():
                (folder / entry.name).symlink_to(entry)
    return folder


def run_lines(lines: list[str], cwd: Path, borrowed: Path) -> list[Path]:
    """Each line run by bash in `cwd`, as written; the venvs made by `python3 -m venv DIR` lines, in order."""
    venvs: list[Path] = []
    for line in lines:
        run_in(cwd, "bash", "-c", line)
        made = re.fullmatch(r"python3 -m venv (\S+)", line)
        if made:
            venv = (cwd / shlex.split(made.group(1))[0]).resolve()
            purelib = next((venv / "lib").glob("python3*/site-packages"))
            (purelib / "borrowed-deps.pth").write_text(f"{borrowed}\n")
            venvs.append(venv)
    return venvs


def example_passes_its_tests(venv: Path, where: Path) -> None:
    """The example project, copied beside the venv as a user's project would be, installs its own requirements
    into it (the package is found installed) and passes its tests."""
    project = where / "user_project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", ".mypy_cache"))
    output = run_in(project, str(venv / "bin" / "pip"), "install", "-r", "requirements-dev.txt")
    assert "Requirement already satisfied: scheduled-table" in output, output[-2000:]
    output = run_in(project, str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider")
    assert f"{example_test_count()} passed" in output, output[-2000:]


def installed_from(venv: Path) -> str:
    """Where the venv imports scheduled_table from (it must be its own copy, not this checkout)."""
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import scheduled_table; print(scheduled_table.__file__)"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    ).stdout.strip()


def test_readme_install_from_a_clone_then_the_example_projects_tests_pass(tmp_path: Path, borrowed: Path) -> None:
    from_clone, _ = install_blocks()
    clone = clean_clone(tmp_path / "scheduled-table")
    (venv,) = run_lines(from_clone, clone, borrowed)
    assert not venv.is_relative_to(clone), "the commands should make the project's venv outside the clone"
    assert Path(installed_from(venv)).is_relative_to(venv)
    example_passes_its_tests(venv, venv.parent)


def test_readme_install_from_the_wheel_then_the_example_projects_tests_pass(
    tmp_path: Path, borrowed: Path, dist: Path
) -> None:
    _, from_wheel = install_blocks()
    folder = tmp_path / "from-wheel"
    shutil.copytree(dist, folder / "dist")
    (venv,) = run_lines(from_wheel, folder, borrowed)
    assert Path(installed_from(venv)).is_relative_to(venv)
    example_passes_its_tests(venv, folder)
