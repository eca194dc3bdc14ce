"""The lifetime run's report: with `LIFETIME_REPORT`, what every mode's runs covered, rewritten
after each example and marked finished at the end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.iam import enforce
from tests.lifetime.harness import COVERED, REPORT, write_report


@pytest.fixture(scope="session", autouse=True)
def report() -> Iterator[None]:
    COVERED.clear()
    yield
    if REPORT:
        write_report(Path(REPORT), finished=True)


@pytest.fixture(autouse=True)
def _iam() -> Iterator[enforce.Enforcement]:
    """Over a table's life too, every handler call is made as its function's role and refused as AWS refuses it
    (tests/iam/enforce.py): the schedules Scheduler fires, the batches the mappings read, each call of each path."""
    with enforce.enforced() as state:
        yield state
