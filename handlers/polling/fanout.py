"""The fan-out (`shardGroups` > 1): the rule's invocation invokes the processor once for each group of shards with
something due, so a herd is drained by as many invocations at once as there are groups, each with its own pool."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from st_core import log
from st_core.clients import CLIENTS, Clients

from polling.index import DueIndex
from polling.shards import MAX_SHARDS, ShardCount

if TYPE_CHECKING:
    from st_core.config import HandlerConfig

# Invoke the processor itself, once a group of shards with something due.
AWS_ACTIONS = ("lambda:InvokeFunction",)


def shard_groups(shards: int, groups: int) -> list[list[int]]:
    """`shards` split into `groups` disjoint groups (shard s in group s mod groups), none empty: one processor
    invocation each when the tick fans out. Disjoint, so no two of one tick's invocations read the same shard (a
    claim would keep an item once even if they did: this only saves the refused claims)."""
    return [list(range(group, shards, groups)) for group in range(max(1, min(groups, shards)))]


class FanOut:
    """What the rule's invocation did when it fanned out: the shards it found due, the invocations it made."""

    def __init__(self, due_shards: list[int], invoked: list[list[int]]) -> None:
        self.due_shards = due_shards
        self.invoked = invoked


def fan_out(
    config: HandlerConfig,
    function: str,
    *,
    clients: Clients = CLIENTS,
    now: Callable[[], float] = time.time,
) -> FanOut:
    """The rule's invocation with `shardGroups` > 1: invoke `function` (this processor) asynchronously once for
    each group of shards that has something due, with the group in the event; each of those runs a tick of its
    shards only (`handler`), so a herd is drained by as many invocations at once as there are groups, each with its
    own worker pool. An invocation given a group never fans out again (no loop). The delivery itself is the one
    `Processor` for both: the same claims, completions and backoffs. An invoke that fails fails this invocation
    after the others were made (its shards stay due for the next tick)."""
    import json

    index = DueIndex(config, clients, now, config["maxWorkers"])
    shards = ShardCount(config["polling"], clients, index, now).index_shards()
    due = set(index.due_shards(shards))
    groups = [group for group in shard_groups(max(shards) + 1, groups_of(config)) if due.intersection(group)]
    lam = clients.get("lambda")

    def invoke(group: list[int]) -> None:
        lam.invoke(FunctionName=function, InvocationType="Event", Payload=json.dumps({"shards": group}).encode())

    errors: list[Exception] = []
    with ThreadPoolExecutor(max_workers=max(1, min(config["maxWorkers"], len(groups)))) as invokers:
        for future in [invokers.submit(invoke, group) for group in groups]:
            try:
                future.result()
            except Exception as exc:  # every group is tried before the tick fails
                errors.append(exc)
    log.info("fanned-out", dueShards=sorted(due), invocations=len(groups) - len(errors), failed=len(errors))
    if errors:
        raise errors[0]
    return FanOut(sorted(due), groups)


def groups_of(config: HandlerConfig) -> int:
    """The configuration's `shardGroups` (1, no fan-out, for a table of another mode)."""
    polling = config.get("polling")
    return int(polling.get("shardGroups", 1)) if polling else 1


def group_of(event: object) -> list[int] | None:
    """The shards a fanned-out invocation was given (`{"shards": [...]}`), those a configuration may have (the
    fan-out also hands out shards above the current count that still hold entries: `ShardCount.index_shards`);
    None for the rule's own event (it has no `shards`)."""
    if not isinstance(event, dict) or "shards" not in event:
        return None
    given = event["shards"]
    group = [s for s in given if isinstance(s, int) and 0 <= s < MAX_SHARDS] if isinstance(given, list) else []
    if group != given:
        log.warning("shard-group-ignored", given=str(given)[:200], kept=group, note="shards out of range")
    return group
