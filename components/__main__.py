"""`python -m scheduled_table redrive ...`: the same command as the installed `scheduled-table`."""

from __future__ import annotations

from .cli.command import main

raise SystemExit(main())
