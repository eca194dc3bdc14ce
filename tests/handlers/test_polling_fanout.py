"""`polling` fanned out (`shard_groups` > 1): the rule's invocation invokes the processor once per group of shards
with something due, and each of those ticks its group only, with the one delivery path (claims, completions,
backoffs) of a single tick. Against moto; the self-invocation is answered by a Stubber, as Lambda answers an
asynchronous invoke (202), after the call is checked against the role the component deploys."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import polling
import pytest
from botocore.stub import Stubber
from st_core.clients import CLIENTS

from tests.handlers.conftest import Env, with_due_index
from tests.iam.roles import role_for

NOW = float(int(time.time()))


@pytest.fixture
def fanned(env: Env) -> Iterator[Env]:
    env = with_due_index(env)
    env.configure(shard_groups=4)
    yield env


def pending(env: Env, pk: str, due: float, shard: int) -> None:
    env.put({"PK": pk, "SK": "T", "stShard": shard, "stDue": int(due), "stStatus": "PENDING"})


def due_keys(env: Env) -> list[str]:
    return sorted(m["keys"]["PK"] for m in env.messages(env.due_queue_url))


def processor_arn(env: Env) -> str:
    """The processor's ARN as the deployed role names it (what Lambda's context gives the function)."""
    [statement] = [
        s for s in role_for(env.config, "processor").document["Statement"] if "lambda:InvokeFunction" in s["Action"]
    ]
    arn: str = statement["Resource"][0]
    return arn


class Invokes:
    """The processor's Lambda client, answering asynchronous invokes as Lambda does (202) and keeping their events."""

    def __init__(self, function: str, count: int) -> None:
        self.client = CLIENTS.get("lambda")
        self.stub = Stubber(self.client)
        self.function = function
        for _ in range(count):
            self.stub.add_response(
                "invoke", {"StatusCode": 202}, {"FunctionName": function, "InvocationType": "Event", "Payload": _ANY}
            )
        self.events: list[dict[str, Any]] = []
        self.client.meta.events.register("provide-client-params.lambda.Invoke", self._seen)

    def _seen(self, params: dict[str, Any], **_: Any) -> None:
        self.events.append(json.loads(params["Payload"]))


class _Any:
    def __eq__(self, other: object) -> bool:
        return True


_ANY = _Any()


def test_shards_split_into_disjoint_groups_covering_every_shard() -> None:
    for shards in range(1, 20):
        for groups in range(1, shards + 3):
            split = polling.shard_groups(shards, groups)
            flat = sorted(s for group in split for s in group)
            assert flat == list(range(shards)) and all(split), (shards, groups, split)
            assert len(split) == min(groups, shards)


def test_the_rules_invocation_invokes_one_processor_per_group_with_something_due(fanned: Env) -> None:
    # GIVEN items due in shards 0 and 5 only, and one in shard 2 due later (8 shards in 4 groups: s mod 4)
    pending(fanned, "a", NOW - 5, shard=0)
    pending(fanned, "b", NOW - 5, shard=5)
    pending(fanned, "later", NOW + 60, shard=2)
    invokes = Invokes(processor_arn(fanned), 2)
    with invokes.stub:
        fanned_out = polling.fan_out(fanned.config, invokes.function, now=lambda: NOW)
        invokes.stub.assert_no_pending_responses()
    # THEN the groups of shards 0 and 5 are invoked, nothing is dispatched by the fan-out itself
    assert fanned_out.due_shards == [0, 5]
    assert sorted(e["shards"] for e in invokes.events) == [[0, 4], [1, 5]]
    assert due_keys(fanned) == []
    # WHEN each invocation ticks its group: every due item once, the later one waits
    reports = [polling.process(fanned.config, now=lambda: NOW, shards=e["shards"]) for e in invokes.events]
    assert sum(r.dispatched for r in reports) == 2 and due_keys(fanned) == ["a", "b"]


def test_a_quiet_tick_invokes_nothing(fanned: Env) -> None:
    pending(fanned, "later", NOW + 60, shard=3)
    invokes = Invokes(processor_arn(fanned), 0)
    with invokes.stub:
        assert polling.fan_out(fanned.config, invokes.function, now=lambda: NOW).invoked == []


def test_a_group_invocation_takes_only_its_shards(fanned: Env) -> None:
    for shard in range(8):
        pending(fanned, f"s{shard}", NOW - 1, shard=shard)
    report = polling.process(fanned.config, now=lambda: NOW, shards=[1, 5])
    assert report.dispatched == 2 and due_keys(fanned) == ["s1", "s5"]
    # the other groups' items are still due, for their own invocations
    assert polling.process(fanned.config, now=lambda: NOW).dispatched == 6


def test_a_group_invocation_never_fans_out_again(fanned: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """No loop: the event the fan-out sends names its shards, and an invocation given shards ticks them; shards
    out of range (an event not of our making) are ignored, not a crash."""
    from st_core.config import load_config
    from st_core.constants import CONFIG_VARIABLE

    monkeypatch.setenv(CONFIG_VARIABLE, json.dumps(fanned.config))
    pending(fanned, "a", time.time() - 5, shard=2)
    load_config.cache_clear()
    try:
        answer = polling.handler({"shards": [2, 6, 99, "x"]}, None)
    finally:
        load_config.cache_clear()
    assert answer["dispatched"] == 1 and due_keys(fanned) == ["a"]


def test_a_failed_invoke_fails_the_tick_after_trying_every_group(fanned: Env) -> None:
    pending(fanned, "a", NOW - 5, shard=0)
    pending(fanned, "b", NOW - 5, shard=1)
    function = processor_arn(fanned)
    invokes = Invokes(function, 0)
    invokes.stub.add_client_error("invoke", "TooManyRequestsException", http_status_code=429)
    invokes.stub.add_response("invoke", {"StatusCode": 202})
    with invokes.stub, pytest.raises(Exception, match="TooManyRequests"):
        polling.fan_out(fanned.config, function, now=lambda: NOW)
    assert len(invokes.events) == 2


def test_a_group_invocation_never_takes_an_item_before_its_time(fanned: Env) -> None:
    # items one second to a minute ahead of the invocation's clock, in the group's shards and others
    for offset in (1, 2, 30, 59):
        pending(fanned, f"ahead{offset}", NOW + offset, shard=offset % 8)
    pending(fanned, "now", NOW, shard=1)
    assert polling.process(fanned.config, now=lambda: NOW, shards=[1, 5]).dispatched == 1
    assert polling.process(fanned.config, now=lambda: NOW, shards=[2, 6]).dispatched == 0
    assert due_keys(fanned) == ["now"]
