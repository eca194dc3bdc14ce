"""What every mode's lifetime tests share: an example's setting (`Setting`), a fresh moto world for it
(`simulated`), playing lives in it to the end and checking the mode's verdict (`live`), the run settings (fixed
examples in `make test`, new draws from `LIFETIME_SEED` in `make lifetime`) and the coverage report."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from moto import mock_aws
from st_core.clients import CLIENTS

from tests.handlers.conftest import build_env, with_due_index
from tests.handlers.model_support import ttl_config
from tests.lifetime import totals
from tests.lifetime.lives import Life, horizon, play
from tests.lifetime.ticks import Ticks
from tests.lifetime.totals import Break, Scored, TotalsWorld, totals_verdict
from tests.lifetime.world import DAY, HOUR, START, Verdict, World, second_precision, ttl_verdict, verdict

EXAMPLES = int(os.environ.get("LIFETIME_EXAMPLES", "6"))
SEED = os.environ.get("LIFETIME_SEED")  # set: new draws from this seed (`make lifetime`); unset: the fixed ones
RANDOM = SEED is not None
ITEMS = int(os.environ.get("LIFETIME_ITEMS", "5"))  # the most item lives in one example
REPORT = os.environ.get("LIFETIME_REPORT")  # where `make lifetime` writes what it covered
# How long the world runs on after an example's last change (days): ledger entries expire, TTL removes items days
# late, reconcile keeps running, redeliveries come; months of it in the long run.
TAIL = timedelta(days=float(os.environ.get("LIFETIME_TAIL_DAYS", "2")))


@dataclass(frozen=True)
class Setting:
    """The world's part of an example: the mode, and how AWS and the operator behave over its weeks."""

    seed: int
    reconcile_every: timedelta | None
    ttl_lag: timedelta
    offsets: tuple[int, ...]
    outages: tuple[tuple[int, int], ...]  # (start hour, hours) of the target being down
    window: int | None  # the idempotency window the user sets, on `window_day`
    window_day: int = 10
    second: bool = False  # eventbridge: precision="second" (a release queue)
    mode: str = "eventbridge"
    precise: bool = False  # ttl: a schedule in the due minute, TTL as the fallback
    shards: int | None = None  # polling: the `shards` count the user deploys on `shards_day` (from 4)
    shards_day: int = 2
    on_change: str = "adjust"  # aggregate: "adjust" (totals of the items as they are) or "ignore" (of inserts)
    breaks: tuple[Break, ...] = ()  # aggregate: a user's bug in a total, the operator's fix and redrives
    again: tuple[int, ...] = ()  # aggregate: seconds from the start at which Lambda delivers every record again


def stream_settings(mode: str) -> st.SearchStrategy[Setting]:
    """The drawn settings of a mode other than eventbridge (no offsets, reconcile or window change): the world's
    seed, TTL's lag, the target's outages."""
    return st.builds(
        Setting,
        seed=st.integers(0, 2**32 - 1),
        reconcile_every=st.none(),
        ttl_lag=st.sampled_from([timedelta(0), HOUR, DAY, 3 * DAY]),
        offsets=st.just((0,)),
        outages=st.lists(st.tuples(st.integers(0, 30 * 24), st.integers(1, 30)), max_size=2).map(tuple),
        window=st.none(),
        mode=st.just(mode),
        shards=st.none() | st.sampled_from([1, 2, 8]) if mode == "polling" else st.none(),
        shards_day=st.integers(0, 6),
    )


@contextmanager
def simulated(setting: Setting, *, lost_answers: float = 0.0) -> Iterator[World]:
    """A fresh moto world for one example, configured as `setting` says."""
    with mock_aws():
        env = build_env()
        env.configure(max_workers=2)
        if setting.mode == "aggregate":
            env.configure(mode="aggregate", on_change=setting.on_change, group_from=totals.OWNER, max_workers=2)
        elif setting.mode == "ttl":
            ttl_config(env, precise=setting.precise)
        elif setting.mode == "polling":
            with_due_index(env)
            # The most attempts the component allows: refused sends back off (doubling from a minute) through any
            # outage, and never give up.
            env.configure(shards=4, max_attempts=100)
        else:
            env.configure(offsets=list(setting.offsets))
            if setting.second:
                second_precision(env)
        world = (TotalsWorld if setting.mode == "aggregate" else World)(
            env,
            seed=setting.seed,
            reconcile_every=setting.reconcile_every,
            ttl_lag=setting.ttl_lag,
            lost_answers=lost_answers,
        )
        world.outages = [
            (START + timedelta(hours=start), START + timedelta(hours=start + hours)) for start, hours in setting.outages
        ]
        try:
            with world.running():
                if setting.mode == "polling":
                    world.ticks = Ticks(world, seed=setting.seed)
                    world.ticks.start()
                yield world
        finally:
            CLIENTS.reset()


def judge(world: World, end: Any) -> Verdict:
    """The mode's verdict on a world run to `end`."""
    if world.mode == "ttl":
        return ttl_verdict(world)
    if isinstance(world, TotalsWorld):
        return totals_verdict(world)
    return verdict(world, offsets=list(world.section.get("offsets", [0])), end=end)


def live(setting: Setting, lives: Sequence[Life | Scored], *, lost_answers: float = 0.0) -> World:
    """Play the lives in a world, to a few days after the last change; fail with the verdict's findings."""
    with simulated(setting, lost_answers=lost_answers) as world:
        if isinstance(world, TotalsWorld):
            scored = [life for life in lives if isinstance(life, Scored)]
            for score in scored:
                totals.play(world, score)
            totals.operate(world, list(setting.breaks), setting.again)
            last = totals.horizon(scored, list(setting.breaks))
        else:
            once = [life for life in lives if isinstance(life, Life)]
            for life in once:
                play(world, life)
            last = horizon(once)
        if setting.window is not None:
            window = setting.window
            world.at(START + setting.window_day * DAY, lambda: world.set_window(window))
        if setting.shards is not None:
            shards = setting.shards
            world.at(START + setting.shards_day * DAY, lambda: world.set_shards(shards))
        end = last + TAIL
        if setting.window is not None:
            end = max(end, START + (setting.window_day + 3) * DAY)  # reconcile runs under the new window too
        world.run_until(end)
        found = judge(world, end)
        COVERED.append(
            Covered(
                label(setting),
                end - START,
                sum((end - START - timedelta(seconds=life.created)).total_seconds() / 86400 for life in lives),
                len(lives),
                found.occurrences,
                world.handled,
                world.redrives if isinstance(world, TotalsWorld) else world.reconciles,
                len(found.at_least_once),
                len(found.limited),
            )
        )
        if REPORT:
            write_report(Path(REPORT), finished=False)  # a run stopped part way still says what it covered
        assert not found.failures(), "\n".join(found.failures())
        return world


def label(setting: Setting) -> str:
    """The mode as the report names it."""
    if setting.mode == "aggregate":
        return f"aggregate ({setting.on_change})"
    if setting.mode != "eventbridge":
        return "ttl precise" if setting.precise else setting.mode
    return "eventbridge (second)" if setting.second else "eventbridge (minute)"


class Covered(NamedTuple):
    """What one example covered."""

    mode: str
    span: timedelta
    item_days: float
    lives: int
    occurrences: int
    records: int
    reconciles: int
    second_copies: int
    limited: int


COVERED: list[Covered] = []
STARTED = time.time()
# The report's generated part sits between these lines; what the file holds around them (what earlier runs found,
# written by people) is kept.
BEGIN, END = "<!-- lifetime: generated by make lifetime -->", "<!-- lifetime: end of generated part -->"


def run_settings() -> settings:
    return settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=not RANDOM,
        database=None,
        print_blob=True,
        report_multiple_bugs=False,
        # `make test`'s run reports the first failing example as drawn (shrinking it costs minutes of moto);
        # `make lifetime` shrinks.
        phases=list(Phase) if RANDOM else [Phase.explicit, Phase.reuse, Phase.generate],
    )


def seeded(test: Any) -> Any:
    """The test with Hypothesis seeded from `LIFETIME_SEED` (a long run's draws replay from the seed it reports)."""
    return test if SEED is None else seed(int(SEED))(test)


def write_report(path: Path, *, finished: bool) -> None:
    """What the run covered so far, by mode, with its settings and times; rewritten after every example."""
    now = time.time()
    stamp = "%Y-%m-%d %H:%M"
    began = datetime.fromtimestamp(STARTED, UTC).strftime(stamp)
    ended = datetime.fromtimestamp(now, UTC).strftime("%H:%M")
    minutes = (now - STARTED) / 60
    state = "finished" if finished else "running (or stopped) after the examples below"
    lines = [
        BEGIN,
        f"Seed (`LIFETIME_SEED`) {SEED if RANDOM else 'none: fixed examples (derandomized)'}; up to {EXAMPLES} "
        f"examples per test, up to {ITEMS} item lives each, {TAIL.days}-day tails. {began}-{ended} UTC "
        f"({minutes:,.1f} min), {state}.",
        "",
        "| mode | examples | simulated item-days | item lives | occurrences (aggregate: record changes) checked "
        "| stream records handled (redeliveries included) | reconcile (aggregate: redrive poison) runs "
        "| longest span (days) | documented second copies | documented limit |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for mode in sorted({row.mode for row in COVERED}):
        rows = [row for row in COVERED if row.mode == mode]
        counts = [sum(getattr(row, field) for row in rows) for field in Covered._fields[3:]]
        lines.append(
            f"| {mode} | {len(rows)} | {sum(row.item_days for row in rows):,.0f} | "
            + " | ".join(f"{count:,}" for count in counts[:4])
            + f" | {max(row.span for row in rows).days} | "
            + " | ".join(f"{count:,}" for count in counts[4:])
            + " |"
        )
    total = sum(row.item_days for row in COVERED)
    lines += ["", f"All modes: {total:,.0f} simulated item-days in {len(COVERED):,} examples.", END]
    text = path.read_text() if path.exists() else "# Lifetime simulation\n\n" + BEGIN + "\n" + END + "\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip("\n") + "\n\n" + BEGIN + "\n" + END + "\n"
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(head + "\n".join(lines) + tail)
