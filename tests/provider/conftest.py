"""Fixtures of the provider tests."""

from __future__ import annotations

from tests.components.conftest import _collect_failed_deploys

__all__ = ["_collect_failed_deploys"]
