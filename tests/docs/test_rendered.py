"""The docs site as a reader sees it: built strictly, then checked in its HTML and in Chromium's rendered DOM.

GIVEN the site built from docs/ WHEN its HTML is read THEN no page holds a snippet include left as text, a list
rendered as a paragraph, a literal `\\|` in a table, or an internal link to a page or anchor that does not exist.
WHEN headless Chromium (Debian's package; `make chromium` installs it) loads the pages from a local server THEN the
consumer recipe shows docs/examples/consumer.py's code, the guarantees page's "Every mode, the same rules" is a list
of items, and the configuration reference is a table with one row per option whose names and defaults are each on
one line at a desktop width.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.args import ScheduledTableArgs

from . import site as docs_site
from .site import REPO, Element, article, dump_dom, problems, served


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site") / "site"
    docs_site.build(folder)
    return folder


@pytest.fixture(scope="module")
def base(built: Path) -> Iterator[str]:
    with served(built) as url:
        yield url


def test_the_built_site_holds_no_unrendered_markdown_and_no_broken_internal_link(built: Path) -> None:
    assert problems(built) == []


def test_the_check_finds_each_kind_of_trace(tmp_path: Path) -> None:
    """It can fail: a page with one of each is reported once for each."""
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "index.html").write_text('<article><h2 id="here">Here</h2></article>')
    (tmp_path / "index.html").write_text(
        "<nav><a href='nowhere/'>theme links are not checked</a></nav><article>"
        '<pre><code>--8 < --"docs/examples/consumer.py"</code></pre>'
        "<p>Every mode, the same rules:\n- <strong>At the target</strong>, at least once.\n- Big items.</p>"
        "<table><tr><td><code>queue\\|function</code></td></tr></table>"
        "<a href='other/#here'>fine</a> <a href='other/#gone'>anchor</a> <a href='missing/'>page</a>"
        " <a href='https://example.com/#x'>external</a></article>"
    )
    assert problems(tmp_path) == [
        "index.html: a snippet include left as text ('--8 < --')",
        "index.html: a list rendered as a paragraph: 'Every mode, the same rules:'",
        "index.html: a literal '\\|' in a table cell: 'queue\\\\|function'",
        "index.html: a link to a missing anchor: other/#gone",
        "index.html: a link to a missing page: missing/",
    ]


def section(content: Element, heading_text: str) -> list[Element]:
    """The elements after the heading whose text starts with `heading_text`, up to the next heading of its level."""
    elements = content.elements()
    start = next(i for i, e in enumerate(elements) if e.tag in {"h2", "h3"} and e.text().startswith(heading_text))
    level = elements[start].tag
    rest = elements[start + 1 :]
    end = next((i for i, e in enumerate(rest) if e.tag == level), len(rest))
    return rest[:end]


def test_the_consumer_recipe_shows_the_tested_files_code(base: str) -> None:
    content = article(dump_dom(base + "consumers/"))
    code = [e.text() for element in section(content, "Recipe") for e in element.iter("pre")]
    source = (REPO / "docs" / "examples" / "consumer.py").read_text().strip()
    assert any(text.strip() == source for text in code), code
    assert docs_site.SNIPPET_MARKER.search(content.text()) is None


def test_the_guarantees_rules_for_every_mode_are_a_list_of_items(base: str) -> None:
    content = article(dump_dom(base + "guarantees/"))
    elements = content.elements()
    (intro,) = [i for i, e in enumerate(elements) if e.tag == "p" and e.text().strip() == "Every mode, the same rules:"]
    listing = elements[intro + 1]
    assert listing.tag in {"ul", "ol"}, listing.tag
    items = [e for e in listing.elements() if e.tag == "li"]
    assert len(items) >= 3, [item.text()[:40] for item in items]
    assert items[0].text().startswith("At the target, at least once"), items[0].text()[:80]


def test_the_configuration_reference_is_a_table_with_a_row_per_option(base: str) -> None:
    content = article(dump_dom(base + "configuration/"))
    (table,) = [table for e in section(content, "ScheduledTableArgs") for table in e.iter("table")]
    assert [th.text() for th in table.iter("th")] == ["option", "default", "notes"]
    rows = [[td.text() for td in tr.iter("td")] for tr in table.iter("tr") if any(True for _ in tr.iter("td"))]
    assert [row[0] for row in rows] == [f.name for f in dataclasses.fields(ScheduledTableArgs)]
    target = next(row for row in rows if row[0] == "target")
    assert "{type: queue|function|stateMachine|topic|eventBus|email" in target[2], target[2]
    assert "\\|" not in table.text()


# Loads a page in a frame as wide as a desktop browser's content area and reports, for each table's first two
# columns' code, how many lines the browser laid it out on (one rectangle per line).
MEASURE = """<!doctype html><meta charset="utf-8">
<iframe id="page" src="/configuration/" style="width: 1280px; height: 1000px; border: 0"></iframe>
<script>
// The window's load comes after the frame's (a frame delays its parent's load), and cannot be missed by a listener
// added while the page is parsed.
window.addEventListener("load", function () {
  var doc = document.getElementById("page").contentDocument, found = [];
  doc.querySelectorAll("article table td:nth-child(-n+2) code").forEach(function (code) {
    found.push([code.textContent, code.getClientRects().length]);
  });
  var out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
});
</script>
"""


def test_the_configuration_references_names_and_defaults_each_stay_on_one_line(built: Path, base: str) -> None:
    (built / "measure-configuration.html").write_text(MEASURE)
    document = dump_dom(base + "measure-configuration.html")
    (measured,) = [e for e in document.iter("pre") if e.attrs.get("id") == "measured"]
    lines: list[tuple[str, int]] = [tuple(pair) for pair in json.loads(measured.text())]
    assert {f.name for f in dataclasses.fields(ScheduledTableArgs)} <= {text for text, _ in lines}
    assert [(text, count) for text, count in lines if count != 1] == []
