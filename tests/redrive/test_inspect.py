"""`scheduled-table inspect --function NAME` against moto: what a deployed table holds, read without changing it.

GIVEN a table with pending occurrences and parked messages WHEN the operator inspects it THEN each queue's count and
a sample with the reason and keys are printed, the pending schedules or due-index entries are listed, every message
is still there and still visible afterwards (a later redrive finds them all), and a wrong function is exit status 2.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import eventbridge
import pytest
from polling_assign import handle_assign_batch

from components.cli.command import main
from components.modes.eventbridge import eventbridge_filters
from components.modes.polling import polling_filters
from components.targets import QueueTarget
from tests.handlers.conftest import Env, with_due_index
from tests.redrive.conftest import Function, aws, bodies, queue, run
from tests.redrive.test_stream_and_target import KEY, KMS_REFUSED, on_failure, scheduler_dead_letter

PAST = "2020-01-01T00:00:00Z"
FUTURE = "2099-01-01T00:00:00Z"


def inspect(function: Function, *args: str) -> tuple[int, list[str]]:
    lines: list[str] = []
    status = main(["inspect", "--function", function.name, *args], client=aws(function), emit=lines.append)
    return status, lines


def consumer(env: Env) -> Function:
    return Function(env, lambda event, config: eventbridge.handle_batch(event, config), eventbridge_filters("dueAt"))


def test_parked_records_are_shown_with_reasons_and_keys_and_left_in_place(env: Env) -> None:
    # GIVEN two records parked because the target queue does not exist
    name = f"fixed-{env.table}"
    env.configure(target=QueueTarget(queue_arn=f"arn:aws:sqs:eu-west-1:123456789012:{name}"))
    function = consumer(env)
    for pk in ("a", "b"):
        env.put({"PK": pk, "SK": "A", "dueAt": PAST})
    eventbridge.handle_batch(env.event(), env.config)
    # WHEN inspected
    status, lines = inspect(function)
    # THEN the poison queue shows both, each with its keys and reason
    assert status == 0, lines
    assert "  poison queue: 2 visible, 0 in flight" in lines, lines
    start = lines.index("  poison queue: 2 visible, 0 in flight")
    shown = lines[start + 1 : start + 3]
    assert all("NonExistentQueue" in line or "QueueDoesNotExist" in line for line in shown), lines
    assert {json.loads(line.split("  ")[3])["PK"] for line in shown} == {"a", "b"}, shown
    # AND nothing was consumed: both are still visible now, and the redrive after the fix replays both
    assert len(bodies(env, env.poison_url)) == 2
    target, _ = queue(env, name)
    assert run("poison", function)[0] == 0
    assert sorted(body["keys"]["PK"] for body in bodies(env, target)) == ["a", "b"]


def test_pending_schedules_are_listed_by_name(env: Env) -> None:
    # GIVEN an item due in the future: one schedule waits in the table's group
    function = consumer(env)
    env.put({"PK": "later", "SK": "A", "dueAt": FUTURE})
    eventbridge.handle_batch(env.event(), env.config)
    [schedule] = env.schedules()
    status, lines = inspect(function)
    assert status == 0, lines
    assert f"  schedule group {env.group}: 1" in lines, lines
    # each with the time it fires (UTC; Scheduler fires within that minute)
    assert f"    {schedule['Name']}  2099-01-01T00:00:00Z" in lines, lines
    assert len(env.schedules()) == 1


def test_a_fire_time_is_read_in_the_schedules_own_time_zone() -> None:
    from components.cli.inspection import fire_time

    at = {"ScheduleExpression": "at(2026-03-30T09:00:00)", "ScheduleExpressionTimezone": "Europe/London"}
    assert fire_time(at) == "2026-03-30T08:00:00Z"  # British Summer Time began the day before
    assert fire_time({"ScheduleExpression": "at(2026-03-30T09:00:00)"}) == "2026-03-30T09:00:00Z"
    recurring = {"ScheduleExpression": "cron(0 9 ? * MON *)", "ScheduleExpressionTimezone": "Europe/Paris"}
    assert fire_time(recurring) == "cron(0 9 ? * MON *) Europe/Paris"


def test_a_stream_dlq_and_a_target_dlq_show_lambdas_and_schedulers_reasons(env: Env) -> None:
    # GIVEN a failed stream batch in the stream DLQ and a Scheduler dead letter in the target DLQ
    url, arn = queue(env, f"stream-dlq-{env.table}")
    function = consumer(env)
    function.stream_dlq_arn = arn
    env.put({"PK": "a", "SK": "A", "dueAt": FUTURE})
    records = env.event()["Records"]
    env.sqs.send_message(QueueUrl=url, MessageBody=on_failure(env, records))
    scheduler_dead_letter(env, json.dumps({"keys": {"PK": "a", "SK": "A"}, "dueAt": PAST}))
    status, lines = inspect(function)
    assert status == 0, lines
    text = "\n".join(lines)
    assert "  stream DLQ: 1 visible" in text and "stream batch: RetryAttemptsExhausted" in text, text
    assert "  target DLQ: 1 visible" in text, text
    assert "AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist." in text, text
    # Both still there, visible
    assert len(bodies(env, url)) == 1


def test_a_scheduler_dead_letter_refused_by_kms_names_kms_key_arn_and_the_key(env: Env) -> None:
    # GIVEN a Scheduler dead letter: KMS refused Scheduler's role the target's key (the component was not told it)
    function = consumer(env)
    scheduler_dead_letter(env, json.dumps({"keys": {"PK": "a", "SK": "A"}, "dueAt": PAST}), error=KMS_REFUSED)
    status, lines = inspect(function)
    # THEN inspect says which option to set, and the key AWS named
    assert status == 0, lines
    text = "\n".join(lines)
    assert f"set the target's kms_key_arn to '{KEY}': KMS refused this role that key" in text, text


def test_polling_lists_the_due_index_entries_earliest_first(env: Env) -> None:
    env = with_due_index(env)
    function = Function(env, lambda event, config: None, polling_filters())
    env.put({"PK": "late", "SK": "T", "dueAt": "2099-01-02T00:00:00Z"})
    env.put({"PK": "soon", "SK": "T", "dueAt": "2099-01-01T00:00:00Z"})
    handle_assign_batch(env.event(), env.config)
    status, lines = inspect(function)
    assert status == 0, lines
    assert f"  due index of {env.table}: 2" in lines, lines
    entries = [line for line in lines if "2099-01-0" in line]
    assert [json.loads(line.split("  ")[2])["PK"] for line in entries] == ["soon", "late"], lines


def test_a_wrong_function_is_exit_status_2_with_one_line(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    function = consumer(env)
    lines: list[str] = []
    status = main(["inspect", "--function", "nope"], client=aws(function), emit=lines.append)
    assert status == 2 and lines == []
    assert capsys.readouterr().err.startswith("scheduled-table: function 'nope': ResourceNotFoundException")


# -- issue 39: the stack's functions found from the table, and a wrong name answered with the functions there are


def test_the_tables_name_finds_its_consumer_from_the_streams_event_source_mapping(env: Env) -> None:
    function = consumer(env)
    lines: list[str] = []
    status = main(["inspect", "--function", env.table], client=aws(function), emit=lines.append)
    assert status == 0, lines
    assert lines[0] == f"table {env.table} (mode eventbridge), consumer {function.name}", lines


def test_a_name_that_is_no_function_lists_the_scheduled_table_functions(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    function = consumer(env)
    status = main(["redrive", "poison", "--function", "orders-table"], client=aws(function), emit=print)
    assert status == 2
    assert capsys.readouterr().err.splitlines() == [
        "scheduled-table: function 'orders-table': ResourceNotFoundException: An error occurred "
        "(ResourceNotFoundException) when calling the GetFunctionConfiguration operation: Function not found: "
        f"orders-table; the ScheduledTable functions here: {function.name} (table {env.table}, mode eventbridge); "
        "pass the consumer (the stack's function_name output: `pulumi stack output function_name`) to --function, "
        "or the table's name to --table"
    ]


@pytest.mark.parametrize("command", ["inspect", "redrive poison", "backfill"])
def test_no_region_configured_is_one_line_naming_how_to_set_it(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    assert main([*command.split(), "--function", "f"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "scheduled-table: no AWS region configured; pass --region (the stack's region, e.g. --region eu-west-1), or "
        "set AWS_REGION, or `region` in ~/.aws/config (aws configure)"
    ]


def test_every_option_has_help() -> None:
    from components.cli.command import parser

    [action] = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in action.choices.items():
        for action in command._actions:
            if action.dest != "help" and name != "local":
                assert action.help, f"{name} {action.option_strings or action.dest}"


def test_items_whose_due_attribute_no_filter_passes_are_reported(env: Env) -> None:
    """No leaf filter matches a map or a list, and Lambda's five filters leave no room for every other type (in
    eventbridge a boolean, a binary and the sets): such an item never reaches the function and nothing is parked
    for it. inspect finds them by a scan of the table for the types the mapping's filters do not pass, with their
    keys and the type; a null, which a filter passes (and the function parks), is not listed."""
    function = consumer(env)
    env.ddb.put_item(
        TableName=env.table, Item={"PK": {"S": "m"}, "SK": {"S": "A"}, "dueAt": {"M": {"at": {"S": FUTURE}}}}
    )
    env.ddb.put_item(TableName=env.table, Item={"PK": {"S": "l"}, "SK": {"S": "A"}, "dueAt": {"L": [{"S": FUTURE}]}})
    env.ddb.put_item(TableName=env.table, Item={"PK": {"S": "b"}, "SK": {"S": "A"}, "dueAt": {"BOOL": True}})
    env.ddb.put_item(TableName=env.table, Item={"PK": {"S": "ss"}, "SK": {"S": "A"}, "dueAt": {"SS": [FUTURE]}})
    env.ddb.put_item(TableName=env.table, Item={"PK": {"S": "null"}, "SK": {"S": "A"}, "dueAt": {"NULL": True}})
    env.put({"PK": "fine", "SK": "A", "dueAt": FUTURE})
    env.put({"PK": "plain", "SK": "A"})

    status, lines = inspect(function)

    assert status == 0, lines
    note = "never seen by the mapping's filter: write the due time as a string or a number"
    start = lines.index(f"  items whose dueAt is of a type no filter passes (B, BOOL, M, L, SS, NS, BS): 4 ({note})")
    assert sorted(lines[start + 1 : start + 5]) == [
        '    {"PK": "b", "SK": "A"}  dueAt is a DynamoDB BOOL (boolean)',
        '    {"PK": "l", "SK": "A"}  dueAt is a DynamoDB L (list)',
        '    {"PK": "m", "SK": "A"}  dueAt is a DynamoDB M (map)',
        '    {"PK": "ss", "SK": "A"}  dueAt is a DynamoDB SS (string set)',
    ], lines


def test_a_scheduler_dead_letter_refused_by_the_ses_sandbox_is_shown_naming_it() -> None:
    """Scheduler delivers an eventbridge email itself: its dead letter carries SES's words only, which never name
    the sandbox; inspect adds what they mean."""
    from components.cli.inspection import reason_of

    message = "Email address is not verified. The following identities failed the check in region US-EAST-1: a@b.c"
    attributes = {
        "ERROR_CODE": {"StringValue": "MessageRejected"},
        "ERROR_MESSAGE": {"StringValue": message},
    }
    reason, _ = reason_of(json.dumps({"keys": {"PK": "a"}, "dueAt": PAST}), attributes)
    assert reason.startswith(f"MessageRejected: {message} (SES refused an address")
    assert "SES sandbox" in reason
    other = {"ERROR_CODE": {"StringValue": "AccessDenied"}, "ERROR_MESSAGE": {"StringValue": "no"}}
    assert reason_of("{}", other)[0] == "AccessDenied: no"


def test_an_item_the_polling_processor_parked_is_shown_by_its_keys() -> None:
    """The processor parks an index entry it cannot read, not a stream record: its message names the item by its
    keys (plain and in DynamoDB JSON), which inspect shows as it shows a parked record's."""
    from st_core.poison import UNUSABLE_ITEM, poison_message

    from components.cli.inspection import reason_of

    record = {"keys": {"PK": "a", "SK": "T"}, "Keys": {"PK": {"S": "a"}, "SK": {"S": "T"}}, "item": {"PK": "a"}}
    body = poison_message(
        record=record, reason="item cannot be delivered", error=UNUSABLE_ITEM, mode="polling", table="t"
    )
    assert reason_of(body, {}) == ("item cannot be delivered", '{"PK": "a", "SK": "T"}')


def test_the_scan_for_unmatchable_due_attributes_stops_after_its_pages_and_says_so(env: Env) -> None:
    """A large table is not read whole by inspect: after its pages it says the count is a floor and what reads all."""
    from components.cli import inspection
    from components.cli.redrive.discovery import discover

    function = consumer(env)
    for n in range(3):
        item = {"PK": {"S": f"m{n}"}, "SK": {"S": "A"}, "dueAt": {"M": {"at": {"S": FUTURE}}}}
        env.ddb.put_item(TableName=env.table, Item=item)
    client = aws(function)
    stack = discover(client, function.name)
    real = client("dynamodb")

    class OnePerPage:
        def scan(self, **request: object) -> object:
            return real.scan(**request, Limit=1)

    def paged(service: str) -> object:
        return OnePerPage() if service == "dynamodb" else client(service)

    found = inspection.unmatchable(paged, stack, pages=2)
    assert found is not None and found.count == 2
    assert found.note.startswith("at least: the first 2 scan pages") and "reconcile --dry-run" in found.note
    whole = inspection.unmatchable(paged, stack, pages=10)
    assert whole is not None and whole.count == 3 and whole.note.startswith("never seen by the mapping's filter")


# -- items without the time attribute, and the JSON output


def test_items_written_under_another_time_attribute_are_named_with_the_fix(env: Env) -> None:
    """The application writes `remindAt` while the stack reads the default `dueAt`: nothing is scheduled, nothing
    parked. inspect counts the items without `dueAt` in its sample and names the attribute holding a time they
    carry, never a key (a sort key holding a date) nor a number that is no time."""
    function = consumer(env)
    env.put({"PK": "a", "SK": "2026-12-01T10:00:00Z", "remindAt": FUTURE, "tries": 3})
    env.put({"PK": "b", "SK": "2026-12-01T10:00:00Z", "remindAt": FUTURE, "tries": 1})
    env.put({"PK": "c", "SK": "A", "dueAt": FUTURE})
    eventbridge.handle_batch(env.event(), env.config)
    assert len(env.schedules()) == 1 and bodies(env, env.poison_url) == []  # the two are silently ignored

    status, lines = inspect(function)

    assert status == 0, lines
    start = lines.index("without dueAt (never scheduled; the whole table, 3 items):")
    assert lines[start + 1] == (
        "  2 of 3 items sampled have no `dueAt`; they have `remindAt` (2): set time_attribute='remindAt'?"
    ), lines


def test_the_time_attribute_check_reads_a_sample_page_by_page_and_says_so(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large table is never scanned whole by inspect: it reads `--sample-items` items, a page at a time."""
    from components.cli import inspection

    monkeypatch.setattr(inspection, "PAGE_ITEMS", 2)
    function = consumer(env)
    for n in range(7):
        env.put({"PK": f"i{n}", "SK": "A", "remindAt": FUTURE})
    scans: list[dict[str, object]] = []
    client = aws(function)
    real = client("dynamodb")

    class Counted:
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def scan(self, **request: object) -> object:
            scans.append(request)
            return real.scan(**request)

    def counted(service: str) -> object:
        return Counted() if service == "dynamodb" else client(service)

    lines: list[str] = []
    status = main(["inspect", "--function", function.name, "--sample-items", "5"], client=counted, emit=lines.append)

    assert status == 0, lines
    sampled = [r for r in scans if "FilterExpression" not in r]  # not the scan for unmatchable types
    assert [r["Limit"] for r in sampled] == [2, 2, 1], sampled
    assert "without dueAt (never scheduled; a sample: the first 5 items a scan returns):" in lines, lines
    assert "  5 of 5 items sampled have no `dueAt`; they have `remindAt` (5): set time_attribute='remindAt'?" in lines


def test_a_polling_item_indexed_by_its_writer_is_not_without_a_time(env: Env) -> None:
    """In polling, a writer may index an item itself (`pending_attributes`, no time attribute), or give it a delay:
    both are scheduled, so neither is reported."""
    from datetime import UTC, datetime

    from st_core.pending import pending_attributes

    env = with_due_index(env)
    function = Function(env, lambda event, config: None, polling_filters())
    env.put({"PK": "own", "SK": "T", **pending_attributes("own#T", datetime(2099, 1, 1, tzinfo=UTC), 8)})
    env.put({"PK": "delayed", "SK": "T", "delaySeconds": 60})
    env.put({"PK": "lost", "SK": "T", "remindAt": FUTURE})
    status, lines = inspect(function)
    assert status == 0, lines
    assert "  1 of 3 items sampled has no `dueAt`; it has `remindAt` (1): set time_attribute='remindAt'?" in lines, (
        lines
    )


def test_json_output_has_the_documented_shape(env: Env) -> None:
    """`--output json`: one JSON document, the shape docs/operations.md gives; the text output says the same."""
    env.configure(target=QueueTarget(queue_arn=f"arn:aws:sqs:eu-west-1:123456789012:gone-{env.table}"))
    function = consumer(env)
    env.put({"PK": "later", "SK": "A", "dueAt": FUTURE})
    env.put({"PK": "parked", "SK": "A", "dueAt": PAST})
    env.put({"PK": "other", "SK": "A", "remindAt": FUTURE})
    eventbridge.handle_batch(env.event(), env.config)
    # written after: the mapping's filter never hands the function a map (the raw stream here would)
    env.ddb.put_item(TableName=env.table, Item={"PK": {"S": "m"}, "SK": {"S": "A"}, "dueAt": {"M": {}}})

    status, lines = inspect(function, "--output", "json")

    assert status == 0, lines
    found = json.loads("\n".join(lines))
    assert set(found) == {"table", "mode", "function", "pending", "unmatchable", "missing_time", "parked"}
    assert (found["table"], found["mode"], found["function"]) == (env.table, "eventbridge", function.name)
    [group] = found["pending"]
    assert set(group) == {"source", "count", "note", "sample"} and group["count"] == 1
    assert [set(s) for s in group["sample"]] == [{"name", "when"}] and group["sample"][0]["when"] == FUTURE
    unseen = found["unmatchable"]
    assert set(unseen) == {"source", "count", "note", "sample"} and unseen["count"] == 1
    assert unseen["sample"] == [{"keys": '{"PK": "m", "SK": "A"}', "why": "dueAt is a DynamoDB M (map)"}]
    assert found["missing_time"] == {
        "attribute": "dueAt",
        "sampled": 4,
        "whole": True,
        "missing": 1,
        "candidates": ["remindAt"],
        "message": "1 of 4 items sampled has no `dueAt`; it has `remindAt` (1): set time_attribute='remindAt'?",
        "note": "the whole table, 4 items",
    }
    poison = next(q for q in found["parked"] if q["queue"] == "poison queue")
    assert set(poison) == {"queue", "url", "visible", "in_flight", "delayed", "sample"}
    assert (poison["url"], poison["visible"], poison["in_flight"], poison["delayed"]) == (env.poison_url, 1, 0, 0)
    [message] = poison["sample"]
    assert set(message) == {"message_id", "keys", "reason"} and json.loads(message["keys"])["PK"] == "parked"
    assert "NonExistentQueue" in message["reason"] or "QueueDoesNotExist" in message["reason"]
    # the text output is written from the same document
    from components.cli.inspection import text

    assert inspect(function)[1] == text(found)
