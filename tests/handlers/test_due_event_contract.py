"""The due event's contract (docs/consumers.md): every mode, route and shape of due event validates against the JSON
Schema the package ships, and carries an `occurrenceId` that is the same for every delivery of one occurrence and
is the id the ledger, the schedule and SQS FIFO deduplication use. (The `due_events` fixture of conftest.py also
checks every event of every other handler test against the schema.)"""

from __future__ import annotations

import ast
import json
import typing
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import eventbridge
import jsonschema
import polling
import pytest
import ttl
from st_core import dispatch, target_types
from st_core.fifo import deduplication_id
from st_core.release import parse

from components.targets import QueueTarget
from localcloud.recurring import render_input
from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT, SCHEMA, Env, SchedulerClock, with_due_index
from tests.handlers.test_targets_bus_fifo import fifo, fifo_messages, ttl_item

NOW = datetime.now(UTC).replace(microsecond=0)
FUTURE = (NOW + timedelta(days=2)).replace(second=0)
VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def valid(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert events, "no due event arrived"
    for event in events:
        VALIDATOR.validate(event)
    return events


def run(env: Env, *, at: datetime | None = None, now: datetime | None = None) -> None:
    batch = env.event(at=at)
    clock = (lambda: now) if now is not None else (lambda: datetime.now(UTC))
    assert eventbridge.handle_batch(batch, env.config, now=clock) == {"batchItemFailures": []}


def ledger_ids(env: Env, table: str) -> set[str]:
    return {i["id"]["S"] for i in env.ddb.scan(TableName=table)["Items"]}


def test_the_schema_the_typeddicts_and_the_handlers_event_name_the_same_fields() -> None:
    from components import DueEvent, due_event_schema

    schema = due_event_schema()
    assert schema == json.loads(SCHEMA.read_text())  # what the package ships is the file the tests check against
    jsonschema.Draft202012Validator.check_schema(schema)
    public = typing.get_type_hints(DueEvent)
    # The handlers' DueEvent is for the type checker only (a TypedDict costs every cold start): read its source.
    source = ast.parse(Path(dispatch.__file__).read_text())
    (shape,) = [n for n in ast.walk(source) if isinstance(n, ast.ClassDef) and n.name == "DueEvent"]
    fields = {n.target.id: ast.unparse(n.annotation) for n in shape.body if isinstance(n, ast.AnnAssign)}  # type: ignore[union-attr]
    handlers = set(fields)
    assert set(public) == handlers == set(schema["properties"])
    handlers_required = {k for k, v in fields.items() if "NotRequired" not in v}
    assert set(schema["required"]) == DueEvent.__required_keys__ == handlers_required


def test_eventbridge_scheduled_and_fired_the_event_validates_and_its_id_is_the_schedules_name(env: Env) -> None:
    env.put({"PK": "user#1", "SK": "appt#1", "dueAt": iso(FUTURE), "name": "Ada", "n": Decimal("1.5")})
    run(env)
    (schedule,) = env.schedules()
    SchedulerClock(env).fire_due(FUTURE + timedelta(minutes=1))
    (event,) = valid(env.messages(env.due_queue_url))
    assert event["occurrenceId"] == schedule["Name"] and event["dueAt"] == iso(FUTURE)


def test_eventbridge_direct_delivery_redelivered_has_one_id_the_ledgers(env: Env) -> None:
    past = NOW - timedelta(minutes=5)
    env.put({"PK": "user#1", "SK": "appt#1", "dueAt": iso(past)})
    batch = env.event()
    for _ in range(2):  # Lambda redelivers the whole batch
        assert eventbridge.handle_batch(batch, env.config) == {"batchItemFailures": []}
    (event,) = valid(env.messages(env.due_queue_url))
    assert event["occurrenceId"] in ledger_ids(env, env.config["eventbridge"]["ledgerTable"])


def test_a_year_before_1000_is_written_with_four_digits(env: Env) -> None:
    """A due time in the year 999 (as ISO text, and as epoch seconds) is past: delivered at once, with the
    four-digit `dueAt` the schema asks for (`strftime("%Y")` writes "999" on Linux)."""
    env.put({"PK": "old#1", "SK": "iso", "dueAt": "0999-01-01T00:00:00Z"})
    env.put({"PK": "old#2", "SK": "epoch", "dueAt": int(datetime(999, 1, 1, tzinfo=UTC).timestamp())})
    run(env)
    events = valid(env.messages(env.due_queue_url))
    assert [e["dueAt"] for e in events] == ["0999-01-01T00:00:00Z"] * 2


def test_offsets_each_occurrence_its_own_stable_id(env: Env) -> None:
    env.configure(offsets=[-3600, 0, 600])
    env.put({"PK": "u", "SK": "appt", "dueAt": iso(FUTURE)})
    run(env)
    first = {s["Name"] for s in env.schedules()}
    env.put({"PK": "u", "SK": "appt", "dueAt": iso(FUTURE), "note": "changed"})  # same due time: same ids
    run(env)
    assert {s["Name"] for s in env.schedules()} == first and len(first) == 3
    SchedulerClock(env).fire_due(FUTURE + timedelta(hours=1))
    events = valid(env.messages(env.due_queue_url))
    assert sorted(e["offsetSeconds"] for e in events) == [-3600, 0, 600]
    assert {e["occurrenceId"] for e in events} == first
    assert {e["dueAt"] for e in events} == {iso(FUTURE)}  # dueAt is the item's time; the action's adds the offset


def test_a_trimmed_event_keeps_its_id_and_validates(env: Env) -> None:
    env.put({"PK": "big", "SK": "1", "dueAt": iso(NOW - timedelta(minutes=1)), "blob": "x" * 300_000})
    run(env)
    (event,) = valid(env.messages(env.due_queue_url))
    assert event["itemTrimmed"] is True and event["item"] == {} and event["occurrenceId"]


def test_recurring_firings_each_get_their_own_stable_id(env: Env) -> None:
    env.configure(time_zone_attribute="timeZone")
    env.put({"PK": "u", "SK": "weekly", "dueAt": "cron(0 9 ? * MON *)", "timeZone": "Europe/London"})
    run(env)
    (schedule,) = env.schedules()
    template = schedule["Target"]["Input"]
    monday, next_monday = datetime(2030, 3, 25, 9, tzinfo=UTC), datetime(2030, 4, 1, 8, tzinfo=UTC)

    def firing(moment: datetime, attempt: int) -> dict[str, Any]:
        arn, execution = f"arn:aws:scheduler:::schedule/g/{schedule['Name']}", f"x{attempt}"
        return dict(json.loads(render_input(template, scheduled=moment, arn=arn, execution=execution, attempt=attempt)))

    first, retried, later = valid([firing(monday, 1), firing(monday, 2), firing(next_monday, 1)])
    assert first["occurrenceId"] == retried["occurrenceId"] == f"{schedule['Name']}@2030-03-25T09:00:00Z"
    assert later["occurrenceId"] != first["occurrenceId"] and later["dueAt"] == "2030-04-01T08:00:00Z"
    assert (first["recurrence"], first["timeZone"]) == ("cron(0 9 ? * MON *)", "Europe/London")


def test_second_precision_the_released_event_is_the_occurrences(env: Env) -> None:
    url = env.sqs.create_queue(QueueName=f"release-{env.table}")["QueueUrl"]
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:release-{env.table}"
    env.second_precision(arn, url)
    due = FUTURE + timedelta(seconds=37)
    env.put({"PK": "sale#1", "SK": "open", "dueAt": iso(due)})
    run(env)
    (schedule,) = env.schedules()
    release = parse(schedule["Target"]["Input"])
    (event,) = valid([json.loads(release.payload)])
    assert event["occurrenceId"] == release.name == schedule["Name"] and event["dueAt"] == iso(due)


def test_ttl_the_event_its_ledger_id_and_its_fifo_deduplication_id_are_one(env: Env) -> None:
    arn, url = fifo(env)
    env.configure(mode="ttl", target=QueueTarget(queue_arn=arn))
    event = ttl_item(env, "pill#1")
    for _ in range(2):
        assert ttl.handle_batch(event, env.config) == {"batchItemFailures": []}
    ((body, _, dedupe),) = fifo_messages(env, url)
    valid([body])
    assert body["mode"] == "ttl" and body["occurrenceId"] == dedupe
    assert ledger_ids(env, env.config["ttl"]["ledgerTable"]) == {dedupe}


def test_polling_the_event_validates_and_its_id_follows_keys_and_due_time(env: Env) -> None:
    env = with_due_index(env)
    due = int(NOW.timestamp()) - 1
    env.put({"PK": "job#1", "SK": "T", "stShard": 0, "stDue": due, "stStatus": "PENDING", "n": 7})
    assert polling.process(env.config, now=lambda: NOW.timestamp()).dispatched == 1
    env.put({"PK": "job#1", "SK": "T", "stShard": 0, "stDue": due, "stStatus": "PENDING", "n": 8})  # again
    assert polling.process(env.config, now=lambda: NOW.timestamp()).dispatched == 1
    first, second = valid(env.messages(env.due_queue_url))
    assert first["mode"] == "polling" and first["occurrenceId"] == second["occurrenceId"]


def test_the_id_is_a_function_of_keys_due_time_and_offset_only() -> None:
    from st_core.naming import item_keys, occurrence_id

    table = {"partitionKey": "PK", "sortKey": "SK"}
    typed = {"PK": {"S": "a"}, "SK": {"N": "1"}}

    def named(keys: dict[str, Any]) -> Any:
        return item_keys(keys, table)

    base = occurrence_id(named(typed), FUTURE)
    # The same keys in the order AWS's records may list them (sort key first), and a number written otherwise.
    assert (
        base
        == occurrence_id(named({"SK": {"N": "1.0"}, "PK": {"S": "a"}}), FUTURE)
        == occurrence_id(named({"SK": {"N": "1"}, "PK": {"S": "a"}}), FUTURE)
    )
    assert base.startswith("a-1-")  # the readable part in the table's key order
    others = {
        occurrence_id(named({**typed, "SK": {"S": "1"}}), FUTURE),  # "1" is not 1
        occurrence_id(named(typed), FUTURE + timedelta(seconds=1)),
        occurrence_id(named(typed), FUTURE, 60),
    }
    assert base not in others and len(others) == 3
    assert len(base) <= 64 and deduplication_id(base) == base


# Every kind with a resource of its own receives the due event itself (email, which has none, gets the email
# rendered from the item: test_st_core).
EVENT_KINDS = [t.KIND for t in target_types.every() if t.ARN_RESOURCE]


@pytest.mark.parametrize("kind", EVENT_KINDS)
def test_every_target_kind_but_email_gets_the_same_event(kind: str, env: Env) -> None:
    target: Any = {"kind": kind, "arn": "arn:aws:sqs:us-east-1:123456789012:q", "detailType": "d", "source": "s"}
    event = dispatch.due_event(
        mode="ttl", table="t", keys={"PK": "k"}, due=FUTURE, item={"a": [1, {"b": None}]}, occurrence="k-1"
    )
    direct, scheduled = dispatch.target_input(target, event), dispatch.target_input(target, event, via_scheduler=True)
    valid([json.loads(direct), json.loads(scheduled)])
