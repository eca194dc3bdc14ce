"""Files generated from the one place each option is described are current: the docs' configuration page
(components/reference.py) and the provider's inputs (components/provider.py, checked in tests/provider too)."""

from __future__ import annotations

import dataclasses

import pytest

from components import reference
from components.args import OPTION_DOCS, ScheduledTableArgs


def test_the_configuration_page_is_generated_from_the_options() -> None:
    assert reference.PAGE.read_text() == reference.page(), (
        "docs/configuration.md is stale: run `.venv/bin/python -m components.reference` and commit it"
    )


def test_every_option_has_one_description_and_a_row() -> None:
    names = [f.name for f in dataclasses.fields(ScheduledTableArgs)]
    assert sorted(OPTION_DOCS) == sorted(names)
    page = reference.page()
    assert all(f"| `{name}` |" in page for name in names)


def test_a_stale_page_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: a changed description makes the page differ."""
    before = reference.page()
    monkeypatch.setitem(OPTION_DOCS, "batch_size", OPTION_DOCS["batch_size"] + " (changed)")
    assert reference.page() != before
