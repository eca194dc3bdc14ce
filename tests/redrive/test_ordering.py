"""Redrive and ordering: Lambda hands the consumer an item's records in stream order, and the handlers rely on it
(a create replayed after the item's delete must not bring its schedule back). A redrive replays parked records
after later ones were applied, so it replays a record whole only while it is still the item's latest change, and
otherwise only what it says of the due time the item *left* (a cancel, or a delivery of a time that came), which
stays true whatever happened after it. Also: binary keys (Lambda's base64 text) and second precision's target
dead letters, which go back through the release path."""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import eventbridge
import pytest
import ttl
from st_core.dispatch import due_event, target_input
from st_core.poison import poison_message
from st_core.release import Release, envelope, handle_messages

from components.cli.redrive.ordering import schedules_of
from components.modes.eventbridge import eventbridge_filters
from components.targets import QueueTarget
from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT, Env, Stream
from tests.redrive.conftest import Function, aws, bodies, queue, run

NOW = datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def consumer(env: Env) -> Function:
    return Function(env, lambda event, config: eventbridge.handle_batch(event, config), eventbridge_filters("dueAt"))


def park(env: Env, record: dict[str, Any], reason: str = "ThrottlingException: Rate exceeded") -> None:
    """What the consumer parks for a record whose Scheduler call kept failing (a throttle, a refused policy)."""
    env.sqs.send_message(
        QueueUrl=env.poison_url,
        MessageBody=poison_message(record=record, reason=reason, error="E", mode=env.config["mode"], table=env.table),
    )


def schedule_times(env: Env) -> list[str]:
    return sorted(s["ScheduleExpression"] for s in env.schedules())


def at(moment: datetime) -> str:
    """The `at()` expression of the schedule of a due time on a whole minute."""
    return f"at({moment:%Y-%m-%dT%H:%M:%S})"


T1, T2, T3 = (NOW.replace(second=0) + timedelta(days=d) for d in (1, 2, 3))


# -- (a) a parked cancel is carried out, whatever the item holds now ------------------------------------------------


def test_a_parked_delete_cancels_the_old_schedule_although_the_item_was_created_again(env: Env) -> None:
    function = consumer(env)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T1)})
    eventbridge.handle_batch(env.event(), env.config)
    env.delete("a", "A")
    [remove] = env.event()["Records"]
    park(env, remove)  # DeleteSchedule was throttled until Lambda gave up: the T1 schedule stays
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T2)})  # the item again, with another time (applied)
    eventbridge.handle_batch(env.event(), env.config)
    assert schedule_times(env) == [at(T1), at(T2)]

    status, lines = run("poison", function)

    assert status == 0, lines
    assert schedule_times(env) == [at(T2)]  # T1 would have fired for an item that left it
    assert bodies(env, env.poison_url) == []
    assert lines[0].startswith("replayed") and "left" in lines[0]


def test_a_dry_run_says_a_superseded_cancel_would_be_replayed_for_the_time_it_left_only(env: Env) -> None:
    function = consumer(env)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T1)})
    eventbridge.handle_batch(env.event(), env.config)
    env.delete("a", "A")
    [remove] = env.event()["Records"]
    park(env, remove)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T2)})
    eventbridge.handle_batch(env.event(), env.config)

    status, lines = run("poison", function, "--dry-run")

    assert status == 0 and function.invoked == []
    assert lines[0].startswith("would replay") and "only the due time it left is replayed (its cancel)" in lines[0]
    assert schedule_times(env) == [at(T1), at(T2)] and len(bodies(env, env.poison_url)) == 1


def test_a_parked_move_cancels_the_time_it_left_and_does_not_make_the_time_it_moved_to(env: Env) -> None:
    function = consumer(env)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T1)})
    eventbridge.handle_batch(env.event(), env.config)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T2)})
    [move] = env.event()["Records"]
    park(env, move)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T3)})  # moved on again (applied: T2's delete finds nothing)
    eventbridge.handle_batch(env.event(), env.config)

    status, lines = run("poison", function)

    assert status == 0, lines
    assert schedule_times(env) == [at(T3)]
    assert bodies(env, env.poison_url) == []


def test_a_parked_cancel_whose_schedule_is_gone_is_dropped_without_a_replay(env: Env) -> None:
    function = consumer(env)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T1)})
    eventbridge.handle_batch(env.event(), env.config)
    env.delete("a", "A")
    [remove] = env.event()["Records"]
    park(env, remove)
    [schedule] = env.schedules()
    env.scheduler.delete_schedule(Name=schedule["Name"], GroupName=env.group)  # gone (an operator, a redelivery)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T2)})
    eventbridge.handle_batch(env.event(), env.config)

    status, lines = run("poison", function)

    assert status == 0, lines
    assert function.invoked == []
    assert schedule_times(env) == [at(T2)]
    assert lines[0].startswith("superseded") and "no longer exist" in lines[0]
    assert bodies(env, env.poison_url) == []


def test_a_parked_cancel_of_a_time_the_item_holds_again_leaves_its_schedule(env: Env) -> None:
    function = consumer(env)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T1)})
    eventbridge.handle_batch(env.event(), env.config)
    env.delete("a", "A")
    [remove] = env.event()["Records"]
    park(env, remove)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T1), "note": "back"})  # the same time again: its schedule is new
    eventbridge.handle_batch(env.event(), env.config)

    status, lines = run("poison", function)

    assert status == 0, lines
    assert schedule_times(env) == [at(T1)] and function.invoked == []
    assert lines[0].startswith("superseded") and "holds that time again" in lines[0]


def test_the_schedule_names_redrive_checks_are_the_handlers_names(env: Env) -> None:
    from st_core.naming import item_keys
    from st_core.stream import decode_image

    env.configure(offsets=[0, -3600])
    keys = {"PK": {"S": "a"}, "SK": {"B": "AAE="}}
    for value in (iso(T1), "rate(1 hour)"):
        image = {**keys, "dueAt": {"S": value}}
        record: Any = {"eventName": "REMOVE", "dynamodb": {"Keys": keys, "OldImage": image}}
        plain = decode_image(image) or {}
        expected = eventbridge.occurrences_of(plain, item_keys(keys, env.config), env.config)
        names = [name for name, _ in schedules_of(dict(env.config), record, plain)]
        assert sorted(names) == sorted(o.name for o in expected.values())


# -- (d) ordering: what a record says of the time it left is replayed; what it says of the new one is not -----------


def test_a_superseded_move_still_delivers_the_time_that_came_while_the_item_held_it(env: Env) -> None:
    """The item held T0 when T0 came, then moved; both records were parked (CreateSchedule refused until a policy
    was fixed), and the item has moved on since (applied). T0 was due: the redrive delivers it, once."""
    function = consumer(env)
    t0 = NOW - timedelta(hours=1)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(t0)})
    [insert] = env.event(at=t0 - timedelta(days=1))["Records"]
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T1)})
    [move] = env.event(at=t0 + timedelta(minutes=5))["Records"]
    park(env, insert, "AccessDeniedException")
    park(env, move, "AccessDeniedException")
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T2)})
    eventbridge.handle_batch(env.event(), env.config)

    status, lines = run("poison", function)
    again, _ = run("poison", function)

    assert (status, again) == (0, 0), lines
    assert [(m["keys"]["PK"], m["dueAt"]) for m in bodies(env, env.due_queue_url)] == [("a", iso(t0))]
    assert schedule_times(env) == [at(T2)]  # T1 (the move's new time) is not made
    assert sorted(line.split()[0] for line in lines[:-1]) == ["replayed", "superseded"]


def test_an_older_parked_record_is_not_replayed_whole_when_a_newer_one_of_the_item_is_parked(env: Env) -> None:
    """The item went X -> Y -> X: its first and last records are both "what the item holds now". Only the latest
    is replayed whole; the first says nothing the last does not."""
    function = consumer(env)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T1)})
    [first] = env.event()["Records"]
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T2)})
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T1)})
    middle, last = env.event()["Records"]
    for record in (first, middle, last):
        park(env, record, "AccessDeniedException")

    status, lines = run("poison", function)

    assert status == 0, lines
    assert schedule_times(env) == [at(T1)]
    replayed = [r["dynamodb"]["SequenceNumber"] for batch in function.invoked for r in batch]
    assert replayed == [last["dynamodb"]["SequenceNumber"]]
    assert bodies(env, env.poison_url) == []


def test_a_superseded_precise_ttl_deletion_at_its_time_still_acts(env: Env) -> None:
    """precise ttl: the item's scheduled delete ran at its time (a due REMOVE), its action failed and was parked;
    the item was created again since. The deletion was due: the redrive still acts on it, once."""
    env.configure(mode="ttl", precise=True)
    function = Function(env, lambda event, config: ttl.handle_batch(event, config), eventbridge_filters("dueAt"))
    due = NOW - timedelta(hours=1)
    env.put({"PK": "s", "SK": "S", "dueAt": int(due.timestamp())})
    env.event()
    env.delete("s", "S")
    [remove] = env.event(at=due + timedelta(seconds=20))["Records"]
    park(env, remove)
    env.put({"PK": "s", "SK": "S", "dueAt": int(T1.timestamp())})  # the item again, for tomorrow (applied)
    ttl.handle_batch(env.event(), env.config)
    assert schedule_times(env) == [at(T1)]

    status, lines = run("poison", function)

    assert status == 0, lines
    [event] = bodies(env, env.due_queue_url)
    assert event["keys"] == {"PK": "s", "SK": "S"} and event["mode"] == "ttl"
    # The replayed REMOVE deleted the item's one schedule (the handler does, first); its current state followed
    # it, so tomorrow's precise delete is there again.
    assert schedule_times(env) == [at(T1)]
    assert bodies(env, env.poison_url) == []


def test_a_stream_range_replays_each_items_latest_record_and_only_the_time_the_others_left(env: Env) -> None:
    from tests.redrive.test_stream_and_target import on_failure, stream_dlq_url

    function = consumer(env)
    _, function.stream_dlq_arn = queue(env, f"stream-dlq-{env.table}")
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T1)})
    eventbridge.handle_batch(env.event(), env.config)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T2)})  # the failed range: a move, then a delete
    env.delete("a", "A")
    records = env.event()["Records"]
    env.sqs.send_message(QueueUrl=stream_dlq_url(env), MessageBody=on_failure(env, records))
    env.put({"PK": "a", "SK": "A", "dueAt": iso(T3)})  # after the range, applied
    eventbridge.handle_batch(env.event(), env.config)

    status, lines = run("stream", function)

    assert status == 0, lines
    assert schedule_times(env) == [at(T3)]
    assert [r["eventName"] for batch in function.invoked for r in batch] == ["REMOVE"]


# -- (b) binary keys --------------------------------------------------------------------------------------------------


def binary_table(env: Env) -> Env:
    """The env moved onto a table keyed by binary partition and sort keys."""
    table = f"binary-{env.table}"
    created = env.ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "PK", "AttributeType": "B"},
            {"AttributeName": "SK", "AttributeType": "B"},
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    stream = Stream(created["TableDescription"]["LatestStreamArn"], env.stream.client)
    config = copy.deepcopy(env.config)
    config["table"] = table
    return dataclasses.replace(env, table=table, stream=stream, config=config)


def test_a_parked_record_of_a_binary_keyed_item_is_replayed(env: Env) -> None:
    env = binary_table(env)
    name = f"fixed-{env.table}"
    env.configure(target=QueueTarget(queue_arn=f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"))
    function = consumer(env)
    key = {"PK": b"\x00\x01\xfe", "SK": b"\xff"}
    env.put({**key, "dueAt": "2020-01-01T00:00:00Z"})
    event = env.event()
    assert event["Records"][0]["dynamodb"]["Keys"]["PK"] == {"B": "AAH+"}  # as Lambda delivers it
    eventbridge.handle_batch(event, env.config)  # the target is missing: parked
    assert len(bodies(env, env.poison_url)) == 1
    target, _ = queue(env, name)

    status, lines = run("poison", function)

    assert status == 0, lines
    assert [m["keys"] for m in bodies(env, target)] == [{"PK": "AAH+", "SK": "/w=="}]
    assert lines[0].startswith("replayed")


def test_a_parked_delete_of_a_binary_keyed_item_cancels_its_schedule(env: Env) -> None:
    env = binary_table(env)
    function = consumer(env)
    env.put({"PK": b"\x00\x01", "SK": b"\x02", "dueAt": iso(T1)})
    eventbridge.handle_batch(env.event(), env.config)
    env.ddb.delete_item(TableName=env.table, Key={"PK": {"B": b"\x00\x01"}, "SK": {"B": b"\x02"}})
    [remove] = env.event()["Records"]
    park(env, remove)

    status, lines = run("poison", function)

    assert status == 0, lines
    assert env.schedules() == [] and lines[0].startswith("replayed")


# -- (c) second precision's target dead letters go back through the release path ------------------------------------


class Recorder:
    """An SQS client that records the release queue's sends (their DelaySeconds) and passes everything on."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.sent: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def send_message(self, **kwargs: Any) -> Any:
        self.sent.append(kwargs)
        return self.real.send_message(**kwargs)


def release_setup(env: Env) -> tuple[str, str]:
    url, arn = queue(env, f"release-{env.table}")
    env.second_precision(arn, url)
    return url, env.config["eventbridge"]["release"]["deadLetterUrl"]


def release_dead_letter(env: Env, tdlq: str, due: datetime) -> None:
    event = due_event(
        mode="eventbridge",
        table=env.table,
        keys={"PK": "a", "SK": "A"},
        due=due,
        item={"PK": "a", "dueAt": iso(due)},
        occurrence="a-A-occ",
    )
    payload = target_input(env.config["target"], event, via_scheduler=True)
    keys = {"PK": {"S": "a"}, "SK": {"S": "A"}}
    env.sqs.send_message(
        QueueUrl=tdlq,
        MessageBody=envelope(Release("a-A-occ", due, due, keys, payload)),
        MessageAttributes={"ERROR_CODE": {"DataType": "String", "StringValue": "AWS.SimpleQueueService.Throttled"}},
    )


def test_a_second_precision_dead_letter_goes_back_to_the_release_queue_held_until_its_second(env: Env) -> None:
    url, tdlq = release_setup(env)
    function = consumer(env)
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=120)
    release_dead_letter(env, tdlq, due)
    sqs = Recorder(env.sqs)

    status, lines = run("target", function, client=aws(function, sqs=sqs))

    assert status == 0, lines
    assert bodies(env, env.due_queue_url) == []  # never straight to the target: 2 minutes early
    [sent] = [s for s in sqs.sent if s["QueueUrl"] == url]
    assert 100 <= sent["DelaySeconds"] <= 120
    assert "release queue" in lines[0]
    assert bodies(env, tdlq) == []


@pytest.mark.parametrize(
    ("holds", "delivered_before", "expected"), [(True, False, 1), (False, False, 0), (True, True, 0)]
)
def test_a_redriven_release_is_delivered_only_if_the_item_holds_it_and_only_once(
    env: Env, holds: bool, delivered_before: bool, expected: int
) -> None:
    url, tdlq = release_setup(env)
    function = consumer(env)
    due = NOW - timedelta(minutes=5)
    env.put({"PK": "a", "SK": "A", "dueAt": iso(due if holds else T1)})
    release_dead_letter(env, tdlq, due)
    if delivered_before:
        from st_core.clients import CLIENTS
        from st_core.idempotency import Ledger

        ledger = Ledger.of(env.config["eventbridge"], CLIENTS)
        assert ledger.claim("a-A-occ", take_over_scheduled=True)
        ledger.complete("a-A-occ")

    status, lines = run("target", function)
    assert status == 0, lines
    messages = env.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    records = [{"messageId": m["MessageId"], "body": m["Body"]} for m in messages]
    assert handle_messages({"Records": records}, env.config) == {"batchItemFailures": []}

    delivered = bodies(env, env.due_queue_url)
    assert len(delivered) == expected
    if expected:  # the due event, not its envelope
        assert delivered[0]["keys"] == {"PK": "a", "SK": "A"} and delivered[0]["dueAt"] == iso(due)


def test_a_release_dead_letter_goes_back_unchanged(env: Env) -> None:
    url, tdlq = release_setup(env)
    function = consumer(env)
    release_dead_letter(env, tdlq, NOW)
    original = bodies(env, tdlq)

    run("target", function)

    assert bodies(env, url) == original


def test_a_release_dead_letter_of_a_table_without_second_precision_cannot_be_resent(env: Env) -> None:
    _, tdlq = release_setup(env)
    function = consumer(env)
    release_dead_letter(env, tdlq, NOW)
    del env.config["eventbridge"]["release"]

    status, lines = run("target", function)

    assert status == 1 and lines[0].startswith("cannot resend") and "no release queue" in lines[0]
    assert len(bodies(env, tdlq)) == 1
