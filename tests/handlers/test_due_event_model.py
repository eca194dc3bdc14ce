"""The consumers' pydantic model of the due event (components/consumer.py, extra `consumer`).

GIVEN due events as the handlers make them WHEN a consumer parses them with Powertools' Parser, bare or inside the
envelope of the target that carried them (SQS, SNS, SNS to SQS, an EventBridge rule) THEN each is read with its
fields typed; and the model accepts what the shipped JSON Schema accepts: every variation the handlers make (offsets,
recurring firings, trimmed items, number keys) and none of the malformed ones, but for a field this version does not
know, which it ignores (docs/consumers.md: a later version may add fields). (The `due_events` fixture in
conftest.py also reads every event of every handler test with the model and writes it back unchanged.)
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import jsonschema
import pytest
from aws_lambda_powertools.utilities.parser import envelopes, parse
from pydantic import ValidationError
from st_core.dispatch import due_event, target_input
from st_core.naming import item_keys, occurrence_id

from components.consumer import DueEventModel
from tests.handlers.conftest import SCHEMA

DUE = datetime(2030, 3, 30, 8, tzinfo=UTC)
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))


def made(**extra: Any) -> dict[str, Any]:
    """A due event as the handlers make it (the text an SQS target receives, read back)."""
    named = item_keys({"SK": {"N": "7"}, "PK": {"S": "user#1"}}, {"partitionKey": "PK", "sortKey": "SK"})
    keys, occurrence = named.plain, occurrence_id(named, DUE)
    event = due_event(
        mode="eventbridge", table="reminders", keys=keys, due=DUE, item={**keys, "name": "Ada"}, occurrence=occurrence
    )
    document: dict[str, Any] = json.loads(target_input({"kind": "sqs", "arn": "arn:aws:sqs:::q"}, event))
    return {**document, **extra}


def sqs_event(*bodies: str) -> dict[str, Any]:
    records = [
        {
            "messageId": f"m{n}",
            "receiptHandle": "r",
            "body": body,
            "attributes": {
                "ApproximateReceiveCount": "1",
                "SentTimestamp": "1700000000000",
                "SenderId": "AROA",
                "ApproximateFirstReceiveTimestamp": "1700000000000",
            },
            "messageAttributes": {},
            "md5OfBody": "0" * 32,
            "eventSource": "aws:sqs",
            "eventSourceARN": "arn:aws:sqs:eu-west-1:123456789012:reminders",
            "awsRegion": "eu-west-1",
        }
        for n, body in enumerate(bodies)
    ]
    return {"Records": records}


def sns_notification(message: str) -> dict[str, Any]:
    return {
        "SignatureVersion": "1",
        "Timestamp": "2030-03-30T08:00:01.000Z",
        "Signature": "s",
        "SigningCertUrl": "https://sns.eu-west-1.amazonaws.com/cert.pem",
        "MessageId": "5f4c6b0e-0000-4000-8000-000000000000",
        "Message": message,
        "MessageAttributes": {},
        "Type": "Notification",
        "UnsubscribeUrl": "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe",
        "TopicArn": "arn:aws:sns:eu-west-1:123456789012:reminders",
        "Subject": None,
    }


def one(event: dict[str, Any], envelope: Any = None) -> DueEventModel:
    """Parser's `parse`, for an envelope holding one event (or none: the event itself)."""
    parsed = parse(event=event, model=DueEventModel, envelope=envelope)
    [result] = parsed if isinstance(parsed, list) else [parsed]
    assert isinstance(result, DueEventModel)
    return result


def test_a_function_or_state_machine_target_parses_the_event_itself() -> None:
    parsed = one(made())
    assert parsed.occurrence_id == made()["occurrenceId"] and parsed.due_at == DUE
    assert parsed.keys == {"PK": "user#1", "SK": 7} and parsed.item["name"] == "Ada" and parsed.offset_seconds is None


def test_a_queue_target_parses_in_the_sqs_envelope() -> None:
    first, second = made(), made(offsetSeconds=-3600)
    parsed = parse(
        event=sqs_event(json.dumps(first), json.dumps(second)), model=DueEventModel, envelope=envelopes.SqsEnvelope
    )
    assert isinstance(parsed, list)
    assert [event.offset_seconds for event in parsed if isinstance(event, DueEventModel)] == [None, -3600]


def test_a_topic_target_parses_in_the_sns_envelopes() -> None:
    notification = sns_notification(json.dumps(made()))
    direct = {
        "Records": [
            {
                "EventVersion": "1.0",
                "EventSubscriptionArn": "arn:aws:sns:eu-west-1:123456789012:r:1",
                "EventSource": "aws:sns",
                "Sns": notification,
            }
        ]
    }
    parsed = one(direct, envelopes.SnsEnvelope)
    assert parsed.table == "reminders"
    # A topic feeding a queue (raw delivery off): the queue's body is the notification.
    assert one(sqs_event(json.dumps(notification)), envelopes.SnsSqsEnvelope) == parsed


def test_an_event_bus_target_parses_in_the_eventbridge_envelope() -> None:
    event = {
        "version": "0",
        "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
        "detail-type": "scheduled-table.due",
        "source": "scheduled-table",
        "account": "123456789012",
        "time": "2030-03-30T08:00:01Z",
        "region": "eu-west-1",
        "resources": [],
        "detail": made(recurrence="cron(0 8 * * ? *)", timeZone="Europe/London"),
    }
    parsed = one(event, envelopes.EventBridgeEnvelope)
    assert (parsed.recurrence, parsed.time_zone) == ("cron(0 8 * * ? *)", "Europe/London")


VALID = {
    "as made": {},
    "an offset": {"offsetSeconds": -86400},
    "a recurring firing": {"recurrence": " rate(1 day)", "timeZone": "UTC"},
    "a trimmed item": {"item": {}, "itemTrimmed": True},
    "a firing's id": {"occurrenceId": "abc@2030-03-30T08:00:00Z"},
    "a float key": {"keys": {"PK": 1.5}},
}


def mutated(change: Any) -> dict[str, Any]:
    document = made()
    if callable(change):
        change(document)
    else:
        document.update(change)
    return document


INVALID = {
    "no occurrenceId": lambda d: d.pop("occurrenceId"),
    "no item": lambda d: d.pop("item"),
    "no keys": lambda d: d.pop("keys"),
    "another source": {"source": "aws.scheduler"},
    "aggregate mode": {"mode": "aggregate"},
    "an empty table": {"table": ""},
    "no key": {"keys": {}},
    "three keys": {"keys": {"a": "1", "b": "2", "c": "3"}},
    "a boolean key": {"keys": {"PK": True}},
    "a null key": {"keys": {"PK": None}},
    "milliseconds in dueAt": {"dueAt": "2030-03-30T08:00:00.000Z"},
    "an offset in dueAt": {"dueAt": "2030-03-30T09:00:00+01:00"},
    "a number dueAt": {"dueAt": 1900000000},
    "itemTrimmed false": {"itemTrimmed": False},
    "itemTrimmed null": {"itemTrimmed": None},
    "offsetSeconds as text": {"offsetSeconds": "5"},
    "offsetSeconds null": {"offsetSeconds": None},
    "a recurrence without its zone": {"recurrence": "rate(1 day)"},
    "a zone without a recurrence": {"timeZone": "UTC"},
    "not an expression": {"recurrence": "every day", "timeZone": "UTC"},
    "a bad occurrenceId": {"occurrenceId": "has space"},
    "an item that is a list": {"item": []},
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_the_model_accepts_what_the_schema_accepts(name: str) -> None:
    document = mutated(VALID[name])
    VALIDATOR.validate(document)
    parsed = DueEventModel.model_validate(document)
    assert parsed.model_dump(mode="json", by_alias=True, exclude_none=True) == document


@pytest.mark.parametrize("name", sorted(INVALID))
def test_the_model_refuses_what_the_schema_refuses(name: str) -> None:
    document = mutated(copy.deepcopy(INVALID[name]) if isinstance(INVALID[name], dict) else INVALID[name])
    assert not VALIDATOR.is_valid(document), name
    with pytest.raises(ValidationError):
        DueEventModel.model_validate(document)


def loaded_after(statement: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules with these prefixes a fresh interpreter has loaded after running `statement`."""
    probe = f"import sys; {statement}; print(sorted(m.split('.')[0] for m in sys.modules if m.startswith({prefixes})))"
    repo = SCHEMA.parents[2]
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=repo)
    return sorted(set(json.loads(result.stdout.replace("'", '"'))))


def test_the_component_loads_no_pydantic_and_the_model_loads_no_pulumi() -> None:
    """The model is for consumers only: the component and its testing kit never load pydantic, and a consumer that
    loads the model loads no Pulumi (a Lambda function ships the package without its dependencies)."""
    assert loaded_after("import components, components.testing", ("pydantic",)) == []
    assert loaded_after("from components.consumer import DueEventModel", ("pulumi",)) == []


def test_a_field_a_later_version_adds_is_ignored_where_the_schema_of_this_version_refuses_it() -> None:
    document = made(addedLater={"x": 1})
    assert not VALIDATOR.is_valid(document)
    assert DueEventModel.model_validate(document) == DueEventModel.model_validate(made())
