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

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.lifetime.harness import ITEMS, Setting, live, run_settings, seeded
from tests.lifetime.lives import Change, Life, once_lives
from tests.lifetime.world import DAY, HOUR

pytestmark = pytest.mark.model

SETTINGS = st.builds(
    Setting,
    seed=st.integers(0, 2**32 - 1),
    reconcile_every=st.none(),
    ttl_lag=st.sampled_from([timedelta(0), HOUR, DAY, 3 * DAY]),
    offsets=st.just((0,)),
    outages=st.lists(st.tuples(st.integers(0, 30 * 24), st.integers(1, 30)), max_size=2).map(tuple),
    window=st.none(),
    mode=st.just("polling"),
)


@run_settings()
@seeded
@given(setting=SETTINGS, lives=st.lists(once_lives(), min_size=1, max_size=ITEMS))
def test_polling_items_over_weeks(setting: Setting, lives: list[Life]) -> None:
    live(setting, lives)


QUIET = Setting(seed=47, reconcile_every=None, ttl_lag=HOUR, offsets=(0,), outages=(), window=None, mode="polling")


def test_an_item_is_sent_once_at_its_time() -> None:
    world = live(QUIET, [Life(created=0, due=3600 + 17, changes=())])
    [delivery] = world.deliveries
    assert timedelta(0) <= delivery.at - (world.history[delivery.pk][0].value) < timedelta(minutes=2)


@pytest.mark.parametrize(
    "change",
    [Change("delete", at=-60), Change("move", at=-600, by=86400), Change("write", at=3 * 86400)],
    ids=["deleted-before", "moved-before", "rewritten-days-after"],
)
def test_a_change_is_respected(change: Change) -> None:
    live(QUIET, [Life(created=0, due=7200, changes=(change,))])
