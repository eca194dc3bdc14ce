"""The e2e session's ministack fixtures, shared with the local cloud's own tests that need a running cloud."""

from __future__ import annotations

from tests.e2e.conftest import cloud, fresh_cloud

__all__ = ["cloud", "fresh_cloud"]
