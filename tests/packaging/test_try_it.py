"""The docs home page's path with no AWS account, run as written from a folder that holds a clone: the example
project copied, the package installed from the clone, then `local up --stay` deploys it into the local cloud and
says it is ready, until Ctrl-C.

GIVEN a folder holding a copy of the repository as a clone has it WHEN the home page's commands run there, line by
line as a shell would (a `cd` line moves the next ones) THEN the last, `local up --stay`, prints that the local cloud
is ready with the project's tables, and stops on Ctrl-C. Each venv borrows this dev venv's dependencies (see
test_readme_install.py), so no download is needed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

from .conftest import REPO
from .test_readme_install import borrowed as borrowed  # the fixture, shared
from .test_readme_install import clean_clone, run_lines

READY = "Ready: the local cloud answers at"


def try_it_block() -> list[str]:
    """The shell block of docs/index.md's no-account section."""
    page = (REPO / "docs" / "index.md").read_text()
    section = page.split("\n## Try it with no AWS account\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    return block.strip().splitlines()


def test_the_home_pages_no_account_path_runs_as_written(tmp_path: Path, borrowed: Path) -> None:
    *setup, stay = try_it_block()
    assert stay.endswith("scheduled-table local up --stay"), stay
    clean_clone(tmp_path / "scheduled-table")
    where = tmp_path
    for line in setup:
        if line.startswith("cd "):
            where = where / line.removeprefix("cd ").strip()
            continue
        run_lines([line], where, borrowed)

    process = subprocess.Popen(
        ["bash", "-c", stay],
        cwd=where,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        start_new_session=True,
    )
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(iter(process.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and process.poll() is None and not any(READY in line for line in output):
            time.sleep(0.5)
        text = "".join(output)
        assert any(READY in line for line in output), text[-4000:]
        assert "reminders" in text and "work" in text, text[-4000:]
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C, as the page says
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        reader.join(timeout=5)
