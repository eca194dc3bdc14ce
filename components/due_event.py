"""The due event's contract for consumers: `DueEvent` (a TypedDict to annotate a consumer with) and its JSON Schema
(`schemas/due_event.schema.json`, shipped in the package). A leaf module: it imports nothing of the component.

The handlers build the event (`handlers/st_core/dispatch.py`, standard library only, so they cannot import this
package); tests/handlers/test_due_event_contract.py pins the three together (this TypedDict, the handlers' own and the
schema) and validates every event the handlers produce against the schema.
"""

# No `from __future__ import annotations` here: Python 3.11 then marks every key of a TypedDict required at runtime
# (`__required_keys__`), which a consumer introspecting `DueEvent` would be misled by.
import json
from functools import cache
from importlib import resources
from typing import Any, Literal, NotRequired, TypedDict

__all__ = ["SCHEMA_FILE", "DueEvent", "due_event_schema"]

SCHEMA_FILE = "schemas/due_event.schema.json"


class DueEvent(TypedDict):
    """What a target receives when an item's time comes (any mode, any target but email). Delivery is at least
    once, so a consumer dedupes on `table` and `occurrenceId`: the id is the same for every delivery of one occurrence
    and unique within its table."""

    source: Literal["scheduled-table"]
    occurrenceId: str  # keys + dueAt + offsetSeconds (or a recurring firing): stable across every redelivery
    mode: Literal["eventbridge", "ttl", "polling"]
    table: str
    keys: dict[str, str | int | float]  # partition key and sort key, plain JSON (binary as base64 text)
    dueAt: str  # ISO-8601 UTC, whole seconds ("2026-03-30T08:00:00Z"); a recurring firing's scheduled time
    item: dict[str, Any]  # the item (plain JSON); empty, or only the FIFO group attribute, when itemTrimmed
    itemTrimmed: NotRequired[Literal[True]]  # the item did not fit the target: read it by its keys
    offsetSeconds: NotRequired[int]  # on tables with offsets: the action's time is dueAt + offsetSeconds
    recurrence: NotRequired[str]  # a recurring item's rate(...)/cron(...) expression
    timeZone: NotRequired[str]  # the IANA zone that expression is read in


@cache
def due_event_schema() -> dict[str, Any]:
    """The due event's JSON Schema (draft 2020-12), as shipped in the package, e.g. for `jsonschema.validate`."""
    text = resources.files(__package__ or "scheduled_table").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
