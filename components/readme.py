"""The README's Install, Quick start and Choosing a mode sections, copied from the docs pages that hold them.

Each is written once, as a page of the docs site (which must stand alone), and copied between markers into the
README, because GitHub shows a README as it is and processes no include. The copy demotes the page's headings one
level (the page's title becomes a README section) and points its relative links into docs/.
`python -m components.readme` rewrites the sections; tests/house fails while they are stale.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = ("install.md", "quick-start.md", "choosing-a-mode.md")

BEGIN = "<!-- copied from docs/{page} by `python -m components.readme`: edit that page, not this section -->"
END = "<!-- end of docs/{page} -->"

# A Markdown link's target that is a path relative to the page: not a URL, not an anchor on the same page.
RELATIVE_LINK = re.compile(r"\]\((?![a-z][a-z0-9+.-]*:|#|/)([^)\s]+)\)")


def section(page: str) -> str:
    """The docs page as a README section: headings one level down, relative links into docs/ (code untouched)."""
    out: list[str] = []
    fenced = False
    for line in (DOCS / page).read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            if line.startswith("#"):
                line = "#" + line
            line = RELATIVE_LINK.sub(r"](docs/\1)", line)
        out.append(line)
    return "\n".join(out).strip("\n")


def readme(text: str) -> str:
    """`text` (the README) with each page's section replaced by the page's current copy."""
    for page in PAGES:
        begin, end = BEGIN.format(page=page), END.format(page=page)
        if text.count(begin) != 1 or text.count(end) != 1:
            raise ValueError(f"README.md must hold exactly one '{begin}' ... '{end}' pair")
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1]
        text = f"{head}{begin}\n{section(page)}\n{end}{tail}"
    return text


def main() -> int:
    README.write_text(readme(README.read_text()))
    print(f"wrote {README}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
