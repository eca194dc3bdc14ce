"""The shipped backfill engine (`handlers/backfill.py` and its parts), loaded for the operator's commands."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

from .aws import RedriveError


def engine() -> ModuleType:
    """`handlers/backfill.py`, the shipped engine (its `st_core` imports need the handlers folder on the path)."""
    from ..packaging import handlers_dir

    folder = handlers_dir()
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
    module = importlib.import_module("backfill")
    if Path(str(module.__file__)).resolve() != (folder / "backfill.py").resolve():
        raise RedriveError(
            f"another module named backfill ({module.__file__}) shadows scheduled-table's: run the command from "
            "another directory or environment"
        )
    return module
