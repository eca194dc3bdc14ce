"""The due event as a pydantic model, for consumers that parse their events (Powertools for AWS Lambda's Parser):
`DueEventModel` works as a Parser model on its own (a FunctionTarget or a state machine receives the due event
itself) and inside Parser's envelopes (SqsEnvelope for a QueueTarget, SnsEnvelope for a TopicTarget, SnsSqsEnvelope
for a topic feeding a queue, EventBridgeEnvelope for an EventBusTarget's rule):

    from aws_lambda_powertools.utilities.parser import envelopes, event_parser
    from scheduled_table.consumer import DueEventModel

    @event_parser(model=DueEventModel, envelope=envelopes.SqsEnvelope)
    def handler(events: list[DueEventModel], context) -> None:
        for event in events:
            act(event.occurrence_id, event.due_at, event.item)

It accepts what the due event's JSON Schema (`schemas/due_event.schema.json`) accepts and refuses what it refuses,
but for a field it does not know, which it ignores (a later version may add fields); the handlers' events are
checked against both (tests/handlers/test_due_event_model.py). Fields are snake_case attributes under the
event's camelCase names (`occurrence_id` for `occurrenceId`); `due_at` is an aware UTC datetime, written back as
the event's `2026-03-30T08:00:00Z` by `model_dump(mode="json", by_alias=True, exclude_none=True)`.

Needs pydantic 2 (the `consumer` extra: `pip install "scheduled-table[consumer]"`), which nothing else of the package
imports: `import scheduled_table` and the handlers never load this module.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from .due_event import due_event_schema

__all__ = ["DueEventModel"]

_PROPERTIES = due_event_schema()["properties"]
# The schema's own patterns, so the model and the schema cannot drift apart.
_DUE_AT = re.compile(_PROPERTIES["dueAt"]["pattern"])


class DueEventModel(BaseModel):
    """What a target receives when an item's time comes (any mode, any target but email). Delivery is at least
    once: act once per `occurrence_id`, the same for every delivery of one occurrence."""

    # By the event's names only. A field this version does not know is ignored, not refused: a later version may add
    # fields (docs/consumers.md), and a consumer must not fail on them; the schema, which describes this version,
    # refuses them. That is the one difference between the two.
    model_config = ConfigDict(extra="ignore", frozen=True, alias_generator=to_camel)

    source: Literal["scheduled-table"]
    occurrence_id: StrictStr = Field(
        min_length=_PROPERTIES["occurrenceId"]["minLength"],
        max_length=_PROPERTIES["occurrenceId"]["maxLength"],
        pattern=_PROPERTIES["occurrenceId"]["pattern"],
    )
    mode: Literal["eventbridge", "ttl", "polling"]
    table: StrictStr = Field(min_length=1)
    keys: dict[str, StrictStr | StrictInt | StrictFloat] = Field(min_length=1, max_length=2)
    due_at: datetime
    item: dict[str, Any]
    item_trimmed: Literal[True] | None = None
    offset_seconds: StrictInt | None = None
    recurrence: StrictStr | None = Field(default=None, pattern=_PROPERTIES["recurrence"]["pattern"])
    time_zone: StrictStr | None = Field(default=None, min_length=1)

    @model_validator(mode="before")
    @classmethod
    def _absent_not_null(cls, data: Any) -> Any:
        """An optional field is left out when it does not apply, never null (the schema refuses null for each)."""
        if isinstance(data, dict):
            for name, known in cls.model_fields.items():
                if not known.is_required() and data.get(known.alias or name, 0) is None:
                    raise ValueError(f"{known.alias}: null; leave it out when it does not apply")
        return data

    @field_validator("due_at", mode="before")
    @classmethod
    def _whole_seconds_utc(cls, value: object) -> object:
        """The event's form only (`2026-03-30T08:00:00Z`), as the schema says; then parsed as a UTC datetime."""
        if not isinstance(value, str) or not _DUE_AT.fullmatch(value):
            raise ValueError("dueAt must be UTC in whole seconds, e.g. '2026-03-30T08:00:00Z'")
        return value

    @model_validator(mode="after")
    def _recurrence_has_its_zone(self) -> DueEventModel:
        if (self.recurrence is None) != (self.time_zone is None):
            raise ValueError("recurrence and timeZone come together: a recurring firing carries both")
        return self

    @field_serializer("due_at")
    def _as_written(self, value: datetime) -> str:
        # isoformat, not strftime: %Y writes a year before 1000 without its leading zeros on Linux.
        return value.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
