"""Backfill of an eventbridge table whose items predate the stream: each item gets what a fresh write makes (its
schedules; a past-due time delivered once), through the deployed consumer; twice changes nothing; live writes racing
the run win; an interrupted run resumes from its checkpoint; the Scheduler ceiling holds on the run's timeline."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import eventbridge
from st_core.timeparse import format_due

from tests.backfill.conftest import FakeTime, command, consumer, fed, run, schedules
from tests.handlers.conftest import Env
from tests.redrive.conftest import aws

NOW = datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime) -> str:
    return format_due(moment)


def existing(env: Env, count: int, *, ahead: timedelta = timedelta(days=2), prefix: str = "job") -> list[str]:
    """Items written before the stack attached: their stream records are gone (read and dropped here)."""
    names = [f"{prefix}#{n:04d}" for n in range(count)]
    for n, name in enumerate(names):
        env.put({"PK": name, "SK": "A", "dueAt": iso(NOW + ahead + timedelta(minutes=n)), "n": n})
    env.stream.read()
    return names


def expected_name(env: Env, pk: str, due: datetime) -> str:
    from st_core.naming import item_keys, occurrence_id

    return occurrence_id(item_keys({"SK": {"S": "A"}, "PK": {"S": pk}}, env.config), due)


def delivered(env: Env) -> list[dict[str, Any]]:
    return env.messages(env.due_queue_url)


def test_existing_items_get_their_schedules_and_past_due_ones_are_delivered_once(env: Env) -> None:
    future = existing(env, 5)
    env.put({"PK": "late#1", "SK": "A", "dueAt": iso(NOW - timedelta(hours=3))})
    env.put({"PK": "late#2", "SK": "A", "dueAt": iso(NOW - timedelta(days=1))})
    env.put({"PK": "plain#1", "SK": "A", "note": "no due time"})
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "backfill", "--segments", "2")

    assert status == 0, lines
    made = schedules(env)
    assert set(made) == {expected_name(env, pk, NOW + timedelta(days=2, minutes=n)) for n, pk in enumerate(future)}
    assert sorted(m["keys"]["PK"] for m in delivered(env)) == ["late#1", "late#2"]
    assert any("7 acted on" in line for line in lines), lines
    # Every record was Lambda-shaped: a synthetic INSERT with the item as its NewImage, N as strings.
    records = fed(function)
    assert {r["eventName"] for r in records} == {"INSERT"}
    assert all(isinstance(r["dynamodb"]["ApproximateCreationDateTime"], int) for r in records)
    assert all(r["dynamodb"]["SequenceNumber"].isdigit() for r in records)
    assert records[0]["dynamodb"]["NewImage"]["n"] == {"N": records[0]["dynamodb"]["NewImage"]["n"]["N"]}


def test_a_year_before_1000_is_delivered_with_a_four_digit_due_time(env: Env) -> None:
    import jsonschema

    from tests.handlers.conftest import SCHEMA

    env.config["eventbridge"]["existingTable"] = True  # the item predates the stack: the first run delivers it
    env.put({"PK": "old#1", "SK": "A", "dueAt": "0999-01-01T00:00:00Z"})
    env.stream.read()
    status, lines = command(consumer(env), "backfill", "--segments", "1")
    assert status == 0, lines
    (event,) = delivered(env)
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(event)
    assert event["dueAt"] == "0999-01-01T00:00:00Z"


def test_a_second_run_changes_nothing(env: Env) -> None:
    existing(env, 4)
    env.put({"PK": "late#1", "SK": "A", "dueAt": iso(NOW - timedelta(hours=3))})
    env.stream.read()
    function = consumer(env)
    first, finished, _ = run(env, function)
    assert finished and first.acted == 5
    before = schedules(env)
    assert len(delivered(env)) == 1
    invoked = len(fed(function))

    second, finished, _ = run(env, function)

    assert finished
    assert (second.acted, second.failed, second.skipped) == (0, 0, 5)
    assert schedules(env) == before
    assert delivered(env) == []
    assert len(fed(function)) == invoked  # nothing was even fed


def test_live_writes_racing_the_run_have_the_last_word(env: Env) -> None:
    """Between the scan and the feed an item moves and another is deleted (the live function runs on their records
    first); after the feed, before the run reads the items back, a third moves. Each ends as its live write says."""
    existing(env, 4, prefix="race")
    function = consumer(env)
    live = env.config
    moved = NOW + timedelta(days=5)
    calls = {"n": 0}
    handle = function.handle

    def racing(event: Any, config: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            env.put({"PK": "race#0000", "SK": "A", "dueAt": iso(moved), "n": 0})
            env.delete("race#0001", "A")
            eventbridge.handle_batch(env.event(), live)
        answer = handle(event, config)
        if calls["n"] == 1:
            env.put({"PK": "race#0002", "SK": "A", "dueAt": iso(moved), "n": 2})
            eventbridge.handle_batch(env.event(), live)
        return answer

    function.handle = racing
    tally, finished, _ = run(env, function, segments=1)

    assert finished and tally.failed == 0
    assert set(schedules(env)) == {
        expected_name(env, "race#0000", moved),
        expected_name(env, "race#0002", moved),
        expected_name(env, "race#0003", NOW + timedelta(days=2, minutes=3)),
    }
    assert tally.kinds.get("followed a live write") == 3
    assert delivered(env) == []


def test_an_interrupted_run_resumes_from_its_checkpoint_and_feeds_each_item_once(env: Env, tmp_path: Path) -> None:
    names = existing(env, 60)
    function = consumer(env)
    checkpoint = tmp_path / "backfill.json"
    pages = {"n": 0}

    def stop() -> bool:
        pages["n"] += 1
        return pages["n"] >= 3

    _, finished, _ = run(env, function, checkpoint=checkpoint, segments=2, page_items=10, stop=stop)
    assert not finished
    saved = json.loads(checkpoint.read_text())
    assert any(state["key"] for state in saved["state"].values())
    partly = len(schedules(env))
    assert 0 < partly < 60

    tally, finished, _ = run(env, function, checkpoint=checkpoint, segments=2, page_items=10)

    assert finished
    assert tally.scanned == 60 and tally.acted == 60
    assert len(schedules(env)) == 60
    per_item = Counter(r["dynamodb"]["Keys"]["PK"]["S"] for r in fed(function))
    assert per_item == Counter(names)  # each item fed exactly once over the two runs


def test_a_run_killed_mid_page_resumes_and_the_replayed_page_changes_nothing_twice(env: Env, tmp_path: Path) -> None:
    existing(env, 30)
    function = consumer(env)
    checkpoint = tmp_path / "backfill.json"
    handle = function.handle
    calls = {"n": 0}

    def dies_on_the_third_batch(event: Any, config: Any) -> Any:
        calls["n"] += 1
        answer = handle(event, config)
        if calls["n"] == 3:
            raise KeyboardInterrupt  # the process killed after the handler ran, before the page was checkpointed
        return answer

    function.handle = dies_on_the_third_batch
    with contextlib.suppress(KeyboardInterrupt):
        run(env, function, checkpoint=checkpoint, segments=1, page_items=10)
    function.handle = handle
    tally, finished, _ = run(env, function, checkpoint=checkpoint, segments=1, page_items=10)

    assert finished
    assert len(schedules(env)) == 30
    assert tally.scanned == 30  # 20 checkpointed before the kill, the third page read again
    assert delivered(env) == []


def test_the_scheduler_ceiling_holds_on_the_runs_timeline(env: Env) -> None:
    existing(env, 40)
    env.configure(max_workers=1)  # one call at a time, so each sleep is one step of the run's own timeline
    function = consumer(env)
    fake = FakeTime()
    moments: list[float] = []
    real = aws(function)

    class Counted:
        def __init__(self, client: Any) -> None:
            self.client = client

        def __getattr__(self, name: str) -> Any:
            call = getattr(self.client, name)

            def counted(**kwargs: Any) -> Any:
                moments.append(fake.now)
                return call(**kwargs)

            return counted

    def client(service: str) -> Any:
        return Counted(real(service)) if service == "scheduler" else real(service)

    rate = 10.0
    tally, finished, _ = run(env, function, segments=1, page_items=10, calls=rate, time=fake, client=client)

    assert finished and tally.acted == 40
    # One GetSchedule per item (none found). CreateSchedule is paced too, as the consumer's share.
    assert len(moments) == 40
    spent = fake.now - 1000.0
    assert spent >= (80 - rate) / rate  # 40 reads + 40 creations, under 10/s after a one-second burst
    for n, moment in enumerate(moments):
        assert n + 1 <= rate * (moment - 1000.0) + rate + 1e-6


def test_a_dry_run_counts_and_changes_nothing(env: Env) -> None:
    existing(env, 3)
    env.put({"PK": "late#1", "SK": "A", "dueAt": iso(NOW - timedelta(hours=3))})
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "backfill", "--dry-run")

    assert status == 0
    assert schedules(env) == {} and delivered(env) == [] and fed(function) == []
    assert any(line.startswith("dry run, nothing changed. backfill: 4 scanned, 4 acted on") for line in lines), lines
    assert any("would schedule" in line and "job#0000" in line for line in lines), lines
    assert any("would deliver (past due)" in line for line in lines), lines


def test_a_wrong_function_cannot_start(env: Env) -> None:
    function = consumer(env)
    status = __import__("components.cli.command", fromlist=["main"]).main(
        ["backfill", "--function", "nope"], client=aws(function), emit=lambda _: None
    )
    assert status == 2


def test_in_lambda_fans_the_segments_out_over_the_backfill_function(env: Env, tmp_path: Path, monkeypatch: Any) -> None:
    """--in-lambda: each segment a chain of invocations of the backfill function (its real entry point, running the
    mode's handler in-process), each resuming from the checkpoint the last one returned."""
    import io

    import backfill as engine

    names = existing(env, 25)
    monkeypatch.setenv("SCHEDULED_TABLE_CONFIG", json.dumps(env.config))
    function = consumer(env)
    invocations: list[dict[str, Any]] = []

    class Budget:
        """Lambda's context: time for two pages per invocation, then the margin says stop."""

        def __init__(self) -> None:
            self.pages = 0

        def get_remaining_time_in_millis(self) -> int:
            self.pages += 1
            return 60_000 if self.pages < 2 else 1_000

    class BackfillFunction:
        def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:
            assert (FunctionName, InvocationType) == ("items-backfill", "RequestResponse")
            event = json.loads(Payload)
            invocations.append(event)
            answer = engine.handler(event, Budget())
            return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}

    backfill_function = BackfillFunction()
    real = aws(function)

    def client(service: str) -> Any:
        if service == "lambda":
            return _Either(function, backfill_function)
        return real(service)

    status, lines = command(
        function, "backfill", "--segments", "3", "--in-lambda", "items-backfill", "--page-items", "5",
        "--checkpoint", str(tmp_path / "cp.json"), client=client,
    )  # fmt: skip

    assert status == 0, lines
    assert len(schedules(env)) == len(names)
    assert {e["segment"] for e in invocations} == {0, 1, 2}
    assert any(e["startKey"] for e in invocations)  # a later invocation resumed from an earlier one's key
    assert all(e["readUnitsPerSecond"] == 500 / 3 for e in invocations)  # the ceiling shared out
    assert fed(function) == []  # the backfill function ran the handler itself


class _Either:
    """Lambda: the consumer's configuration and mapping for discovery, the backfill function for invocations."""

    def __init__(self, consumer: Any, backfill: Any) -> None:
        self.consumer = consumer
        self.backfill = backfill

    def get_function_configuration(self, FunctionName: str) -> Any:
        if FunctionName == "items-backfill":
            return {"FunctionName": FunctionName, "Handler": "backfill.handler"}
        return self.consumer.get_function_configuration(FunctionName)

    def list_event_source_mappings(self, FunctionName: str) -> Any:
        return self.consumer.list_event_source_mappings(FunctionName)

    def invoke(self, **kwargs: Any) -> Any:
        return self.backfill.invoke(**kwargs)


def test_records_the_consumer_keeps_failing_are_parked_with_the_reason_and_the_run_fails(env: Env) -> None:
    existing(env, 3)
    function = consumer(env)
    function.answer = lambda records: {
        "batchItemFailures": [{"itemIdentifier": records[0]["dynamodb"]["SequenceNumber"]}]
    }

    status, lines = command(function, "backfill")

    assert status == 1, lines
    parked = env.messages(env.poison_url)
    assert sorted(m["record"]["dynamodb"]["Keys"]["PK"]["S"] for m in parked) == ["job#0000", "job#0001", "job#0002"]
    assert all(m["reason"].startswith("backfill: the consumer failed it") for m in parked)
    assert any("3 failed" in line for line in lines), lines


def test_a_segment_stopped_by_an_error_exits_3_and_resumes_from_its_checkpoint(env: Env, tmp_path: Path) -> None:
    existing(env, 20)
    function = consumer(env)
    real = aws(function)
    broken = {"on": True}

    class Throttled:
        def __init__(self, client: Any) -> None:
            self.client = client

        def __getattr__(self, name: str) -> Any:
            return getattr(self.client, name)

        def scan(self, **request: Any) -> Any:
            if broken["on"] and "ExclusiveStartKey" in request:
                from botocore.exceptions import ClientError

                error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}
                raise ClientError(error, "Scan")
            return self.client.scan(**request)

    def client(service: str) -> Any:
        return Throttled(real(service)) if service == "dynamodb" else real(service)

    checkpoint = str(tmp_path / "cp.json")
    args = ("backfill", "--segments", "1", "--page-items", "5", "--checkpoint", checkpoint)
    status, lines = command(function, *args, client=client)
    assert status == 3, lines
    assert len(schedules(env)) == 5

    broken["on"] = False
    status, lines = command(function, *args, client=client)
    assert status == 0, lines
    assert len(schedules(env)) == 20


def test_offsets_and_recurring_items_get_every_schedule_a_fresh_write_makes(env: Env) -> None:
    from tests.handlers.test_offsets import OFFSETS, with_offsets
    from tests.handlers.test_recurring import WEEKLY, zoned

    zoned(with_offsets(env))
    due = NOW + timedelta(days=3)
    env.put({"PK": "offsets", "SK": "A", "dueAt": iso(due)})
    env.put({"PK": "weekly", "SK": "A", "dueAt": WEEKLY, "timeZone": "Europe/London"})
    env.stream.read()
    function = consumer(env)

    tally, finished, _ = run(env, function)
    assert finished and tally.failed == 0
    made = {s["Name"]: s for s in env.schedules()}
    from st_core.naming import item_keys, occurrence_id

    keys = item_keys({"SK": {"S": "A"}, "PK": {"S": "offsets"}}, env.config)
    assert {occurrence_id(keys, due, o) for o in OFFSETS} <= set(made)
    recurring = [s for s in made.values() if s["ScheduleExpression"] == WEEKLY]
    assert len(recurring) == 1 and recurring[0]["ScheduleExpressionTimezone"] == "Europe/London"
    assert len(made) == len(OFFSETS) + 1

    again, finished, _ = run(env, function)
    assert finished and again.acted == 0 and {s["Name"] for s in env.schedules()} == set(made)


def test_an_item_with_an_unusable_time_is_parked_by_the_consumer_and_reported_failed(env: Env) -> None:
    existing(env, 1)
    env.put({"PK": "bad#1", "SK": "A", "dueAt": "next tuesday"})
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "backfill")

    assert status == 1, lines
    assert any("1 unusable time (the consumer parked it" in line and "bad#1" in line for line in lines), lines
    assert [m["record"]["dynamodb"]["Keys"]["PK"]["S"] for m in env.messages(env.poison_url)] == ["bad#1"]
    assert len(schedules(env)) == 1


def test_fresh_makes_the_schedules_without_looking_them_up_and_twice_changes_nothing(env: Env) -> None:
    existing(env, 5)
    env.put({"PK": "late#1", "SK": "A", "dueAt": iso(NOW - timedelta(hours=3))})
    env.stream.read()
    function = consumer(env)
    looked_up: list[str] = []
    real = aws(function)

    class Counted:
        def __init__(self, client: Any) -> None:
            self.client = client

        def __getattr__(self, name: str) -> Any:
            return getattr(self.client, name)

        def get_schedule(self, **request: Any) -> Any:
            looked_up.append(request["Name"])
            return self.client.get_schedule(**request)

    def client(service: str) -> Any:
        return Counted(real(service)) if service == "scheduler" else real(service)

    status, lines = command(function, "backfill", "--fresh", client=client)
    assert status == 0, lines
    made = schedules(env)
    assert len(made) == 5 and looked_up == []
    assert len(delivered(env)) == 1

    status, lines = command(function, "backfill", "--fresh", client=client)
    assert status == 0, lines
    assert schedules(env) == made  # updated in place, the same
    assert delivered(env) == []
