"""`make soak`: every mode end to end at volume, under faults, in the local cloud; per-item accounting at the end.

    python -m bench.soak [--items 20000] [--rate 10] [--faults 0.02] [--redeliver 0.3] [--herd 0]
                         [--out bench/latest.md]

The same stack `make demo` deploys (`Pulumi.local.yaml`, IAM enforced) in ministack, with the local cloud's AWS
behaviours (Scheduler's minute, stream batches delivered again) and faults at a stated rate (localcloud/faults.py:
throttling and 5xx from DynamoDB, Scheduler and SQS, targets throttling Scheduler's firings, a function timing out
mid-batch). Items are written at `--rate` items a second, spread over eight workloads, one per mode, each with its
own mix of creates, moves, cancels, deletes with re-inserts and consumers' write-backs; due times fall a few minutes
after each write, so the whole run takes minutes. Everything that reaches a target is kept (keys, `dueAt`,
`occurrenceId`, the message's id and when it was sent) and compared, item by item, with what the final state of
each item says should have happened (`account`).

Definitions (docs/guarantees.md): *early* is a delivery sent before its due time (the instant the item names, or for
a recurring schedule its firing's scheduled minute): every mode promises "never early". *lateness* is from that time
to when the target received the message (SQS `SentTimestamp`), judged against the mode's documented bound (p99 for
second precision, whose bound is stated at p99; the maximum for the others) less what Scheduler's retries of the
firing added when an injected fault made the target refuse it (each bound of a Scheduler-delivered mode adds
Scheduler's delay, and a retry under the schedule's retry policy is part of it; the raw lateness is reported too). A
*duplicate* is a delivery beyond the first of one occurrence (item + due time); it is *allowed* when the same queue
message is received again (SQS is at least once) or, in the modes documented as at least once (recurring schedules:
Scheduler's targets), when the same occurrence (same `occurrenceId`) is sent again; any other is *undocumented*.
*cancelled but delivered*: an occurrence a cancel, a move or a delete removed (made at least 10 s before its minute)
that still arrived. The driver may fall behind its plan on a loaded machine: a cancel it made later than that does
not count as one (the old occurrence may arrive or not), and the report says how far behind the writes were.

A herd (`--herd N`): N items in each of two more tables, all due at the same whole minute (a 09:00 rush), written
beforehand at `--herd-rate` a second, a twentieth of them deleted before their minute (cancels that must hold):
`eventbridge herd` (one schedule each, fired through the local Scheduler's invocation throttle,
localcloud/throttle.py) and `polling herd` (fanned out: `HERD_SHARDS` shard keys, one processor invocation per
group of them, `HERD_SHARD_GROUPS`; its rule ticked once a minute, as deployed), the polling herd a few minutes
after the eventbridge one so each drains alone.
Each is judged against what docs/performance.md's herd section says for its size at the local throttle (`herd_bounds`).
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from localcloud.scenarios import LOCAL_TTL, MINUTE_SCHEDULE, POLL_TICK, SECOND, Bound, percentile
from localcloud.throttle import AWS_INVOCATIONS_PER_SECOND, LOCAL_INVOCATIONS_PER_SECOND

REPO = Path(__file__).resolve().parent.parent
PLOTS_DIR = REPO / "docs" / "assets" / "plots"
RECURRING = Bound(
    71.0,
    "the firing's minute (Scheduler runs it anywhere in it), + 10 s for the stream when the handler takes the firing "
    "over (a write made before the minute, handled inside it: sent once the schedule's update is made), + 1 s for "
    "the local Scheduler's sweep",
)
# The modes, in report order: (name, table, bound, whether its guarantee is at least once per occurrence).
MODES: tuple[tuple[str, str, Bound | None, bool], ...] = (
    ("eventbridge minute", "tasks", MINUTE_SCHEDULE, False),
    ("eventbridge second", "flash", SECOND, False),
    ("eventbridge offsets", "clinic", MINUTE_SCHEDULE, False),
    ("eventbridge recurring", "clinic", RECURRING, True),
    ("ttl plain", "sessions", LOCAL_TTL, False),
    ("ttl precise", "offers", MINUTE_SCHEDULE, False),
    ("polling", "jobs", POLL_TICK, False),
    ("aggregate", "scores", None, False),
)
P99_BOUND = {"eventbridge second"}  # bounds stated at p99 (docs/guarantees.md); the others bound every delivery
# The modes Scheduler delivers (or, for second precision, releases): their bounds add Scheduler's delay.
SCHEDULER_DELIVERED = {
    "eventbridge herd",
    "eventbridge minute",
    "eventbridge second",
    "eventbridge offsets",
    "eventbridge recurring",
    "ttl precise",
}
OFFSETS = (-60, 0)  # the clinic table's offsets (Pulumi.local.yaml)
ZONE = "Asia/Kolkata"
PLAYERS = 100
WRITE_BACK = 0.2  # the share of deliveries whose consumer writes back to the item
CANCEL_MARGIN = 10.0  # a cancel holds when made this long before its minute (docs/guarantees.md)
# The herd's two workloads (their tables are added to the stack for the run, `herd_config`): name, table.
HERD_MODES: tuple[tuple[str, str], ...] = (("eventbridge herd", "herd"), ("polling herd", "herdjobs"))
# Every workload's table, by mode.
ALL_MODES: dict[str, str] = {mode: table for mode, table, *_ in MODES} | dict(HERD_MODES)
HERD_SHARDS = 8
HERD_SHARD_GROUPS = 4  # processor invocations a tick, each with its own workers: what two cores can run at once
HERD_CANCELLED = 0.05  # the share of a herd's items deleted before their minute
HERD_CANCEL_AFTER = 5.0  # seconds after its write
# docs/performance.md's herd section: one fanned-out processor invocation drains about 195 items/s (modelled from
# `python -m bench herd`'s measured per-item calls and CPU, 2026-11-27, for a Lambda's 0.58 vCPU at 1,024 MB).
MODELLED_INVOCATION_RATE = 195.0
# The local cloud's scale: two shared cores serve AWS's rates 1:10 (localcloud/throttle.py), Scheduler's throttle and
# a processor invocation's drain alike.
LOCAL_SCALE = AWS_INVOCATIONS_PER_SECOND / LOCAL_INVOCATIONS_PER_SECOND
# The two herd tables' stream handlers (the eventbridge handler's schedules, the polling assigner's index entries)
# took about 25 records a second between them on a shared 2-core machine (`make soak N=0 HERD=1000`, 2026-11-27):
# a herd's minute is a second per 10 items after its last write, so every schedule exists before it.
HERD_LEAD_ITEMS = 10.0
SCHEDULER_SWEEP = 1.0  # the local Scheduler looks for due schedules every second (localcloud/aws_behaviour.py)


# -- accounting (pure) -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arrival:
    """One message a target received: the occurrence it names and the message that carried it."""

    item: str
    due: float
    occurrence: str
    message: str
    at: float


@dataclass
class Account:
    """One mode's numbers at the end of a run."""

    mode: str
    items: int
    expected: int
    delivered: int = 0
    lost: list[str] = field(default_factory=list)
    early: list[str] = field(default_factory=list)
    allowed_duplicates: int = 0
    undocumented_duplicates: list[str] = field(default_factory=list)
    # Each undocumented duplicate's deliveries, as the report shows them: occurrenceId, message id, when sent.
    duplicate_details: dict[str, list[tuple[str, str, float]]] = field(default_factory=dict)
    cancelled_delivered: list[str] = field(default_factory=list)
    raced_delivered: int = 0  # delivered though cancelled, the cancel made too late to hold (the driver fell behind)
    unexpected: list[str] = field(default_factory=list)
    lateness: list[float] = field(default_factory=list)
    # Each delivery's lateness less what Scheduler's retries of its firing added (an injected target fault): the
    # bounds of Scheduler-delivered modes add "Scheduler's delay", of which a retry is part (docs/guarantees.md).
    beyond_retries: list[float] = field(default_factory=list)
    retried: int = 0  # deliveries whose firing Scheduler retried, later for it
    bound: Bound | None = None
    p99_bound: bool = False

    def late(self, fraction: float) -> float | None:
        return percentile(self.lateness, fraction)

    def judged_lateness(self) -> float | None:
        """What the bound judges: p99 where the bound is stated at p99, else the maximum, of the lateness less what
        Scheduler's retries added."""
        return percentile(self.beyond_retries, 0.99 if self.p99_bound else 1.0)

    def within_bound(self) -> bool:
        judged = self.judged_lateness()
        return self.bound is None or judged is None or judged <= self.bound.seconds

    @property
    def ok(self) -> bool:
        """Nothing lost, early, duplicated beyond the documented cases, cancelled-but-delivered or unknown."""
        return not (self.lost or self.early or self.undocumented_duplicates or self.cancelled_delivered) and not (
            self.unexpected
        )


def occurrence_key(item: str, due: float) -> str:
    return f"{item}@{datetime.fromtimestamp(due, UTC):%Y-%m-%dT%H:%M:%SZ}"


def retry_wait(held: tuple[float, float] | None, due: float) -> float:
    """How much later a firing reached its target, after its due time, because Scheduler retried it: `held` is when
    it was first attempted and when it was let through (localcloud/faults.py). A firing retried before its due time
    (a release schedule's, in the minute before) adds only what ran past the due time."""
    if held is None:
        return 0.0
    first, through = held
    return max(0.0, max(0.0, through - due) - max(0.0, first - due))


def retried_in(table: str, held: Mapping[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """The retried firings of one table, by occurrenceId (the injector keys them `<table>/<occurrenceId>`)."""
    prefix = f"{table}/"
    return {key[len(prefix) :]: value for key, value in held.items() if key.startswith(prefix)}


def account(
    mode: str,
    items: int,
    expected: Iterable[tuple[str, float]],
    cancelled: Iterable[tuple[str, float]],
    arrivals: Iterable[Arrival],
    bound: Bound | None = None,
    at_least_once: bool = False,
    p99_bound: bool = False,
    raced: Iterable[tuple[str, float]] = (),
    retried: Mapping[str, tuple[float, float]] | None = None,
) -> Account:
    """Compare what arrived with what should have: each expected occurrence (item, due time) once, not before its
    due time; cancelled occurrences never; nothing else. `retried`: per occurrenceId, a firing Scheduler retried
    after an injected target fault (first attempt, let through). See the module's docstring for the definitions."""
    wanted = {occurrence_key(item, due): due for item, due in expected}
    removed = {occurrence_key(item, due) for item, due in cancelled} - set(wanted)
    late_cancels = {occurrence_key(item, due) for item, due in raced} - set(wanted) - removed
    by_occurrence: dict[str, list[Arrival]] = {}
    for arrival in sorted(arrivals, key=lambda a: a.at):
        by_occurrence.setdefault(occurrence_key(arrival.item, arrival.due), []).append(arrival)
    result = Account(mode, items, len(wanted), bound=bound, p99_bound=p99_bound)
    for key, received in by_occurrence.items():
        first = received[0]
        seen_messages = {first.message}
        for again in received[1:]:
            if again.message in seen_messages:
                result.allowed_duplicates += 1  # the queue handed the same message out again
            elif at_least_once and again.occurrence == first.occurrence:
                result.allowed_duplicates += 1  # sent again, as the mode documents it may be
                seen_messages.add(again.message)
            else:
                result.undocumented_duplicates.append(key)
                result.duplicate_details[key] = [(a.occurrence, a.message, a.at) for a in received]
                seen_messages.add(again.message)
        if key in wanted:
            result.delivered += 1
            if first.at < wanted[key]:
                result.early.append(key)
            late = max(0.0, first.at - wanted[key])
            retry = (retried or {}).get(first.occurrence)
            # Only a delivery the retried firing made (sent once it was let through) was later for the retry.
            wait = retry_wait(retry, wanted[key]) if retry is not None and first.at >= retry[1] else 0.0
            result.lateness.append(late)
            result.beyond_retries.append(max(0.0, late - wait))
            result.retried += wait > 0
        elif key in removed:
            result.cancelled_delivered.append(key)
        elif key in late_cancels:
            result.raced_delivered += 1
        else:
            result.unexpected.append(key)
    result.lost = sorted(set(wanted) - set(by_occurrence))
    return result


def account_totals(mode: str, items: int, sums: dict[str, int], totals: dict[str, int]) -> Account:
    """Aggregate mode: each group's total must equal the sum of the records it counts; short is lost, over is
    counted twice (undocumented: the mode is exactly once per record)."""
    result = Account(mode, items, len(sums))
    for group, wanted in sorted(sums.items()):
        total = totals.get(group, 0)
        if total == wanted:
            result.delivered += 1
        elif total < wanted:
            result.lost.append(f"{group}: {total} of {wanted}")
        else:
            result.undocumented_duplicates.append(f"{group}: {total} for {wanted}")
    return result


# -- the workload --------------------------------------------------------------------------------------------------


@dataclass(order=True)
class Op:
    """One write the driver makes at `at`: a put of `item` (the whole item) or a delete of `keys`."""

    at: float
    table: str = field(compare=False)
    keys: dict[str, Any] = field(compare=False)
    item: dict[str, Any] | None = field(compare=False, default=None)
    written_at: float | None = field(compare=False, default=None)  # when the driver made it (None: not yet)


@dataclass
class Plan:
    """What the driver writes, and what the final state says should arrive, per mode."""

    ops: list[Op] = field(default_factory=list)
    items: dict[str, int] = field(default_factory=dict)
    expected: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    cancelled: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    # The write that cancels each cancelled occurrence (its move or delete), per mode.
    cancelled_by: dict[str, list[tuple[tuple[str, float], Op]]] = field(default_factory=dict)
    sums: dict[str, int] = field(default_factory=dict)
    mix: dict[str, int] = field(default_factory=dict)
    last_due: float = 0.0
    herd_minutes: dict[str, float] = field(default_factory=dict)  # each herd's due minute


def iso_z(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def weekly_cron(minute: float, zone: str) -> str:
    """`cron(M H ? * DOW *)` for the UTC minute `minute`, read in `zone` (AWS numbers days from Sunday = 1)."""
    from zoneinfo import ZoneInfo

    local = datetime.fromtimestamp(minute, UTC).astimezone(ZoneInfo(zone))
    return f"cron({local.minute} {local.hour} ? * {(local.weekday() + 1) % 7 + 1} *)"


def next_minute(epoch: float) -> float:
    return float((int(epoch) // 60 + 1) * 60)


def plan(items: int, rate: float, start: float, rng: random.Random) -> Plan:
    """`items` items over the eight workloads, written `rate` a second from `start`, with each mode's mix."""
    result = Plan()
    per_mode = -(-items // len(MODES))
    for mode, *_ in MODES:
        result.items[mode] = per_mode
        result.expected[mode] = []
        result.cancelled[mode] = []
        result.cancelled_by[mode] = []
    for n in range(per_mode * len(MODES)):
        mode, table = MODES[n % len(MODES)][:2]
        written = start + n / rate
        _plan_item(result, mode, table, n // len(MODES), written, rng)
    result.ops.sort()
    return result


def herd_bounds(size: int, scheduler_rate: float) -> dict[str, Bound]:
    """What docs/performance.md's herd section says of `size` items due in one minute, at the local throttle.

    eventbridge: Scheduler fires an `at()` anywhere in its minute (it may start the herd late in it) and at most at
    its invocation throttle, so the last is up to the minute + size / rate after the minute began (at 1,000/s:
    100,000 end up to 160 s after it began). The local
    Scheduler's throttle is AWS's scaled (localcloud/throttle.py), so a local herd drains as one `1,000 / rate` times
    larger does on AWS. polling fanned out: the poll interval (the herd's rule ticks once a minute, as deployed) +
    the drain of `size` items by `HERD_SHARD_GROUPS` invocations at the modelled rate each, scaled to two cores as
    the throttle is (`LOCAL_SCALE`): a local processor invocation shares the two cores with ministack, which plays
    DynamoDB, SQS and Lambda, where on AWS each of those is a service of its own."""
    drain = size / scheduler_rate if scheduler_rate > 0 else 0.0
    scale = AWS_INVOCATIONS_PER_SECOND / scheduler_rate if scheduler_rate > 0 else 1.0
    local_rate = MODELLED_INVOCATION_RATE / LOCAL_SCALE
    fanned = size / (HERD_SHARD_GROUPS * local_rate)
    return {
        "eventbridge herd": Bound(
            60.0 + drain + SCHEDULER_SWEEP,
            f"{size:,} at the throttle's {scheduler_rate:g}/s (as {size * scale:,.0f} at AWS's 1,000/s): the last "
            f"up to the minute + {drain:.0f} s after the minute began (Scheduler may start the herd anywhere in its "
            f"minute), + {SCHEDULER_SWEEP:g} s for the local sweep",
        ),
        "polling herd": Bound(
            HERD_TICK_EVERY + fanned,
            f"the poll interval ({HERD_TICK_EVERY:.0f} s) + {size:,} drained by {HERD_SHARD_GROUPS} invocations at "
            f"the modelled {MODELLED_INVOCATION_RATE:g} items/s each scaled 1:{LOCAL_SCALE:g} to two cores as "
            f"Scheduler's throttle is ({local_rate:g}/s each: {fanned:.0f} s)",
        ),
    }


def plan_herd(result: Plan, size: int, rate: float, start: float, lead: float, scheduler_rate: float) -> None:
    """`size` items in each herd table, written `rate` a second from `start`, a twentieth deleted again; all of a
    table due at one whole minute at least `lead` s after the last write (the stream handlers' backlog drains
    first), the polling herd's minute after the eventbridge herd has drained (so neither slows the other)."""
    written_until = start + size / rate
    due = next_minute(written_until + lead)
    drained = max(60.0, size / scheduler_rate if scheduler_rate > 0 else 0.0)
    minutes = {"eventbridge herd": due, "polling herd": due + 60.0 * (int(drained // 60) + 2)}
    cancelled = set(range(0, size, round(1 / HERD_CANCELLED)))
    for mode, table in HERD_MODES:
        result.items[mode] = size
        result.expected[mode], result.cancelled[mode], result.cancelled_by[mode] = [], [], []
        at_minute = minutes[mode]
        result.mix["herd"] = result.mix.get("herd", 0) + size
        for i in range(size):
            written = start + i / rate
            keys = {"PK": f"HERD#{i:05}", "SK": "ITEM"}
            result.ops.append(Op(written, table, keys, {**keys, "dueAt": iso_z(at_minute)}))
            if i in cancelled:
                delete = Op(written + HERD_CANCEL_AFTER, table, keys)
                result.ops.append(delete)
                result.cancelled[mode].append((keys["PK"], at_minute))
                result.cancelled_by[mode].append(((keys["PK"], at_minute), delete))
            else:
                result.expected[mode].append((keys["PK"], at_minute))
        result.last_due = max(result.last_due, at_minute)
    result.herd_minutes = minutes
    result.ops.sort()


def herd_config(size: int, directory: Path) -> Path:
    """The local stack's configuration with the herd's two tables added: `herd` (eventbridge) and `herdjobs`
    (polling, fanned out over `HERD_SHARD_GROUPS` invocations), both timed by `dueAt`."""
    import yaml

    document = yaml.safe_load((REPO / "Pulumi.local.yaml").read_text())
    tables = document["config"]["scheduled-table:tables"]
    tables.append({"name": "herd", "mode": "eventbridge", "timeAttribute": "dueAt"})
    tables.append(
        {
            "name": "herdjobs",
            "mode": "polling",
            "timeAttribute": "dueAt",
            "shards": HERD_SHARDS,
            "shardGroups": HERD_SHARD_GROUPS,
        }
    )
    path = directory / "Pulumi.local.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _choose(rng: random.Random) -> str:
    draw = rng.random()
    return "move" if draw < 0.15 else "cancel" if draw < 0.25 else "reinsert" if draw < 0.30 else "create"


def _plan_item(result: Plan, mode: str, table: str, i: int, written: float, rng: random.Random) -> None:
    change = _choose(rng)
    result.mix[change] = result.mix.get(change, 0) + 1
    later = written + rng.uniform(3.0, 10.0)  # the move, the cancel or the delete of a re-insert
    if mode == "aggregate":
        _plan_score(result, table, i, written, later, change, rng)
        return
    lead = {"eventbridge minute": 120, "eventbridge second": 120, "eventbridge offsets": 180, "ttl plain": 30}
    due = float(int(written + lead.get(mode, 120) + rng.uniform(0, 60)))
    if mode == "polling":
        due = float(int(written + 30 + rng.uniform(0, 60)))
    pk, sk = f"SOAK#{i}", {"eventbridge offsets": "APPT", "eventbridge recurring": "WEEKLY"}.get(mode, "ITEM")
    keys = {"PK": pk, "SK": sk}
    if mode == "eventbridge recurring":
        due = next_minute(written + 120 + rng.uniform(0, 60))
    moved = due + (60.0 if mode == "eventbridge recurring" else float(int(rng.uniform(20, 60))))

    def item(at: float) -> dict[str, Any]:
        body: dict[str, Any] = {**keys, "n": i}
        if mode.startswith("ttl"):
            body["expiresAt"] = int(at)
        elif mode == "eventbridge recurring":
            body["remindAt"], body["timeZone"] = weekly_cron(at, ZONE), ZONE
        elif mode == "eventbridge offsets":
            body["remindAt"] = iso_z(at)
        else:
            body["dueAt"] = iso_z(at)
        return body

    def occurrences(at: float) -> list[tuple[str, float]]:
        if mode == "eventbridge offsets":
            return [(f"{pk}{offset:+d}", at + offset) for offset in OFFSETS]
        return [(pk, at)]

    result.ops.append(Op(written, table, keys, item(due)))
    final = due
    if change == "move":
        result.ops.append(Op(later, table, keys, item(moved)))
        final = moved
    elif change in ("cancel", "reinsert"):
        result.ops.append(Op(later, table, keys))
        final = moved if change == "reinsert" else 0.0
        if change == "reinsert":
            result.ops.append(Op(later + 3.0, table, keys, item(moved)))
    if final:
        result.expected[mode] += occurrences(final)
        result.last_due = max(result.last_due, final)
    if final != due:
        result.cancelled[mode] += occurrences(due)
        cancelling = next(op for op in reversed(result.ops) if op.at == later)
        result.cancelled_by[mode] += [(occurrence, cancelling) for occurrence in occurrences(due)]


def arrived_so_far(work: Plan, arrivals: Mapping[str, list[Arrival]]) -> str:
    """The progress line's arrivals against expectations, for the workloads the run has (a plain soak has no herd)."""
    return ", ".join(f"{m} {len(a)}/{len(work.expected[m])}" for m, a in arrivals.items() if work.items.get(m))


def held_in_time(
    cancelled_by: Iterable[tuple[tuple[str, float], Op]],
) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """The cancelled occurrences split by when their cancelling write was made: at least `CANCEL_MARGIN` seconds
    before the due time's minute (a cancel the guarantee holds), or later or never (the driver fell behind its plan:
    a delivery of the old occurrence is then allowed, and counted apart)."""
    held: list[tuple[str, float]] = []
    raced: list[tuple[str, float]] = []
    for (item, due), op in cancelled_by:
        minute = float(int(due) // 60 * 60)
        in_time = op.written_at is not None and op.written_at <= minute - CANCEL_MARGIN
        (held if in_time else raced).append((item, due))
    return held, raced


def _plan_score(
    result: Plan, table: str, i: int, written: float, later: float, change: str, rng: random.Random
) -> None:
    """Scores count on insert only (the table's `on_change` is `ignore`): a change or a delete leaves the total, a
    re-insert counts again."""
    group = f"USER#player{i % PLAYERS}"
    keys = {"PK": f"SCORE#{i:06}", "SK": group}
    value = rng.randrange(1, 100)
    result.ops.append(Op(written, table, keys, {**keys, "Score": value}))
    counted = value
    if change == "move":
        result.ops.append(Op(later, table, keys, {**keys, "Score": value + 1000}))
    elif change in ("cancel", "reinsert"):
        result.ops.append(Op(later, table, keys))
        if change == "reinsert":
            again = rng.randrange(1, 100)
            result.ops.append(Op(later + 3.0, table, keys, {**keys, "Score": again}))
            counted += again
    result.sums[group] = result.sums.get(group, 0) + counted


# -- running it ----------------------------------------------------------------------------------------------------

Client = Callable[[str], Any]
WRITE_BACK_MODES = {m for m, *_ in MODES if m.startswith("eventbridge")} | {"polling"}
WRITE_BACK_THREADS = 4
TICK_EVERY = 2.0  # the polling rule, fired this often (as make demo does) instead of once a minute
# The herd's polling rule at its deployed interval, as on AWS: ticked every 2 s, each tick's invocations (up to the
# Lambda timeout, a minute, while a herd drains) piled up thirty deep on two cores and drained 2 items/s.
HERD_TICK_EVERY = 60.0
SETTLE_SECONDS = 30.0
QUIET_SECONDS = 120.0


def epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def arrival_of(mode: str, body: dict[str, Any], message: dict[str, Any]) -> Arrival:
    """A due event as an `Arrival`: its item (with the offset, for offsets), due time, occurrence and message."""
    item, due = str(body["keys"]["PK"]), epoch(str(body["dueAt"]))
    if mode == "eventbridge offsets":  # `dueAt` is the item's time; the reminder is due `offsetSeconds` from it
        offset = int(body.get("offsetSeconds", 0))
        item, due = f"{item}{offset:+d}", due + offset
    sent = int(message["Attributes"]["SentTimestamp"]) / 1000
    return Arrival(item, due, str(body.get("occurrenceId", "")), message["MessageId"], sent)


class Driver:
    """Writes the plan on time, drains every due queue (keeping each arrival), writes back for a share of the
    deliveries as a consumer would, and ticks the polling rule."""

    def __init__(self, client: Client, outputs: dict[str, Any], region: str, rng: random.Random) -> None:
        self.client = client
        self.outputs = outputs
        self.region = region
        self.rng = rng
        self.arrivals: dict[str, list[Arrival]] = {mode: [] for mode in ALL_MODES}
        self.write_backs: list[tuple[str, dict[str, Any]]] = []
        self.written = 0
        self.ops_left = -1  # until the writer starts
        self.written_back = 0
        self.ticks = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()

    # the consumers

    def drain(self, table: str) -> None:
        sqs = self.client("sqs")
        url = self.outputs[table]["due_queue_url"]
        while not self.stop.is_set():
            try:
                messages = sqs.receive_message(
                    QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, AttributeNames=["SentTimestamp"]
                ).get("Messages", [])
            except Exception:  # the cloud under load: the consumer tries again, as any would
                time.sleep(0.5)
                continue
            for message in messages:
                body = json.loads(message["Body"])
                mode = self.mode_of(table, body)
                arrival = arrival_of(mode, body, message)
                with self.lock:
                    self.arrivals[mode].append(arrival)
                    if mode in WRITE_BACK_MODES and self.rng.random() < WRITE_BACK:
                        self.write_backs.append((table, {k: body["keys"][k] for k in ("PK", "SK")}))
            if messages:
                entries = [{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(messages)]
                # Not deleted: received again, which the accounting allows (the same message id).
                with contextlib.suppress(Exception):
                    sqs.delete_message_batch(QueueUrl=url, Entries=entries)

    @staticmethod
    def mode_of(table: str, body: dict[str, Any]) -> str:
        if table == "clinic":
            return "eventbridge offsets" if body["keys"]["SK"] == "APPT" else "eventbridge recurring"
        return next(mode for mode, t in ALL_MODES.items() if t == table)

    def tick(self) -> None:
        from localcloud.emulators import fire_rule

        # jobs' rule every TICK_EVERY; in a herd run, herdjobs' every HERD_TICK_EVERY.
        every = {table: HERD_TICK_EVERY if table in dict(HERD_MODES).values() else TICK_EVERY for table in self.outputs}
        rules = {
            out["tick_rule_name"]: every[table]
            for table, out in self.outputs.items()
            if isinstance(out, dict) and out.get("tick_rule_name")
        }
        fired = dict.fromkeys(rules, time.time())
        while not self.stop.wait(TICK_EVERY):
            for rule, interval in rules.items():
                if time.time() - fired[rule] < interval - 0.5:
                    continue
                fired[rule] = time.time()
                # A missed tick is a late one; the rule's own minute tick also runs.
                with contextlib.suppress(Exception):
                    self.ticks += fire_rule(self.client, rule, self.region)

    # the writer

    def write(self, ops: list[Op]) -> None:
        """Every op at its time (batched per table, 25 at a time, one write per key in a batch; the tables at once, as
        an application's writers would, so a busy local cloud slows each table's writes, not all of them in turn)."""
        from concurrent.futures import ThreadPoolExecutor

        from boto3.dynamodb.types import TypeSerializer

        serializer = TypeSerializer()
        pending = list(ops)
        heapq.heapify(pending)
        ddb = self.client("dynamodb")
        with ThreadPoolExecutor(max_workers=len(MODES)) as writers:
            while pending:
                due: dict[str, list[Op]] = {}
                while pending and pending[0].at <= time.time():
                    op = heapq.heappop(pending)
                    due.setdefault(op.table, []).append(op)
                self.ops_left = len(pending) + sum(len(batch) for batch in due.values())
                writing = [
                    writers.submit(self._write_table, ddb, self.outputs[table]["table_name"], batch, serializer)
                    for table, batch in due.items()
                ]
                for done in writing:
                    done.result()
                self.ops_left = len(pending)
                if not due:
                    time.sleep(0.05)

    def write_back(self) -> None:
        """The consumers' write-backs, as they ask for them, beside the application's writes (a consumer does not
        wait for the application, nor the application for it)."""
        from concurrent.futures import ThreadPoolExecutor

        from boto3.dynamodb.types import TypeSerializer

        serializer = TypeSerializer()
        ddb = self.client("dynamodb")
        with ThreadPoolExecutor(max_workers=WRITE_BACK_THREADS) as consumers:
            while not self.stop.is_set():
                with self.lock:
                    backs, self.write_backs = self.write_backs, []
                done = [
                    consumers.submit(self._write_back, ddb, self.outputs[table]["table_name"], keys, serializer)
                    for table, keys in backs
                ]
                for each in done:
                    with contextlib.suppress(Exception):  # a consumer's failed write-back: the item keeps its state
                        each.result()
                if not backs:
                    time.sleep(0.05)

    def _write_table(self, ddb: Any, name: str, batch: list[Op], serializer: Any) -> None:
        while batch:
            chunk: list[Op] = []
            seen: set[str] = set()
            for op in batch:
                ident = json.dumps(op.keys, sort_keys=True)
                if len(chunk) < 25 and ident not in seen:
                    chunk.append(op)
                    seen.add(ident)
            taken = {id(op) for op in chunk}  # by identity: ops compare by their time alone (`Op`'s order)
            batch = [op for op in batch if id(op) not in taken]
            requests = [
                {"PutRequest": {"Item": {k: serializer.serialize(v) for k, v in op.item.items()}}}
                if op.item is not None
                else {"DeleteRequest": {"Key": {k: serializer.serialize(v) for k, v in op.keys.items()}}}
                for op in chunk
            ]
            while requests:
                left = ddb.batch_write_item(RequestItems={name: requests}).get("UnprocessedItems", {})
                requests = list(left.get(name, []))
            with self.lock:
                self.written += len(chunk)
            done = time.time()
            for op in chunk:
                op.written_at = done

    def _write_back(self, ddb: Any, name: str, keys: dict[str, Any], serializer: Any) -> None:
        """What a consumer does with the item it was told about: marks it handled (its due time unchanged)."""
        from botocore.exceptions import ClientError

        try:
            ddb.update_item(
                TableName=name,
                Key={k: serializer.serialize(v) for k, v in keys.items()},
                UpdateExpression="SET handledAt = :now",
                ConditionExpression="attribute_exists(PK)",
                ExpressionAttributeValues={":now": serializer.serialize(int(time.time()))},
            )
            self.written_back += 1
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def delivered_all(self, expected: dict[str, list[tuple[str, float]]]) -> bool:
        with self.lock:
            for mode, wanted in expected.items():
                seen = {occurrence_key(a.item, a.due) for a in self.arrivals[mode]}
                if any(occurrence_key(item, due) not in seen for item, due in wanted):
                    return False
        return True


def read_totals(client: Client, table: str, groups: Iterable[str]) -> dict[str, int]:
    ddb = client("dynamodb")
    totals = {}
    for group in groups:
        found = ddb.get_item(TableName=table, Key={"PK": {"S": group}, "SK": {"S": "TOTAL"}}, ConsistentRead=True)
        totals[group] = int(found["Item"]["totalScore"]["N"]) if "Item" in found else 0
    return totals


def dead_letter_reasons(client: Client, outputs: dict[str, Any]) -> dict[str, list[str]]:
    """Every message left in each table's stream DLQ, target DLQ and poison queue, with its reason (read, not
    removed: the queues are gone with the cloud)."""
    sqs = client("sqs")
    found: dict[str, list[str]] = {}
    for table, out in outputs.items():
        for key in ("stream_dlq_url", "poison_queue_url", "target_dlq_url"):
            url = out.get(key) if isinstance(out, dict) else None
            if not url:
                continue
            messages = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60, MessageAttributeNames=["All"]
            ).get("Messages", [])
            for message in messages:
                attributes = {k: v.get("StringValue", "") for k, v in message.get("MessageAttributes", {}).items()}
                reason = attributes.get("ERROR_CODE") or _reason(message["Body"])
                found.setdefault(f"{table} {key.removesuffix('_url')}", []).append(reason[:200])
    return found


def _reason(body: str) -> str:
    try:
        document = json.loads(body)
    except ValueError:
        return body
    if isinstance(document, dict):
        context = document.get("responseContext") or {}
        return str(document.get("reason") or context.get("functionError") or document.get("requestContext") or body)
    return body


@dataclass
class Run:
    """What a soak run measured: the accounts, and the circumstances."""

    accounts: list[Account]
    items: int
    written: int
    written_back: int
    wall_seconds: float
    deliver_seconds: float
    fault_rate: float
    redeliver: float
    faults: dict[str, int]
    redelivered: dict[str, int]
    dead_letters: dict[str, list[str]]
    mix: dict[str, int]
    load: tuple[float, float, float]
    write_lag: float  # the most a write was made after its planned time (seconds)
    seed: int
    date: str
    rate: float
    scheduler_rate: float = 0.0
    throttled: dict[str, Any] = field(default_factory=dict)  # the local Scheduler's throttle: what it did
    herd: list[str] = field(default_factory=list)  # the report's lines on the herd
    herd_size: int = 0

    @property
    def ok(self) -> bool:
        return all(a.ok for a in self.accounts)


def verdict_line(run: Run) -> str:
    """The report's verdict: correctness first (nothing lost, early, duplicated beyond the documented cases or
    cancelled but delivered), then lateness, which the documented bounds judge separately."""
    if not run.ok:
        return "**FAILED** (see the rows not OK)."
    over = [a.mode for a in run.accounts if not a.within_bound()]
    if not over:
        return "**All modes OK, every lateness within its documented bound.**"
    return (
        "**Nothing lost, early, duplicated beyond the documented cases or cancelled but delivered; lateness over "
        f"its documented bound in {len(over)} of {len(run.accounts)} modes** ({', '.join(over)})."
    )


@dataclass(frozen=True)
class Herd:
    """The herd's settings: items per table, written `rate` a second, due at least `lead` s after the last write."""

    size: int = 0
    rate: float = 100.0
    lead: float | None = None  # None: a second per HERD_LEAD_ITEMS items (the stream handlers' pace, measured)


def soak(
    items: int,
    rate: float,
    fault_rate: float,
    redeliver: float,
    timeout: float,
    dump: Path | None = None,
    herd: Herd | None = None,
) -> Run:
    from localcloud.deploy import LOCAL_STACK, up
    from localcloud.emulators import Emulators
    from localcloud.provision import clients
    from localcloud.scenarios import TTL_DELAYS, verify_sender
    from localcloud.scheduler_minute import seed
    from localcloud.server import Ministack
    from localcloud.throttle import configured_rate, throttle_state

    herd = herd or Herd()
    began = time.monotonic()
    scheduler_rate = configured_rate()  # ministack's process reads the same variable
    scratch = Path(tempfile.mkdtemp(prefix="soak-"))
    config = herd_config(herd.size, scratch) if herd.size else None
    with Ministack(redeliver=redeliver, faults=fault_rate) as cloud:
        print(f"ministack up at {cloud.endpoint}; log: {cloud.log_path}; LOCALCLOUD_SEED={seed()}", flush=True)
        deployment = up(cloud.endpoint, LOCAL_STACK, config_file=config)
        verify_sender(deployment)
        print(f"deployed stack '{LOCAL_STACK}': {len(deployment.resources)} resources", flush=True)
        client = clients(cloud.endpoint, deployment.region)
        rng = random.Random(seed())
        with Emulators(cloud.endpoint, deployment.region, ttl_delays=TTL_DELAYS):
            start = time.time() + 2.0
            work = plan(items, rate, start, rng)
            if herd.size:
                lead = herd.lead if herd.lead is not None else max(60.0, herd.size / HERD_LEAD_ITEMS)
                plan_herd(work, herd.size, herd.rate, start, lead, scheduler_rate)
            driver = Driver(client, deployment.outputs, deployment.region, random.Random(seed() + 3))
            tables = sorted({t for mode, t, *_ in MODES if mode != "aggregate" and work.items[mode]})
            tables += [table for _, table in HERD_MODES if herd.size]
            threads = [threading.Thread(target=driver.drain, args=(t,), daemon=True) for t in tables]
            threads.append(threading.Thread(target=driver.tick, daemon=True))
            threads.append(threading.Thread(target=driver.write_back, daemon=True))
            writer = threading.Thread(target=driver.write, args=(work.ops,), daemon=True)
            for thread in [*threads, writer]:
                thread.start()
            print(
                f"writing {sum(work.items[m] for m, *_ in MODES):,} items at {rate:g}/s"
                + (f" and a herd of {herd.size:,} a table at {herd.rate:g}/s" if herd.size else "")
                + f" ({len(work.ops):,} writes); last due "
                f"{work.last_due - start:.0f}s in; faults at {fault_rate:.1%}, {redeliver:.0%} of stream batches "
                f"delivered again; Scheduler's invocations throttled at {scheduler_rate:g}/s"
                + "".join(f"; {mode} due {m - start:.0f}s in" for mode, m in work.herd_minutes.items()),
                flush=True,
            )
            # Past the last due time and the widest bound, the run ends once nothing has arrived for a while: what
            # is still missing then is lost (a slow machine makes deliveries late, which the accounting shows).
            deadline = time.time() + timeout
            quiet_after = work.last_due + MINUTE_SCHEDULE.seconds
            last_report, seen, changed = 0.0, 0, time.time()
            while time.time() < deadline:
                time.sleep(2.0)
                count = sum(len(a) for a in driver.arrivals.values())
                if count != seen:
                    seen, changed = count, time.time()
                if time.time() > quiet_after and time.time() - changed > QUIET_SECONDS:
                    break
                if time.time() - last_report > 30:
                    last_report = time.time()
                    got = arrived_so_far(work, driver.arrivals)
                    print(
                        f"  {time.time() - start:5.0f}s: {driver.written:,} writes, arrivals/expected: {got}, "
                        f"{driver.written_back:,} write-backs, faults {sum(cloud.injected().values()):,}, "
                        f"load {os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                if driver.ops_left == 0 and time.time() > work.last_due and driver.delivered_all(work.expected):
                    break
            time.sleep(SETTLE_SECONDS)  # a duplicate or a cancelled occurrence would still arrive
            driver.stop.set()
            for thread in [*threads, writer]:
                thread.join(timeout=15)
            totals = read_totals(client, deployment.outputs["scores"]["table_name"], work.sums)
            dead = dead_letter_reasons(client, deployment.outputs)
            faults, redelivered, retries = cloud.injected(), cloud.redelivered(), cloud.held()
            throttled = throttle_state(cloud.endpoint)
        if dump is not None:  # the local cloud's log (the functions' lines among it) goes with the run's data
            with contextlib.suppress(OSError):
                shutil.copyfile(cloud.log_path, dump.with_suffix(".log"))
    if dump is not None:
        arrived = {m: [vars(a) for a in found] for m, found in driver.arrivals.items()}
        document = {
            "expected": work.expected,
            "cancelled": work.cancelled,
            "arrivals": arrived,
            "totals": totals,
            "retried": retries,
        }
        dump.write_text(json.dumps({**document, "sums": work.sums}, indent=0))
    delivered_at = max((a.at for found in driver.arrivals.values() for a in found), default=time.time())
    accounts = []
    bounds = herd_bounds(herd.size, scheduler_rate)
    herd_modes = [(mode, table, bounds[mode], False) for mode, table in HERD_MODES if herd.size]
    for mode, table, bound, at_least_once in [*MODES, *herd_modes]:
        if not work.items[mode]:
            continue  # a herd-only run (`--items 0`)
        if mode == "aggregate":
            accounts.append(account_totals(mode, work.items[mode], work.sums, totals))
            continue
        in_time, raced = held_in_time(work.cancelled_by[mode])
        accounts.append(
            account(
                mode,
                work.items[mode],
                work.expected[mode],
                in_time,
                driver.arrivals[mode],
                bound,
                at_least_once,
                mode in P99_BOUND,
                raced,
                retried_in(deployment.outputs[table]["table_name"], retries) if mode in SCHEDULER_DELIVERED else None,
            )
        )
    return Run(
        accounts=accounts,
        items=sum(work.items[mode] for mode, *_ in MODES),
        written=driver.written,
        written_back=driver.written_back,
        wall_seconds=time.monotonic() - began,
        deliver_seconds=delivered_at - start,
        fault_rate=fault_rate,
        redeliver=redeliver,
        faults=faults,
        redelivered=redelivered,
        dead_letters=dead,
        mix=work.mix,
        load=os.getloadavg(),
        write_lag=max((op.written_at - op.at for op in work.ops if op.written_at is not None), default=0.0),
        seed=seed(),
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        rate=rate,
        scheduler_rate=scheduler_rate,
        throttled=throttled,
        herd=herd_facts(herd, work.herd_minutes, driver.arrivals, bounds),
        herd_size=herd.size,
    )


def herd_facts(
    herd: Herd, minutes: Mapping[str, float], arrivals: Mapping[str, list[Arrival]], bounds: Mapping[str, Bound]
) -> list[str]:
    """Per herd, in words: when its minute was, when its first and last deliveries were sent, and the rate between
    them (the drain rate the throttle or the fan-out allowed), beside the bound it is judged against."""
    if not herd.size:
        return []
    lines = []
    for mode, _ in HERD_MODES:
        sent = sorted(a.at for a in arrivals.get(mode, []))
        minute = minutes[mode]
        if not sent:
            lines.append(f"- {mode}: due {datetime.fromtimestamp(minute, UTC):%H:%M} UTC, nothing arrived.")
            continue
        # The drain rate over the first 99% (the last percent includes firings Scheduler retried seconds later).
        most = sent[: max(1, int(len(sent) * 0.99))]
        span = most[-1] - most[0]
        drained = f"{(len(most) - 1) / span:.0f}/s" if span > 0 else "at once"
        lines.append(
            f"- {mode}: {herd.size:,} items due at {datetime.fromtimestamp(minute, UTC):%H:%M}:00 UTC; the first "
            f"delivery sent {sent[0] - minute:.1f} s after, 99% by {most[-1] - minute:.1f} s ({len(most):,} in "
            f"{span:.1f} s: {drained}), the last {sent[-1] - minute:.1f} s after; bound "
            f"{bounds[mode].seconds:.0f} s: {bounds[mode].why}."
        )
    return lines


# -- the report ----------------------------------------------------------------------------------------------------


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def _few(keys: list[str]) -> str:
    """How many, and the first few (a reader can look them up in the run's data)."""
    return f"{len(keys)} ({', '.join(keys[:3])}{', ...' if len(keys) > 3 else ''})" if keys else "0"


def duplicate_lines(run: Run) -> list[str]:
    """Each undocumented duplicate's deliveries (at most five per mode), so a reader can tell an occurrence sent
    twice (one occurrenceId, two messages: the send retried or repeated) from two occurrences made of one."""
    lines = []
    for a in run.accounts:
        for key, deliveries in list(a.duplicate_details.items())[:5]:
            same = len({occurrence for occurrence, _, _ in deliveries}) == 1
            shown = "; ".join(
                f"message {message[:8]} sent {datetime.fromtimestamp(at, UTC):%H:%M:%S.%f}"[:-3]
                for _, message, at in deliveries
            )
            lines.append(
                f"- {a.mode}, {key}: {len(deliveries)} deliveries, "
                + ("one occurrenceId" if same else "different occurrenceIds")
                + f" ({deliveries[0][0]}): {shown}."
            )
    return ["Duplicates beyond the documented cases:", "", *lines, ""] if lines else []


def throttle_line(run: Run) -> str:
    """The local Scheduler's invocation throttle: its rate, AWS's it stands for, what it delayed."""
    if not run.scheduler_rate:
        return "Scheduler's invocation throttle: not emulated (`LOCALCLOUD_SCHEDULER_RATE=0`)."
    done = run.throttled
    delayed = (
        f"; {done.get('granted', 0):,} firings took a turn, {done.get('delayed', 0):,} of them delayed, the longest "
        f"by {float(done.get('most_delayed', 0.0)):.1f} s"
        if done
        else ""
    )
    return (
        f"Scheduler's invocation throttle (localcloud/throttle.py): {run.scheduler_rate:g} firings/s, AWS's default "
        f"{AWS_INVOCATIONS_PER_SECOND:,.0f}/s scaled 1:{AWS_INVOCATIONS_PER_SECOND / run.scheduler_rate:g} to two "
        f"cores{delayed}."
    )


def section(run: Run, plots: list[Path], report_dir: Path) -> str:
    """The Markdown section for bench/latest.md."""
    delivered = sum(a.delivered for a in run.accounts if a.bound is not None)
    expected = sum(a.expected for a in run.accounts if a.bound is not None)
    per_second = delivered / run.deliver_seconds if run.deliver_seconds > 0 else 0.0
    lines = [
        "## Soak",
        "",
        f"`make soak N={run.items} HERD={run.herd_size}` on {run.date} ({os.cpu_count()} CPUs; load average at the end "
        f"{', '.join(f'{v:.1f}' for v in run.load)}; `LOCALCLOUD_SEED={run.seed}`): the local stack in ministack, IAM "
        f"enforced, every mode fed {run.items:,} items in all at {run.rate:g} items/s ({run.written:,} writes: "
        + ", ".join(f"{n:,} {kind}" for kind, n in sorted(run.mix.items()))
        + f"; {run.written_back:,} consumer write-backs), {run.redeliver:.0%} of stream batches delivered again, "
        f"faults injected at {run.fault_rate:.1%} of calls and firings. Wall time {run.wall_seconds:.0f} s; "
        f"{delivered:,} of {expected:,} expected deliveries arrived, the last {run.deliver_seconds:.0f} s after the "
        f"first write: {per_second:.1f} deliveries/s end to end; the writes were at most {run.write_lag:.0f} s behind "
        f"their plan, and {sum(a.raced_delivered for a in run.accounts):,} occurrences whose cancel was made too late "
        "to hold (under 10 s before their minute) arrived anyway, as allowed. " + verdict_line(run),
        "",
        "| mode | items | expected | delivered | lost | early | dupes allowed | dupes undocumented | "
        "cancelled but delivered | unexpected | late p50 | late p99 | late max | retried by Scheduler | "
        "judged (less retries) | bound | verdict |",
        "|" + " --- |" * 17,
    ]
    for a in run.accounts:
        bound = "-" if a.bound is None else f"{a.bound.seconds:.0f}s" + (" (p99)" if a.p99_bound else "")
        verdict = "FAILED" if not a.ok else "within bound" if a.within_bound() else "over bound"
        lines.append(
            f"| {a.mode} | {a.items:,} | {a.expected:,} | {a.delivered:,} | {_few(a.lost)} | {_few(a.early)} | "
            f"{a.allowed_duplicates} | {_few(a.undocumented_duplicates)} | {_few(a.cancelled_delivered)} | "
            f"{_few(a.unexpected)} | {_s(a.late(0.5))} | {_s(a.late(0.99))} | {_s(a.late(1.0))} | "
            f"{a.retried:,} | {_s(a.judged_lateness())} | {bound} | {verdict} |"
        )
    lines += [
        "",
        "Aggregate counts groups (each player's total against the sum of the scores it counts), not deliveries. "
        "Definitions (early, lateness, allowed duplicates): `bench/soak.py`'s docstring; bounds: "
        "docs/guarantees.md as the local cloud reproduces it (`localcloud/scenarios.py`). *Retried by Scheduler*: "
        "deliveries whose firing a target refused (an injected fault) and Scheduler delivered later, on retry; "
        "*judged*: the p99 (second precision) or maximum (the others) of the lateness less what those retries added, "
        "which the bound judges (each Scheduler-delivered bound adds Scheduler's delay, a retry's included).",
        "",
        "Faults injected (localcloud/faults.py): "
        + (", ".join(f"{kind} {n:,}" for kind, n in sorted(run.faults.items())) or "none")
        + ". Stream batches delivered again: "
        + f"{sum(run.redelivered.values()):,}.",
        "",
        throttle_line(run),
        "",
        *(["Herds:", "", *run.herd, ""] if run.herd else []),
        *duplicate_lines(run),
        "Left in a dead-letter or poison queue: "
        + (
            "; ".join(f"{queue}: {len(r)} ({', '.join(sorted(set(r)))})" for queue, r in run.dead_letters.items())
            or "nothing"
        )
        + ".",
        "",
    ]
    for plot in plots:
        lines += [f"![{plot.stem}]({Path(os.path.relpath(plot, report_dir)).as_posix()})", ""]
    return "\n".join(lines)


def draw(run: Run, directory: Path) -> list[Path]:
    """One lateness histogram per mode with its bound, `soak_<mode>.png`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for a in run.accounts:
        if not a.lateness:
            continue
        fig, ax = plt.subplots(figsize=(5.5, 3.2))
        ax.hist(a.lateness, bins=60, color="tab:blue")
        if a.bound is not None:
            ax.axvline(a.bound.seconds, color="tab:red", linestyle="--", label=f"bound {a.bound.seconds:.0f}s")
            ax.legend(fontsize=8)
        ax.set_xlabel("lateness after the due time (s)")
        ax.set_ylabel("deliveries")
        ax.set_title(f"soak: {a.mode} ({len(a.lateness):,} deliveries)", fontsize=10)
        fig.tight_layout()
        path = directory / f"soak_{a.mode.replace(' ', '_')}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20000, help="items in all, over the eight modes")
    parser.add_argument("--rate", type=float, default=10.0, help="items written a second (2 cores keep up with 10)")
    parser.add_argument("--faults", type=float, default=0.02, help="the rate of every injected fault")
    parser.add_argument("--redeliver", type=float, default=0.3, help="the share of stream batches delivered again")
    parser.add_argument("--timeout", type=float, default=3600.0, help="give up waiting after this many seconds")
    parser.add_argument("--herd", type=int, default=0, help="items due in one minute, in eventbridge and in polling")
    parser.add_argument("--herd-rate", type=float, default=Herd.rate, help="the herd's items written a second")
    parser.add_argument(
        "--herd-lead", type=float, default=None, help="seconds from the herd's last write to its minute (at least)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "latest.md")
    parser.add_argument(
        "--dump",
        type=Path,
        default=Path(tempfile.gettempdir()) / "scheduled-table-soak.json",
        help="every expectation and arrival (JSON), the local cloud's log beside it (.log)",
    )
    args = parser.parse_args(argv)
    from .report import replace_soak_section

    herd = Herd(args.herd, args.herd_rate, args.herd_lead)
    run = soak(args.items, args.rate, args.faults, args.redeliver, args.timeout, args.dump, herd)
    # The docs site's plots are redrawn only by a run that writes the repository's report; any other run draws
    # beside its own report.
    default = args.out.resolve() == (REPO / "bench" / "latest.md").resolve()
    plots = draw(run, PLOTS_DIR if default else args.out.parent / "plots")
    text = section(run, plots, args.out.parent)
    print(text)
    previous = args.out.read_text() if args.out.exists() else "# Benchmark report\n"
    args.out.write_text(replace_soak_section(previous, text))
    # bench/latest.md is each machine's own (not in git); the soak's last report is kept in bench/soak.md, a herd's
    # (which a plain soak does not replace) in bench/soak-herd.md.
    kept = args.out.with_name("soak-herd.md" if args.herd else "soak.md")
    kept.write_text(f"# Soak report\n\nWritten by `make soak` (`python -m bench.soak`).\n\n{text.rstrip()}\n")
    print(f"report written: {args.out} (its Soak section) and {kept}; the run's data: {args.dump} and its .log")
    return 0 if run.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
