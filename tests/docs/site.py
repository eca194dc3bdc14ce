"""The built docs site, as a reader gets it: its HTML read back into a small tree, served on localhost, and rendered
by headless Chromium (Debian's package). Used by tests/docs and by `make docs-check` (`python -m tests.docs.site`,
which writes screenshots of the pages a newcomer opens first).

Markdown that did not render leaves traces a strict MkDocs build does not notice: a snippet include that stayed
text (`--8<--`, or what a formatter made of it), a list written without the blank line Python-Markdown needs (it
becomes one run-on paragraph of "- ..." lines), a table cell with a literal `\\|`, a link to an anchor no page has.
`problems` finds each of these in the HTML.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
# A browser that reaches nothing but the local server: no sandbox (root in a container), no GPU, no QUIC, nothing
# fetched in the background, a profile of its own each run.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
WINDOW = (1280, 1600)
# The pages `make docs-check` screenshots: the home page and the three that rendered wrongly before.
PAGES = {"home": "", "configuration": "configuration/", "consumers": "consumers/", "guarantees": "guarantees/"}
# Pages shot taller, to reach what once rendered wrongly: the consumer recipe's code is below the contract's table.
TALL = {"consumers": 4200, "guarantees": 2400}

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# A snippet include left as text: `--8<--`, and ruff format's rewrite of it as Python (`--8 < --`).
SNIPPET_MARKER = re.compile(r"-{1,2}8\s*<\s*-{1,2}")


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self, tag: str | None = None) -> Iterator[Element]:
        if tag is None or self.tag == tag:
            yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter(tag)

    def elements(self) -> list[Element]:
        return [c for c in self.children if isinstance(c, Element)]


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in VOID:
            self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def article(document: Element) -> Element:
    """The page's own content (Material's <article>), without the theme's navigation around it."""
    return next(e for e in document.iter("article"))


def ids(document: Element) -> set[str]:
    return {e.attrs["id"] for e in document.iter() if "id" in e.attrs}


def page_of(site: Path, url_path: str) -> Path | None:
    """The file a site-relative URL path is served from (a folder's index.html), if there is one."""
    target = site / unquote(url_path).lstrip("/")
    if target.is_dir():
        target = target / "index.html"
    return target if target.is_file() else None


def problems(site: Path) -> list[str]:
    """Each trace of Markdown that did not render, and each internal link to a page or anchor that does not exist,
    as `page: what`."""
    found: list[str] = []
    documents = {path: parse(path.read_text()) for path in sorted(site.rglob("*.html"))}
    for path, document in documents.items():
        name = path.relative_to(site).as_posix()
        content = next(document.iter("article"), None)
        if content is None:
            continue
        text = content.text()
        for marker in SNIPPET_MARKER.findall(text):
            found.append(f"{name}: a snippet include left as text ({marker!r})")
        for paragraph in content.iter("p"):
            lines = paragraph.text().splitlines()
            if any(re.match(r"\s*(?:[-*+]|\d+\.) \S", line) for line in lines[1:]):
                found.append(f"{name}: a list rendered as a paragraph: {lines[0][:80]!r}")
        for cell in (*content.iter("td"), *content.iter("th")):
            if "\\|" in cell.text():
                found.append(f"{name}: a literal '\\|' in a table cell: {cell.text()[:80]!r}")
        page_url = "/" + name.removesuffix("index.html")
        for link in content.iter("a"):
            href = link.attrs.get("href", "")
            parts = urlsplit(urljoin(page_url, href))
            if not href or parts.scheme or parts.netloc:
                continue
            target = page_of(site, parts.path)
            if target is None:
                found.append(f"{name}: a link to a missing page: {href}")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in ids(documents[target]):
                found.append(f"{name}: a link to a missing anchor: {href}")
    return found


def build(site: Path) -> None:
    """The site, built strictly (as `make docs`) into `site`."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"mkdocs build failed:\n{result.stdout}{result.stderr}")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def served(root: Path) -> Iterator[str]:
    """`root` served on 127.0.0.1 (a free port) while the block runs; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()
            thread.join()


def chromium(*args: str, height: int = WINDOW[1]) -> str:
    """Headless Chromium with a fresh profile and a window 1280 wide, its standard output."""
    if not CHROMIUM.exists():
        raise RuntimeError(f"{CHROMIUM} is missing: `make chromium` installs Debian's package (apt-get)")
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        result = subprocess.run(
            [
                str(CHROMIUM),
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={WINDOW[0]},{height}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    if result.returncode != 0:
        raise RuntimeError(f"chromium {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result.stdout


def dump_dom(url: str) -> Element:
    """The page's DOM once Chromium has loaded it (scripts run), parsed."""
    return parse(chromium("--dump-dom", url))


def screenshot(url: str, path: Path, height: int = WINDOW[1]) -> None:
    """The top `height` pixels of the page, 1280 wide."""
    path.parent.mkdir(parents=True, exist_ok=True)
    chromium(f"--screenshot={path}", "--hide-scrollbars", url, height=height)
    if not path.is_file() or path.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot of {url} to {path}")


def main() -> int:
    """`make docs-check`: the site built, served, and screenshotted (build/screenshots/PAGE.png)."""
    site, shots = REPO / "build" / "site", REPO / "build" / "screenshots"
    build(site)
    found = problems(site)
    with served(site) as base:
        for name, path in PAGES.items():
            screenshot(base + path, shots / f"{name}.png", height=TALL.get(name, WINDOW[1]))
            print(f"{shots / name}.png: {base}{path}")
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
