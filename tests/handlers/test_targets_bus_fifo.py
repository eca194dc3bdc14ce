"""Event bus and FIFO queue targets against moto, in every mode that has a target: what arrives (observed through
a bus rule into a queue, or the FIFO queue's own message attributes), what a schedule's target looks like and what
Scheduler would do with it, and that a refused PutEvents entry or a redelivered occurrence is neither lost nor
doubled."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import eventbridge
import polling
import pytest
import ttl
from botocore.exceptions import ClientError
from st_core import constants
from st_core.clients import CLIENTS, Clients
from st_core.config import TargetConfig
from st_core.dispatch import due_event, send_now, target_input
from st_core.fifo import deduplication_id, message_group, sqs_token

from components.targets import EventBusTarget, QueueTarget, TopicTarget
from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT, Env, with_due_index
from tests.iam.enforce import acting_for_target

NOW = datetime.now(UTC).replace(microsecond=0)
TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


# -- fixtures and what AWS would do -------------------------------------------------------------------------------


@pytest.fixture
def bus(env: Env) -> Iterator[tuple[str, str]]:
    """An event bus whose rule copies every scheduled-table event to a queue, so a test can read what the bus got:
    (bus ARN, that queue's URL). PutEvents entries over 256 KiB are refused, as AWS refuses them."""
    events = env_client(env, "events")
    name = f"orders-{env.table}"
    arn = events.create_event_bus(Name=name)["EventBusArn"]
    url = env.sqs.create_queue(QueueName=f"seen-{env.table}")["QueueUrl"]
    queue_arn = env.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    pattern = {"source": ["scheduled-table", "com.example.reminders"]}
    events.put_rule(Name="copy", EventBusName=name, EventPattern=json.dumps(pattern))
    events.put_targets(Rule="copy", EventBusName=name, Targets=[{"Id": "seen", "Arn": queue_arn}])
    CLIENTS.get("events").meta.events.register("before-parameter-build.events.PutEvents", _entry_size_rule)
    yield arn, url


def _entry_size_rule(params: dict[str, Any], **_: Any) -> None:
    # AWS counts Source, DetailType and Detail (and 14 bytes for Time) against the entry's 256 KiB; moto does not.
    for entry in params["Entries"]:
        used = sum(len(entry.get(k, "").encode()) for k in ("Source", "DetailType", "Detail"))
        if used + (14 if "Time" in entry else 0) > constants.EVENTBRIDGE_ENTRY_BYTES:
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "entry over 256 KiB"}}, "PutEvents")


def env_client(env: Env, service: str) -> Any:
    import boto3

    return boto3.client(service, region_name=REGION)


def on_bus(env: Env, url: str) -> list[dict[str, Any]]:
    """The events the bus's rule copied to its queue (each the whole EventBridge event)."""
    return env.messages(url)


def fifo(env: Env, *, content_based: bool = False) -> tuple[str, str]:
    """A FIFO queue (SQS's default 256 KiB messages): its ARN and URL."""
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true" if content_based else "false"}
    url = env.sqs.create_queue(QueueName=f"jobs-{env.table}.fifo", Attributes=attributes)["QueueUrl"]
    return f"arn:aws:sqs:{REGION}:{ACCOUNT}:jobs-{env.table}.fifo", url


def fifo_messages(env: Env, url: str) -> list[tuple[dict[str, Any], str, str]]:
    """Everything in the FIFO queue, in order: (body, MessageGroupId, MessageDeduplicationId)."""
    found: list[tuple[dict[str, Any], str, str]] = []
    while True:
        batch = env.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]).get(
            "Messages", []
        )
        if not batch:
            return found
        for m in batch:
            found.append(
                (json.loads(m["Body"]), m["Attributes"]["MessageGroupId"], m["Attributes"]["MessageDeduplicationId"])
            )
            env.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def fire(env: Env, schedule: dict[str, Any]) -> None:
    """What EventBridge Scheduler does with a schedule's templated target when it fires: PutEvents with the
    target's Source and DetailType and its Input as Detail; SendMessage with its MessageGroupId and no
    deduplication id (Scheduler has none to give)."""
    target = schedule["Target"]
    if "EventBridgeParameters" in target:
        parameters = target["EventBridgeParameters"]
        entry = {
            "EventBusName": target["Arn"],
            "Source": parameters["Source"],
            "DetailType": parameters["DetailType"],
            "Detail": target["Input"],
        }
        answer = env_client(env, "events").put_events(Entries=[entry])
        assert answer["FailedEntryCount"] == 0, answer
    else:
        url = env.sqs.get_queue_url(QueueName=target["Arn"].split(":")[-1])["QueueUrl"]
        group = target["SqsParameters"]["MessageGroupId"]
        env.sqs.send_message(QueueUrl=url, MessageBody=target["Input"], MessageGroupId=group)


def refuse_entries(code: str, times: int = 1) -> list[dict[str, Any]]:
    """PutEvents answers 200 with FailedEntryCount 1 and the entry's ErrorCode, `times` times, as AWS does when it
    refuses an entry (throttling, a bus policy), then lets calls through. Returns the refused requests."""
    refused: list[dict[str, Any]] = []

    def answer(params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]] | None:
        if len(refused) >= times:
            return None
        refused.append(params)  # the handlers put one entry per call
        entries = [{"ErrorCode": code, "ErrorMessage": f"injected {code}"}]
        return SimpleNamespace(status_code=200, headers={}), {"FailedEntryCount": 1, "Entries": entries}

    CLIENTS.get("events").meta.events.register("before-call.events.PutEvents", answer)
    return refused


def as_ttl(env: Env) -> Env:
    return env.configure(mode="ttl")


def expire(env: Env, pk: str, sk: str = "S") -> Any:
    """DynamoDB's TTL deleting the item: the REMOVE record, as a service deletion."""
    env.delete(pk, sk)
    removes = [r for r in env.event()["Records"] if r["eventName"] == "REMOVE"]
    return {"Records": [{**r, "userIdentity": TTL_IDENTITY} for r in removes]}


def ttl_item(env: Env, pk: str, **extra: Any) -> Any:
    """An item whose TTL deletion just came: its REMOVE record."""
    env.put({"PK": pk, "SK": "S", "dueAt": int(NOW.timestamp()), **extra})
    env.event()
    return expire(env, pk)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# -- the event bus -------------------------------------------------------------------------------------------------


def test_a_past_due_item_is_put_on_the_bus_as_the_events_detail(env: Env, bus: tuple[str, str]) -> None:
    # GIVEN eventbridge mode with an event bus target, and an item already due when written
    arn, seen = bus
    env.configure(target=EventBusTarget(bus_arn=arn))
    env.put({"PK": "user#1", "SK": "appt#1", "dueAt": iso(NOW - timedelta(minutes=5)), "name": "Ada"})
    # WHEN the batch is handled (Scheduler cannot fire in the past: the Lambda puts the event itself)
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    # THEN one event reached the bus's rule, with the due event as its detail
    (event,) = on_bus(env, seen)
    assert (event["source"], event["detail-type"]) == ("scheduled-table", "scheduled-table.due")
    assert event["detail"]["keys"] == {"PK": "user#1", "SK": "appt#1"} and event["detail"]["item"]["name"] == "Ada"
    assert event["detail"]["dueAt"] == iso(NOW - timedelta(minutes=5))


def test_a_schedule_delivers_through_schedulers_templated_eventbridge_target(env: Env, bus: tuple[str, str]) -> None:
    arn, seen = bus
    env.configure(target=EventBusTarget(bus_arn=arn, detail_type="Reminder due", source="com.example.reminders"))
    env.put({"PK": "user#1", "SK": "appt#2", "dueAt": iso(NOW + timedelta(days=2)), "name": "Ada"})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    target = schedule["Target"]
    assert target["Arn"] == arn
    assert target["EventBridgeParameters"] == {"DetailType": "Reminder due", "Source": "com.example.reminders"}
    assert "SqsParameters" not in target and on_bus(env, seen) == []  # nothing is sent before the schedule fires
    # WHEN Scheduler fires it, THEN its Input is the event's detail
    fire(env, schedule)
    (event,) = on_bus(env, seen)
    assert (event["source"], event["detail-type"]) == ("com.example.reminders", "Reminder due")
    assert event["detail"] == json.loads(target["Input"]) and event["detail"]["keys"]["SK"] == "appt#2"


def test_ttl_puts_the_due_event_on_the_bus(env: Env, bus: tuple[str, str]) -> None:
    arn, seen = bus
    env.configure(mode="ttl", target=EventBusTarget(bus_arn=arn))
    assert ttl.handle_batch(ttl_item(env, "offer#1"), env.config) == {"batchItemFailures": []}
    (event,) = on_bus(env, seen)
    assert event["detail"]["mode"] == "ttl" and event["detail"]["keys"] == {"PK": "offer#1", "SK": "S"}


def test_polling_puts_the_due_event_on_the_bus(env: Env, bus: tuple[str, str]) -> None:
    arn, seen = bus
    with_due_index(env).configure(target=EventBusTarget(bus_arn=arn))
    env.put({"PK": "job#1", "SK": "T", "stShard": 0, "stDue": int(NOW.timestamp()) - 1, "stStatus": "PENDING"})
    assert polling.process(env.config, now=lambda: NOW.timestamp()).dispatched == 1
    (event,) = on_bus(env, seen)
    assert event["detail"]["mode"] == "polling" and event["detail"]["keys"] == {"PK": "job#1", "SK": "T"}


def test_an_entry_refused_by_throttling_is_retried_and_arrives_once(env: Env, bus: tuple[str, str]) -> None:
    # GIVEN PutEvents answering 200 but refusing the entry (FailedEntryCount 1, ThrottlingException)
    arn, seen = bus
    env.configure(mode="ttl", target=EventBusTarget(bus_arn=arn))
    event = ttl_item(env, "offer#2")
    refused = refuse_entries("ThrottlingException")
    # WHEN the record is handled, THEN it is reported for retry, not counted as done
    first = ttl.handle_batch(event, env.config)
    assert len(refused) == 1 and first["batchItemFailures"] == [
        {"itemIdentifier": event["Records"][0]["dynamodb"]["SequenceNumber"]}
    ]
    assert on_bus(env, seen) == []
    # AND Lambda's retry delivers it, once
    assert ttl.handle_batch(event, env.config) == {"batchItemFailures": []}
    assert ttl.handle_batch(event, env.config) == {"batchItemFailures": []}
    assert [e["detail"]["keys"]["PK"] for e in on_bus(env, seen)] == ["offer#2"]


def test_an_entry_refused_for_good_is_parked_with_awss_reason(env: Env, bus: tuple[str, str]) -> None:
    arn, seen = bus
    env.configure(target=EventBusTarget(bus_arn=arn))
    env.put({"PK": "user#1", "SK": "appt#3", "dueAt": iso(NOW - timedelta(minutes=1))})
    refuse_entries("NotAuthorizedForSourceException")
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (parked,) = env.messages(env.poison_url)
    assert "NotAuthorizedForSourceException" in parked["reason"] and on_bus(env, seen) == []


def test_polling_backs_off_an_item_whose_entry_was_refused(env: Env, bus: tuple[str, str]) -> None:
    arn, seen = bus
    with_due_index(env).configure(target=EventBusTarget(bus_arn=arn))
    env.put({"PK": "job#2", "SK": "T", "stShard": 0, "stDue": int(NOW.timestamp()) - 1, "stStatus": "PENDING"})
    refuse_entries("InternalFailure")
    report = polling.process(env.config, now=lambda: NOW.timestamp())
    assert report.dispatched == 0 and on_bus(env, seen) == []
    item = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": "job#2"}, "SK": {"S": "T"}})["Item"]
    assert item["stStatus"]["S"] == "RETRY" and item["stAttempts"]["N"] == "1"


def test_a_due_event_too_big_for_an_entry_is_put_without_its_item(env: Env, bus: tuple[str, str]) -> None:
    arn, seen = bus
    env.configure(mode="ttl", target=EventBusTarget(bus_arn=arn))
    assert ttl.handle_batch(ttl_item(env, "big#1", blob="x" * 300_000), env.config) == {"batchItemFailures": []}
    (event,) = on_bus(env, seen)
    assert event["detail"]["itemTrimmed"] is True and event["detail"]["item"] == {}
    assert event["detail"]["keys"] == {"PK": "big#1", "SK": "S"}


# -- FIFO queues -----------------------------------------------------------------------------------------------------


def occurrences(env: Env) -> set[str]:
    """The occurrences the ttl executor claimed (its ledger's ids)."""
    return {i["id"]["S"] for i in env.ddb.scan(TableName=env.config["ttl"]["ledgerTable"])["Items"]}


def test_each_item_gets_a_message_group_of_its_own_and_the_occurrence_is_the_deduplication_id(env: Env) -> None:
    arn, url = fifo(env)
    env.configure(mode="ttl", target=QueueTarget(queue_arn=arn))
    for pk in ("offer#1", "offer#2"):
        assert ttl.handle_batch(ttl_item(env, pk), env.config) == {"batchItemFailures": []}
    found = fifo_messages(env, url)
    assert [(body["keys"]["PK"], group) for body, group, _ in found] == [
        ("offer#1", '{"PK":"offer#1","SK":"S"}'),
        ("offer#2", '{"PK":"offer#2","SK":"S"}'),
    ]
    # The ledger's id, the FIFO deduplication id and the due event's occurrenceId are one id.
    assert {dedupe for _, _, dedupe in found} == occurrences(env) == {body["occurrenceId"] for body, _, _ in found}


def test_polling_sends_to_a_fifo_queue_with_the_items_group(env: Env) -> None:
    arn, url = fifo(env)
    with_due_index(env).configure(target=QueueTarget(queue_arn=arn, message_group_id="jobs"))
    for pk in ("job#1", "job#2"):
        env.put({"PK": pk, "SK": "T", "stShard": 0, "stDue": int(NOW.timestamp()) - 1, "stStatus": "PENDING"})
    assert polling.process(env.config, now=lambda: NOW.timestamp()).dispatched == 2
    found = fifo_messages(env, url)
    assert sorted(body["keys"]["PK"] for body, _, _ in found) == ["job#1", "job#2"]
    assert {group for _, group, _ in found} == {"jobs"}  # one group for every message


def test_a_group_attribute_groups_items_and_an_item_without_it_keeps_a_group_of_its_own(env: Env) -> None:
    arn, url = fifo(env)
    env.configure(mode="ttl", target=QueueTarget(queue_arn=arn, message_group_attribute="customer"))
    for pk, extra in (
        ("o#1", {"customer": "c-7"}),
        ("o#2", {"customer": "c-7"}),
        ("o#3", {}),
        ("o#4", {"customer": ""}),
    ):
        assert ttl.handle_batch(ttl_item(env, pk, **extra), env.config) == {"batchItemFailures": []}
    groups = {body["keys"]["PK"]: group for body, group, _ in fifo_messages(env, url)}
    assert groups == {"o#1": "c-7", "o#2": "c-7", "o#3": '{"PK":"o#3","SK":"S"}', "o#4": '{"PK":"o#4","SK":"S"}'}


def test_a_redelivered_occurrence_reaches_the_fifo_queue_once(env: Env) -> None:
    # GIVEN the executor sent the message, then could not record that it did (the ledger's completion fails)
    arn, url = fifo(env)
    executor = as_ttl(env)
    executor.configure(target=QueueTarget(queue_arn=arn))
    event = ttl_item(env, "offer#9")
    ledger = executor.config["ttl"]["ledgerTable"]
    failures: list[int] = []

    def fail_completion(params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") == ledger and len(failures) < 5:  # every attempt of one completion
            failures.append(1)
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "injected"}}, "UpdateItem")

    CLIENTS.get("dynamodb").meta.events.register("before-parameter-build.dynamodb.UpdateItem", fail_completion)
    # reported for retry: the action may not be recorded
    assert ttl.handle_batch(event, env.config)["batchItemFailures"]
    # WHEN the claim's lease runs out and Lambda delivers the record again (a second send of the same occurrence)
    (occurrence,) = occurrences(env)
    env.ddb.update_item(
        TableName=ledger,
        Key={"id": {"S": occurrence}},
        UpdateExpression="SET leaseUntil = :gone",
        ExpressionAttributeValues={":gone": {"N": "0"}},
    )
    assert ttl.handle_batch(event, env.config) == {"batchItemFailures": []}
    # THEN SQS kept one message: the second had the same deduplication id within the 5-minute window
    assert [body["keys"]["PK"] for body, _, _ in fifo_messages(env, url)] == ["offer#9"]


@pytest.mark.parametrize("kind", ["sqs", "sns"])
def test_send_now_twice_is_one_message_and_another_occurrence_is_another(kind: str, env: Env) -> None:
    arn, url = fifo(env) if kind == "sqs" else fifo_topic(env)
    target: TargetConfig = {"kind": kind, "arn": arn}
    event = due_event(mode="ttl", table="t", keys={"PK": "k"}, due=NOW, item={}, occurrence="k#1")
    payload = target_input(target, event)
    clients = Clients()
    for occurrence in ("k#1", "k#1", "k#2"):
        with acting_for_target(target):
            send_now(target, payload, occurrence=occurrence, clients=clients)
    found = fifo_messages(env, url)
    assert [dedupe for _, _, dedupe in found] == [deduplication_id("k#1"), deduplication_id("k#2")]


def test_a_trimmed_event_keeps_its_group_attribute_and_so_its_group(env: Env) -> None:
    arn, url = fifo(env)
    env.configure(mode="ttl", target=QueueTarget(queue_arn=arn, message_group_attribute="customer"))
    event = ttl_item(env, "big#2", customer="c-9", blob="x" * 300_000)  # over the queue's 256 KiB
    assert ttl.handle_batch(event, env.config) == {"batchItemFailures": []}
    ((body, group, _),) = fifo_messages(env, url)
    assert body["itemTrimmed"] is True and body["item"] == {"customer": "c-9"} and group == "c-9"


def test_keys_or_values_sqs_cannot_take_as_a_group_are_hashed_within_its_limit() -> None:
    target: TargetConfig = {"kind": "sqs", "arn": "arn:aws:sqs:eu-west-1:123456789012:q.fifo"}
    for keys in ({"PK": "user with spaces"}, {"PK": "é"}, {"PK": "x" * 200}):
        payload = target_input(target, due_event(mode="ttl", table="t", keys=keys, due=NOW, item={}, occurrence="o"))
        group = message_group(target, payload)
        assert group == hashlib.sha256(json.dumps(keys, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()
    assert sqs_token("c-7") == "c-7" and len(deduplication_id("o" * 1000)) == 64


# -- FIFO through Scheduler (eventbridge mode) -------------------------------------------------------------------


def test_a_schedule_to_a_fifo_queue_names_the_items_group_and_relies_on_content_deduplication(env: Env) -> None:
    arn, url = fifo(env, content_based=True)
    env.configure(
        target=QueueTarget(queue_arn=arn, message_group_attribute="customer", content_based_deduplication=True)
    )
    env.put({"PK": "user#1", "SK": "appt#4", "dueAt": iso(NOW + timedelta(days=2)), "customer": "c-1"})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert schedule["Target"]["SqsParameters"] == {"MessageGroupId": "c-1"}
    assert "EventBridgeParameters" not in schedule["Target"]
    # WHEN Scheduler invokes it twice (it may, rarely), THEN the queue keeps one copy: same body, same content hash
    fire(env, schedule)
    fire(env, schedule)
    ((body, group, _),) = fifo_messages(env, url)
    assert (body["keys"]["SK"], group) == ("appt#4", "c-1")


def test_without_content_deduplication_the_queue_refuses_schedulers_messages(env: Env) -> None:
    # Why eventbridge mode requires QueueTarget(content_based_deduplication=True): Scheduler sends no
    # deduplication id, and such a FIFO queue refuses the message (Scheduler would retry, then dead-letter it).
    arn, _ = fifo(env)
    # A configuration the component refuses (that is the rule shown here): the target section written by hand.
    env.config["target"] = {"kind": "sqs", "arn": arn}
    env.put({"PK": "user#1", "SK": "appt#5", "dueAt": iso(NOW + timedelta(days=2))})
    eventbridge.handle_batch(env.event(), env.config)
    (schedule,) = env.schedules()
    with pytest.raises(ClientError) as caught:
        fire(env, schedule)
    assert caught.value.response["Error"]["Code"] == "InvalidParameterValue"


# -- SNS FIFO topics -----------------------------------------------------------------------------------------------


def fifo_topic(env: Env) -> tuple[str, str]:
    """A FIFO topic (no content-based deduplication) with a FIFO queue subscribed, raw: (topic ARN, queue URL). A
    publish to it without a message group is refused, as AWS refuses it."""
    sns = env_client(env, "sns")
    attributes = {"FifoTopic": "true", "ContentBasedDeduplication": "false"}
    topic = sns.create_topic(Name=f"news-{env.table}.fifo", Attributes=attributes)["TopicArn"]
    queue_arn, url = fifo(env)
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    return topic, url


def test_a_fifo_topic_gets_each_items_group_and_the_occurrence_as_deduplication_id(env: Env) -> None:
    topic, url = fifo_topic(env)
    env.configure(mode="ttl", target=TopicTarget(topic_arn=topic))
    for pk in ("offer#1", "offer#2", "offer#1"):  # offer#1's occurrence delivered twice: once
        assert ttl.handle_batch(ttl_item(env, pk), env.config) == {"batchItemFailures": []}
    found = fifo_messages(env, url)
    assert [(body["keys"]["PK"], group) for body, group, _ in found][:2] == [
        ("offer#1", '{"PK":"offer#1","SK":"S"}'),
        ("offer#2", '{"PK":"offer#2","SK":"S"}'),
    ]
    assert {dedupe for _, _, dedupe in found} == {body["occurrenceId"] for body, _, _ in found}
