"""`make demo`: start ministack, deploy the local stack, drive every scenario, print what happened, stop."""

from __future__ import annotations

import os
import time

from .backlog import TABLE as BACKLOG_TABLE
from .backlog import Backlog, prefill
from .deploy import LOCAL_STACK, up
from .drift import self_repair
from .emulators import Emulators
from .program import stack_region
from .scenarios import TTL_DELAYS, Bound, Outcome, count_redeliveries, run, scenarios, verify_sender
from .scheduler_minute import seed
from .server import Ministack

COLUMNS = (
    "scenario",
    "mode",
    "written",
    "expected",
    "delivered",
    "dupes",
    "missing",
    "early",
    "unexpected",
    "late p50",
    "late max",
    "bound",
    "verdict",
    "DLQ/poison",
    "redelivered",
)
# The demo delivers this fraction of stream batches again, later (as Lambda may): the guarantees must hold anyway.
REDELIVER = 0.3


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def summary(outcomes: list[Outcome]) -> str:
    rows = [
        (
            o.scenario,
            o.mode,
            str(o.written),
            str(o.expected),
            str(o.delivered),
            str(o.duplicates),
            str(len(o.missing)),
            str(len(o.early)),
            str(len(o.unexpected)),
            _seconds(o.lateness_p50()),
            _seconds(o.lateness_max()),
            "-" if o.bound is None else f"{o.bound.seconds:.0f}s",
            verdict(o),
            _dead(o),
            str(o.redelivered),
        )
        for o in outcomes
    ]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def verdict(outcome: Outcome) -> str:
    """One word a newcomer can read: did the scenario keep its mode's promise (docs/guarantees.md)?"""
    if not outcome.ok:
        return "FAILED"
    if not outcome.within_bound():
        return "over bound"
    return "ok" if outcome.bound is None else "within bound"


def bounds(outcomes: list[Outcome]) -> list[str]:
    """Each bound once, with the scenarios it judges and where it comes from."""
    judged: dict[Bound, list[str]] = {}
    for outcome in outcomes:
        if outcome.bound is not None:
            judged.setdefault(outcome.bound, []).append(outcome.scenario.split()[0])
    return [f"  {b.seconds:.0f}s ({', '.join(names)}): {b.why}" for b, names in judged.items()]


def _dead(outcome: Outcome) -> str:
    total, expected = sum(outcome.dead_letters.values()), sum(outcome.expected_dead_letters.values())
    return f"{total} ({expected} expected)" if expected else str(total)


def problems(outcomes: list[Outcome]) -> list[str]:
    found = []
    for o in outcomes:
        for label, keys in (("missing", o.missing), ("unexpected", o.unexpected), ("early", o.early)):
            if keys:
                found.append(f"{o.scenario}: {label}: {', '.join(keys)}")
        if o.duplicates:
            found.append(f"{o.scenario}: {o.duplicates} duplicate deliveries")
        for queue, depth in o.unexpected_dead_letters().items():
            expected = o.expected_dead_letters.get(queue, 0)
            found.append(f"{o.scenario}: {depth} message(s) in {queue}, expected {expected}")
    return found


def over_bound(outcomes: list[Outcome]) -> list[str]:
    """Scenarios later than their documented bound. Reported, not failed: the bounds are AWS's, and the local cloud
    runs every service and function on this machine, so its load adds to every figure (the e2e tests assert
    lateness with a stated allowance); missing, duplicate, early and dead-lettered actions are what fail the demo."""
    return [
        f"{o.scenario}: late max {o.lateness_max() or 0:.2f}s, over its {o.bound.seconds:.0f}s bound"
        for o in outcomes
        if o.bound is not None and not o.within_bound()
    ]


def demo(stack: str = LOCAL_STACK) -> int:
    began = time.monotonic()
    with Ministack(redeliver=REDELIVER) as cloud:
        print(f"ministack up at {cloud.endpoint} ({time.monotonic() - began:.1f}s); log: {cloud.log_path}")
        print(
            "As on AWS, Scheduler runs each schedule at a random moment of its minute and Lambda delivers some stream "
            f"batches twice ({REDELIVER:.0%} here); LOCALCLOUD_SEED={seed()} make demo replays these random choices"
        )
        # Before the stack exists, as a user's table would: items that no stream record describes.
        filled = prefill(cloud.endpoint, stack_region(stack))
        print(
            f"made table {BACKLOG_TABLE!r} with {filled.items} items, then enabled its stream: the stack attaches to "
            "items no stream record describes (backfill gives them their actions)"
        )
        deployed = time.monotonic()
        deployment = up(cloud.endpoint, stack)
        print(f"deployed stack '{stack}': {len(deployment.resources)} resources in {time.monotonic() - deployed:.1f}s")
        verify_sender(deployment)
        with Emulators(cloud.endpoint, deployment.region, ttl_delays=TTL_DELAYS) as emulators:
            chosen = [*scenarios(deployment), Backlog(deployment, filled), self_repair(deployment)]
            print(f"running {len(chosen)} scenarios: " + "; ".join(s.name for s in chosen))
            for scenario in chosen:
                articles = getattr(scenario, "article", ())
                if articles:
                    titles = " and ".join(f'"{title}"' for title in articles)
                    print(f"  {scenario.name.split()[0]}: the pattern described in {titles}")
            outcomes = run(chosen)
            count_redeliveries(outcomes, cloud.redelivered())
            print(
                "done by the local cloud where ministack has no such service: "
                f"{emulators.universal.fired} AWS calls made for Scheduler (emails sent, messages queued), "
                f"{emulators.ttl.delivered} expired items deleted as DynamoDB TTL would"
            )
    print()
    print(summary(outcomes))
    print("bound: the latest a due action may arrive after its due time, as documented (docs/guarantees.md)")
    print("\n".join(bounds(outcomes)))
    for scenario in chosen:
        report = getattr(scenario, "report", None)
        if report is not None:
            print(f"{scenario.name}: {report()}")
    print()
    late = over_bound(outcomes)
    if late:
        load = ", ".join(f"{n:.1f}" for n in os.getloadavg())
        for line in late:
            print("NOTE", line)
        print(f"NOTE lateness here includes this machine's load (load average {load}); the bounds are AWS's")
    found = problems(outcomes)
    for problem in found:
        print("FAILED", problem)
    print(f"{'FAILED' if found else 'OK'}: demo finished in {time.monotonic() - began:.1f}s")
    return 1 if found else 0
