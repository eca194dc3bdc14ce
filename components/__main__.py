"""`python -m scheduled_table redrive ...`: the same command as the installed `scheduled-table`."""

from __future__ import annotations

from .ops.cli import main

raise SystemExit(main())
