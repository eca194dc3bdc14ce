"""`tally`: how deliveries are judged against expectations (pure, no cloud)."""

from __future__ import annotations

import json
from typing import Any

from localcloud.demo import over_bound, problems, summary, verdict
from localcloud.deploy import Deployment
from localcloud.drift import reconcile_passes
from localcloud.scenarios import MINUTE_SCHEDULE, Delivery, scenarios, tally


def test_each_expected_key_once_on_time_is_ok() -> None:
    outcome = tally("s", "eventbridge", 2, {"a": 10.0, "b": 20.0}, set(), [Delivery("a", 10.5), Delivery("b", 22.0)])
    assert outcome.ok and outcome.delivered == 2 and sorted(outcome.lateness) == [0.5, 2.0]


def test_a_second_delivery_is_a_duplicate() -> None:
    outcome = tally("s", "m", 1, {"a": 10.0}, set(), [Delivery("a", 10.0), Delivery("a", 11.0)])
    assert outcome.duplicates == 1 and not outcome.ok


def test_missing_unexpected_forbidden_and_early_are_reported() -> None:
    outcome = tally(
        "s",
        "m",
        4,
        {"a": 10.0, "b": 10.0, "early": 50.0},
        {"cancelled"},
        [Delivery("stranger", 1.0), Delivery("cancelled", 1.0), Delivery("early", 40.0)],
    )
    assert outcome.missing == ["a", "b"]
    assert outcome.unexpected == ["cancelled", "stranger"]
    assert outcome.early == ["early"]


def test_dead_letters_fail_the_outcome_and_are_named() -> None:
    outcome = tally("s", "m", 1, {"a": 1.0}, set(), [Delivery("a", 1.0)])
    outcome.dead_letters = {"poison_queue": 2}
    assert not outcome.ok
    assert problems([outcome]) == ["s: 2 message(s) in poison_queue, expected 0"]


def test_summary_has_one_row_per_scenario_with_lateness() -> None:
    outcome = tally("reminders", "eventbridge", 1, {"a": 1.0}, set(), [Delivery("a", 1.25)])
    lines = summary([outcome]).splitlines()
    assert lines[0].split()[:3] == ["scenario", "mode", "written"]
    assert lines[2].split()[:5] == ["reminders", "eventbridge", "1", "1", "1"] and "0.2s" in lines[2]


def test_summary_judges_lateness_against_the_documented_bound() -> None:
    """GIVEN a scenario whose latest delivery is 67 s late under a 180 s bound, and one 200 s late under it THEN the
    first reads "within bound" and the second "over bound", each beside its bound, and only the second is noted (not
    failed: the bound is AWS's, and the local cloud shares the machine)."""
    within = tally("tasks", "eventbridge", 1, {"a": 0.0}, set(), [Delivery("a", 67.0)])
    over = tally("late", "eventbridge", 1, {"a": 0.0}, set(), [Delivery("a", 200.0)])
    within.bound = over.bound = MINUTE_SCHEDULE
    header, _, first, second = summary([within, over]).splitlines()
    columns = header.split()
    assert columns[columns.index("bound") + 1] == "verdict"
    assert "180s" in first and "within bound" in first and "over bound" not in first
    assert "over bound" in second
    assert over_bound([within, over]) == ["late: late max 200.00s, over its 180s bound"]
    assert problems([within, over]) == []  # the bound is AWS's: reported beside the local machine's load


def test_an_early_delivery_has_its_own_column_and_fails() -> None:
    early = tally("flash", "eventbridge", 1, {"a": 10.0}, set(), [Delivery("a", 5.0)])
    header, _, row = summary([early]).splitlines()
    starts = {name: header.index(name) for name in ("early", "unexpected")}
    assert row[starts["early"] : starts["unexpected"]].strip() == "1"
    assert row[starts["unexpected"] :].split()[0] == "0"
    assert verdict(early) == "FAILED"


def test_scenario_names_carry_no_internal_seed_numbers() -> None:
    """The demo prints scenario names to newcomers: the articles are named by title, never as "seed 000"."""
    outputs = {"due_queue_url": "http://127.0.0.1:1/q", "table_name": "t"}
    keys = ("reminders", "tasks", "sessions", "offers", "jobs", "scores", "clinic", "flash")
    deployment = Deployment("local", "http://127.0.0.1:1", "eu-west-1", [], dict.fromkeys(keys, outputs))
    chosen = scenarios(deployment)
    assert [s.name.split()[0] for s in chosen] == list(keys)
    assert not [s.name for s in chosen if "seed" in s.name.lower()]
    assert all("seed" not in title.lower() for s in chosen for title in getattr(s, "article", ()))


def test_reconcile_passes_are_read_from_the_emf_lines_of_the_log_in_time_order() -> None:
    """The drift scenario reads what each reconcile pass published as CloudWatch would: the Embedded Metric Format
    lines of the function's log group (other lines, and the consumer's own metrics, are not passes)."""

    def emf(**values: int) -> str:
        return json.dumps({"_aws": {"CloudWatchMetrics": []}, "Table": "drift-table", **values})

    events = [
        {"timestamp": 30, "message": emf(ReconcileDrift=0, ReconcileMissing=0, ReconcileRepaired=0) + "\n"},
        {"timestamp": 10, "message": "START RequestId: 1 Version: $LATEST"},
        {"timestamp": 20, "message": emf(ReconcileDrift=3, ReconcileMissing=2, ReconcileStray=1, ReconcileRepaired=3)},
        {"timestamp": 15, "message": emf(Records=3, Poisoned=0)},
    ]

    class Paginator:
        def paginate(self, logGroupName: str) -> list[dict[str, Any]]:
            assert logGroupName == "/aws/lambda/drift-backfill"
            return [{"events": events[:2]}, {"events": events[2:]}]

    class Logs:
        def get_paginator(self, name: str) -> Paginator:
            assert name == "filter_log_events"
            return Paginator()

    passes = reconcile_passes(lambda service: Logs(), "/aws/lambda/drift-backfill")
    assert [p["ReconcileDrift"] for p in passes] == [3, 0]
    assert passes[0] == {
        "ReconcileMissing": 2,
        "ReconcileStray": 1,
        "ReconcileWrongTotals": 0,
        "ReconcileRepaired": 3,
        "ReconcileDrift": 3,
    }
