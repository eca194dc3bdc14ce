"""The target registry: each kind of target declared once (its class in components/target_types/, its handlers'
declaration in handlers/st_core/target_types/), and every consumer enumerating kinds from there: the checks, the
stack file and provider forms, the policies, the handler configuration, the dispatch, the local cloud's IAM layer,
the tests' expectations and the generated docs. A kind added to the registry alone (tests/support/
throwaway_target.py) is validated, granted, dispatched and documented with no other file touched."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from st_core import dispatch
from st_core import target_types as handler_types

import components
from components import ScheduledTableArgs, policies, provider, reference, target_types
from components.args import OPTION_DOCS
from components.inputs import args_from_inputs
from components.packaging import runtime_module
from components.stack_config import target_from_config, target_type_names
from components.target_base import declaration
from components.targets import TARGET_TYPES
from localcloud.iam import templated_action
from tests.components.conftest import Built
from tests.iam import test_granted
from tests.iam.requests import Where
from tests.iam.scheduler_targets import target_requests
from tests.support import throwaway_target
from tests.support.throwaway_target import KinesisTarget

TABLE = "arn:aws:dynamodb:eu-west-1:123456789012:table/t"
SENDER = "reminders@example.com"


def example(cls: type[Any]) -> Any:
    """An instance of a target class from its kind's example ARN (email: a sender)."""
    if cls.arn_field is None:
        return cls(SENDER)
    arn = declaration(cls.kind).ARN_EXAMPLE
    return cls(arn)


def test_each_kind_is_one_class_and_one_handler_declaration() -> None:
    classes = target_types.classes()
    kinds = [cls.kind for cls in classes]
    assert sorted(kinds) == sorted(t.KIND for t in handler_types.every())
    assert len(set(kinds)) == len(kinds) and len({cls.stack_type for cls in classes}) == len(classes)
    # The static `Target` type and the public API name every class the registry has.
    assert set(TARGET_TYPES) == set(classes)
    assert {cls.__name__ for cls in classes} <= set(components.__all__)
    for cls in classes:
        declared = declaration(cls.kind)
        fields = {f.name for f in dataclasses.fields(cls)}
        # A class takes a KMS key exactly when its senders need one of the key's actions.
        assert ("kms_key_arn" in fields) == bool(declared.KMS_ACTIONS), cls.__name__
        assert (cls.arn_field is None) == (declared.ARN_RESOURCE == ""), cls.__name__


@pytest.mark.parametrize("cls", target_types.classes(), ids=lambda c: c.__name__)
def test_every_consumer_knows_every_kind(cls: type[Any], build: Callable[..., Built]) -> None:
    declared = declaration(cls.kind)
    target = example(cls)
    arn = target.arn
    # The forms a user writes: a stack file's `type`, the provider's `kind`.
    assert cls.stack_type in target_type_names()
    given = {"arn": arn} if cls.arn_field else {"sender": SENDER}
    assert target_from_config({"type": cls.stack_type, **given}) == target
    assert args_from_inputs({"mode": "ttl", "target": {"kind": cls.stack_type, **given}}).target == target
    # The docs and the schema.
    assert f"`{cls.__name__}`" in OPTION_DOCS["target"] and f"`{cls.stack_type}`" in reference.intro()
    assert f"| `{cls.__name__}` (`{cls.stack_type}`) |" in reference.page()
    assert f'= "{cls.stack_type}"' in provider.render_inputs()
    # The policies: the kind's actions, for Scheduler and for the functions.
    sender = SENDER if cls.arn_field is None else None
    scheduler = policies.target_statements(cls.kind, arn, home_arn=TABLE, sender=sender)
    direct = policies.direct_dispatch_statements(cls.kind, arn, home_arn=TABLE, sender=sender)
    assert scheduler[0]["Action"] == list(declared.SCHEDULER_ACTIONS)
    assert sorted(a for s in direct for a in s["Action"]) == sorted(declared.SEND_ACTIONS)
    # What the functions read, what Scheduler and the local cloud ask IAM for, what the tests expect granted.
    config = build(mode="ttl", target=target).handler_config()["target"]
    assert config["kind"] == cls.kind
    schedule_target = runtime_module("dispatch").scheduler_target(
        config, {"roleArn": "r", "deadLetterArn": "d", "maxEventAgeSeconds": 60, "maxRetryAttempts": 1}, "{}"
    )
    if not declared.SCHEDULER_ARN:
        assert templated_action(arn) == (declared.SCHEDULER_ACTIONS[0], declared.SERVICE)
        requested = target_requests(schedule_target, Where("eu-west-1", "123456789012"))
        assert [r.action for r in requested] == list(declared.SCHEDULER_ACTIONS)
    assert cls.kind in test_granted.KINDS


@pytest.fixture
def kinesis() -> Iterator[None]:
    """The throwaway kind registered with the component, the handlers' runtime it reads, and the handlers as the
    handler tests import them; removed again afterwards."""
    registries = [runtime_module("target_types"), handler_types]
    target_types.register(KinesisTarget)
    for registry in registries:
        registry.register(throwaway_target)
    yield
    target_types.unregister("kinesis")
    for registry in registries:
        registry.unregister("kinesis")


STREAM = "arn:aws:kinesis:eu-west-1:123456789012:stream/due"


def test_a_kind_added_through_the_registry_alone_is_validated(kinesis: None) -> None:
    with pytest.raises(ValueError, match=r"KinesisTarget.stream_arn: 'due' is not a full ARN \(a name\?\); pass the "):
        KinesisTarget("due")
    assert target_from_config({"type": "kinesisStream", "arn": STREAM}) == KinesisTarget(STREAM)
    args = ScheduledTableArgs(mode="ttl", target=KinesisTarget(STREAM))  # type: ignore[arg-type]
    assert args.target == KinesisTarget(STREAM)
    with pytest.raises(ValueError, match=r"target\.type: 'kinesis' is not a target type; did you mean kinesisStream"):
        target_from_config({"type": "kinesis", "arn": STREAM})


def test_a_kind_added_through_the_registry_alone_is_granted(kinesis: None, build: Callable[..., Built]) -> None:
    key = "arn:aws:kms:eu-west-1:123456789012:key/k"
    built = build(target=KinesisTarget(STREAM, kms_key_arn=key))
    put = {"Effect": "Allow", "Action": ["kinesis:PutRecord"], "Resource": [STREAM]}
    through_kinesis = {"StringEquals": {"kms:ViaService": "kinesis.eu-west-1.amazonaws.com"}}
    use_key = {"Effect": "Allow", "Action": ["kms:GenerateDataKey"], "Resource": [key], "Condition": through_kinesis}
    for policy in ("rem-scheduler-exec-policy", "rem-scheduler-policy"):
        assert put in built.statements(policy) and use_key in built.statements(policy), policy
    assert built.handler_config()["target"] == {"kind": "kinesis", "arn": STREAM}


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def get(self, service: str) -> Any:
        recorder = self

        class Client:
            def put_record(self, **request: Any) -> None:
                recorder.calls.append((service, request))

        return Client()


def test_a_kind_added_through_the_registry_alone_is_dispatched(kinesis: None) -> None:
    target: Any = {"kind": "kinesis", "arn": STREAM}
    event = dispatch.due_event(mode="ttl", table="t", keys={"PK": "a"}, due=_now(), item={}, occurrence="a-1")
    payload = dispatch.target_input(target, event)
    recorder = Recorder()
    dispatch.send_now(target, payload, occurrence="a-1", clients=recorder)  # type: ignore[arg-type]
    assert recorder.calls == [("kinesis", {"StreamARN": STREAM, "Data": payload.encode(), "PartitionKey": "a-1"})]
    scheduler: Any = {"roleArn": "r", "deadLetterArn": "d", "maxEventAgeSeconds": 60, "maxRetryAttempts": 1}
    scheduled = dispatch.scheduler_target(target, scheduler, payload)
    assert scheduled["Arn"] == STREAM and scheduled["KinesisParameters"] == {"PartitionKey": "scheduled-table"}
    assert templated_action(STREAM) == ("kinesis:PutRecord", "kinesis")
    assert "kinesis" in handler_types.templated_actions()


def test_a_kind_added_through_the_registry_alone_is_documented(kinesis: None) -> None:
    page = reference.page()
    assert "| `KinesisTarget` (`kinesisStream`) | `stream_arn` | (required) |" in page
    assert "`kinesisStream`" in reference.intro()
    assert "data stream" in provider.target_field_docs()["arn"]
    rendered = provider.render_inputs()
    assert '    KinesisStream = "kinesisStream"' in rendered
    assert json.dumps("kinesisStream") in rendered


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime(2030, 1, 1, tzinfo=UTC)
