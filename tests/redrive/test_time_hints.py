"""`time_hints.find`: of a sample of items, those without the configured time attribute, and the attributes holding
a time they carry instead (pure: the caller reads the sample).

GIVEN items as DynamoDB returns them (DynamoDB JSON) or as plain values WHEN some lack `time_attribute` THEN the hint
counts them, names what holds a time among their other attributes (most carried first), and suggests the fix.
"""

from __future__ import annotations

from decimal import Decimal

from components.cli.time_hints import TimeHint, find, holds_time


def test_every_item_with_the_attribute_is_no_hint() -> None:
    assert find([{"PK": "a", "dueAt": "2026-12-01T10:00:00Z"}], "dueAt") is None
    assert find([], "dueAt") is None


def test_items_under_another_name_are_counted_and_the_name_suggested() -> None:
    items = [{"PK": f"i{n}", "remindAt": "2026-12-01T10:00:00Z"} for n in range(42)] + [{"PK": "x", "dueAt": 1}]
    assert find(items, "dueAt") == TimeHint(
        missing=42,
        sampled=43,
        candidates=("remindAt",),
        message="42 of 43 items sampled have no `dueAt`; they have `remindAt` (42): set time_attribute='remindAt'?",
    )


def test_dynamodb_json_and_epoch_seconds_are_read_as_the_handlers_read_them() -> None:
    items = [
        {"PK": {"S": "a"}, "expiresAt": {"N": "1767225600"}, "title": {"S": "hello"}},
        {"PK": {"S": "b"}, "expiresAt": {"N": "1767225600"}, "startsAt": {"S": "2026-03-30T09:00:00"}},
    ]
    hint = find(items, "dueAt")
    assert hint is not None and hint.candidates == ("expiresAt", "startsAt")
    assert hint.message.endswith("they have `expiresAt` (2), `startsAt` (1): set time_attribute='expiresAt'?")


def test_numbers_that_are_no_time_and_other_types_are_not_candidates() -> None:
    """A count (epoch seconds of 1970), a boolean, a map, a list, a set, a millisecond time the handlers refuse."""
    assert not holds_time(3) and not holds_time({"N": "42"}) and not holds_time(True) and not holds_time({"BOOL": True})
    assert not holds_time({"M": {"at": {"S": "2026-12-01T10:00:00Z"}}}) and not holds_time({"SS": ["2026-12-01"]})
    assert not holds_time(1_767_225_600_000) and not holds_time("soon") and not holds_time(None)
    assert holds_time(Decimal("1767225600")) and holds_time("1767225600") and holds_time("2026-12-01T10:00:00+01:00")
    hint = find([{"PK": "a", "tries": 3, "done": False}], "dueAt")
    assert hint == TimeHint(
        1, 1, (), "1 of 1 item sampled has no `dueAt` and no other attribute holding a time: it is never scheduled"
    )


def test_the_most_carried_candidate_comes_first_then_the_closest_name() -> None:
    items = [
        {"createdAt": "2026-01-01T00:00:00Z", "due_at": "2026-12-01T10:00:00Z"},
        {"createdAt": "2026-01-01T00:00:00Z", "due_at": "2026-12-01T10:00:00Z"},
        {"createdAt": "2026-01-01T00:00:00Z"},
        {"a": "2026-01-01T00:00:00Z", "b": "2026-01-01T00:00:00Z", "c": "2026-01-01T00:00:00Z"},
    ]
    hint = find(items, "dueAt")
    assert hint is not None and hint.candidates == ("createdAt", "due_at", "a", "b", "c")
    assert "`createdAt` (3), `due_at` (2), `a` (1) and 2 more: set time_attribute='createdAt'?" in hint.message
    tie = find([{"dueDate": "2026-12-01", "createdAt": "2026-01-01T00:00:00Z"}], "dueAt")
    assert tie is not None and tie.candidates[0] == "dueDate"
