"""Policy checks reuse the component tests' mocked build, and print the rule table at the end of the run."""

from __future__ import annotations

from typing import Any

import pytest

from tests.components.conftest import build  # noqa: F401  (the fixture, shared)

REPORT: dict[str, dict[str, tuple[int, list[str]]]] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not REPORT:
        return
    from .rules import RULES

    modes = sorted(REPORT)
    terminalreporter.write_sep("-", "policy checks: resources passing each rule, per mode")
    width = max(len(r.name) for r in RULES)
    terminalreporter.write_line(f"{'rule':<{width}}  " + "  ".join(f"{m:>11}" for m in modes))
    for rule in RULES:
        cells = []
        for mode in modes:
            passed, problems = REPORT[mode][rule.name]
            cells.append(f"{passed}/{passed + len(problems)}".rjust(11))
        terminalreporter.write_line(f"{rule.name:<{width}}  " + "  ".join(cells))


@pytest.fixture
def report() -> dict[str, dict[str, tuple[int, list[str]]]]:
    return REPORT
