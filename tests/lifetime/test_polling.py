"""`polling` over a table's life: weeks of simulated time per example, item lives drawn by Hypothesis in the world
of tests/lifetime/world.py, with the assigner as the stream's consumer (Lambda's lag, redeliveries within 24 h,
retries while the target is down) and the processor ticking every minute on the world's clock, killed by its Lambda
timeout at any point (tests/lifetime/ticks.py). Items are created, written again, moved and deleted at any moment
relative to their due time, and removed by the user's own TTL days late. Each run ends with `verdict`: every task
sent exactly once by the processor (a send a kill cut off from its completion may come once more: the documented
at-least-once case, named apart), never before its due second, a change before a task ran holds, nothing lost
without a parked reason.

`make test` runs the fixed examples; `make lifetime` many more with new draws (see test_eventbridge.py)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.lifetime.harness import ITEMS, Setting, live, run_settings, seeded, stream_settings
from tests.lifetime.lives import Change, Life, once_lives
from tests.lifetime.world import HOUR

pytestmark = pytest.mark.model

SETTINGS = stream_settings("polling")


# Half the moves by an UpdateItem of the due time alone: the item keeps its index entry at the old time (a PutItem
# replaces the entry too), and the assigner may not have seen the move when a tick reads that entry.
LIVES = once_lives().map(
    lambda life: dataclasses.replace(
        life,
        changes=tuple(
            dataclasses.replace(c, kind="update") if c.kind == "move" and c.by % 2 else c for c in life.changes
        ),
    )
)


@run_settings()
@seeded
@given(setting=SETTINGS, lives=st.lists(LIVES, min_size=1, max_size=ITEMS))
def test_polling_items_over_weeks(setting: Setting, lives: list[Life]) -> None:
    live(setting, lives)


QUIET = Setting(seed=47, reconcile_every=None, ttl_lag=HOUR, offsets=(0,), outages=(), window=None, mode="polling")


@pytest.mark.parametrize("shards", [1, 8])
def test_a_shards_change_between_a_write_and_its_time_loses_nothing(shards: int) -> None:
    """Indexed on one of 4 shards; the user deploys `shards` lowered to 1 (or raised to 8) a day before its time."""
    setting = dataclasses.replace(QUIET, shards=shards, shards_day=1)
    world = live(setting, [Life(created=0, due=2 * 86400 + 5, changes=()) for _ in range(6)])
    assert len(world.deliveries) == 6


def test_an_item_is_sent_once_at_its_time() -> None:
    world = live(QUIET, [Life(created=0, due=3600 + 17, changes=())])
    [delivery] = world.deliveries
    assert timedelta(0) <= delivery.at - (world.history[delivery.pk][0].value) < timedelta(minutes=2)


@pytest.mark.parametrize(
    "change",
    [
        Change("delete", at=-60),
        Change("move", at=-600, by=86400),
        Change("update", at=-20, by=3600),
        Change("write", at=3 * 86400),
    ],
    ids=["deleted-before", "moved-before", "updated-seconds-before", "rewritten-days-after"],
)
def test_a_change_is_respected(change: Change) -> None:
    """Deleted or moved before its time: not sent then (moved: sent at the new time); written again days after it
    ran: not sent again. Seed 5: the assigner sees the update 20 s before the due time only after the tick at that
    time read the old index entry (the processor's own reading of the item must hold the move)."""
    live(dataclasses.replace(QUIET, seed=5), [Life(created=0, due=7200, changes=(change,))])
