"""`polling`'s processor in the lifetime world: the rule invokes it every `interval` on the world's clock, and its
Lambda timeout kills it at any point.

Each AWS call of a tick takes time on the tick's own clock (milliseconds mostly, seconds sometimes, now and then
the tens of seconds an SDK call with its retries may take); a tick may also start late in its invocation (a cold
start, a slow first page), so the timeout can fall anywhere in it. When the clock reaches the timeout the invocation
dies where it is: the call under way is made or not (either may happen), and no later call of any of its threads is
(no `finally` that releases a shard runs in a dead Lambda). What a killed tick sent and had not completed may be
sent again once its shards' leases end: the documented at-least-once case, counted apart per occurrence
(`World.killed_sends`).

A tick with nothing due in the index reads one page a shard and writes nothing, so the world skips the ticks that
cannot find anything: the next tick is the first one on the rule's grid at or after the earliest `stDue` in the
index or the world's next event (a write, a Lambda poll: the only things that change the index), whichever comes
first."""

from __future__ import annotations

import json
import math
import random
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from st_core.clients import CLIENTS
from st_core.pending import DUE

from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT
from tests.lifetime.world import START, World

INTERVAL = timedelta(minutes=1)  # the rule's schedule
TIMEOUT = 60.0  # the processor's Lambda timeout (the env's lease, 90 s, is the timeout + 30 s)


class Killed(BaseException):
    """The Lambda timeout: not an error the handler can catch (a dead invocation runs no handler code)."""


class TickClock:
    """One invocation's clock: AWS calls move it on; at `TIMEOUT` the invocation is dead."""

    def __init__(self, world: World, start: float, rng: random.Random, *, late: float) -> None:
        self.world = world
        self.start = start
        self.random = rng
        self.elapsed = late
        self.dead = False
        self.lock = threading.Lock()
        self.local = threading.local()
        self.sent: set[tuple[str, str]] = set()  # (pk, dueAt) sent by this tick
        self.completed: set[tuple[str, str]] = set()  # (pk, dueAt) whose completion this tick made

    def now(self) -> float:
        return self.start + self.elapsed

    def time_left(self) -> float:
        return TIMEOUT - self.elapsed

    def moment(self) -> datetime:
        return datetime.fromtimestamp(self.now(), UTC)

    def _duration(self) -> float:
        draw = self.random.random()
        if draw < 0.85:
            return self.random.uniform(0.005, 0.05)
        if draw < 0.97:
            return self.random.uniform(0.05, 3.0)
        # Throttled and retried, or a connection that hangs: up to the SDK's 3 attempts x (5 s connect + 15 s read).
        return self.random.uniform(3.0, 60.0)

    # botocore's hooks, on the processor's clients --------------------------------------------------------------------

    def parameters(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.local.call = (model.name, params)

    def before(self, **_: Any) -> None:
        """The call starts: dead already, or dying during it (made or not), or it takes its time."""
        with self.lock:
            if self.dead:
                raise Killed()
            duration = self._duration()
            self.local.dies_after = False
            if self.elapsed + duration >= TIMEOUT:
                self.dead = True
                self.elapsed = TIMEOUT
                if self.random.random() < 0.5:
                    raise Killed()  # the call was never made
                self.local.dies_after = True  # made; the invocation dies before its answer
            else:
                self.elapsed += duration
            self._record(*self.local.call)

    def after(self, **_: Any) -> None:
        if getattr(self.local, "dies_after", False):
            raise Killed()

    def _record(self, name: str, params: dict[str, Any]) -> None:
        """The sends to the target and the completions this tick made (what a kill between them leaves sent
        and not completed)."""
        if name in ("SendMessage", "SendMessageBatch") and params.get("QueueUrl") == self.world.env.due_queue_url:
            for entry in params.get("Entries", [params]):
                body = json.loads(entry["MessageBody"])
                self.sent.add((body["keys"]["PK"], body["dueAt"]))
        elif name == "UpdateItem" and ":done" in params.get("ExpressionAttributeValues", {}):
            due = datetime.fromtimestamp(int(params["ExpressionAttributeValues"][":due"]["N"]), UTC)
            self.completed.add((params["Key"]["PK"]["S"], _format(due)))


def _format(moment: datetime) -> str:
    from st_core.timeparse import format_due

    return format_due(moment)


class Ticks:
    """The rule's ticks in a world (see the module's docstring); `late_rate`: how often an invocation starts late
    enough in its timeout that the kill may fall anywhere in its work."""

    def __init__(self, world: World, *, seed: int, late_rate: float = 0.2) -> None:
        self.world = world
        self.random = random.Random(seed ^ 0x5EED)
        self.late_rate = late_rate
        self.ticks = 0
        self.killed = 0
        self.clock: TickClock | None = None

    def start(self) -> None:
        for client in (CLIENTS.get("dynamodb"), CLIENTS.get("sqs")):
            client.meta.events.register_first("before-parameter-build", self._parameters)
            client.meta.events.register("before-call", self._before)
            client.meta.events.register("after-call", self._after)
        self.world.at(START + INTERVAL, self.tick)

    def _parameters(self, **kwargs: Any) -> None:
        if self.clock is not None:
            self.clock.parameters(**kwargs)

    def _before(self, **kwargs: Any) -> None:
        if self.clock is not None:
            self.clock.before(**kwargs)

    def _after(self, **kwargs: Any) -> None:
        if self.clock is not None:
            self.clock.after(**kwargs)

    def tick(self) -> None:
        """One invocation of the processor at the world's time, then the next tick that may find something."""
        import polling

        world = self.world
        late = self.random.uniform(0, TIMEOUT) if self.random.random() < self.late_rate else 0.0
        clock = TickClock(world, world.t.timestamp(), self.random, late=late)
        self.clock = clock
        world.clock = clock.moment  # its sends are stamped by its clock
        self.ticks += 1
        try:
            polling.process(world.env.config, now=clock.now, time_left=clock.time_left)
        except Killed:
            self.killed += 1
            for pk, due in clock.sent - clock.completed:
                world.killed_sends[(pk, due, 0)] += 1
        finally:
            self.clock = None
        world.observe("processor")
        world.collect("processor", world.t)
        world.at(self._next(), self.tick)

    def _next(self) -> datetime:
        """The first tick on the rule's grid after this one that may find something due."""
        world = self.world
        soonest = world.t + INTERVAL
        queued = world.next_event()
        wake = min([*self._index_dues(), *([] if queued is None else [queued])], default=soonest)
        moment = max(soonest, wake)
        steps = math.ceil((moment - START) / INTERVAL)
        return START + steps * INTERVAL

    def _index_dues(self) -> list[datetime]:
        """The earliest `stDue` in the index (read from moto's backend: no API call, no cost on the tick's clock)."""
        from moto.dynamodb.models import dynamodb_backends

        table = dynamodb_backends[ACCOUNT][REGION].get_table(self.world.env.table)
        dues = [int(item.attrs[DUE].value) for item in table.all_items() if DUE in item.attrs]
        return [datetime.fromtimestamp(min(dues), UTC)] if dues else []
