"""Redrive's Lambda filter matcher (`matcher.matches`) decides which records of a failed range the consumer would
have seen: checked against moto's EventBridge pattern matcher (the syntax Lambda's event filtering uses), over
every mode's real filters (components/modes/) and stream records in the shape Lambda delivers, drawn by
hypothesis: every event name, TTL's and users' identities, images present or absent, the time and status
attributes absent or of each DynamoDB type, keys with and without the aggregate prefix."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.cli.redrive.matcher import matches
from components.cli.redrive.matcher import passes as redrive_passes
from components.modes.aggregate import aggregate_filters
from components.modes.eventbridge import eventbridge_filters
from components.modes.polling import polling_filters
from components.modes.ttl import ttl_filters
from tests.support.patterns import passes

TIME = "dueAt"
STATUS = "stStatus"

FILTERS: dict[str, list[dict[str, Any]]] = {
    "eventbridge": eventbridge_filters(TIME),
    "ttl": ttl_filters(TIME, precise=False),
    "ttl precise": ttl_filters(TIME, precise=True),
    "polling": polling_filters(),
    "aggregate ignore": aggregate_filters("PK", "SCORE", "ignore"),
    "aggregate adjust": aggregate_filters("PK", "SCORE", "adjust"),
}

strings = st.sampled_from(["", "a", "SCORE", "SCORE#1", "SCOR", "score#1", "USER#1", "PENDING", "2026-01-01T00:00:00Z"])
numbers = st.sampled_from(["0", "1", "1767225600", "-5", "1.5"])
# Any attribute value DynamoDB can hold, in Lambda's JSON (binary as base64 text).
values = st.one_of(
    strings.map(lambda s: {"S": s}),
    numbers.map(lambda n: {"N": n}),
    st.just({"B": "AAE="}),
    st.booleans().map(lambda b: {"BOOL": b}),
    st.just({"NULL": True}),
    st.just({"M": {}}),
    st.just({"M": {"S": {"S": "x"}}}),
    st.just({"L": []}),
    st.just({"SS": ["a", "b"]}),
    st.just({"NS": ["1"]}),
)
statuses = st.one_of(st.sampled_from(["PENDING", "RETRY", "DONE", "FAILED"]).map(lambda s: {"S": s}), values)


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    keys = {"PK": {"S": draw(strings)}, "SK": {"S": draw(strings)}}
    if draw(st.booleans()):
        keys["PK"] = draw(values.filter(lambda v: set(v) <= {"S", "N", "B"}))

    def image() -> dict[str, Any] | None:
        if not draw(st.booleans()):
            return None
        found = dict(keys)
        if draw(st.booleans()):
            found[TIME] = draw(values)
        if draw(st.booleans()):
            found[STATUS] = draw(statuses)
        return found

    data: dict[str, Any] = {"Keys": keys, "SequenceNumber": "100", "ApproximateCreationDateTime": 1767225600}
    for name in ("NewImage", "OldImage"):
        shown = image()
        if shown is not None:
            data[name] = shown
    record: dict[str, Any] = {
        "eventID": "e",
        "eventName": draw(st.sampled_from(["INSERT", "MODIFY", "REMOVE"])),
        "eventSource": "aws:dynamodb",
        "eventSourceARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/t/stream/x",
        "dynamodb": data,
    }
    identity = draw(
        st.sampled_from(
            [
                None,
                {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
                {"type": "Service", "principalId": "other.amazonaws.com"},
                {"type": "User", "principalId": "dynamodb.amazonaws.com"},
            ]
        )
    )
    if identity is not None:
        record["userIdentity"] = identity
    return record


def eventbridge_match(pattern: dict[str, Any], record: dict[str, Any]) -> bool:
    """moto's EventBridge matcher, the reference (a record is an event to it: any JSON object)."""
    return passes([pattern], record)


@pytest.mark.parametrize("mode", sorted(FILTERS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record=records())
def test_the_matcher_agrees_with_eventbridge_patterns_on_every_modes_filters(mode: str, record: dict[str, Any]) -> None:
    for pattern in FILTERS[mode]:
        expected = eventbridge_match(pattern, record)
        assert matches(pattern, record) is expected, (mode, pattern, record)
    either = any(eventbridge_match(p, record) for p in FILTERS[mode])
    assert redrive_passes(FILTERS[mode], record) is either


def test_the_filters_do_let_records_through_and_keep_others_out() -> None:
    """Not a vacuous agreement: each mode's filter passes some records and drops others."""
    insert = {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "SCORE#1"}}, "NewImage": {TIME: {"S": "x"}}}}
    ttl_delete = {
        "eventName": "REMOVE",
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
        "dynamodb": {"Keys": {"PK": {"S": "u"}}, "OldImage": {TIME: {"N": "1"}}},
    }
    assert redrive_passes(FILTERS["eventbridge"], insert) and not redrive_passes(FILTERS["ttl"], insert)
    assert redrive_passes(FILTERS["ttl"], ttl_delete) and not redrive_passes(FILTERS["aggregate ignore"], ttl_delete)
    assert redrive_passes(FILTERS["aggregate ignore"], insert) and redrive_passes(FILTERS["polling"], insert)
