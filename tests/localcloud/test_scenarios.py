"""`tally`: how deliveries are judged against expectations (pure, no cloud)."""

from __future__ import annotations

from localcloud.demo import problems, summary
from localcloud.scenarios import Delivery, tally


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
