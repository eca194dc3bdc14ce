"""Property-based: stream records with random attribute types and values, missing keys, wrong time formats, huge
items and unicode keys. No handler may raise for them, none may leave a record for retry (no fault is injected),
and every record it could not use is in the poison queue with a reason."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable
from typing import Any

import aggregate
import eventbridge
import polling_assign
import ttl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from st_core.constants import OWNED_QUEUE_MESSAGE_BYTES

from tests.handlers.conftest import Env
from tests.handlers.test_aggregate import agg_env  # noqa: F401  (fixtures)
from tests.handlers.test_polling import polling_env  # noqa: F401
from tests.handlers.test_ttl import TTL_IDENTITY, ttl_env  # noqa: F401

EXAMPLES = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)

text = st.text(min_size=0, max_size=40)
scalar = st.one_of(
    text.map(lambda s: {"S": s}),
    st.integers(min_value=-(10**15), max_value=10**15).map(lambda n: {"N": str(n)}),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(lambda f: {"N": repr(f)}),
    st.booleans().map(lambda b: {"BOOL": b}),
    st.just({"NULL": True}),
    st.binary(max_size=16).map(lambda b: {"B": __import__("base64").b64encode(b).decode()}),
)
value = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda v: {"L": v}),
        st.dictionaries(text, inner, max_size=3).map(lambda v: {"M": v}),
    ),
    max_leaves=6,
)
times = st.one_of(
    st.just({"S": "2030-01-01T10:00:00Z"}),
    st.just({"S": "2030-01-01T12:00:00+02:00"}),
    st.just({"N": "1893492000"}),
    st.just({"N": "1893492000000"}),  # milliseconds
    st.just({"S": "next tuesday"}),
    st.just({"S": ""}),
    value,
)
huge = st.integers(min_value=0, max_value=1).map(lambda big: {"S": "x" * (300_000 if big else 10)})


@st.composite
def records(draw: st.DrawFn, time_attribute: str, value_attribute: str = "Score") -> list[dict[str, Any]]:
    out = []
    for n in range(draw(st.integers(min_value=1, max_value=6))):
        pk = draw(st.one_of(text.map(lambda s: {"S": "SCORE" + s}), text.map(lambda s: {"S": s}), scalar))
        keys: dict[str, Any] = draw(st.sampled_from([{"PK": pk, "SK": {"S": draw(text)}}, {"PK": pk}, {}]))
        image = {**keys, **draw(st.dictionaries(text, value, max_size=3))}
        if draw(st.booleans()):
            image[time_attribute] = draw(times)
        if draw(st.booleans()):
            image[value_attribute] = draw(st.one_of(scalar, st.just({"N": "7"})))
        if draw(st.booleans()):
            image["blob"] = draw(huge)
        name = draw(st.sampled_from(["INSERT", "MODIFY", "REMOVE"]))
        data: dict[str, Any] = {"Keys": keys, "SequenceNumber": str(10**20 + n), "StreamViewType": "NEW_AND_OLD_IMAGES"}
        if name != "REMOVE":
            data["NewImage"] = image
        if name != "INSERT":
            data["OldImage"] = copy.deepcopy(image)
        record: dict[str, Any] = {"eventID": uuid.uuid4().hex, "eventName": name, "dynamodb": data}
        if name == "REMOVE" and draw(st.booleans()):
            record["userIdentity"] = TTL_IDENTITY
        # Records Lambda never sends but a console test or a broken producer can: each must be parked alone.
        malformed = [None, "a string", {}, {**record, "dynamodb": None}, {**record, "dynamodb": "text"}]
        out.append(draw(st.sampled_from([record] * 5 + malformed)))
    return out


def check(env: Env, handle: Callable[[Any], Any], batch: list[dict[str, Any]]) -> None:
    response = handle({"Records": batch})
    assert response == {"batchItemFailures": []}
    for message in env.messages(env.poison_url):
        assert message["reason"], message
        assert len(json.dumps(message).encode()) < OWNED_QUEUE_MESSAGE_BYTES


@EXAMPLES
@given(batch=records("dueAt"))
def test_eventbridge_never_raises_and_parks_what_it_cannot_use(env: Env, batch: list[dict[str, Any]]) -> None:
    check(env, lambda e: eventbridge.handle_batch(e, env.config), batch)


@EXAMPLES
@given(batch=records("dueAt"))
def test_ttl_never_raises_and_parks_what_it_cannot_use(ttl_env: Env, batch: list[dict[str, Any]]) -> None:  # noqa: F811
    ttl_env.configure(precise=True)
    check(ttl_env, lambda e: ttl.handle_batch(e, ttl_env.config), batch)


@EXAMPLES
@given(batch=records("dueAt"))
def test_polling_assigner_never_raises_and_parks_what_it_cannot_use(
    polling_env: Env,  # noqa: F811
    batch: list[dict[str, Any]],
) -> None:
    check(polling_env, lambda e: polling_assign.handle_assign_batch(e, polling_env.config), batch)


@EXAMPLES
@given(batch=records("dueAt"))
def test_aggregate_never_raises_and_parks_what_it_cannot_use(agg_env: Env, batch: list[dict[str, Any]]) -> None:  # noqa: F811
    agg_env.configure(on_change="adjust")
    check(agg_env, lambda e: aggregate.handle_batch(e, agg_env.config), batch)
