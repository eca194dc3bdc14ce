"""The tick's time budget, planned without AWS calls: how long one call may take, how many items the next page may
hold at a shard's pace, how many entries the next send may take so that its completions still fit, and the
invocation's time left. The drain and the sends ask these questions; the answers are pure arithmetic."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from st_core.clients import CallLimits, Clients
from st_core.dispatch import most_calls

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import TargetConfig

AWS_ACTIONS: tuple[str, ...] = ()

# The most items one page of the due index (and so one consistent BatchGetItem, the call's limit) holds.
PAGE_SIZE = 100
# Kept free of calls in a send's budget: the processor's own time between them (building events, logging, a pause
# of the interpreter).
SLACK_SECONDS = 1.0
# One call's budget is never sized below this, however short the Lambda timeout (its budget margin).
MIN_CALL_SECONDS = 1.0
# The pace (items a second) at which this container's last tick took each shard of a table, by (table, shard): a
# warm container (the rule invokes the processor every interval) sizes a shard's first page with it, as it sizes
# later pages with the tick's own pace. Read and written through `pace_of` and `remember_pace`.
PACES: dict[tuple[str, int], float] = {}


if TYPE_CHECKING:  # a Protocol class costs its build at import; the handler only annotates with it

    class LambdaContext(Protocol):
        invoked_function_arn: str

        def get_remaining_time_in_millis(self) -> int: ...


def call_limits(margin: float) -> CallLimits:
    """The processor's own limits for one AWS call, sized to its budget margin: the last batch a tick may start, with
    the margin left, is one send and one completion, each at its worst (`CallLimits.worst_seconds`), and
    SLACK_SECONDS to spare. The handlers' default (3 x (5 s + 15 s)) lets one call outlast the margin, so a batch sent
    at the margin was cut off by the Lambda timeout between its send and its completions (and sent again).

    One attempt, with the whole budget for its answer: the SDK retries a read timeout, and a send whose answer was
    merely slow had been stored by the target, so its retry delivered the batch twice (the herd soak on a loaded
    machine saw 3 of 9,500 sent twice about a second apart with two attempts of 1.25 s each). A send that fails or
    times out is the processor's to judge (its entries backed off or dead-lettered), a completion is retried by
    `persist` while the time left allows."""
    worst = max(MIN_CALL_SECONDS, (margin - SLACK_SECONDS) / 2)
    connect = min(0.5, worst / 3)
    return CallLimits(connect=connect, read=worst - connect, attempts=1)


_PROCESSOR_CLIENTS: dict[float, Clients] = {}


def processor_clients(margin: float) -> Clients:
    """The processor's clients, keeping to `call_limits(margin)`: one registry a container (a margin)."""
    made = _PROCESSOR_CLIENTS.get(margin)
    if made is None:
        made = _PROCESSOR_CLIENTS.setdefault(margin, Clients(call_limits(margin)))
    return made


def pace_of(table: str, shard: int) -> float | None:
    """This container's last pace on the shard (items a second), None before it took any."""
    return PACES.get((table, shard))


def remember_pace(table: str, shard: int, pace: float) -> None:
    """Keep the tick's pace on the shard for the next tick this container runs."""
    PACES[(table, shard)] = pace


def page_limit(*, handled: int, spent: float, left: float, margin: float, pace: float | None, first_page: int) -> int:
    """How many items to read next: what the time left before the margin can take at the shard's pace (0: none),
    up to a page. The pace is this tick's so far (`handled` items in `spent` s); before the first page, this
    container's last tick's (`pace`; at least one item: a pace is only learnt by taking items), or `first_page` in
    a cold container. `spent` is in the clock of `left` (the Lambda's remaining time)."""
    available = left - margin
    if available < 0:
        return 0
    if handled == 0:
        return first_page if pace is None else max(1, min(PAGE_SIZE, int(pace * available)))
    if spent <= 0:
        return PAGE_SIZE  # the clock did not move (no Lambda context): nothing to fit
    return min(PAGE_SIZE, int(handled / spent * available))


def fitting(target: TargetConfig, batch: Sequence[tuple[str, str]], call_seconds: float, left: float) -> int:
    """How many of `batch`'s entries (payload, occurrence), from the first, can be sent now: their send's calls
    (`dispatch.most_calls`) and one completion each, every call at its worst (`call_seconds`), fit the time `left`
    with SLACK_SECONDS to spare. The Lambda timeout then never cuts a send off from its completions."""
    room = left - SLACK_SECONDS
    for count in range(len(batch), 0, -1):
        if (most_calls(target, batch[:count]) + count) * call_seconds <= room:
            return count
    return 0


def time_left_of(context: LambdaContext) -> Callable[[], float]:
    """The invocation's time left (s): the context's, never more than it said at the start less the time gone since
    on this container's own clock, so a context whose count does not move (an emulator's) still bounds the tick."""
    start, first = time.monotonic(), context.get_remaining_time_in_millis() / 1000

    def left() -> float:
        return min(context.get_remaining_time_in_millis() / 1000, first - (time.monotonic() - start))

    return left
