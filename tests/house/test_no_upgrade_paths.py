"""The first release is the baseline: no code, test or page serves an upgrade from a version that never shipped.

Before the first release, the handlers kept names and paths for versions nobody ran: each occurrence's other
names (the readable prefix in a stream record's key order, looked for on every cancel, move, claim and reconcile),
a per-item claim status of the polling processor, and the assigner's former entry point. They cost calls on every
path (a second DeleteSchedule per cancel and per recurring create, a consistent ledger read per late delivery, a
second GetSchedule per backfilled item) for nothing. This test keeps them out: each pattern below is one of those
names. CHANGELOG.md is history and may name them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("components", "handlers", "localcloud", "bench", "tests", "docs", "examples", "provider")
TOP_LEVEL = ("README.md", "Makefile", "mkdocs.yml", "pyproject.toml", "__main__.py")
SUFFIXES = {".py", ".md", ".json", ".yaml", ".yml", ".toml", ".txt"}
SKIPPED_PARTS = {"__pycache__", ".venv", "venv", "site", "node_modules", ".mypy_cache", ".ruff_cache"}

# The removed names, each with what it was.
REMOVED = {
    r"\boccurrence_names\b": "naming.occurrence_names: an occurrence's id, then the ids earlier versions gave it",
    r"\brecurring_names\b": "naming.recurring_names: the same for an item's recurring schedule",
    r"\bitem_schedule_names\b": "naming.item_schedule_names: the same for precise ttl's schedule",
    r"\bschedule_names\(": "ttl.schedule_names: precise ttl's schedule name and its earlier names",
    r"\breadables\b": "ItemKeys.readables: the readable prefixes in both key orders",
    r"\b_drop_aliases\b": "eventbridge's delete of an occurrence's earlier-named schedules",
    r"\baliases=": "Occurrence(aliases=...) and the ledger's claim/taken(aliases=...)",
    r"\boccurrence\.aliases\b": "Occurrence.aliases",
    r"\bbefore_create\b": "schedules.upsert(before_create=...), which dropped earlier-named schedules",
    r"\bCLAIMED\b": "the polling processor's per-item claim status",
    r"\bstClaimUntil\b": "the polling processor's per-item claim lease",
    r"\bpolling\.assign\b": "the assigner's former entry point (it is polling_assign.handler)",
    r"\bpolling\.handle_assign_batch\b": "polling's forward to the assigner, kept for that entry point",
}


def scanned() -> list[Path]:
    """Every text file of the repository's own folders and top-level files, this test's file excepted."""
    found = [ROOT / name for name in TOP_LEVEL if (ROOT / name).is_file()]
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and not SKIPPED_PARTS.intersection(path.parts):
                found.append(path)
    return [path for path in found if path.resolve() != Path(__file__).resolve()]


def test_no_file_names_what_only_an_earlier_version_used() -> None:
    patterns = {re.compile(pattern): what for pattern, what in REMOVED.items()}
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {what}"
        for path in scanned()
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        for pattern, what in patterns.items()
        if pattern.search(line)
    ]
    assert hits == [], "names of upgrade paths from unreleased versions (the first release is the baseline):\n" + (
        "\n".join(hits)
    )


def test_the_scan_reads_the_handlers_and_the_tests() -> None:
    """Not vacuous: the files that held those names are among those read."""
    names = {path.relative_to(ROOT).as_posix() for path in scanned()}
    assert {"handlers/eventbridge/planning.py", "handlers/st_core/naming.py", "tests/handlers/test_polling.py"} <= names
    assert "docs/consumers.md" in names
