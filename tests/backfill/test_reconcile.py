"""Reconcile of an eventbridge table after drift (changes the stream never carried): a schedule whose item is gone
or holds another time is deleted, an item missing its schedule gets it; --dry-run reports each kind with counts and
examples and changes nothing; a second run finds nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import eventbridge

from tests.backfill.conftest import command, consumer, schedules
from tests.backfill.test_eventbridge import expected_name, iso
from tests.handlers.conftest import Env

NOW = datetime.now(UTC).replace(microsecond=0)


def test_reconcile_deletes_stale_schedules_and_makes_missing_ones(env: Env) -> None:
    due = NOW + timedelta(days=2)
    for pk in ("keep", "gone", "moved", "lost"):
        env.put({"PK": pk, "SK": "A", "dueAt": iso(due)})
    eventbridge.handle_batch(env.event(), env.config)
    assert len(schedules(env)) == 4
    # Drift: the stream was off while these happened.
    env.delete("gone", "A")
    env.put({"PK": "moved", "SK": "A", "dueAt": iso(due + timedelta(hours=1))})
    env.scheduler.delete_schedule(Name=expected_name(env, "lost", due), GroupName=env.group)
    env.stream.read()
    function = consumer(env)

    status, lines = command(function, "reconcile", "--dry-run")

    assert status == 0, lines
    assert any("2 would delete schedule" in line and "gone" in line for line in lines), lines
    assert any("2 would schedule" in line for line in lines), lines  # "moved" at its new time, and "lost"
    assert len(schedules(env)) == 3

    status, lines = command(function, "reconcile")

    assert status == 0, lines
    assert set(schedules(env)) == {
        expected_name(env, "keep", due),
        expected_name(env, "moved", due + timedelta(hours=1)),
        expected_name(env, "lost", due),
    }
    status, lines = command(function, "reconcile")
    assert status == 0 and any("0 acted on" in line for line in lines), lines


def test_an_item_given_the_time_again_while_its_schedule_is_deleted_keeps_its_schedule(env: Env) -> None:
    """Between reconcile's read (the item holds another time) and its delete, a live write gives the item the old
    time back and the live function makes its schedule: reconcile reads the item again after the delete, and makes
    it again."""
    from typing import Any

    from tests.redrive.conftest import aws

    due = NOW + timedelta(days=2)
    env.put({"PK": "back", "SK": "A", "dueAt": iso(due)})
    eventbridge.handle_batch(env.event(), env.config)
    env.put({"PK": "back", "SK": "A", "dueAt": iso(due + timedelta(hours=1))})  # drift: the stream missed it
    env.stream.read()
    function = consumer(env)
    real = aws(function)
    live = env.config

    class Racing:
        def __init__(self, client: Any) -> None:
            self.client = client

        def __getattr__(self, name: str) -> Any:
            return getattr(self.client, name)

        def delete_schedule(self, **request: Any) -> Any:
            if request["Name"] == expected_name(env, "back", due):
                env.put({"PK": "back", "SK": "A", "dueAt": iso(due)})
                eventbridge.handle_batch(env.event(), live)
            return self.client.delete_schedule(**request)

    def client(service: str) -> Any:
        return Racing(real(service)) if service == "scheduler" else real(service)

    status, lines = command(function, "reconcile", client=client)

    assert status == 0, lines
    assert expected_name(env, "back", due) in schedules(env)
