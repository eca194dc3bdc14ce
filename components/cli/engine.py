"""The shipped backfill engine (the package `handlers/backfill/`), loaded for the operator's commands."""

from __future__ import annotations

from types import ModuleType

from .aws import RedriveError


def engine() -> ModuleType:
    """`handlers/backfill/`, the shipped engine (its `st_core` imports need the handlers folder on the path)."""
    from ..packaging import ShadowedError, handler_module

    try:
        return handler_module("backfill")
    except ShadowedError as error:
        raise RedriveError(f"{error}: run the command from another directory or environment") from None
