"""Past occurrences due longer ago than the ledger remembers: backfill and reconcile never deliver one a second time
on their own, and the operator's `--deliver-past-due` still delivers one that was never delivered."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import eventbridge

from tests.backfill.conftest import command, consumer
from tests.backfill.test_eventbridge import delivered, iso
from tests.backfill.test_reconcile import forget
from tests.handlers.conftest import Env

NOW = datetime.now(UTC).replace(microsecond=0)


def reminded(env: Env) -> None:
    """Offsets -3 days and 0, a table backfilled before (its marker in the ledger), and an item due in 3 hours: its
    reminder is past due longer ago than the ledger remembers."""
    from backfill.timed import BACKFILLED

    config = copy.deepcopy(env.config)
    config["eventbridge"]["offsets"] = [-3 * 86400, 0]
    env.config = config
    env.ddb.put_item(
        TableName=config["eventbridge"]["ledgerTable"],
        Item={"id": {"S": BACKFILLED}, "status": {"S": "DONE"}, "at": {"N": "0"}},
    )
    env.put({"PK": "soon", "SK": "A", "dueAt": iso(NOW + timedelta(hours=3))})


def test_a_reminder_reconcile_held_back_is_still_delivered_by_deliver_past_due(env: Env) -> None:
    """GIVEN offsets -3 days and 0, an item written while the stream was off (its reminder never delivered), and a
    table backfilled before
    WHEN reconcile makes the due time's schedule (the reminder is reported, not delivered) and the operator then runs
    `reconcile --deliver-past-due`
    THEN the reminder is delivered, once: the first run held it back without recording it as delivered."""
    reminded(env)
    env.stream.read()  # the outage: the record never reaches the function
    function = consumer(env)
    status, lines = command(function, "reconcile")
    assert status == 0, lines
    assert delivered(env) == []
    assert len(env.schedules()) == 1, lines

    status, lines = command(function, "reconcile", "--deliver-past-due")
    assert status == 0, lines
    assert [m["keys"]["PK"] for m in delivered(env)] == ["soon"], lines
    status, lines = command(function, "reconcile", "--deliver-past-due")
    assert status == 0 and delivered(env) == [], lines


def test_a_held_back_reminder_is_not_delivered_by_a_redelivered_live_batch(env: Env) -> None:
    """GIVEN a reminder reconcile held back (offsets -3 days and 0)
    WHEN Lambda delivers the item's stream batch late (the live handler, which delivers every past occurrence the
    ledger does not hold)
    THEN the live handler does not deliver it: only the operator's flag does."""
    reminded(env)
    batch = env.event()
    status, lines = command(consumer(env), "reconcile")
    assert status == 0 and delivered(env) == [], lines
    assert eventbridge.handle_batch(copy.deepcopy(batch), env.config, now=lambda: NOW) == {"batchItemFailures": []}
    assert delivered(env) == []


def test_a_first_backfill_of_a_table_the_stack_made_does_not_deliver_again_what_the_live_function_delivered(
    env: Env,
) -> None:
    """GIVEN a stack on a table it made, whose live function delivered a past-due item 3 days ago (the ledger's TTL
    has since removed its entry), and no backfill ever run
    WHEN the operator runs `backfill` (as the docs advise after a stream outage longer than 24 hours)
    THEN nothing is delivered again: the occurrence is reported (a dry run counts it too), and
    `--deliver-past-due` is the operator's way to deliver it."""
    from backfill.timed import FORGOTTEN

    due = NOW - timedelta(days=3)
    env.put({"PK": "live", "SK": "A", "dueAt": iso(due)})
    batch = env.event(at=due + timedelta(seconds=5))
    assert eventbridge.handle_batch(copy.deepcopy(batch), env.config, now=lambda: due + timedelta(seconds=30)) == {
        "batchItemFailures": []
    }
    assert [m["keys"]["PK"] for m in delivered(env)] == ["live"]
    assert forget(env) >= 1
    function = consumer(env)
    for args in (("backfill", "--dry-run"), ("backfill",)):
        status, lines = command(function, *args)
        assert status == 0, lines
        assert any(f"1 {FORGOTTEN}" in line and "live" in line for line in lines), lines
        assert delivered(env) == [], lines


def test_a_first_backfill_of_an_existing_table_delivers_its_past_due_items_once(env: Env) -> None:
    """GIVEN a stack on an existing table (`existing_table`) holding an item 3 days past due
    WHEN backfill runs for the first time, then again
    THEN the item is delivered by the first run only."""
    env.config["eventbridge"]["existingTable"] = True
    env.put({"PK": "old", "SK": "A", "dueAt": iso(NOW - timedelta(days=3))})
    env.stream.read()  # written before the stack existed: no record reaches the function
    function = consumer(env)
    status, lines = command(function, "backfill")
    assert status == 0, lines
    assert [m["keys"]["PK"] for m in delivered(env)] == ["old"], lines
    status, lines = command(function, "backfill")
    assert status == 0 and delivered(env) == [], lines
