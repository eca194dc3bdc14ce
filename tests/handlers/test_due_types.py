"""A due attribute of a type no due time can be passes the mapping's real filter, as far as Lambda's five filters
have room (a null; in precise `ttl` a boolean too: components/filters.py), and is parked with a reason naming the
attribute and its DynamoDB type. Before, the filter dropped such records (only S and N passed): the item vanished
without a trace, and a null read as "no due time". The types left without room never reach the function: `inspect`
reports them (tests/redrive/test_inspect.py), and given to the function (as `reconcile` feeds them) they are
parked the same way."""

from __future__ import annotations

from typing import Any

import eventbridge
import pytest
import ttl

from components.modes.eventbridge import eventbridge_filters
from components.modes.ttl import ttl_filters
from tests.handlers.conftest import Env
from tests.support.patterns import LambdaFilter

UNUSABLE: dict[str, dict[str, Any]] = {
    "B": {"B": b"1893456000"},  # base64 text of these bytes could even read as epoch seconds
    "BOOL": {"BOOL": True},
    "NULL": {"NULL": True},
    "SS": {"SS": ["2030-01-01T00:00:00Z"]},
    "NS": {"NS": ["1893456000"]},
    "BS": {"BS": [b"\x00"]},
}
FUTURE_EPOCH = "1893456000"  # 2030-01-01T00:00:00Z


def configure(env: Env, mode: str) -> tuple[Any, LambdaFilter]:
    if mode == "eventbridge":
        return eventbridge.handle_batch, LambdaFilter(eventbridge_filters("dueAt"))
    env.configure(mode="ttl", precise=True)
    return ttl.handle_batch, LambdaFilter(ttl_filters("dueAt", precise=True))


def write(env: Env, pk: str, due: dict[str, Any] | None) -> None:
    item: dict[str, Any] = {"PK": {"S": pk}, "SK": {"S": "s"}}
    if due is not None:
        item["dueAt"] = due
    env.ddb.put_item(TableName=env.table, Item=item)


# The unusable types each mode's five filters pass (components/filters.py UNUSABLE_LEAF_TYPES, in order).
PASSED = {"eventbridge": ("NULL",), "precise ttl": ("NULL", "BOOL")}


@pytest.mark.parametrize(("mode", "tag"), [(m, t) for m in sorted(PASSED) for t in sorted(UNUSABLE)])
def test_an_unusable_due_type_is_parked_naming_it_and_reaches_the_function_where_the_filters_have_room(
    env: Env, mode: str, tag: str
) -> None:
    handle, mapping = configure(env, mode)
    write(env, "bad", UNUSABLE[tag])
    write(env, "plain", None)  # a shared table's other write: never passed to the function

    written = env.event()["Records"]
    records = mapping(written)

    if tag in PASSED[mode]:
        assert [r["dynamodb"]["Keys"]["PK"]["S"] for r in records] == ["bad"]
    else:  # no room left in Lambda's five filters: the function sees it when reconcile feeds it
        assert records == []
        records = [r for r in written if r["dynamodb"]["Keys"]["PK"]["S"] == "bad"]
    assert handle({"Records": records}, env.config) == {"batchItemFailures": []}
    (parked,) = env.messages(env.poison_url)
    assert parked["reason"].startswith(f"due attribute 'dueAt' is a DynamoDB {tag} ("), parked["reason"]
    assert parked["record"]["dynamodb"]["Keys"] == {"PK": {"S": "bad"}, "SK": {"S": "s"}}
    assert env.schedules() == []


@pytest.mark.parametrize("mode", ["eventbridge", "precise ttl"])
def test_a_due_time_changed_to_null_cancels_its_schedule_and_is_parked(env: Env, mode: str) -> None:
    """NULL is no "no due time": the write meant something, and the operator hears of it."""
    handle, mapping = configure(env, mode)
    write(env, "p", {"N": FUTURE_EPOCH})
    handle({"Records": mapping(env.event()["Records"])}, env.config)
    assert len(env.schedules()) == 1

    write(env, "p", {"NULL": True})
    assert handle({"Records": mapping(env.event()["Records"])}, env.config) == {"batchItemFailures": []}

    assert env.schedules() == []
    (parked,) = env.messages(env.poison_url)
    assert "'dueAt' is a DynamoDB NULL (null) value" in parked["reason"]
