"""What a tick did: each due item's `Outcome`, and the `TickReport` of an invocation (its return value and the
metrics it logs), summed over its shards."""

from __future__ import annotations

from enum import Enum

AWS_ACTIONS: tuple[str, ...] = ()


class Outcome(Enum):
    """What became of one due item the tick read."""

    DISPATCHED = "dispatched"
    RETRIED = "retried"
    FAILED = "failed"
    SKIPPED = "skipped"  # not sent: moved, deleted or done since the index showed it
    LEFT = "left"  # not sent: out of time (the next tick takes it)
    UNREAD = "unread"  # not sent: its read was throttled past every try (the next tick takes it)
    UNSETTLED = "unsettled"  # sent (or refused), but its completion or backoff failed: due again at the next tick
    POISONED = "poisoned"  # not sent: it cannot be (`Unusable`); parked in the poison queue, out of the index


class TickReport:
    """What one processor invocation did (also its return value and the metrics it logs).

    `backlog` is the due items the tick read but had no time left for, and `backlogged_shards` the shards it stopped
    with due items left (read, or beyond the last page it read). Both come free with the pages read: counting the
    rest of a shard would read every waiting item again, every tick for as long as the backlog lasts.
    `held_shards` is the shards with something due that another invocation held (a tick still running).
    `throttled` is the due items whose consistent read DynamoDB throttled past every try (left for the next tick,
    their shard stopped and counted in `backlogged_shards`): a hot partition, not a tick short of time, which
    `out_of_time` alone says.

    A plain class rather than a dataclass, which would generate and compile its methods on every cold start."""

    def __init__(self) -> None:
        self.dispatched = self.retried = self.failed = self.skipped = self.unsettled = self.poisoned = 0
        self.backlog = self.backlogged_shards = self.held_shards = self.throttled = 0
        self.out_of_time = False
        self.shards: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"TickReport({vars(self)})"

    def tally(self, outcomes: list[Outcome]) -> None:
        self.dispatched += outcomes.count(Outcome.DISPATCHED)
        self.retried += outcomes.count(Outcome.RETRIED)
        self.failed += outcomes.count(Outcome.FAILED)
        self.skipped += outcomes.count(Outcome.SKIPPED)
        self.backlog += outcomes.count(Outcome.LEFT)
        self.throttled += outcomes.count(Outcome.UNREAD)
        self.unsettled += outcomes.count(Outcome.UNSETTLED)
        self.poisoned += outcomes.count(Outcome.POISONED)

    def add(self, other: TickReport) -> None:
        self.dispatched += other.dispatched
        self.retried += other.retried
        self.failed += other.failed
        self.skipped += other.skipped
        self.backlog += other.backlog
        self.throttled += other.throttled
        self.unsettled += other.unsettled
        self.poisoned += other.poisoned
        self.backlogged_shards += other.backlogged_shards
        self.held_shards += other.held_shards
        self.out_of_time |= other.out_of_time
