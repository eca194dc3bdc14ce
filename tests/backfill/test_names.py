"""One name per occurrence, whichever path names it and whichever order a stream record lists the keys in (AWS's
records may list the sort key first; the handler tests' records do): the live function, backfill and reconcile name
an occurrence alike, its readable part in the table's key order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import eventbridge
from st_core.timeparse import format_due

from tests.backfill.conftest import command, consumer
from tests.handlers.conftest import Env

NOW = datetime.now(UTC).replace(microsecond=0)
DUE = (NOW + timedelta(days=2)).replace(second=0)


def names(env: Env) -> set[str]:
    return {s["Name"] for s in env.schedules()}


def live(env: Env) -> None:
    """The live function on the stream's new records."""
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}


def test_the_live_function_backfill_and_reconcile_give_an_occurrence_one_name(env: Env) -> None:
    """The live function names the occurrence from an AWS record (sort key first); a later backfill and reconcile
    find its schedule and make no second one under another name (which would fire the occurrence twice)."""
    env.put({"PK": "user-1", "SK": "A", "dueAt": format_due(DUE)})
    live(env)
    (made,) = names(env)
    assert made.startswith("user-1-A-")  # the readable part in the table's key order, whatever the record's
    function = consumer(env)
    for run in ("backfill", "reconcile"):
        status, lines = command(function, run)
        assert status == 0, lines
        assert names(env) == {made}, (run, lines)
