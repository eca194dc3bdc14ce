"""Backfill and reconcile end to end, in the local cloud: the table `backlog` is made and filled before the local stack
deploys, its stream enabled only afterwards (so no stream record describes its items, as on a table you attach to),
and the operator's commands run with `--in-lambda` over the stack's backfill functions (ministack runs them).

Without backfill nothing acts for those items; with it each past-due item is delivered once, at once, and each future
and weekly one once in its minute, never before its time; schedules deleted and totals corrupted by hand are found by
`reconcile --dry-run` and repaired by `reconcile` before any of them was due. Stream batches are redelivered as
Lambda may (30%), and IAM is enforced on every call the functions make."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from localcloud.backlog import EVENTS, TABLE, TOTALS, Backlog, prefill
from localcloud.deploy import up
from localcloud.server import Ministack

REDELIVER = 0.3
# The documented bound for a schedule (docs/guarantees.md: 180 s) plus 20 s for a loaded machine's stream and the
# local cloud's 1 s Scheduler sweep; a wait ends as soon as everything arrived.
LATE_SECONDS = 200.0
# Nothing arrives for the items without backfill, although the stream (lag of a second here) has had this long.
QUIET_SECONDS = 6.0


@pytest.fixture(scope="module")
def backlog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backlog]:
    with Ministack(log_dir=tmp_path_factory.mktemp("ministack-backlog"), redeliver=REDELIVER) as cloud:
        filled = prefill(cloud.endpoint, "eu-west-1")
        yield Backlog(up(cloud.endpoint), filled)


def wait_until(what: str, check: Callable[[], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds:.0f} s: {what}")
        time.sleep(0.5)


def delivered(scenario: Backlog) -> dict[str, int]:
    counts: dict[str, int] = {}
    for delivery in scenario.observe():
        counts[delivery.key] = counts.get(delivery.key, 0) + 1
    return counts


def test_items_that_predate_the_stream_act_once_at_their_time_after_backfill_and_reconcile_repairs_drift(
    backlog: Backlog,
) -> None:
    filled = backlog.prefilled
    future = sorted([*filled.future, *filled.weekly])
    # Both components act on the table that was there first (neither owns it).
    assert {backlog.deployment.outputs[c]["table_name"] for c in (EVENTS, TOTALS)} == {TABLE}
    # Without backfill: no due event, no schedule, no total, though the stack runs and its stream is on.
    time.sleep(QUIET_SECONDS)
    assert delivered(backlog) == {}
    assert backlog.schedules() == {}
    assert backlog.read_totals() == dict.fromkeys(filled.sums, 0)

    began = time.time()
    backlog.expect(began)
    totals = backlog.in_background(backlog.total_steps)  # a minute's settle per replacing run: alongside

    fed = backlog.command(EVENTS, "backfill")
    assert (fed.kinds.get("fed as a fresh write"), fed.failed, fed.finished) == (
        len(filled.past) + len(future),
        0,
        True,
    )
    # Past due: delivered once, promptly. Future and weekly: a schedule each, none fired yet.
    wait_until("the past-due items' due events", lambda: set(filled.past) <= set(delivered(backlog)), 30.0)
    assert sorted(backlog.schedules()) == future
    assert not set(future) & {d.key for d in backlog.deliveries}

    deleted = backlog.delete_schedules(["SOON#3", "SOON#4", "WEEKLY#1"])
    assert len(deleted) == 3, f"this machine was too slow to delete {deleted} well before they were due"
    assert sorted(backlog.schedules()) == ["SOON#1", "SOON#2"]
    found = backlog.command(EVENTS, "reconcile", dry_run=True)
    assert (found.kinds.get("would schedule"), found.failed) == (3, 0)
    assert sorted(backlog.schedules()) == ["SOON#1", "SOON#2"]  # a dry run changes nothing
    repaired = backlog.command(EVENTS, "reconcile")
    assert (repaired.kinds.get("fed as a fresh write"), repaired.failed) == (3, 0)
    assert sorted(backlog.schedules()) == future
    # Once repaired, backfill again finds nothing to do: every item has what a fresh write would have made.
    again = backlog.command(EVENTS, "backfill")
    assert (again.acted, again.kinds.get("already scheduled")) == (0, len(filled.past) + len(future))

    wait_until("every item's due event", lambda: set(backlog.expected) <= {d.key for d in backlog.observe()}, 240.0)
    totals.join(timeout=240.0)
    time.sleep(5.0)  # a duplicate would arrive now
    outcome = backlog.outcome()
    assert backlog.wrong == [], backlog.wrong  # every step's counts (the totals' thread included) as expected
    assert (outcome.missing, outcome.unexpected, outcome.early, outcome.duplicates) == ([], [], [], 0), outcome
    assert outcome.delivered == outcome.expected == len(filled.past) + len(future)
    assert max(outcome.lateness) < LATE_SECONDS
    past_lateness = [d.at - began for d in backlog.deliveries if d.key in filled.past]
    assert max(past_lateness) < 30.0
    # Totals: set by backfill, two corrupted by hand, found and replaced by reconcile.
    assert backlog.read_totals() == filled.sums
    by_step = {(s.component, s.command): s.kinds for s in backlog.steps}
    assert by_step[(TOTALS, "backfill")].get("total replaced") == len(filled.sums)
    assert by_step[(TOTALS, "reconcile --dry-run")].get("would replace total") == 2
    assert by_step[(TOTALS, "reconcile")].get("total replaced") == 2
    assert outcome.unexpected_dead_letters() == {} and sum(outcome.dead_letters.values()) == 0
