"""Files generated from the one place each option is described are current: the docs' configuration page
(components/reference.py), the provider's inputs (components/provider.py, checked in tests/provider too), and the
README's copies of the docs pages it shares (components/readme.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from components import readme, reference
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


def test_the_readmes_install_quick_start_and_modes_sections_are_the_docs_pages() -> None:
    """Written once, on the docs site; the README holds copies (GitHub processes no include)."""
    text = readme.README.read_text()
    assert text == readme.readme(text), (
        "README.md's copies of docs/install.md, quick-start.md or choosing-a-mode.md are stale: run "
        "`.venv/bin/python -m components.readme` and commit it"
    )
    for page in readme.PAGES:
        title = (readme.DOCS / page).read_text().splitlines()[0]
        assert title.startswith("# ") and f"\n#{title}\n" in text, page


def test_a_copied_section_demotes_headings_and_points_links_into_docs_but_leaves_code_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "page.md").write_text(
        "# Title\n\nSee [Deploying](deploying.md#x), [AWS](https://aws.amazon.com/) and [here](#title).\n\n"
        "```sh\n# a comment, not a heading\n[not](a-link.md)\n```\n\n## Part\n"
    )
    monkeypatch.setattr(readme, "DOCS", tmp_path)
    assert readme.section("page.md") == (
        "## Title\n\nSee [Deploying](docs/deploying.md#x), [AWS](https://aws.amazon.com/) and [here](#title).\n\n"
        "```sh\n# a comment, not a heading\n[not](a-link.md)\n```\n\n### Part"
    )


def test_an_edited_page_makes_the_readme_stale(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for page in readme.PAGES:
        (tmp_path / page).write_text((readme.DOCS / page).read_text())
    (tmp_path / "install.md").write_text((readme.DOCS / "install.md").read_text() + "\nOne more line.\n")
    monkeypatch.setattr(readme, "DOCS", tmp_path)
    text = readme.README.read_text()
    assert readme.readme(text) != text


def test_the_operator_policies_in_the_docs_are_the_generated_ones() -> None:
    """docs/operations.md shows each operator command's policy as `scheduled-table policy` builds it."""
    from pathlib import Path

    from components.cli import permissions

    docs = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
    text = docs.read_text()
    assert permissions.PAGE_START in text and "`scheduled-table redrive target`:" in text
    assert permissions.page(text) == text, (
        "docs/operations.md's policies are stale: run `.venv/bin/python -m components.cli.permissions` and commit it"
    )


def test_the_readme_stays_short() -> None:
    """The README is the front page; the rest belongs on the docs site."""
    assert len(readme.README.read_text().splitlines()) <= 300
