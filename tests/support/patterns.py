"""Lambda's event filtering, as the tests' reference: moto's EventBridge pattern matcher (Lambda filters stream
records with the EventBridge pattern syntax). The component's filters and the operator's own matcher are checked
against this, so it is loaded in one place."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from moto.events.models import EventPattern


class LambdaFilter:
    """An event source mapping's filter criteria: only records that match one of its patterns reach the function.
    A pattern with `$or` is refused: moto's EventBridge matcher knows it, Lambda's documented filter rule syntax
    does not (components/filters.py says where)."""

    def __init__(self, patterns: Iterable[str | Mapping[str, Any]]) -> None:
        texts = [p if isinstance(p, str) else json.dumps(p) for p in patterns]
        if any('"$or"' in t for t in texts):
            raise ValueError(f"Lambda's filter rule syntax has no $or: {texts}")
        self.patterns = [EventPattern.load(t) for t in texts]

    def passes(self, record: Mapping[str, Any]) -> bool:
        """Lambda invokes the function with a record when any one pattern matches it."""
        event: Any = record  # moto types an event as its own dict shape; a stream record is any JSON object to it
        return any(pattern.matches_event(event) for pattern in self.patterns)

    def __call__(self, records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The records the function receives, as copies (the function may change what it is given)."""
        return [copy.deepcopy(dict(record)) for record in records if self.passes(record)]


def passes(patterns: Iterable[str | Mapping[str, Any]], record: Mapping[str, Any]) -> bool:
    """Whether a mapping with these filter patterns lets the record through."""
    return LambdaFilter(patterns).passes(record)
