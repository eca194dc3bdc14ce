"""Names that say what they hold: alarms and the dashboard live in one module (`components/alarms.py`, once split
between `operations.py`, the specs, and `observability.py`, their resources), the operator's command line under
`components/cli/` (once `components/ops/`, with its entry in `ops/cli.py`), and the local cloud's files are named
for their contents (`try_it.py`, what `up --stay` prints, once `stay.py`; `scheduler_minute.py`, Scheduler's minute
shared by its processes, once `window.py`), and the backfill engine is one package (`handlers/backfill/`, once
twelve flat modules, `handlers/backfill.py` and `handlers/backfill_<part>.py`). The old paths are gone and nothing
imports or names them: a module left behind under an old name, or an import of one, would be two names for one idea
again."""

from __future__ import annotations

import re
from pathlib import Path

from .test_no_upgrade_paths import ROOT, scanned

# The backfill package's modules that were flat `handlers/backfill_<part>.py` modules.
BACKFILL_PARTS = (
    "engine",
    "every",
    "feed",
    "index",
    "records",
    "report",
    "resources",
    "scan",
    "sweep",
    "timed",
    "totals",
)
# Each removed module path (relative to the repository) -> the one that holds its contents now.
MOVED = {
    "components/operations.py": "components/alarms.py",
    "components/observability.py": "components/alarms.py",
    "components/ops": "components/cli",
    "components/ops/cli.py": "components/cli/command.py",
    "localcloud/stay.py": "localcloud/try_it.py",
    "localcloud/window.py": "localcloud/scheduler_minute.py",
    "handlers/backfill.py": "handlers/backfill/__init__.py",
    **{f"handlers/backfill_{part}.py": f"handlers/backfill/{part}.py" for part in BACKFILL_PARTS},
}

# How code, configuration or a page would name a removed module: its import path (as the repo's `components.` or
# the installed `scheduled_table.`), a relative import from its package, or its file path (written out or joined).
OLD_NAMES = (
    r"\b(components|scheduled_table)\.(ops|operations|observability)\b",
    r"\bcomponents/(ops/|operations\.py|observability\.py)",
    r"\bfrom \.+(ops|operations|observability)\b",
    r"\bfrom \.+ import .*\b(operations|observability)\b",
    r"\blocalcloud[./](stay|window)\b",
    r"\bfrom \.(stay|window) import\b",
    r"\bfrom localcloud import (stay|window)\b",
    r"`(stay|window)\.py`",
    r'"components" / "(ops|operations\.py|observability\.py)"',
    r'"localcloud" / "(stay|window)\.py"',
    r"\bbuild_operations\b",
    rf"\bbackfill_({'|'.join(BACKFILL_PARTS)})\b",
    r"\bhandlers/backfill\*?\.py\b",
    r'\.glob\("backfill\*',
)


def test_the_old_module_paths_are_gone() -> None:
    """No source file under an old path (a stale `__pycache__` left in a checkout is not a module)."""
    left = [old for old in MOVED if (ROOT / old).is_file() or any((ROOT / old).rglob("*.py"))]
    assert left == [], f"modules left under their old names (their contents moved): {left}"
    missing = sorted({new for new in MOVED.values() if not (ROOT / new).exists()})
    assert missing == [], f"the new homes are missing: {missing}"


def test_nothing_imports_or_names_the_old_modules() -> None:
    patterns = [re.compile(pattern) for pattern in OLD_NAMES]
    this = Path(__file__).resolve()
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in scanned()
        if path.resolve() != this
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if any(pattern.search(line) for pattern in patterns)
    ]
    assert hits == [], "old module names (see MOVED in this test for where each one went):\n" + "\n".join(hits)


def test_the_scan_reads_the_files_that_imported_them() -> None:
    """Not vacuous: the files that imported the old modules are among those read."""
    names = {path.relative_to(ROOT).as_posix() for path in scanned()}
    assert {
        "pyproject.toml",
        "components/__main__.py",
        "components/component.py",
        "localcloud/component.py",
        "localcloud/guide.py",
        "bench/soak.py",
        "docs/operations.md",
        "handlers/backfill/engine.py",
        "components/backfill_function.py",
        "tests/iam/test_backfill_granted.py",
    } <= names
