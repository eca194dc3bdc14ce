"""The Drift view's `reconcile --dry-run` over a sample (against moto, the consumer run in-process): it reads the
number of items asked for, a page at a time, says when that was not the whole table, and finds the items whose
schedule is missing among them; asked for more than the table holds, it reads it all and sweeps the group too."""

from __future__ import annotations

import json

import eventbridge

from components.cli.console.views import drift
from components.cli.redrive.discovery import discover
from components.modes.eventbridge import eventbridge_filters
from tests.handlers.conftest import Env
from tests.handlers.conftest import env as env  # the moto env fixture, shared with the handler tests
from tests.redrive.conftest import Function, aws

FUTURE = "2099-01-01T00:00:00Z"
ITEMS = 230


def test_a_sample_reads_the_items_asked_for_and_the_whole_table_when_it_holds_fewer(env: Env) -> None:
    """None of the items was ever seen by the consumer (written with the stream off, say): each is a missing
    schedule. A sample of 150 reads 150 (two pages), finds 150, and sweeps nothing; one of 1,000 reads all 230."""
    function = Function(env, eventbridge.handle_batch, eventbridge_filters("dueAt"))
    for n in range(ITEMS):
        env.put({"PK": f"item-{n:03d}", "SK": "A", "dueAt": FUTURE})
    client = aws(function)
    stack = discover(client, function.name)
    scans: list[int] = []
    client("dynamodb").meta.events.register(
        "provide-client-params.dynamodb.Scan", lambda params, **_: scans.append(params["Limit"])
    )
    ticks = iter([10.0, 12.5])

    sample = drift(client, stack, 150, clock=lambda: next(ticks))

    assert (sample.tally.scanned, sample.whole, sample.problems, sample.seconds) == (150, False, [], 2.5)
    assert scans == [75, 75]  # two even pages
    assert sample.tally.kinds == {"would schedule": 150}
    assert client("scheduler").list_schedules(GroupName=env.config["scheduler"]["group"])["Schedules"] == []

    scans.clear()
    whole = drift(client, stack, 1000)

    assert (whole.tally.scanned, whole.whole) == (ITEMS, True)
    assert whole.kinds[0][:2] == ("would schedule", ITEMS)
    assert (
        whole.headline == f"dry run, nothing changed. reconcile: {ITEMS} scanned, {ITEMS} acted on, 0 skipped, 0 failed"
    )


def test_an_item_whose_schedule_is_missing_is_found_among_those_scheduled(env: Env) -> None:
    function = Function(env, eventbridge.handle_batch, eventbridge_filters("dueAt"))
    for pk in ("a", "b", "c"):
        env.put({"PK": pk, "SK": "A", "dueAt": FUTURE})
    eventbridge.handle_batch(env.event(), env.config)  # each scheduled by the consumer
    client = aws(function)
    group = env.config["scheduler"]["group"]
    schedules = client("scheduler").list_schedules(GroupName=group)["Schedules"]
    assert len(schedules) == 3
    gone = schedules[1]["Name"]
    held = json.loads(client("scheduler").get_schedule(GroupName=group, Name=gone)["Target"]["Input"])
    client("scheduler").delete_schedule(GroupName=group, Name=gone)  # behind the component's back

    found = drift(client, discover(client, function.name), 100)

    assert found.whole
    [(kind, count, examples), *rest] = found.kinds
    assert (kind, count) == ("would schedule", 1)
    assert examples == [json.dumps(held["keys"], sort_keys=True)]
    assert rest == [("already scheduled", 2, []), ("schedule matches its item", 2, [])]  # the sweep, whole table
