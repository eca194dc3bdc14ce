"""The lifetime run's report: with `LIFETIME_REPORT`, what every mode's runs covered, written once they are done."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lifetime.harness import COVERED, REPORT, write_report


@pytest.fixture(scope="session", autouse=True)
def report() -> Iterator[None]:
    COVERED.clear()
    yield
    if REPORT:
        write_report(Path(REPORT))
