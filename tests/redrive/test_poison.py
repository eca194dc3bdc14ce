"""Redrive from the poison queue: parked records re-run through the consumer (the real eventbridge handler, run
in-process for the stand-in function) after the fix; a message goes only once its record succeeded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import eventbridge
import pytest
from st_core.poison import poison_message

from components.modes.eventbridge import eventbridge_filters
from components.targets import QueueTarget
from tests.handlers.conftest import Env
from tests.redrive.conftest import Function, bodies, queue, run

PAST = "2020-01-01T00:00:00Z"


@pytest.fixture
def broken(env: Env) -> Iterator[tuple[Env, Function, str]]:
    """An eventbridge table whose target queue does not exist yet (deleted, a wrong ARN): due times already past
    are delivered at once, fail with the queue missing, and are parked. Yields the env, the consumer, and the
    target queue's name (create it to fix the target)."""
    name = f"fixed-{env.table}"
    env.configure(target=QueueTarget(queue_arn=f"arn:aws:sqs:eu-west-1:123456789012:{name}"))
    function = Function(
        env, lambda event, config: eventbridge.handle_batch(event, config), eventbridge_filters("dueAt")
    )
    yield env, function, name


def write_past_due(env: Env, *pks: str) -> None:
    for pk in pks:
        env.put({"PK": pk, "SK": "A", "dueAt": PAST})
    eventbridge.handle_batch(env.event(), env.config)


def fix(env: Env, name: str) -> str:
    return queue(env, name)[0]


def delivered(env: Env, url: str) -> list[str]:
    return sorted(body["keys"]["PK"] for body in bodies(env, url))


def test_parked_records_are_delivered_once_after_the_fix_and_their_messages_deleted(broken: Any) -> None:
    env, function, name = broken
    write_past_due(env, "a", "b")
    parked = bodies(env, env.poison_url)
    assert len(parked) == 2 and all(
        "NonExistentQueue" in p["reason"] or "QueueDoesNotExist" in p["reason"] for p in parked
    ), parked
    target = fix(env, name)

    status, lines = run("poison", function)

    assert status == 0, lines
    assert delivered(env, target) == ["a", "b"]
    assert bodies(env, env.poison_url) == []
    assert [line.split()[0] for line in lines[:-1]] == ["replayed", "replayed"]
    assert lines[-1] == "poison queue: 2 replayed"


def test_a_record_that_fails_again_is_parked_again_with_its_new_message_only(broken: Any) -> None:
    env, function, _ = broken
    write_past_due(env, "a")
    [old] = bodies(env, env.poison_url)

    status, lines = run("poison", function)  # not fixed: the handler parks the record again

    assert status == 1
    assert lines[0].startswith("parked again") and '{"PK": "a", "SK": "A"}' in lines[0]
    [new] = bodies(env, env.poison_url)  # the old message is gone, the new one holds the same record
    assert new["record"] == old["record"] and new["failedAt"] >= old["failedAt"]
    assert lines[-1] == "poison queue: 1 parked again"


def test_a_record_still_failing_transiently_keeps_its_message_and_a_superseded_one_is_not_replayed(
    broken: Any,
) -> None:
    env, function, name = broken
    write_past_due(env, "a", "b")
    env.put({"PK": "a", "SK": "A", "dueAt": "2020-01-02T00:00:00Z"})  # a moved: a new occurrence, parked too
    eventbridge.handle_batch(env.event(), env.config)
    assert len({m["eventID"] for m in bodies(env, env.poison_url)}) == 3  # the MODIFY parks both its occurrences
    target = fix(env, name)
    latest_of_a = max(
        (m["record"] for m in bodies(env, env.poison_url) if m["record"]["dynamodb"]["Keys"]["PK"]["S"] == "a"),
        key=lambda r: int(r["dynamodb"]["SequenceNumber"]),
    )
    seq = latest_of_a["dynamodb"]["SequenceNumber"]

    def throttled(records: list[dict[str, Any]]) -> Any:
        # a's MODIFY meets throttling again: the handler runs the others and reports that one for retry.
        if any(r["dynamodb"]["SequenceNumber"] == seq for r in records):
            others = [r for r in records if r["dynamodb"]["SequenceNumber"] != seq]
            eventbridge.handle_batch({"Records": others}, env.config)
            return {"batchItemFailures": [{"itemIdentifier": seq}]}
        return None

    function.answer = throttled
    status, lines = run("poison", function)

    assert status == 1
    assert delivered(env, target) == ["b"]
    # a's INSERT is superseded by its MODIFY (which settles the old time when it runs): deleted, not replayed; the
    # MODIFY that still fails keeps its messages, visible again.
    kept = bodies(env, env.poison_url)
    assert {m["record"]["dynamodb"]["SequenceNumber"] for m in kept} == {seq}
    assert sorted(line.split()[0] for line in lines[:-1]) == ["failed", "replayed", "superseded"]


def test_a_record_of_an_item_deleted_since_is_not_replayed_so_no_schedule_outlives_it(broken: Any) -> None:
    # The reviewer's case: an INSERT with a future time was parked (say CreateSchedule was refused until a policy
    # was fixed); the item's REMOVE was handled fine (deleting a schedule that does not exist succeeds). Replaying
    # the INSERT alone would make a schedule for an item that is gone, and nothing would ever cancel it.
    env, function, name = broken
    fix(env, name)
    env.put({"PK": "gone", "SK": "A", "dueAt": "2099-01-01T00:00:00Z"})
    [insert] = env.event()["Records"]
    env.sqs.send_message(
        QueueUrl=env.poison_url,
        MessageBody=poison_message(
            record=insert, reason="AccessDeniedException", error="ClientError", mode="eventbridge", table=env.table
        ),
    )
    env.delete("gone", "A")
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}

    status, lines = run("poison", function)

    assert status == 0, lines
    assert env.schedules() == []
    assert lines[0].startswith("superseded") and bodies(env, env.poison_url) == []


def test_only_messages_whose_reason_matches_are_replayed(broken: Any) -> None:
    env, function, name = broken
    write_past_due(env, "a")
    other = {"eventID": "x", "eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "z"}}, "SequenceNumber": "9"}}
    env.sqs.send_message(
        QueueUrl=env.poison_url,
        MessageBody=poison_message(record=other, reason="something else", error="E", mode="eventbridge", table="t"),
    )
    target = fix(env, name)

    status, lines = run("poison", function, "--reason", "NonExistentQueue|QueueDoesNotExist")

    assert status == 0, lines
    assert delivered(env, target) == ["a"]
    assert [m["reason"] for m in bodies(env, env.poison_url)] == ["something else"]


def test_a_dry_run_lists_keys_reason_and_time_and_changes_nothing(broken: Any) -> None:
    env, function, name = broken
    write_past_due(env, "a")
    [parked] = bodies(env, env.poison_url)
    target = fix(env, name)

    status, lines = run("poison", function, "--dry-run")

    assert status == 0
    assert lines[0].startswith("would replay") and '"PK": "a"' in lines[0]
    assert parked["failedAt"] in lines[0] and "NonExistentQueue" in lines[0]
    assert lines[-1] == "dry run, nothing changed. poison queue: 1 would replay"
    assert function.invoked == [] and delivered(env, target) == []
    assert bodies(env, env.poison_url) == [parked]  # still there, and visible at once


def test_a_trimmed_record_is_not_replayed_and_its_message_stays(broken: Any) -> None:
    env, function, name = broken
    fix(env, name)
    big = {
        "eventID": "big",
        "eventName": "INSERT",
        "dynamodb": {
            "Keys": {"PK": {"S": "big"}, "SK": {"S": "A"}},
            "SequenceNumber": "5",
            "NewImage": {"PK": {"S": "big"}, "SK": {"S": "A"}, "blob": {"S": "x" * 1_100_000}},
        },
    }
    body = poison_message(record=big, reason="too big", error="E", mode="eventbridge", table="t")
    assert "record trimmed" in json.loads(body)["note"]  # what the handlers park for a record over 1 MiB
    env.sqs.send_message(QueueUrl=env.poison_url, MessageBody=body)

    status, lines = run("poison", function)

    assert status == 1 and function.invoked == []
    assert lines[0].startswith("cannot replay") and "write the item again" in lines[0]
    assert len(bodies(env, env.poison_url)) == 1


def test_two_messages_of_one_record_replay_it_once_and_both_go(broken: Any) -> None:
    env, function, name = broken
    write_past_due(env, "a")
    [parked] = bodies(env, env.poison_url)
    env.sqs.send_message(QueueUrl=env.poison_url, MessageBody=json.dumps(parked))  # parked on a redelivery too
    target = fix(env, name)

    status, lines = run("poison", function)

    assert status == 0, lines
    assert [len(records) for records in function.invoked] == [1]
    assert delivered(env, target) == ["a"] and bodies(env, env.poison_url) == []
    assert "(2 messages)" not in lines[0]


def test_an_occurrence_already_delivered_is_not_delivered_again_by_a_redrive(env: Env) -> None:
    """Exactly once under redrive (eventbridge): the record was applied (its due time past, delivered at once), and
    also parked (a redelivery that met a fault, say). Replaying it meets the ledger, which says delivered."""
    function = Function(
        env, lambda event, config: eventbridge.handle_batch(event, config), eventbridge_filters("dueAt")
    )
    env.put({"PK": "a", "SK": "A", "dueAt": PAST})
    event = env.event()
    assert eventbridge.handle_batch(event, env.config) == {"batchItemFailures": []}
    assert delivered(env, env.due_queue_url) == ["a"]
    [record] = event["Records"]
    env.sqs.send_message(
        QueueUrl=env.poison_url,
        MessageBody=poison_message(record=record, reason="Throttled", error="E", mode="eventbridge", table=env.table),
    )

    status, lines = run("poison", function)

    assert status == 0, lines
    assert len(function.invoked) == 1
    assert delivered(env, env.due_queue_url) == ["a"]  # still one delivery
    assert bodies(env, env.poison_url) == []


def test_an_unknown_function_is_a_clear_error(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    function = Function(env, lambda event, config: None, [])
    function.name = "deployed"
    from components.cli.command import main
    from tests.redrive.conftest import aws

    status = main(["redrive", "poison", "--function", "nope"], client=aws(function), emit=lambda _: None)
    assert status == 2
    assert "function 'nope': ResourceNotFoundException" in capsys.readouterr().err


def test_items_the_polling_processor_parked_are_listed_with_their_fix_and_cleared_once_fixed(env: Env) -> None:
    """The polling processor parks index entries it cannot read (not stream records: nothing to replay) and takes
    their items out of the due index. The redrive names each item and what to do, keeps its message while the item
    is as the processor left it, and deletes it once its user wrote the item again (or deleted it)."""
    import polling
    from polling_assign import handle_assign_batch

    from components.filters import filter_patterns
    from components.modes.polling import polling_filters
    from tests.handlers.conftest import with_due_index
    from tests.support.patterns import passes

    env = with_due_index(env)
    function = Function(env, lambda event, config: handle_assign_batch(event, config), polling_filters())
    now = 1_900_000_000
    for pk, extra in (
        ("garbage", {"dueAt": "next tuesday"}),
        ("attempts", {"stAttempts": "two"}),
        ("gone", {"stDue": -(10**15)}),
    ):
        env.put({"PK": pk, "SK": "T", "stShard": 0, "stDue": now - 60, "stStatus": "PENDING", **extra})
    # (each an entry written by hand the processor cannot read: a time that is no time, attempts that are text, a
    # due time no date holds)
    env.event()
    assert polling.process(env.config, now=lambda: now).poisoned == 3
    parked = bodies(env, env.poison_url)
    assert sorted(p["record"]["keys"]["PK"] for p in parked) == ["attempts", "garbage", "gone"]

    # WHEN the operator redrives before fixing anything (a dry run, then a run)
    status, lines = run("poison", function, "--dry-run")
    # THEN each is listed as an item to fix, by its keys, with its reason and what to do; nothing is invoked
    assert status == 1 and function.invoked == [] and len(lines) == 4, lines
    for line in lines[:3]:
        assert line.startswith("item to fix") and "(an index entry)" in line, line
        assert "not a stream record" in line and "put it again without its st* attributes" in line, line
    assert any('{"PK": "garbage", "SK": "T"}' in line and "'next tuesday\\' is not ISO-8601" in line for line in lines)
    assert "cannot replay" not in "\n".join(lines) and "(no keys)" not in "\n".join(lines)
    status, lines = run("poison", function)
    assert status == 1 and len(bodies(env, env.poison_url)) == 3

    # WHEN the users fix two items (a new time; the item put again) and delete the third
    env.ddb.update_item(
        TableName=env.table,
        Key={"PK": {"S": "garbage"}, "SK": {"S": "T"}},
        UpdateExpression="SET dueAt = :d",
        ExpressionAttributeValues={":d": {"N": str(now + 60)}},
    )
    env.put({"PK": "attempts", "SK": "T", "dueAt": now + 60})
    env.delete("gone", "T")
    deployed = filter_patterns(polling_filters())  # what the assigner's mapping passes it (not the delete)
    handle_assign_batch({"Records": [r for r in env.event()["Records"] if passes(deployed, r)]}, env.config)
    status, lines = run("poison", function)
    # THEN their messages are deleted as settled, and the command succeeds
    assert status == 0, lines
    assert sorted(line.split()[0] for line in lines[:3]) == ["settled"] * 3
    assert any("deleted since" in line for line in lines) and bodies(env, env.poison_url) == []
    assert polling.process(env.config, now=lambda: now + 60).dispatched == 2
