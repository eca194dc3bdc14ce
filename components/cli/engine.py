"""The shipped backfill engine (`handlers/backfill.py` and its parts), loaded for the operator's commands."""

from __future__ import annotations

from types import ModuleType

from .aws import RedriveError


def engine() -> ModuleType:
    """`handlers/backfill.py`, the shipped engine (its `st_core` imports need the handlers folder on the path)."""
    from ..packaging import ShadowedError, handler_module

    try:
        return handler_module("backfill")
    except ShadowedError as error:
        raise RedriveError(f"{error}: run the command from another directory or environment") from None
