"""polling handlers against moto: a real table with the sparse due index and a stream; the processor's claims,
retries and completions read back from the table and the queues."""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import polling
import polling_assign
import pytest
from polling import Processor, budget, sending
from st_core.clients import CLIENTS

from components.filters import filter_patterns
from components.modes.polling import polling_filters
from tests.conftest import REGION
from tests.handlers.conftest import Env, use_shards, with_due_index
from tests.iam.enforce import acting
from tests.support.patterns import passes

NOW = float(int(time.time()))


@pytest.fixture
def polling_env(env: Env) -> Iterator[Env]:
    """The handler env's queues and config, on a table that has the due index."""
    yield with_due_index(env)


def pending(env: Env, pk: str, due: float, shard: int = 0, **extra: Any) -> None:
    env.put({"PK": pk, "SK": "T", "stShard": shard, "stDue": int(due), "stStatus": "PENDING", **extra})


def item(env: Env, pk: str) -> dict[str, Any]:
    found: dict[str, Any] = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": pk}, "SK": {"S": "T"}}).get(
        "Item", {}
    )
    return found


def due_keys(env: Env) -> list[str]:
    return sorted(m["keys"]["PK"] for m in env.messages(env.due_queue_url))


def tick(env: Env, now: float = NOW, **kwargs: Any) -> Any:
    return polling.process(env.config, now=lambda: now, **kwargs)


# -- the processor ------------------------------------------------------------------------------------------------


def test_due_items_run_and_later_ones_wait(polling_env: Env) -> None:
    pending(polling_env, "due", NOW - 60)
    pending(polling_env, "now", NOW)
    pending(polling_env, "later", NOW + 60)
    report = tick(polling_env)
    assert report.dispatched == 2 and due_keys(polling_env) == ["due", "now"]
    assert item(polling_env, "later")["stStatus"]["S"] == "PENDING"


def test_times_off_the_rules_grid_are_never_missed(polling_env: Env) -> None:
    # GIVEN due times at odd seconds (seed 002 queried one exact minute bucket and missed these)
    for i, offset in enumerate((37, 61, 119, 3601)):
        pending(polling_env, f"odd{i}", NOW - offset, shard=i % 8)
    assert tick(polling_env).dispatched == 4


def test_every_shard_is_drained(polling_env: Env) -> None:
    for shard in range(8):
        pending(polling_env, f"s{shard}", NOW - 1, shard=shard)
    report = tick(polling_env)
    assert report.dispatched == 8 and all(report.shards[s] == 1 for s in range(8))


def test_a_done_item_leaves_the_index_and_is_marked_with_its_time(polling_env: Env) -> None:
    pending(polling_env, "a", NOW - 5, payload="x")
    tick(polling_env)
    done = item(polling_env, "a")
    assert done["stStatus"]["S"] == "DONE" and "stShard" not in done and "stDue" not in done and "stDoneAt" in done
    [message] = polling_env.messages(polling_env.due_queue_url)
    assert message["item"] == {"PK": "a", "SK": "T", "payload": "x"} and message["mode"] == "polling"
    assert tick(polling_env, NOW + 600).dispatched == 0


def test_on_done_delete_removes_the_item(polling_env: Env) -> None:
    polling_env.configure(on_done="delete")
    pending(polling_env, "a", NOW - 5)
    tick(polling_env)
    assert item(polling_env, "a") == {}


@pytest.mark.slow  # volume: `make test` runs it, `make unit` does not
def test_overlapping_processors_dispatch_each_item_once(polling_env: Env) -> None:
    # The overlap is interleaved by hand: processor A reads a page, then B runs a whole tick, then A goes on with
    # what it read. (With one worker, A asks for the time left before its first page, then before each claim.)
    polling_env.configure(max_workers=1)
    for i in range(60):
        pending(polling_env, f"t{i}", NOW - i, shard=i % 8)
    other: list[Any] = []
    asked: list[int] = []

    def time_left() -> float:
        asked.append(1)
        if len(asked) == 2:
            other.append(tick(polling_env))
        return 900.0

    first = tick(polling_env, time_left=time_left)
    keys = due_keys(polling_env)
    assert len(keys) == 60 and len(set(keys)) == 60
    # AND B left the shard A held when B started (A took the rest of it), and took the others
    assert first.dispatched + other[0].dispatched == 60 and other[0].held_shards == 1


def _break_target(polling_env: Env, code: str = "ServiceUnavailable", status: int = 503) -> None:
    """The target queue fails; the dead-letter queue (also SQS) still works."""
    from botocore.exceptions import ClientError

    def fail(params: dict[str, Any], **_: Any) -> None:
        # `params` is the serialized request; it names the queue's URL
        if polling_env.due_queue_url.rsplit("/", 1)[-1] not in json.dumps(params, default=str):
            return
        raise ClientError(
            {"Error": {"Code": code, "Message": "down"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "SendMessage"
        )

    for operation in ("SendMessage", "SendMessageBatch"):  # the processor sends up to 10 due events a call
        CLIENTS.get("sqs").meta.events.register(f"before-call.sqs.{operation}", fail)


def test_a_failed_dispatch_backs_off_then_lands_in_the_dead_letter_queue(polling_env: Env) -> None:
    pending(polling_env, "a", NOW - 5)
    _break_target(polling_env)
    # Attempt 1 and 2: back into the index, 60 s then 120 s later
    assert tick(polling_env).retried == 1
    assert (item(polling_env, "a")["stDue"]["N"], item(polling_env, "a")["stAttempts"]["N"]) == (
        str(int(NOW) + 60),
        "1",
    )
    assert tick(polling_env, NOW + 30).retried == 0  # not due again yet
    assert tick(polling_env, NOW + 61).retried == 1
    assert item(polling_env, "a")["stDue"]["N"] == str(int(NOW) + 61 + 120)
    # Attempt 3 (the last): dead-lettered with the reason, out of the index
    assert tick(polling_env, NOW + 200).failed == 1
    failed = item(polling_env, "a")
    assert failed["stStatus"]["S"] == "FAILED" and "stShard" not in failed
    CLIENTS.reset()
    sqs = boto3.client("sqs", region_name=REGION)
    [letter] = [
        json.loads(m["Body"])
        for m in sqs.receive_message(QueueUrl=polling_env.config["polling"]["deadLetterUrl"])["Messages"]
    ]
    assert letter["attempts"] == 3 and "ServiceUnavailable" in letter["reason"] and letter["keys"]["PK"] == "a"


def test_a_permanent_dispatch_error_dead_letters_at_once(polling_env: Env) -> None:
    pending(polling_env, "a", NOW - 5)
    _break_target(polling_env, "InvalidParameterValue", 400)
    assert tick(polling_env).failed == 1


def dead_letters(env: Env) -> list[dict[str, Any]]:
    return env.messages(env.config["polling"]["deadLetterUrl"])


def test_an_item_moved_while_it_failed_for_good_gets_no_dead_letter_and_waits_at_its_new_time(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    pending(polling_env, "a", NOW - 5, dueAt=int(NOW) - 5)
    # GIVEN the target refusing the item for good, and its user moving it while it is being sent (after the read)
    _break_target(polling_env, "InvalidParameterValue", 400)
    send_many = sending.send_many

    def moved_meanwhile(target: Any, entries: list[Any], **kwargs: Any) -> Any:
        polling_env.ddb.update_item(
            TableName=polling_env.table,
            Key={"PK": {"S": "a"}, "SK": {"S": "T"}},
            UpdateExpression="SET dueAt = :x",
            ExpressionAttributeValues={":x": {"N": str(int(NOW) + 500)}},
        )
        return send_many(target, entries, **kwargs)

    monkeypatch.setattr(sending, "send_many", moved_meanwhile)
    report = tick(polling_env)
    # THEN no dead letter: the item waits at its new time (the assigner re-indexes it), not marked failed
    assert dead_letters(polling_env) == []
    assert (report.failed, report.skipped) == (0, 1)
    after = item(polling_env, "a")
    assert after["stStatus"]["S"] == "PENDING" and after["dueAt"]["N"] == str(int(NOW) + 500)


def test_a_dead_letter_whose_send_failed_is_sent_by_the_next_tick_and_the_target_not_called_again(
    polling_env: Env,
) -> None:
    from botocore.exceptions import ClientError

    pending(polling_env, "a", NOW - 5)
    # GIVEN the target refusing the item for good, and the dead-letter queue failing the first dead letter
    _break_target(polling_env, "InvalidParameterValue", 400)
    sends: list[str] = []
    dlq = polling_env.config["polling"]["deadLetterUrl"].rsplit("/", 1)[-1]

    def count_and_fail_once(params: dict[str, Any], **_: Any) -> None:
        sends.append("dlq" if dlq in json.dumps(params, default=str) else "target")
        if sends.count("dlq") == 1 and sends[-1] == "dlq":
            raise ClientError(
                {"Error": {"Code": "InternalError", "Message": "down"}, "ResponseMetadata": {"HTTPStatusCode": 500}},
                "SendMessage",
            )

    for operation in ("SendMessage", "SendMessageBatch"):
        CLIENTS.get("sqs").meta.events.register_first(f"before-call.sqs.{operation}", count_and_fail_once)
    with pytest.raises(ClientError, match="InternalError"):
        tick(polling_env)
    # THEN the item is marked failed and still in the index: its dead letter is owed
    owed = item(polling_env, "a")
    assert owed["stStatus"]["S"] == "FAILED" and "stShard" in owed
    # AND the next tick sends the dead letter, once, without sending the item to the target again
    assert tick(polling_env, NOW + 60).failed == 1
    assert sends.count("target") == 1 and sends.count("dlq") == 2
    [letter] = dead_letters(polling_env)
    assert letter["keys"]["PK"] == "a" and "InvalidParameterValue" in letter["reason"] and letter["attempts"] == 1
    failed = item(polling_env, "a")
    assert failed["stStatus"]["S"] == "FAILED" and "stShard" not in failed and "stDue" not in failed
    assert tick(polling_env, NOW + 120).failed == 0


def test_a_fractional_stdue_written_by_hand_runs_at_its_next_second_never_before(polling_env: Env) -> None:
    from decimal import Decimal

    # GIVEN items indexed by hand with a fraction of a second in `stDue` (N values are exact decimal text)
    base = int(NOW)
    polling_env.put({"PK": "half", "SK": "T", "stShard": 0, "stDue": Decimal(f"{base - 1}.5"), "stStatus": "PENDING"})
    polling_env.put({"PK": "late", "SK": "T", "stShard": 0, "stDue": Decimal(f"{base}.000001"), "stStatus": "PENDING"})
    pending(polling_env, "whole", NOW - 5)
    # WHEN the rule ticks at `base`: THEN the one due at `base` (its ceiling) and the whole one run, with that time
    report = tick(polling_env, base)
    assert (report.dispatched, report.poisoned) == (2, 0)
    events = {m["keys"]["PK"]: m for m in polling_env.messages(polling_env.due_queue_url)}
    assert sorted(events) == ["half", "whole"] and events["half"]["dueAt"] == format_due(base)
    # AND the one due at `base` + 1 waits for that second
    assert tick(polling_env, base + 0.9).dispatched == 0
    assert tick(polling_env, base + 1).dispatched == 1
    assert [m["dueAt"] for m in polling_env.messages(polling_env.due_queue_url)] == [format_due(base + 1)]


def format_due(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_entries_it_cannot_handle_are_parked_out_of_the_index_and_the_rest_of_the_shard_runs(
    polling_env: Env,
) -> None:
    # GIVEN one shard whose first entries carry index attributes written by hand that cannot be read (a due time
    # no datetime holds, an occurrence time or attempt count that is text) or a time attribute rewritten as text
    # that is no time, before good entries of the same shard
    pending(polling_env, "far", NOW - 100)
    polling_env.ddb.update_item(
        TableName=polling_env.table,
        Key={"PK": {"S": "far"}, "SK": {"S": "T"}},
        UpdateExpression="SET stDue = :d",
        ExpressionAttributeValues={":d": {"N": "-99999999999999"}},
    )
    pending(polling_env, "task-text", NOW - 90, stTaskDue="soon", stStatus="RETRY")
    pending(polling_env, "attempts-text", NOW - 80, stAttempts="two")
    pending(polling_env, "garbage", NOW - 70, dueAt="next tuesday")
    for n in range(3):
        pending(polling_env, f"good{n}", NOW - 60 + n)
    # WHEN the rule ticks
    report = tick(polling_env)
    # THEN the good entries run, and the tick does not fail
    assert due_keys(polling_env) == ["good0", "good1", "good2"]
    assert (report.dispatched, report.poisoned) == (3, 4)
    # AND each bad one is in the poison queue with a reason naming its keys, the attribute and the fix
    parked = {m["record"]["keys"]["PK"]: m for m in polling_env.messages(polling_env.poison_url)}
    assert sorted(parked) == ["attempts-text", "far", "garbage", "task-text"]
    for pk, attribute in (("far", "stDue"), ("task-text", "stTaskDue"), ("attempts-text", "stAttempts")):
        reason = parked[pk]["reason"]
        assert f'"PK":"{pk}"' in reason and f"attribute '{attribute}'" in reason and "fix: " in reason, reason
    assert "attribute 'dueAt'" in parked["garbage"]["reason"] and "not ISO-8601" in parked["garbage"]["reason"]
    assert parked["garbage"]["mode"] == "polling" and parked["garbage"]["record"]["item"]["dueAt"] == "next tuesday"
    # AND each is out of the index, waiting for its user's fix, so the next ticks do not park it again
    for pk in parked:
        left = item(polling_env, pk)
        assert "stShard" not in left and "stDue" not in left and left["stStatus"]["S"] == "PENDING"
        assert "fix: " in left["stError"]["S"]
    assert tick(polling_env, NOW + 60).poisoned == 0
    assert polling_env.messages(polling_env.poison_url) == []


def test_a_park_or_dead_letter_whose_send_keeps_failing_fails_the_tick_but_not_its_shard(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ClientError

    # GIVEN one shard read an item at a time (a cold container with one worker), headed by an item to park and a
    # dead letter owed, and the poison queue and the dead-letter queue refusing every send (a disabled KMS key)
    use_shards(polling_env, 1)
    polling_env.configure(max_workers=1)
    monkeypatch.setattr(budget, "PACES", {})
    pending(polling_env, "garbage", NOW - 100, dueAt="next tuesday")
    pending(polling_env, "owed", NOW - 90, stStatus="FAILED", stError="refused", stAttempts=3)
    for n in range(3):
        pending(polling_env, f"good{n}", NOW - 60 + n)
    refused = [polling_env.poison_url, polling_env.config["polling"]["deadLetterUrl"]]

    def fail(params: dict[str, Any], **_: Any) -> None:
        if any(url.rsplit("/", 1)[-1] in json.dumps(params, default=str) for url in refused):
            raise ClientError(
                {"Error": {"Code": "KMS.DisabledException", "Message": "disabled"}, "ResponseMetadata": {}},
                "SendMessage",
            )

    CLIENTS.get("sqs").meta.events.register("before-call.sqs.SendMessage", fail)
    # WHEN the rule ticks: THEN the tick fails with the error (the alarm sees it)
    with pytest.raises(ClientError, match=r"KMS\.DisabledException"):
        tick(polling_env)
    # AND the rest of the shard was sent all the same
    assert due_keys(polling_env) == ["good0", "good1", "good2"]
    # AND both entries are still in the index, so that once the queues take messages again the next tick parks one
    # and dead-letters the other, once each, and sends nothing again
    assert "stDue" in item(polling_env, "garbage") and "stDue" in item(polling_env, "owed")
    CLIENTS.reset()
    report = tick(polling_env, NOW + 60)
    assert (report.dispatched, report.poisoned, report.failed) == (0, 1, 1)
    assert due_keys(polling_env) == [] and len(polling_env.messages(polling_env.poison_url)) == 1
    [letter] = dead_letters(polling_env)
    assert letter["keys"]["PK"] == "owed" and letter["reason"] == "refused"
    assert "stDue" not in item(polling_env, "garbage") and "stDue" not in item(polling_env, "owed")


@pytest.mark.slow  # volume: `make test` runs it, `make unit` does not
def test_the_time_budget_stops_before_the_lambda_would_and_reports_the_backlog(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_shards(polling_env, 1)
    polling_env.configure(max_workers=1)  # one batch at a time: the clock below counts the sends
    for i in range(250):
        pending(polling_env, f"t{i:03}", NOW - 1000 + i)
    # GIVEN a warm container that read whole pages at its last tick's pace, and a target grown slow: each send
    # takes 10 s of the Lambda's 60 (reads and claims take none), so a page read in time cannot be sent in time
    monkeypatch.setitem(budget.PACES, (polling_env.table, 0), 100.0)
    calls: list[int] = []
    send_many = sending.send_many

    def slow(target: Any, entries: list[Any], **kwargs: Any) -> Any:
        assert 60.0 - 10 * len(calls) >= 10, "a batch sent inside the margin: the Lambda timeout would cut it off"
        calls.append(len(entries))
        return send_many(target, entries, **kwargs)

    monkeypatch.setattr(sending, "send_many", slow)
    report = tick(polling_env, time_left=lambda: 60.0 - 10 * len(calls))
    # THEN it sent no batch inside its margin (10 s) and stopped there, reporting the shard it left due items on;
    # each batch no larger than its send and completions fit the time left at their worst (fewer as time runs out)
    assert report.out_of_time and report.dispatched == sum(calls) and len(calls) == 6
    worst = polling.call_limits(10).worst_seconds()
    assert all((1 + n) * worst + polling.SLACK_SECONDS <= 60 - 10 * i for i, n in enumerate(calls)), calls
    assert calls[0] == 10 and calls[-1] == 1, calls
    assert report.backlogged_shards == 1
    # AND the next tick sends the rest, none twice
    monkeypatch.undo()
    assert tick(polling_env).dispatched == 250 - report.dispatched
    keys = due_keys(polling_env)
    assert len(keys) == len(set(keys)) == 250


def test_a_time_left_that_fits_only_small_sends_still_drains_the_shard_in_them(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a warm container (whole pages) whose time left holds a send and three completions at their worst
    use_shards(polling_env, 1)
    polling_env.configure(max_workers=1)
    for i in range(25):
        pending(polling_env, f"t{i:02}", NOW - 100 + i)
    monkeypatch.setitem(budget.PACES, (polling_env.table, 0), 100.0)
    worst = polling.call_limits(polling_env.config["polling"]["budgetMarginSeconds"]).worst_seconds()
    sizes: list[int] = []
    send_many = sending.send_many

    def counted(target: Any, entries: list[Any], **kwargs: Any) -> Any:
        sizes.append(len(entries))
        return send_many(target, entries, **kwargs)

    monkeypatch.setattr(sending, "send_many", counted)
    report = tick(polling_env, time_left=lambda: 4 * worst + polling.SLACK_SECONDS)
    # THEN every item is sent, three a send, and the tick did not stop for want of time
    assert report.dispatched == 25 and not report.out_of_time
    assert max(sizes) == 3 and sum(sizes) == 25


@pytest.mark.parametrize("timeout", [9, 12, 15, 30, 60, 900])
def test_the_processors_calls_are_sized_so_a_send_and_a_completion_fit_its_margin(timeout: int) -> None:
    margin = min(10, max(1, timeout // 3))  # components/runtime_config.py's budget margin
    limits = polling.call_limits(margin)
    assert 2 * limits.worst_seconds() + polling.SLACK_SECONDS <= margin, limits
    assert limits.connect > 0 and limits.read > limits.connect
    # one attempt: the SDK never sends a batch again after a slow answer (the target may have stored it)
    assert limits.attempts == 1
    # the handlers' default would not: one call alone can outlast the margin
    assert CLIENTS.limits.worst_seconds() > margin


@pytest.mark.parametrize("left", [10.5, 14.0, 25.0, 40.0, 60.0])
@pytest.mark.parametrize("slow", ["SendMessageBatch", "UpdateItem"])
def test_the_lambda_timeout_never_cuts_a_send_off_from_its_completions(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch, left: float, slow: str
) -> None:
    """A batch started just before the margin, whose send or completions then take as long as the processor's call
    limits allow, was killed by the Lambda timeout between its send and its completions, and sent again when the
    shard's lease ended (the herd soak saw it). Now a send starts only when it and its completions fit."""
    from tests.handlers.test_model_polling import Kill, Killed

    use_shards(polling_env, 1)
    polling_env.configure(max_workers=1)
    for i in range(25):
        pending(polling_env, f"t{i:02}", NOW - 100 + i)
    monkeypatch.setitem(budget.PACES, (polling_env.table, 0), 100.0)  # a warm container: whole pages
    # GIVEN an invocation with `left` s of its 60 s timeout, whose `slow` calls each take the worst its limits allow
    worst = polling.call_limits(polling_env.config["polling"]["budgetMarginSeconds"]).worst_seconds()
    kill = Kill(60, 60 - left, lambda call: worst if call[0] == slow else 0.0, None, applied=True)
    with kill.attached(), contextlib.suppress(Killed):
        polling.process(polling_env.config, now=lambda: NOW, time_left=kill.left)
    # THEN every item it sent was completed before the timeout: none is sent again once the lease ends
    sent = due_keys(polling_env)
    assert all(item(polling_env, pk).get("stStatus", {}).get("S") == "DONE" for pk in sent), sent
    assert tick(polling_env, NOW + 90).dispatched == 25 - len(sent)
    assert sorted(sent + due_keys(polling_env)) == [f"t{i:02}" for i in range(25)]


def test_the_tick_logs_the_backlog_as_an_embedded_metric(polling_env: Env, caplog: pytest.LogCaptureFixture) -> None:
    pending(polling_env, "a", NOW - 5)
    tick(polling_env)
    lines = [json.loads(r.getMessage()) for r in caplog.records if '"_aws"' in r.getMessage()]
    [metric] = lines
    assert metric["Backlog"] == 0 and metric["BackloggedShards"] == 0 and metric["Dispatched"] == 1
    assert metric["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ScheduledTable"


def test_a_completion_leaves_an_item_changed_since_its_read_as_it_is(polling_env: Env) -> None:
    # GIVEN the processor read a due item, and the user moved it before the completion
    pending(polling_env, "a", NOW - 5, dueAt=int(NOW) - 5)
    processor = Processor(polling_env.config, CLIENTS, lambda: NOW, lambda: 900.0)
    read = item(polling_env, "a")
    polling_env.ddb.update_item(
        TableName=polling_env.table,
        Key={"PK": {"S": "a"}, "SK": {"S": "T"}},
        UpdateExpression="SET dueAt = :x",
        ExpressionAttributeValues={":x": {"N": str(int(NOW) + 500)}},
    )
    # WHEN the completion of what was sent comes
    with acting("processor", polling_env.config):
        processor.settler.done(read)
    # THEN the item still waits (the assigner moves it to its new time), not marked done
    after = item(polling_env, "a")
    assert after["stStatus"]["S"] == "PENDING" and after["stDue"]["N"] == str(int(NOW) - 5)


def test_a_lease_put_retried_after_its_answer_was_lost_still_holds_the_shard(polling_env: Env) -> None:
    # GIVEN DynamoDB applied an invocation's lease put, and its answer was lost (a timeout): the SDK sends it again
    processor = Processor(polling_env.config, CLIENTS, lambda: NOW, lambda: 900.0)
    with acting("processor", polling_env.config):
        assert processor.lease.hold(0)
        # THEN the retry finds the invocation's own lease and holds the shard (which it releases at the end),
        # where another invocation's lease still refuses it
        assert processor.lease.hold(0)
        assert not Processor(polling_env.config, CLIENTS, lambda: NOW, lambda: 900.0).lease.hold(0)


def test_a_shard_held_by_an_invocation_that_died_waits_for_its_lease_then_runs_once(polling_env: Env) -> None:
    # GIVEN an invocation took shard 0 and died (its lease, the Lambda timeout + 30 s, is still in the ledger)
    pending(polling_env, "a", NOW - 5)
    pending(polling_env, "b", NOW - 5, shard=1)
    polling_env.ddb.put_item(
        TableName=polling_env.config["polling"]["ledgerTable"],
        Item={"id": {"S": "lease#shard#0"}, "holder": {"S": "dead"}, "expiresAt": {"N": str(int(NOW) + 90)}},
    )
    # WHEN the next tick comes within the lease: the other shards run, shard 0 waits
    report = tick(polling_env, NOW + 60)
    assert (report.dispatched, report.held_shards, due_keys(polling_env)) == (1, 1, ["b"])
    # AND after it, the item runs once; the tick gave its shards back as it ended
    assert tick(polling_env, NOW + 91).dispatched == 1
    assert due_keys(polling_env) == ["a"]
    leases = polling_env.ddb.scan(TableName=polling_env.config["polling"]["ledgerTable"])["Items"]
    assert [i for i in leases if i["id"]["S"].startswith("lease#")] == []


# -- the assigner ---------------------------------------------------------------------------------------------------


def assign(env: Env) -> Any:
    return polling_assign.handle_assign_batch(env.event(), env.config)


@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ({"dueAt": "2030-01-01T10:00:00Z"}, 1893492000),
        ({"dueAt": "2030-01-01T12:00:00+02:00"}, 1893492000),
        ({"dueAt": "2030-01-01T10:00:00"}, 1893492000),
        ({"dueAt": 1893492000}, 1893492000),
        ({"dueAt": "1893492000"}, 1893492000),
    ],
)
def test_the_assigner_indexes_every_time_format(polling_env: Env, written: dict[str, Any], expected: int) -> None:
    polling_env.put({"PK": "a", "SK": "T", **written})
    assert assign(polling_env) == {"batchItemFailures": []}
    indexed = item(polling_env, "a")
    assert indexed["stDue"]["N"] == str(expected) and indexed["stStatus"]["S"] == "PENDING"
    assert 0 <= int(indexed["stShard"]["N"]) < 8


def test_the_assigner_entry_point_indexes_with_the_deployed_configuration(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`polling_assign.handler`, what the component deploys, reads the configuration from the environment, as in
    Lambda, and runs as the assigner's role (tests/iam/enforce.py)."""
    from st_core.config import load_config
    from st_core.constants import CONFIG_VARIABLE

    monkeypatch.setenv(CONFIG_VARIABLE, json.dumps(polling_env.config))
    polling_env.put({"PK": "a", "SK": "T", "dueAt": "2030-01-01T10:00:00Z"})
    load_config.cache_clear()  # parsed once per container: this test's container is new
    try:
        assert polling_assign.handler(polling_env.event(), None) == {"batchItemFailures": []}
    finally:
        load_config.cache_clear()
    indexed = item(polling_env, "a")
    assert indexed["stDue"]["N"] == "1893492000" and indexed["stStatus"]["S"] == "PENDING"


def test_a_delay_attribute_counts_from_when_the_item_was_written(polling_env: Env) -> None:
    before = int(time.time())
    polling_env.put({"PK": "a", "SK": "T", "delaySeconds": 300})
    assign(polling_env)
    assert before + 299 <= int(item(polling_env, "a")["stDue"]["N"]) <= int(time.time()) + 301


def test_the_default_delay_applies_when_the_item_names_no_time(polling_env: Env) -> None:
    polling_env.configure(default_delay_seconds=0)
    polling_env.put({"PK": "a", "SK": "T"})
    assign(polling_env)
    assert abs(int(item(polling_env, "a")["stDue"]["N"]) - time.time()) < 5


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        ({}, "neither 'dueAt'"),
        ({"dueAt": "next tuesday"}, "is not ISO-8601 or epoch seconds"),
        ({"delaySeconds": "soon"}, "must be a number of seconds"),
        ({"dueAt": 1893492000000}, "milliseconds"),
    ],
)
def test_an_item_without_a_usable_time_goes_to_poison_with_the_reason(
    polling_env: Env, written: dict[str, Any], reason: str
) -> None:
    polling_env.put({"PK": "a", "SK": "T", **written})
    assert assign(polling_env) == {"batchItemFailures": []}
    [poison] = polling_env.messages(polling_env.poison_url)
    assert reason in poison["reason"] and "stShard" not in item(polling_env, "a")


def remove_time(env: Env, pk: str) -> None:
    env.ddb.update_item(TableName=env.table, Key={"PK": {"S": pk}, "SK": {"S": "T"}}, UpdateExpression="REMOVE dueAt")


def test_a_waiting_item_whose_time_its_user_removed_is_not_sent_at_its_old_time(polling_env: Env) -> None:
    # GIVEN an item the assigner indexed from its time, whose user then removed that time (cancelling it), and the
    # rule ticking before the assigner has seen the removal (stream lag)
    polling_env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    assign(polling_env)
    remove_time(polling_env, "a")
    # THEN the tick does not send it, and takes it out of the index (no delay would index it again)
    assert tick(polling_env).dispatched == 0
    assert due_keys(polling_env) == [] and "stDue" not in item(polling_env, "a")
    # AND the assigner, seeing the removal, parks it with the reason (an item with no time), and no later tick
    # sends it
    assign(polling_env)
    [poison] = polling_env.messages(polling_env.poison_url)
    assert "neither 'dueAt'" in poison["reason"]
    assert tick(polling_env, NOW + 600).dispatched == 0


def backed_off_then_time_removed(env: Env) -> None:
    """An item indexed from its time, backed off after a failed send, whose user then removed its time (the
    assigner's filter never passes a backed-off item's writes)."""
    env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    assign(env)
    _break_target(env)
    assert tick(env).retried == 1
    CLIENTS.reset()
    remove_time(env, "a")


def test_a_backed_off_item_whose_time_its_user_removed_without_a_delay_is_parked_with_the_reason(
    polling_env: Env,
) -> None:
    backed_off_then_time_removed(polling_env)
    # THEN its next attempt is not sent: it is parked in the poison queue with the reason, out of the index
    report = tick(polling_env, NOW + 600)
    assert (report.dispatched, report.poisoned) == (0, 1) and due_keys(polling_env) == []
    [parked] = polling_env.messages(polling_env.poison_url)
    assert "attribute 'dueAt'" in parked["reason"] and "was removed" in parked["reason"] and "fix: " in parked["reason"]
    left = item(polling_env, "a")
    assert "stDue" not in left and left["stStatus"]["S"] == "PENDING" and "was removed" in left["stError"]["S"]


def test_a_backed_off_item_whose_time_its_user_removed_runs_at_its_delay(polling_env: Env) -> None:
    polling_env.configure(default_delay_seconds=300)
    backed_off_then_time_removed(polling_env)
    # THEN its next attempt is not sent at its old time: it is indexed again at its delay, as a new occurrence
    report = tick(polling_env, NOW + 600)
    assert (report.dispatched, report.poisoned) == (0, 0) and due_keys(polling_env) == []
    waiting = item(polling_env, "a")
    assert waiting["stDue"]["N"] == str(int(NOW) + 900) and waiting["stStatus"]["S"] == "PENDING"
    assert "stTimed" not in waiting and "stAttempts" not in waiting and "stTaskDue" not in waiting
    # AND the tick that finds it due sends it, once
    assert tick(polling_env, NOW + 899).dispatched == 0
    assert tick(polling_env, NOW + 900).dispatched == 1 and due_keys(polling_env) == ["a"]


def test_a_removed_time_with_a_default_delay_waits_for_the_assigner_and_runs_at_its_delay(polling_env: Env) -> None:
    polling_env.configure(default_delay_seconds=300)
    # GIVEN an item indexed from its time whose user removed the time, with a default delay configured
    polling_env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    assign(polling_env)
    remove_time(polling_env, "a")
    # THEN a tick before the assigner saw it sends nothing and leaves the entry to the assigner
    assert tick(polling_env).dispatched == 0 and "stDue" in item(polling_env, "a")
    # AND the assigner indexes it at its delay (not from a time), where a tick sends it
    assign(polling_env)
    due = int(item(polling_env, "a")["stDue"]["N"])
    assert due >= int(NOW) + 299 and "stTimed" not in item(polling_env, "a")
    assert tick(polling_env, due).dispatched == 1


def test_an_item_written_with_a_null_time_runs_at_its_delay(polling_env: Env) -> None:
    polling_env.configure(default_delay_seconds=0)
    # GIVEN items written with their time as null (boto3's `put_item(Item={..., "dueAt": None})`), one with a delay
    polling_env.put({"PK": "a", "SK": "T", "dueAt": None, "delaySeconds": 0})
    polling_env.put({"PK": "b", "SK": "T", "dueAt": None})
    assign(polling_env)
    assert "stTimed" not in item(polling_env, "a") and "stDue" in item(polling_env, "b")
    # THEN the tick sends them at their delay, as items without a time, and parks neither
    report = tick(polling_env, time.time() + 1)
    assert (report.dispatched, report.poisoned) == (2, 0) and due_keys(polling_env) == ["a", "b"]
    assert item(polling_env, "a")["stStatus"]["S"] == "DONE" and polling_env.messages(polling_env.poison_url) == []


@pytest.mark.parametrize("change", ["SET dueAt = :null, delaySeconds = :null", "SET delaySeconds = :null REMOVE dueAt"])
def test_a_time_and_delay_set_to_null_count_as_removed_and_the_default_delay_applies(
    polling_env: Env, change: str
) -> None:
    polling_env.configure(default_delay_seconds=300)
    # GIVEN an item indexed from its time whose user then wrote its delay as null, and its time too or removed it
    polling_env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    assign(polling_env)
    polling_env.ddb.update_item(
        TableName=polling_env.table,
        Key={"PK": {"S": "a"}, "SK": {"S": "T"}},
        UpdateExpression=change,
        ExpressionAttributeValues={":null": {"NULL": True}},
    )
    # THEN a tick before the assigner saw it sends nothing, parks nothing, and leaves the entry to the assigner
    report = tick(polling_env)
    assert (report.dispatched, report.poisoned) == (0, 0) and "stDue" in item(polling_env, "a")
    # AND the assigner indexes it at the default delay, where a tick sends it
    assign(polling_env)
    due = int(item(polling_env, "a")["stDue"]["N"])
    assert due >= int(NOW) + 299 and "stTimed" not in item(polling_env, "a")
    assert tick(polling_env, due).dispatched == 1 and due_keys(polling_env) == ["a"]


@pytest.mark.parametrize("change", ["REMOVE dueAt", "SET dueAt = :x"])
def test_the_assigner_takes_a_waiting_item_left_without_a_usable_time_out_of_the_index(
    polling_env: Env, change: str
) -> None:
    from components import pending_attributes

    # GIVEN a waiting item not marked as indexed from its time (a writer indexed it with pending_attributes), whose
    # user then removed its time or rewrote it as no time
    keys = {"PK": "a", "SK": "T"}
    polling_env.put({**keys, "dueAt": int(NOW) - 5, **pending_attributes(keys, int(NOW) - 5)})
    values = {":x": {"S": "next tuesday"}} if ":x" in change else {}
    polling_env.ddb.update_item(
        TableName=polling_env.table,
        Key={"PK": {"S": "a"}, "SK": {"S": "T"}},
        UpdateExpression=change,
        **({"ExpressionAttributeValues": values} if values else {}),
    )
    # WHEN the assigner sees the change: it parks it with the reason and takes it out of the index
    assign(polling_env)
    [poison] = polling_env.messages(polling_env.poison_url)
    assert ("neither 'dueAt'" if "REMOVE" in change else "not ISO-8601") in poison["reason"]
    assert "stDue" not in item(polling_env, "a") and item(polling_env, "a")["stStatus"]["S"] == "PENDING"
    # THEN no tick sends it at the time it left behind
    assert tick(polling_env).dispatched == 0
    # AND a new time written by its user indexes it again
    polling_env.ddb.update_item(
        TableName=polling_env.table,
        Key={"PK": {"S": "a"}, "SK": {"S": "T"}},
        UpdateExpression="SET dueAt = :d",
        ExpressionAttributeValues={":d": {"N": str(int(NOW) + 60)}},
    )
    assign(polling_env)
    assert tick(polling_env, NOW + 60).dispatched == 1


def test_items_indexed_without_a_time_attribute_run_at_their_stdue(polling_env: Env) -> None:
    from components import pending_attributes

    # GIVEN one item indexed from a delay by the assigner, and one a writer indexed itself, both with no time
    polling_env.put({"PK": "delayed", "SK": "T", "delaySeconds": 0})
    assign(polling_env)
    polling_env.put({"PK": "own", "SK": "T", **pending_attributes({"PK": "own", "SK": "T"}, int(NOW) - 1)})
    # THEN both run (no time attribute is not a removed one)
    assert tick(polling_env, time.time() + 1).dispatched == 2
    assert due_keys(polling_env) == ["delayed", "own"]


def assign_as_deployed(env: Env) -> Any:
    """The assigner given only the records its event source mapping's filter passes, as on AWS."""
    return polling_assign.handle_assign_batch(
        {"Records": [r for r in env.event()["Records"] if matches(r)]}, env.config
    )


def set_item(env: Env, pk: str, expression: str, values: dict[str, Any]) -> None:
    env.ddb.update_item(
        TableName=env.table,
        Key={"PK": {"S": pk}, "SK": {"S": "T"}},
        UpdateExpression=expression,
        ExpressionAttributeValues=values,
    )


@pytest.mark.parametrize("written", ["inserted", "stdue-rewritten", "put-over-a-done-item"])
@pytest.mark.parametrize("offset", [-55, 55])
def test_a_writer_indexed_item_whose_time_disagrees_with_its_stdue_runs_once_at_its_time(
    polling_env: Env, written: str, offset: int
) -> None:
    from components import pending_attributes

    keys = {"PK": "w", "SK": "T"}
    indexed = int(NOW) - 5
    at = indexed + offset  # what its time attribute says: before, or after, the writer's stDue
    # GIVEN a writer that indexed the item itself (pending_attributes) at a time its time attribute does not give:
    # in the item it inserted, by rewriting only stDue, or by putting a done item again with both
    if written == "inserted":
        polling_env.put({**keys, "dueAt": at, **pending_attributes(keys, indexed)})
    elif written == "stdue-rewritten":
        polling_env.put({**keys, "dueAt": at, **pending_attributes(keys, at + 3600)})
        set_item(polling_env, "w", "SET stDue = :d", {":d": {"N": str(indexed)}})
    else:
        polling_env.put({**keys, "dueAt": int(NOW) - 600, **pending_attributes(keys, int(NOW) - 600)})
        assert tick(polling_env, NOW - 590).dispatched == 1 and due_keys(polling_env) == ["w"]
        polling_env.put({**keys, "dueAt": at, **pending_attributes(keys, indexed)})
    # AND the assigner is given what its filter passes of those writes (none is a change of the time attribute)
    assert assign_as_deployed(polling_env) == {"batchItemFailures": []}
    assert item(polling_env, "w")["stDue"]["N"] == str(indexed)
    # WHEN the rule ticks at its stDue: it is not sent at a time its time attribute does not give, and the
    # processor indexes it again at the time its time attribute gives
    assert tick(polling_env).dispatched == 0
    assert item(polling_env, "w")["stDue"]["N"] == str(at) and "stTimed" in item(polling_env, "w")
    # (its write reaches the assigner, which leaves it as it is)
    assert assign_as_deployed(polling_env) == {"batchItemFailures": []}
    assert item(polling_env, "w")["stDue"]["N"] == str(at)
    # THEN it runs once, at its time attribute's time (never before it, nor before the writer's stDue)
    if at > NOW:
        assert tick(polling_env, at - 1).dispatched == 0
    assert tick(polling_env, max(at, NOW + 60)).dispatched == 1
    [event] = polling_env.messages(polling_env.due_queue_url)
    assert event["keys"]["PK"] == "w" and event["dueAt"] == format_due(at)
    assert tick(polling_env, NOW + 3600 * 2).dispatched == 0 and due_keys(polling_env) == []


def test_a_writer_indexed_item_whose_user_moves_only_its_time_is_moved_by_the_assigner(polling_env: Env) -> None:
    from components import pending_attributes

    keys = {"PK": "w", "SK": "T"}
    # GIVEN an item a writer indexed itself at its time, which its user then moves (an UpdateItem of its time alone)
    polling_env.put({**keys, "dueAt": int(NOW) + 300, **pending_attributes(keys, int(NOW) + 300)})
    set_item(polling_env, "w", "SET dueAt = :d", {":d": {"N": str(int(NOW) - 60)}})
    # WHEN the assigner is given what its filter passes (the move: a waiting item's change of time)
    assert assign_as_deployed(polling_env) == {"batchItemFailures": []}
    # THEN it indexes the item at its new time, where the next tick sends it once
    assert item(polling_env, "w")["stDue"]["N"] == str(int(NOW) - 60)
    assert tick(polling_env).dispatched == 1
    assert [m["dueAt"] for m in polling_env.messages(polling_env.due_queue_url)] == [format_due(NOW - 60)]
    assert tick(polling_env, NOW + 600).dispatched == 0


# -- no loop: the mode's own writes never reach the assigner ------------------------------------------------------


def matches(record: dict[str, Any]) -> bool:
    return passes(filter_patterns(polling_filters()), record)


def test_only_users_writes_pass_the_assigners_filter(polling_env: Env) -> None:
    # GIVEN a user's insert, the assigner indexing it, the processor completing it
    polling_env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    user_insert = polling_env.event()
    assert [matches(r) for r in user_insert["Records"]] == [True]
    polling_assign.handle_assign_batch(user_insert, polling_env.config)
    tick(polling_env, NOW + 1)
    own_writes = polling_env.event()["Records"]
    # THEN none of the mode's own writes (index, done) would invoke the assigner again
    assert len(own_writes) == 2 and not any(matches(r) for r in own_writes)
    # AND a user moving a waiting item's time, or rewriting a done item, would
    polling_env.put(
        {"PK": "b", "SK": "T", "dueAt": int(NOW) + 3600, "stShard": 1, "stDue": int(NOW) + 3600, "stStatus": "PENDING"}
    )
    polling_env.event()
    polling_env.ddb.update_item(
        TableName=polling_env.table,
        Key={"PK": {"S": "b"}, "SK": {"S": "T"}},
        UpdateExpression="SET dueAt = :d",
        ExpressionAttributeValues={":d": {"N": str(int(NOW) + 60)}},
    )
    [moved] = polling_env.event()["Records"]
    assert matches(moved)
    polling_assign.handle_assign_batch({"Records": [moved]}, polling_env.config)
    assert item(polling_env, "b")["stDue"]["N"] == str(int(NOW) + 60)


def test_a_user_rewriting_a_done_item_unchanged_does_not_run_it_again(polling_env: Env) -> None:
    polling_env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})
    polling_assign.handle_assign_batch(polling_env.event(), polling_env.config)
    tick(polling_env, NOW + 1)
    polling_env.event()
    polling_env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5})  # the same item, written again
    assign(polling_env)
    assert "stShard" not in item(polling_env, "a")
    # AND written again once more (its bookkeeping is gone since the first rewrite): found by the model check
    polling_env.put({"PK": "a", "SK": "T", "dueAt": int(NOW) - 5, "sent": True})
    assign(polling_env)
    assert "stShard" not in item(polling_env, "a")
    assert tick(polling_env, NOW + 120).dispatched == 0


def test_pre_insertion_scheduling_puts_an_item_where_the_assigner_would(polling_env: Env) -> None:
    from components import pending_attributes

    # GIVEN one item indexed by the assigner and the same keys indexed by the exported helper
    polling_env.put({"PK": "pre", "SK": "T", "dueAt": "2030-01-01T10:00:00Z"})
    assign(polling_env)
    by_assigner = item(polling_env, "pre")
    helper = pending_attributes({"PK": "pre", "SK": "T"}, "2030-01-01T10:00:00Z", shards=8)
    # THEN they agree, and a helper-indexed item is found by the processor without the assigner
    assert helper == {"stShard": int(by_assigner["stShard"]["N"]), "stDue": 1893492000, "stStatus": "PENDING"}
    polling_env.put({"PK": "direct", "SK": "T", **pending_attributes({"PK": "direct", "SK": "T"}, int(NOW) - 1)})
    assert tick(polling_env).dispatched == 1


def test_the_helper_indexes_a_datetime_never_before_it_and_one_without_a_zone_as_utc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from datetime import UTC, datetime

    from components import pending_attributes

    # GIVEN a writer's machine whose local time is not UTC (naive datetimes' .timestamp() reads them in it)
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        keys = {"PK": "a", "SK": "T"}
        # THEN a fraction of a second is due at the next second, never before, as the time attribute's is
        assert pending_attributes(keys, datetime(2030, 1, 1, 10, 0, 0, 700000, tzinfo=UTC))["stDue"] == 1893492001
        assert pending_attributes(keys, "2030-01-01T10:00:00.7Z")["stDue"] == 1893492001
        # AND a datetime without a zone is UTC, as ISO-8601 text without an offset is
        assert pending_attributes(keys, datetime(2030, 1, 1, 10))["stDue"] == 1893492000
        assert pending_attributes(keys, "2030-01-01T10:00:00")["stDue"] == 1893492000
    finally:
        monkeypatch.undo()
        time.tzset()


def test_the_helper_refuses_what_the_index_cannot_hold() -> None:
    from components import pending_attributes

    with pytest.raises(ValueError, match="shards: 0 is out of range"):
        pending_attributes({"PK": "a"}, 0, shards=0)
    with pytest.raises(ValueError, match="cannot be a boolean"):
        pending_attributes({"PK": True}, 0)


def test_a_table_without_the_due_index_fails_each_tick_naming_the_index_to_add(
    polling_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    # An existing table given with its stream ARN is not looked up at deploy: the first tick is where it shows.
    config = copy.deepcopy(polling_env.config)
    config["table"] = polling_env.table.removeprefix("polling-")  # the handler env's table: no index
    with pytest.raises(RuntimeError, match=r"has no due index 'due': add a global secondary index 'due' with"):
        polling.process(config, now=lambda: NOW)
    assert any("due-index-missing" in record.getMessage() for record in caplog.records)
