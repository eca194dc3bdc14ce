"""Scheduler's invocation throttle, scaled to the local cloud. A leaf module (nothing of the local cloud imported), so
ministack's process (which fires the templated targets) and the universal-target emulator share one budget.

AWS's Scheduler invokes at most 1,000 targets a second per account and Region by default (*Quotas for Amazon
EventBridge Scheduler*: the invocations throttle); firings over it are delayed, never dropped, and never run before
their time. A herd (thousands of schedules due in one minute) therefore drains at that rate, which is what
docs/performance.md's herd arithmetic rests on. ministack fires every due schedule at once, one after another, as
fast as the machine goes: here each Scheduler firing first takes its turn from an `InvocationThrottle` at a stated
rate, scaled from AWS's by the ratio a 2-core machine can serve (`LOCAL_INVOCATIONS_PER_SECOND`, 1:10 by default;
`LOCALCLOUD_SCHEDULER_RATE` sets it, `0` switches the throttle off). The turns are handed out in the order firings
ask for them; a firing waits for its turn, then runs: a burst over the rate is delayed, in order, none dropped, none
early (it can only run later than ministack would have run it).

Retries of a firing its target refused (localcloud/faults.py) are not throttled again: the first attempt took its
turn. How the scale was chosen, and what it means for a herd's bound: docs/local-cloud.md.
"""

from __future__ import annotations

import contextvars
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .rulebook import limit

__all__ = [
    "AWS_INVOCATIONS_PER_SECOND",
    "LOCAL_INVOCATIONS_PER_SECOND",
    "SCHEDULER_RATE_VARIABLE",
    "SCHEDULER_SLOT_PATH",
    "InvocationThrottle",
    "ThrottledDispatcher",
    "configured_rate",
    "install",
    "remote_turn",
    "throttle_state",
]

SCHEDULER_RATE_VARIABLE = "LOCALCLOUD_SCHEDULER_RATE"
AWS_INVOCATIONS_PER_SECOND = float(limit("scheduler-throttle"))  # AWS's default, per account and Region
# What two shared cores serve with room to spare while the rest of the local cloud runs: 1,000/s scaled 1:10, so a
# local herd of 10,000 drains as 100,000 do on AWS (docs/local-cloud.md).
LOCAL_INVOCATIONS_PER_SECOND = 100.0
# Turns handed out ahead of their time wait here; this many run at once once their turn comes (each an IAM check and
# a send into ministack's own services: milliseconds).
DISPATCH_WORKERS = 8
# The local cloud's own endpoint (served in ministack's process): a universal-target firing's turn, `{"wait": s}`.
SCHEDULER_SLOT_PATH = "/_localcloud/scheduler-slot"


def configured_rate() -> float:
    """The local throttle's invocations a second: `LOCALCLOUD_SCHEDULER_RATE`, else the scaled default; 0: none."""
    text = os.environ.get(SCHEDULER_RATE_VARIABLE, "").strip()
    rate = float(text) if text else LOCAL_INVOCATIONS_PER_SECOND
    if rate < 0:
        raise ValueError(f"{SCHEDULER_RATE_VARIABLE} must be 0 (no throttle) or more invocations a second, not {text}")
    return rate


class InvocationThrottle:
    """Turns at most `rate` a second, evenly spaced, in the order they are asked for (a turn is never before it is
    asked for, and never refused). `clock`: the time turns are given in (a test's)."""

    def __init__(self, rate: float, clock: Callable[[], float] = time.time) -> None:
        if rate <= 0:
            raise ValueError(f"an invocation throttle needs a rate above 0, not {rate}")
        self.rate = rate
        self.clock = clock
        self._next = float("-inf")  # the earliest the next turn may be
        self._lock = threading.Lock()
        self.granted = 0
        self.delayed = 0
        self.most_delayed = 0.0

    def turn(self) -> float:
        """When the invocation asking now may run: now if the rate allows, else as soon as it does."""
        with self._lock:
            now = self.clock()
            at = max(now, self._next)
            self._next = at + 1.0 / self.rate
            self.granted += 1
            if at > now:
                self.delayed += 1
                self.most_delayed = max(self.most_delayed, at - now)
            return at


class ThrottledDispatcher:
    """Runs each submitted call at its throttle's turn, in the order submitted, without holding up the submitter
    (ministack's sweep goes on to the next due schedule, as Scheduler's does). `sleep`: how it waits (a test's)."""

    def __init__(
        self,
        throttle: InvocationThrottle,
        workers: int = DISPATCH_WORKERS,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.throttle = throttle
        self.sleep = sleep
        self._waiting: deque[tuple[float, Callable[[], Any]]] = deque()
        self._ready = threading.Condition()
        self._closed = False
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scheduler-throttled")
        self._thread = threading.Thread(target=self._run, name="scheduler-throttle", daemon=True)
        self._thread.start()

    def submit(self, call: Callable[[], Any]) -> float:
        """Queue `call` for its turn; returns the turn (epoch seconds in the throttle's clock)."""
        with self._ready:
            at = self.throttle.turn()  # taken under the queue's lock: turns and queue agree on the order
            self._waiting.append((at, call))
            self._ready.notify()
        return at

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._waiting and not self._closed:
                    self._ready.wait()
                if not self._waiting:
                    return
                at, call = self._waiting.popleft()
            wait = at - self.throttle.clock()
            if wait > 0:
                self.sleep(wait)
            self._pool.submit(call)

    def close(self) -> None:
        """Run what is queued (each at its turn), then stop."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join()
        self._pool.shutdown(wait=True)


def install(rate: float | None = None) -> ThrottledDispatcher | None:
    """In ministack's process: every Scheduler firing of a templated target (ministack's at() sweep and the recurring
    ticker, both through `eventbridge._invoke_target`; install this after the IAM and fault patches so the whole
    firing waits its turn) runs at its turn, in its own request context; and the universal-target emulator's firings
    ask for theirs at `SCHEDULER_SLOT_PATH`. None when the rate is 0 (no throttle)."""
    from ministack.services import eventbridge

    from .endpoints import first, json_answer, serve

    rate = configured_rate() if rate is None else rate
    if rate == 0:
        return None
    dispatcher = ThrottledDispatcher(InvocationThrottle(rate))
    invoke = eventbridge._invoke_target

    def throttled(target: dict, event: dict, rule: dict, view: Any = None) -> Any:
        if not (isinstance(event, dict) and event.get("Source") == "aws.scheduler"):
            return invoke(target, event, rule, view)
        context = contextvars.copy_context()  # ministack keeps the request's account and region in context variables
        dispatcher.submit(lambda: context.run(invoke, target, event, rule, view))
        return None

    def slot(query: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if first(query.get("peek")):
            throttle = dispatcher.throttle
            state = {"rate": rate, "granted": throttle.granted, "delayed": throttle.delayed}
            return json_answer({**state, "most_delayed": throttle.most_delayed, "waiting": dispatcher.waiting})
        return json_answer({"wait": max(0.0, dispatcher.throttle.turn() - time.time())})

    eventbridge._invoke_target = throttled
    serve(SCHEDULER_SLOT_PATH, slot)
    return dispatcher


def remote_turn(endpoint: str) -> Callable[[], float]:
    """For the universal-target emulator (another process): ask ministack's throttle for a turn; the seconds to wait
    (0 when the local cloud's ministack has no throttle)."""
    from .endpoints import ask

    def wait() -> float:
        try:
            return float(ask(endpoint, SCHEDULER_SLOT_PATH).get("wait", 0.0))
        except (OSError, ValueError):
            return 0.0

    return wait


def throttle_state(endpoint: str) -> dict[str, Any]:
    """What the throttle did so far (`{}` without one): rate, turns granted, delayed, the longest delay, queued."""
    from .endpoints import ask

    try:
        return ask(endpoint, SCHEDULER_SLOT_PATH, peek="1")
    except (OSError, ValueError):
        return {}
