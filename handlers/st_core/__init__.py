"""Shared runtime for every ScheduledTable handler: stream decoding, batching, dispatch, poison queue, naming."""

from __future__ import annotations
