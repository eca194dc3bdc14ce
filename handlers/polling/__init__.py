"""`polling` mode (seed 002, sharded as in part 2 of the AWS series): a rule invokes `handler` every interval; it
takes what is due from the sparse due index, every shard at once, a shard's items spread over the worker pool, and
runs each item exactly once. The assigner (`polling_assign.handler`) is the stream consumer that puts newly written
items in the index (seed 002's "task scheduler").

Exactly once, with overlapping or crashing processors: a shard is held by one invocation at a time (a lease in the
ledger, one conditional write a shard and tick, not one an item); the index is eventually consistent, so each page's
items are read again consistently before they are sent, and each sent item is completed by a write conditional on
it being unchanged since that read. An invocation that dies leaves its shards held until the lease ends (the Lambda
timeout + 30 s from its start): what it sent and did not complete is then sent again (at least once, never lost). A
failed dispatch goes back into the index with an attempt count and exponential backoff, and after the last attempt
to the dead-letter queue with the reason. An item it cannot read (an index attribute written by hand, a time that
is no time) is parked in the poison queue and taken out of the index; the rest of its page goes on. Every write
here sets `stStatus`, so the stream filter never hands these writes back to the assigner (no loop).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from st_core import log
from st_core.clients import CLIENTS, Clients
from st_core.config import load_config

from polling.budget import SLACK_SECONDS, call_limits, processor_clients, time_left_of
from polling.drain import READ_ATTEMPTS, Processor
from polling.fanout import FanOut, fan_out, group_of, groups_of, shard_groups
from polling.report import Outcome, TickReport
from polling.shards import MAX_SHARDS, SHARDS_RECORD

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from st_core.config import HandlerConfig

    from polling.budget import LambdaContext

# The package's parts, by concern (each declares the AWS actions its own calls need, checked by tests/iam):
# items.py reads an entry and its item (pure); budget.py plans the time (pure); index.py reads the due index;
# shards.py finds the shards in use; lease.py holds a shard; drain.py is the tick (`Processor`), which reads each
# page again and judges it (triage.py), sends it (sending.py) and settles it (settle.py); fanout.py spreads a tick
# over invocations; report.py is what a tick did. This module is the entry points.
AWS_ACTIONS: tuple[str, ...] = ()

# What the tests, the benchmarks and the local cloud use; the rest is each part's own.
__all__ = [
    "MAX_SHARDS",
    "READ_ATTEMPTS",
    "SHARDS_RECORD",
    "SLACK_SECONDS",
    "FanOut",
    "Outcome",
    "Processor",
    "TickReport",
    "call_limits",
    "fan_out",
    "handler",
    "process",
    "shard_groups",
]


def process(
    config: HandlerConfig,
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], float] = time.time,
    time_left: Callable[[], float] = lambda: 900.0,
    shards: Sequence[int] | None = None,
    sending: Clients | None = None,
) -> TickReport:
    """One tick of `shards` (every shard when None); `sending`: the clients of its sends and item writes
    (`clients` when None)."""
    return Processor(config, clients, now, time_left, shards, sending).tick()


def handler(event: dict[str, Any], context: LambdaContext | None = None) -> dict[str, Any]:
    """Lambda entry point for the rule (`polling.handler`): one tick; with `shardGroups` > 1, the rule's
    invocation fans out (`fan_out`) and each invocation it makes ticks its group of shards."""
    log.invoked(context)
    config = load_config()
    group = group_of(event)
    if group is None and groups_of(config) > 1:
        function = context.invoked_function_arn if context is not None else os.environ["AWS_LAMBDA_FUNCTION_NAME"]
        fanned = fan_out(config, function)
        return {"dueShards": len(fanned.due_shards), "invocations": len(fanned.invoked)}
    section = config.get("polling")
    sending = processor_clients(section["budgetMarginSeconds"]) if section else CLIENTS
    if context is None:
        report = process(config, shards=group, sending=sending)
    else:
        report = process(config, time_left=time_left_of(context), shards=group, sending=sending)
    return {
        "dispatched": report.dispatched,
        "retried": report.retried,
        "failed": report.failed,
        "poisoned": report.poisoned,
        "backlog": report.backlog,
        "backloggedShards": report.backlogged_shards,
        "heldShards": report.held_shards,
        "outOfTime": report.out_of_time,
        "throttled": report.throttled,
    }
