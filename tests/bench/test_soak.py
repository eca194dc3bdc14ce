"""The soak's accounting, fed fabricated deliveries: each kind of failure it must find is found, and only there."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench.report import SOAK_BEGIN, SOAK_END, replace_soak_section, soak_section
from bench.soak import (
    ALL_MODES,
    HERD_MODES,
    MODES,
    Account,
    Arrival,
    Herd,
    Op,
    Run,
    account,
    account_totals,
    arrived_so_far,
    held_in_time,
    herd_bounds,
    herd_facts,
    occurrence_key,
    plan,
    plan_herd,
    verdict_line,
)
from localcloud.faults import batch_failed, fault_response
from localcloud.scenarios import MINUTE_SCHEDULE

DUE = 1_800_000_000.0  # a whole second


def arrival(item: str, at: float, message: str, occurrence: str = "", due: float = DUE) -> Arrival:
    return Arrival(item, due, occurrence or f"occ-{item}", message, at)


def test_a_clean_run_is_ok_with_its_lateness() -> None:
    result = account("m", 2, [("A", DUE), ("B", DUE)], [], [arrival("A", DUE + 5, "1"), arrival("B", DUE, "2")])
    assert result.ok
    assert (result.delivered, result.lost, result.early) == (2, [], [])
    assert sorted(result.lateness) == [0.0, 5.0]


def test_lost_early_cancelled_and_unexpected_are_each_found() -> None:
    arrivals = [
        arrival("EARLY", DUE - 0.5, "1"),
        arrival("CANCELLED", DUE + 3, "2"),
        arrival("STRANGER", DUE + 3, "3"),
    ]
    result = account("m", 4, [("LOST", DUE), ("EARLY", DUE)], [("CANCELLED", DUE)], arrivals)
    assert result.lost == [occurrence_key("LOST", DUE)]
    assert result.early == [occurrence_key("EARLY", DUE)]
    assert result.cancelled_delivered == [occurrence_key("CANCELLED", DUE)]
    assert result.unexpected == [occurrence_key("STRANGER", DUE)]
    assert not result.ok


def test_a_moved_item_counts_its_new_time_only() -> None:
    moved = DUE + 60
    result = account("m", 1, [("A", moved)], [("A", DUE)], [arrival("A", moved + 1, "1", due=moved)])
    assert result.ok and result.delivered == 1
    late_old = account("m", 1, [("A", moved)], [("A", DUE)], [arrival("A", DUE + 1, "0"), arrival("A", moved, "1")])
    assert late_old.cancelled_delivered == [occurrence_key("A", DUE)]


def test_a_cancel_made_too_late_to_hold_lets_the_old_occurrence_arrive() -> None:
    minute = DUE // 60 * 60
    in_time = Op(0.0, "t", {}, written_at=minute - 30)
    too_late = Op(0.0, "t", {}, written_at=minute - 5)
    never = Op(0.0, "t", {})
    held, raced = held_in_time([(("A", DUE), in_time), (("B", DUE), too_late), (("C", DUE), never)])
    assert (held, raced) == ([("A", DUE)], [("B", DUE), ("C", DUE)])
    arrivals = [arrival("A", DUE + 1, "1"), arrival("B", DUE + 1, "2")]
    result = account("m", 3, [], held, arrivals, raced=raced)
    assert result.cancelled_delivered == [occurrence_key("A", DUE)]
    assert result.raced_delivered == 1 and result.unexpected == []


def test_duplicates_are_split_into_allowed_and_undocumented() -> None:
    same_message = [arrival("A", DUE + 1, "1"), arrival("A", DUE + 9, "1")]
    resent = [arrival("A", DUE + 1, "1", "occ"), arrival("A", DUE + 2, "2", "occ")]
    other_occurrence = [arrival("A", DUE + 1, "1", "occ"), arrival("A", DUE + 2, "2", "other")]
    expected = [("A", DUE)]

    queue = account("exactly once", 1, expected, [], same_message)
    assert (queue.allowed_duplicates, queue.undocumented_duplicates, queue.ok) == (1, [], True)

    exactly_once = account("exactly once", 1, expected, [], resent)
    assert exactly_once.undocumented_duplicates == [occurrence_key("A", DUE)] and not exactly_once.ok

    at_least_once = account("recurring", 1, expected, [], resent, at_least_once=True)
    assert (at_least_once.allowed_duplicates, at_least_once.ok) == (1, True)

    different = account("recurring", 1, expected, [], other_occurrence, at_least_once=True)
    assert different.undocumented_duplicates == [occurrence_key("A", DUE)] and not different.ok


def test_the_bound_judges_the_maximum_or_the_p99() -> None:
    arrivals = [arrival(f"I{n}", DUE + (200 if n == 0 else 1), str(n)) for n in range(200)]
    expected = [(f"I{n}", DUE) for n in range(200)]
    by_max = account("m", 200, expected, [], arrivals, MINUTE_SCHEDULE)
    assert not by_max.within_bound()
    by_p99 = account("m", 200, expected, [], arrivals, MINUTE_SCHEDULE, p99_bound=True)
    assert by_p99.within_bound()


def test_the_verdict_names_the_modes_over_their_bound_even_when_nothing_was_lost() -> None:
    on_time = account("on time", 1, [("A", DUE)], [], [arrival("A", DUE + 5, "1")], MINUTE_SCHEDULE)
    late = account("late", 1, [("B", DUE)], [], [arrival("B", DUE + 500, "2")], MINUTE_SCHEDULE)
    lost = account("lost", 1, [("C", DUE)], [], [], MINUTE_SCHEDULE)

    def run(*accounts: Account) -> Run:
        return Run(list(accounts), 3, 3, 0, 1.0, 1.0, 0.0, 0.3, {}, {}, {}, {}, (0.0, 0.0, 0.0), 0.0, 1, "d", 1.0)

    assert verdict_line(run(on_time)) == "**All modes OK, every lateness within its documented bound.**"
    assert "over its documented bound in 1 of 2 modes** (late)" in verdict_line(run(on_time, late))
    assert verdict_line(run(on_time, late, lost)).startswith("**FAILED**")


def test_totals_short_is_lost_and_over_is_an_undocumented_duplicate() -> None:
    result = account_totals("aggregate", 30, {"G1": 10, "G2": 20, "G3": 5}, {"G1": 10, "G2": 19, "G3": 6})
    assert result.delivered == 1
    assert result.lost == ["G2: 19 of 20"]
    assert result.undocumented_duplicates == ["G3: 6 for 5"]


def test_the_plan_feeds_every_mode_and_expects_an_outcome_for_every_item() -> None:
    work = plan(160, 100.0, DUE, random.Random(1))
    assert set(work.items) == {mode for mode, *_ in MODES} and sum(work.items.values()) >= 160
    offsets = {item for item, _ in work.expected["eventbridge offsets"]}
    assert any(item.endswith("-60") for item in offsets) and any(item.endswith("+0") for item in offsets)
    for mode, *_ in MODES:
        if mode != "aggregate":
            assert work.expected[mode], mode
            assert all(due >= DUE for _, due in work.expected[mode])
    assert {"move", "cancel", "reinsert", "create"} <= set(work.mix)


def test_the_soak_section_survives_a_rewrite_of_the_report() -> None:
    report = replace_soak_section("# Benchmark report\n\nold tables\n", "## Soak\n\nfirst")
    assert soak_section(report).startswith(SOAK_BEGIN) and "first" in report
    again = replace_soak_section(report, "## Soak\n\nsecond")
    assert "second" in again and "first" not in again and again.count(SOAK_END) == 1


def test_injected_faults_parse_as_the_errors_aws_answers() -> None:
    import botocore.session
    from botocore.parsers import create_parser

    session = botocore.session.get_session()
    for service, api, operation, code in (
        ("dynamodb", "dynamodb", "PutItem", "ProvisionedThroughputExceededException"),
        ("scheduler", "scheduler", "CreateSchedule", "ThrottlingException"),
        ("sqs", "sqs", "SendMessage", "ServiceUnavailable"),
    ):
        model = session.get_service_model(api)
        status, headers, body = fault_response(service, 503 if service == "sqs" else 400, code)
        parsed = create_parser(model.metadata["protocol"]).parse(
            {"status_code": status, "headers": headers, "body": body}, model.operation_model(operation).output_shape
        )
        assert parsed["Error"]["Code"] == code, service
    assert batch_failed({"body": {"batchItemFailures": [{"itemIdentifier": "1"}]}})
    assert batch_failed({"body": '{"batchItemFailures": [{"itemIdentifier": "1"}]}'})
    assert not batch_failed({"body": {"batchItemFailures": []}})


def test_an_undocumented_duplicate_is_shown_with_its_occurrence_ids_and_messages() -> None:
    """A reader of the report can tell one occurrence sent twice from two occurrences made of one item."""
    from bench.soak import duplicate_lines

    resent = account(
        "ttl precise", 1, [("A", DUE)], [], [arrival("A", DUE + 1, "m1", "o"), arrival("A", DUE + 2, "m2", "o")]
    )
    split = account(
        "polling", 1, [("B", DUE)], [], [arrival("B", DUE + 1, "m3", "p"), arrival("B", DUE + 2, "m4", "q")]
    )
    run = Run([resent, split], 2, 2, 0, 1.0, 1.0, 0.0, 0.3, {}, {}, {}, {}, (0.0, 0.0, 0.0), 0.0, 1, "d", 1.0)
    lines = duplicate_lines(run)
    assert lines[0] == "Duplicates beyond the documented cases:"
    assert any(
        "ttl precise" in line and "one occurrenceId (o)" in line and "m1" in line and "m2" in line for line in lines
    )
    assert any("polling" in line and "different occurrenceIds" in line for line in lines)
    assert (
        duplicate_lines(Run([], 0, 0, 0, 1.0, 1.0, 0.0, 0.3, {}, {}, {}, {}, (0.0, 0.0, 0.0), 0.0, 1, "d", 1.0)) == []
    )


def test_the_bound_judges_lateness_less_what_schedulers_retries_added() -> None:
    """A recurring firing refused by its target and retried 4 s later is 4 s later than its bound allows: within
    its bound (which adds Scheduler's delay), but only by the retry; a firing never retried is judged as it is, and a
    release firing retried before its due time adds only what ran past it."""
    from bench.soak import RECURRING, retry_wait

    expected = [("A", DUE), ("B", DUE)]
    arrivals = [arrival("A", DUE + 74.0, "1", "occ-A"), arrival("B", DUE + 30.0, "2", "occ-B")]
    plain = account("eventbridge recurring", 2, expected, [], arrivals, RECURRING, at_least_once=True)
    assert not plain.within_bound() and plain.retried == 0
    held = {"occ-A": (DUE + 69.5, DUE + 73.5)}
    judged = account("eventbridge recurring", 2, expected, [], arrivals, RECURRING, True, retried=held)
    assert judged.within_bound() and judged.retried == 1
    assert judged.judged_lateness() == 70.0 and judged.late(1.0) == 74.0  # the raw lateness is kept and shown
    # Retried more than its lateness beyond the bound explains: still over.
    short = account(
        "eventbridge recurring", 2, expected, [], arrivals, RECURRING, True, retried={"occ-A": (DUE, DUE + 1)}
    )
    assert not short.within_bound()
    # A copy that arrived before the retried firing got through (sent by another path) was not held by it.
    before = account(
        "eventbridge recurring", 2, expected, [], arrivals, RECURRING, True, retried={"occ-A": (DUE + 69, DUE + 75)}
    )
    assert not before.within_bound() and before.retried == 0
    # A release firing (second precision) retried in the minute before its due second: only what ran past it counts.
    assert retry_wait((DUE - 30.0, DUE - 26.0), DUE) == 0.0
    assert retry_wait((DUE - 2.0, DUE + 3.0), DUE) == 3.0
    assert retry_wait((DUE + 10.0, DUE + 14.0), DUE) == 4.0
    assert retry_wait(None, DUE) == 0.0


def test_a_retried_firing_is_known_by_its_table_and_the_occurrence_it_carries(tmp_path: Path) -> None:
    """The injector keeps, per table and occurrenceId, when a firing it made the target refuse was first tried and
    when it was let through: a due event's own, or that of the due event inside a release envelope as the stream
    handler makes it; nothing for any other input. Two tables' items with the same keys and due time have the same
    occurrenceId, so each mode's account sees only its own table's."""
    from st_core import release

    from bench.soak import retried_in
    from localcloud.faults import HELD_FILE, Faults, firing_occurrence

    due_event = {"occurrenceId": "o-1", "table": "tasks-table", "dueAt": "2026-11-27T00:00:00Z"}
    moment = datetime(2026, 11, 27, tzinfo=UTC)
    payload = json.dumps({"occurrenceId": "o-1", "table": "flash-table", "dueAt": "2026-11-27T00:00:00Z"})
    envelope = release.envelope(release.Release("o-1", moment, moment, {"PK": {"S": "A"}}, payload))
    assert firing_occurrence({"Input": json.dumps(due_event)}) == "tasks-table/o-1"
    assert firing_occurrence({"Input": envelope}) == "flash-table/o-1"
    assert firing_occurrence({"Input": "not json"}) == firing_occurrence({}) == ""
    assert firing_occurrence({"Input": json.dumps({"occurrenceId": "o-1"})}) == ""  # no table: not ours
    faults = Faults(0.5, random.Random(1), str(tmp_path / "faults.json"))
    faults.hold("tasks-table/o-1", 10.0, 14.5)
    faults.hold("", 1.0, 2.0)  # a firing with no occurrence: nothing to attribute
    assert json.loads((tmp_path / HELD_FILE).read_text()) == {"tasks-table/o-1": [10.0, 14.5]}
    held = {"tasks-table/o-1": (10.0, 14.5), "flash-table/o-2": (1.0, 2.0)}
    assert retried_in("tasks-table", held) == {"o-1": (10.0, 14.5)}
    assert retried_in("tasks", held) == {}


def test_a_firing_the_target_refused_is_retried_and_its_hold_kept(tmp_path: Path, monkeypatch: Any) -> None:
    """Scheduler's firing refused once (an injected throttle) reaches its target on the retry, and the injector
    records the hold under the firing's occurrenceId; a firing let through at once records nothing."""
    import threading

    from ministack.services import eventbridge

    from localcloud import faults as injector

    delivered = threading.Event()
    monkeypatch.setattr(eventbridge, "_invoke_target", lambda *args: delivered.set())
    monkeypatch.setattr(injector, "TARGET_RETRY_SECONDS", (0.01, 0.02))

    answers = [True, False, False]

    class Scripted(injector.Faults):
        def hit(self) -> bool:
            return answers.pop(0)

    faults = Scripted(1.0, random.Random(1), str(tmp_path / "faults.json"))
    injector.patch_targets(faults)
    event = {"Source": "aws.scheduler"}
    eventbridge._invoke_target({"Input": json.dumps({"occurrenceId": "o-1", "table": "t"})}, event, {})
    assert delivered.wait(5)
    assert list(faults.held) == ["t/o-1"] and faults.held["t/o-1"][1] > faults.held["t/o-1"][0]
    assert faults.counts == {"target throttled (Scheduler retried)": 1}
    eventbridge._invoke_target({"Input": json.dumps({"occurrenceId": "o-2", "table": "t"})}, event, {})
    assert list(faults.held) == ["t/o-1"]


def test_a_herd_is_due_at_one_minute_after_its_writes_with_cancels_that_hold() -> None:
    work = plan(0, 10.0, DUE, random.Random(1))
    plan_herd(work, 1000, 100.0, DUE, lead=60.0, scheduler_rate=100.0)
    assert sum(work.items[mode] for mode, *_ in MODES) == 0
    for mode, table in HERD_MODES:
        minute = work.herd_minutes[mode]
        assert minute % 60 == 0 and minute >= DUE + 1000 / 100.0 + 60.0
        assert {due for _, due in work.expected[mode]} == {minute} and len(work.expected[mode]) == 950
        assert len(work.cancelled[mode]) == 50 and not set(work.expected[mode]) & set(work.cancelled[mode])
        deletes = [op for op in work.ops if op.table == table and op.item is None]
        assert len(deletes) == 50 and all(op.at <= minute - 60 for op in deletes)  # in time to hold
    # The polling herd's minute comes after the eventbridge herd has drained, so neither slows the other.
    assert work.herd_minutes["polling herd"] >= work.herd_minutes["eventbridge herd"] + 120


def test_a_herds_bound_is_the_docs_drain_at_the_local_throttle() -> None:
    large, small = herd_bounds(10_000, 100.0), herd_bounds(1_000, 100.0)
    # 10,000 at 100/s: 100 s of firings that may start at the minute's end (+1 s sweep)
    assert large["eventbridge herd"].seconds == 161.0
    assert "as 100,000 at AWS's 1,000/s" in large["eventbridge herd"].why
    assert small["eventbridge herd"].seconds == 71.0
    # the interval + the drain by 4 invocations at the modelled 195 items/s each, scaled 1:10 to two cores as
    # Scheduler's throttle is
    assert large["polling herd"].seconds == pytest.approx(60.0 + 10_000 / (4 * 19.5))
    assert "scaled 1:10 to two cores" in large["polling herd"].why


def test_the_herd_lines_give_each_herds_drain() -> None:
    minute = 1_800_000_000.0
    sent = [Arrival(f"HERD#{n}", minute, f"o{n}", f"m{n}", minute + 10 + n / 100) for n in range(1000)]
    lines = herd_facts(
        Herd(1000),
        {"eventbridge herd": minute, "polling herd": minute},
        {"eventbridge herd": sent},
        herd_bounds(1000, 100.0),
    )
    assert "the first delivery sent 10.0 s after" in lines[0] and "(990 in 9.9 s: 100/s)" in lines[0]
    assert lines[1].endswith("nothing arrived.")


def test_the_writer_makes_every_write_of_a_batch_even_two_planned_for_the_same_instant() -> None:
    class Table:
        def __init__(self) -> None:
            self.requests: list[dict[str, Any]] = []

        def batch_write_item(self, RequestItems: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
            self.requests += RequestItems["t"]
            return {}

    from boto3.dynamodb.types import TypeSerializer

    from bench.soak import Driver

    table = Table()
    driver = Driver(lambda service: table, {}, "eu-west-1", random.Random(1))
    # A herd's cancel of item n and its write of item n + 500 fall at the same instant (5 s after, 100 a second);
    # one request takes 25, so the cancel waits for the second request.
    ops = [Op(DUE + n / 100, "t", {"PK": f"I{n}"}, {"PK": f"I{n}"}) for n in range(25)]
    ops.append(Op(DUE, "t", {"PK": "CANCELLED"}))
    driver._write_table(table, "t", ops, TypeSerializer())
    assert len(table.requests) == 26 and driver.written == 26 and all(op.written_at is not None for op in ops)


def test_the_progress_line_counts_the_workloads_the_run_has_with_or_without_a_herd() -> None:
    work = plan(16, 10.0, DUE, random.Random(1))
    arrivals: dict[str, list[Arrival]] = {mode: [] for mode in ALL_MODES}
    line = arrived_so_far(work, arrivals)
    assert line.startswith("eventbridge minute 0/") and "herd" not in line
    plan_herd(work, 100, 100.0, DUE, lead=60.0, scheduler_rate=100.0)
    assert arrived_so_far(work, arrivals).endswith("eventbridge herd 0/95, polling herd 0/95")
