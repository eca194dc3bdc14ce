"""The Makefile's `pytest` target installs what the tests need on a machine that never ran them.

make expands a rule's prerequisites when it reads the rule: a variable defined below the rule is empty there, and a
machine without Chromium then fails the rendered-docs tests (every machine that already had it hid this). The
check reads make's own database (`make -p -n`), so it sees what make will do, not what the file seems to say.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def prerequisites(makefile: Path, target: str) -> list[str]:
    """The prerequisites make resolves for `target`, read from `make -p -n` (nothing is run)."""
    result = subprocess.run(
        ["make", "-p", "-n", "-f", str(makefile), "-C", str(makefile.parent), target],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    for line in result.stdout.splitlines():
        match = re.match(rf"^{re.escape(target)}:(?!=)(.*)$", line)
        if match:
            return match.group(1).split()
    raise AssertionError(f"make printed no rule for {target!r}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")


def test_the_test_run_installs_chromium_before_it_needs_it() -> None:
    assert "/usr/bin/chromium" in prerequisites(MAKEFILE, "pytest")
    assert "/usr/bin/chromium" in prerequisites(MAKEFILE, "docs-check")


def test_the_check_fails_when_the_variable_is_defined_after_the_rule_again(tmp_path: Path) -> None:
    """The regression this guards: the definition moved below the rule leaves the prerequisite empty."""
    text = MAKEFILE.read_text()
    definition = "CHROMIUM := /usr/bin/chromium\n"
    assert definition in text
    moved = tmp_path / "Makefile"
    moved.write_text(text.replace(definition, "", 1) + "\n" + definition)
    assert "/usr/bin/chromium" not in prerequisites(moved, "pytest")


def test_the_install_rule_says_what_it_installs_and_what_to_do_without_apt_get() -> None:
    result = subprocess.run(
        ["make", "-n", "-B", "-f", str(MAKEFILE), "-C", str(MAKEFILE.parent), "chromium"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "apt-get install -y -q chromium" in result.stdout
    assert "install Chromium by hand" in result.stdout
