"""`ttl` over a table's life, plain and precise: weeks of simulated time per example, item lives drawn by Hypothesis
in the world of tests/lifetime/world.py. The item's TTL attribute is its due time: DynamoDB's TTL deletes it
anywhere from then to days later, a REMOVE with TTL's identity that the mapping's filter passes; with `precise` the
handler also keeps a schedule in the due minute that fires the item (UpdateItem), TTL being the fallback. Lambda
lags, redelivers batches within 24 h and retries failed ones while the target is down; the ledger's entries expire
days late. Each run ends with `ttl_verdict`: every occurrence acted on exactly once when a removal that counts gave
it up, never before its due second, never for a user's delete before it (or, plain, any user's delete), nothing
lost without a parked reason.

`make test` runs the fixed examples; `make lifetime` many more with new draws (see test_eventbridge.py)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.lifetime.harness import ITEMS, Setting, live, run_settings, seeded, stream_settings
from tests.lifetime.lives import Change, Life, once_lives
from tests.lifetime.world import DAY

pytestmark = pytest.mark.model

SETTINGS = stream_settings("ttl")
# The item's TTL is its due time: no cleanup attribute of its own.
LIVES = once_lives().map(lambda life: dataclasses.replace(life, cleanup=None))


@pytest.mark.parametrize("precise", [False, True], ids=["plain", "precise"])
@run_settings()
@seeded
@given(setting=SETTINGS, lives=st.lists(LIVES, min_size=1, max_size=ITEMS))
def test_ttl_items_over_weeks(precise: bool, setting: Setting, lives: list[Life]) -> None:
    live(dataclasses.replace(setting, precise=precise), lives)


# -- single lives -----------------------------------------------------------------------------------------------------

QUIET = Setting(seed=47, reconcile_every=None, ttl_lag=3 * DAY, offsets=(0,), outages=(), window=None, mode="ttl")


@pytest.mark.parametrize("precise", [False, True], ids=["plain", "precise"])
def test_an_item_removed_by_ttl_days_late_is_acted_on_once(precise: bool) -> None:
    """Due an hour in, TTL days late (plain: the only path; precise: the fallback after the schedule fired it)."""
    world = live(dataclasses.replace(QUIET, precise=precise), [Life(created=0, due=3600, changes=())])
    assert [d.path for d in world.deliveries] == ["handler"]


@pytest.mark.parametrize("precise", [False, True], ids=["plain", "precise"])
def test_a_users_delete_is_not_an_expiry(precise: bool) -> None:
    """Deleted by the user two hours before its due time (plain: after it too, still not TTL's): never acted on."""
    changes = (Change("delete", at=-2 * 3600),) if precise else (Change("delete", at=2 * 3600),)
    world = live(dataclasses.replace(QUIET, precise=precise), [Life(created=0, due=86400, changes=changes)])
    assert world.deliveries == []


def test_precise_fires_in_the_due_minute_and_ttl_finds_nothing_left() -> None:
    """precise: the schedule fires the item in its due minute (not days later by TTL), once."""
    world = live(dataclasses.replace(QUIET, precise=True), [Life(created=0, due=3600 + 17, changes=())])
    [delivery] = world.deliveries
    assert timedelta(0) <= delivery.at - (world.removals[0].due) < timedelta(minutes=5), world.removals
    assert [r.by for r in world.removals] == ["scheduler"]


@pytest.mark.parametrize("precise", [False, True], ids=["plain", "precise"])
def test_a_moved_item_is_acted_on_at_its_new_time_only(precise: bool) -> None:
    """Moved a day later an hour before its due time, then written again (same time) after it: one occurrence."""
    changes = (Change("move", at=-3600, by=86400), Change("write", at=7200))
    world = live(dataclasses.replace(QUIET, precise=precise), [Life(created=0, due=7200, changes=changes)])
    assert len(world.deliveries) == 1
