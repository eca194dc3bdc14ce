"""Item lives, drawn by Hypothesis: created, written again, moved, deleted and cleaned up by the user's own TTL at
any moment relative to each occurrence (before it, inside Scheduler's minute, hours, days and weeks after it); a
recurring item's writes near its firings, its rule changed, its deletion. `play` turns a life into the world's
events; each change is timed from the occurrence the item holds when it comes (moves shift the later ones)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta

from hypothesis import strategies as st
from st_core import recurrence

from tests.lifetime.world import CLEANUP, DAY, START, World

# When a change comes, in seconds from the occurrence the item holds.
AROUND = st.one_of(
    st.integers(-3 * 86400, -120),  # before it: minutes, hours, days
    st.integers(-75, 75),  # around and inside Scheduler's minute
    st.integers(75, 12 * 3600),  # hours after
    st.integers(86400, 21 * 86400),  # days and weeks after
)
# How far a move takes the due time.
MOVE = st.one_of(st.integers(-7 * 86400, -60), st.integers(60, 14 * 86400))
RULES = ("rate(1 hour)", "rate(6 hours)", "rate(1 day)")
_NAMES = itertools.count()


@dataclass(frozen=True)
class Change:
    # "write" (the due time kept), "move" (a PutItem), "update" (a move by an UpdateItem of the due time alone),
    # "delete"; recurring: "write", "rule", "delete"
    kind: str
    at: int  # once: seconds from the held due time; recurring: seconds from the `firing`-th firing after the last
    by: int = 0  # move: seconds; rule: which rule
    firing: int = 1


@dataclass(frozen=True)
class Life:
    created: int  # seconds after START
    due: int  # once: seconds from creation (negative: written past due); recurring: the rule's index
    changes: tuple[Change, ...]
    recurring: bool = False
    cleanup: int | None = None  # once: the user's TTL on the item, seconds after its due time


@st.composite
def once_lives(draw: st.DrawFn) -> Life:
    changes = draw(
        st.lists(
            st.builds(Change, kind=st.sampled_from(["write", "move", "move", "delete"]), at=AROUND, by=MOVE),
            max_size=3,
        )
    )
    return Life(
        created=draw(st.integers(0, 3 * 86400)),
        due=draw(st.one_of(st.integers(-2 * 86400, -1), st.integers(30, 5 * 86400))),
        changes=tuple(changes),
        cleanup=draw(st.none() | st.integers(3600, 10 * 86400)),
    )


@st.composite
def recurring_lives(draw: st.DrawFn) -> Life:
    near = st.one_of(st.integers(-15, 5), st.integers(-3600, 3600))  # the seconds before a firing, or hours
    changes = draw(
        st.lists(
            st.builds(
                Change,
                kind=st.sampled_from(["write", "write", "rule", "delete"]),
                at=near,
                by=st.integers(0, len(RULES) - 1),
                firing=st.integers(1, 12),
            ),
            max_size=4,
        )
    )
    return Life(
        created=draw(st.integers(0, 2 * 86400)),
        due=draw(st.integers(0, len(RULES) - 1)),
        changes=tuple(changes),
        recurring=True,
    )


def play(world: World, life: Life) -> None:
    """Put the life's events on the world's queue: its creation, then each change once the one before was made."""
    pk = f"item{next(_NAMES)}"
    if life.recurring:
        _recurring(world, pk, life)
    else:
        _once(world, pk, life)


def _once(world: World, pk: str, life: Life) -> None:
    created = START + timedelta(seconds=life.created)
    dues: list[datetime] = []

    def write(due: datetime, version: int) -> None:
        extra: dict[str, int | str] = {"v": version}
        if life.cleanup is not None:
            extra[CLEANUP] = int((due + timedelta(seconds=life.cleanup)).timestamp())
        dues.append(due)
        world.put(pk, due, **extra)

    def step(index: int) -> None:
        if index == len(life.changes):
            return
        change = life.changes[index]
        held = dues[-1]
        when = max(world.t + timedelta(seconds=1), held + timedelta(seconds=change.at))

        def act() -> None:
            if world.history[pk][-1].value is None:
                return  # the user's TTL removed it: the app's later writes find no item (its life is over)
            if change.kind == "delete":
                world.delete(pk)
                return
            due = held
            if change.kind in ("move", "update"):
                due = held + timedelta(seconds=change.by)
                while due in dues:
                    due += timedelta(seconds=1)  # a new due time, never one the item held before
            if change.kind == "update":
                dues.append(due)
                world.update(pk, due)
            else:
                write(due, index + 1)
            step(index + 1)

        world.at(when, act)

    def create() -> None:
        write(created + timedelta(seconds=life.due), 0)
        step(0)

    world.at(created, create)


def _recurring(world: World, pk: str, life: Life) -> None:
    rules = [RULES[life.due]]

    def step(index: int) -> None:
        if index == len(life.changes):
            return
        change = life.changes[index]
        rule = recurrence.parse(rules[-1])
        assert isinstance(rule, recurrence.Rate)
        firing = world.t
        for _ in range(change.firing):
            firing = rule.next_after(firing, datetime.fromtimestamp(0, firing.tzinfo))
        when = max(world.t + timedelta(seconds=1), firing + timedelta(seconds=change.at))

        def act() -> None:
            if change.kind == "delete":
                world.delete(pk)
                return
            if change.kind == "rule" and RULES[change.by] != rules[-1]:
                rules.append(RULES[change.by])
            world.put(pk, rules[-1], v=index + 1)
            step(index + 1)

        world.at(when, act)

    def create() -> None:
        world.put(pk, rules[-1], v=0)
        step(0)

    world.at(START + timedelta(seconds=life.created), create)


def horizon(lives: list[Life]) -> datetime:
    """A bound on when the lives' last change can come (the run goes on a few days after it)."""
    latest = START
    for life in lives:
        moment = START + timedelta(seconds=life.created + max(life.due, 0) + (life.cleanup or 0))
        moment += 3 * DAY if life.cleanup is not None else timedelta(0)  # the user's TTL, days late
        period = max(_period(RULES[i]) for i in (life.due, *(c.by for c in life.changes))) if life.recurring else DAY
        for change in life.changes:
            moment += timedelta(seconds=abs(change.at) + (0 if life.recurring else abs(change.by)))
            moment += period * change.firing if life.recurring else timedelta(0)
        latest = max(latest, moment)
    return latest + DAY


def _period(rule: str) -> timedelta:
    """The time between two firings of a `rate(...)` rule."""
    parsed = recurrence.parse(rule)
    assert isinstance(parsed, recurrence.Rate)
    start = datetime.fromtimestamp(0, START.tzinfo)
    return parsed.next_after(start, start) - start
