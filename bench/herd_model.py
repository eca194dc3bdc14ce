"""The herd model: how long a herd of occurrences due in the same minute takes to deliver, what it costs and what
a hundred million pending occurrences need, at AWS's default quotas, computed from drain rates the herd benchmark
measures (`bench_herd`). Pure functions, no AWS and no clock, so the arithmetic is unit-tested
(tests/bench/test_herd.py), and docs/performance.md's herd tables are the benchmark's output, not arithmetic done
by hand.

What bounds a `polling` drain, each a separate cap, the least of which wins:
- the invocations: how many processor invocations take the herd at once, times the rate one invocation drains
  (measured: the worker pool's rounds of a page's consistent read, the sends and the completions);
- the index partitions: each shard key of the due index is one partition key, and a partition takes at most
  1,000 write units a second; while a herd drains, every item costs the index one unit (its completion removes its
  entry; a shard is held by a lease in the ledger, not by a claim per item), so a shard key drains at most 1,000
  items a second;
- the table-level on-demand quota (40,000 write units a second, for the table and for each of its indexes);
- Lambda's account concurrency (1,000 by default, shared): a drain longer than the poll interval overlaps the next
  tick's invocations.
pending occurrence (10,000,000 a Region by default)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .prices import PRICES

MINUTE = 60.0
# Lambda gives a function CPU in proportion to its memory: one vCPU at 1,769 MB, so about 0.58 at the default 1,024.
VCPU_AT_DEFAULT_MEMORY = 1024 / 1769


@dataclass(frozen=True)
class Quotas:
    """AWS's default quotas (read 2026-11-25/27 from the services' quota pages; check your account's)."""

    lambda_concurrency: int = 1_000
    partition_write_units: int = 1_000  # per partition (here: per shard key of the due index) a second
    partition_read_units: int = 3_000
    table_write_units: int = 40_000  # on-demand, per table and per index, a second
    scheduler_invocations: int = 1_000  # Scheduler's invocation throttle, a second (primary Regions)
    schedules: int = 10_000_000  # schedules a Region holds
    partition_bytes: int = 10 * 1024**3  # what one partition holds before DynamoDB splits it


@dataclass(frozen=True)
class ItemWrites:
    """DynamoDB write units one delivered item costs a `polling` design, by step, each as (the table or the ledger,
    the due index). An item of up to 1 KB: a write is one unit, in a transaction two; an index entry written, moved
    (a delete and a put: two) or removed is the index's own units. `shard_lease` is what a design writes per shard
    key, not per item: the ledger writes that hold a shard for one invocation of one tick (take and release)."""

    assign: tuple[float, float]  # the item enters the due index (at write time, not during the drain)
    claim: tuple[float, float]  # the drain takes it, item by item
    completion: tuple[float, float]  # the drain marks it done (out of the index)
    consistent_reads: float = 0.0  # read units of the drain's own consistent reads, per item
    shard_lease: float = 0.0  # ledger write units per shard key, invocation and tick with something due

    def total(self) -> float:
        return sum(table + index for table, index in (self.assign, self.claim, self.completion))

    def drain_index(self) -> float:
        """What the drain writes to the index: the load on a shard key's partition while the herd drains."""
        return self.claim[1] + self.completion[1]

    def drain_table(self) -> float:
        return self.claim[0] + self.completion[0]

    def drain_calls(self) -> float:
        """DynamoDB requests the drain makes per item (a step with no unit is no request; reads 100 keys a call)."""
        steps = (self.claim, self.completion)
        return sum(1.0 for table, index in steps if table + index) + (0.01 if self.consistent_reads else 0.0)


# `polling` as built: the assign is a transaction (the item, and the record's ledger marker: two units each) plus
# the index entry; no claim per item: an invocation holds each shard key with something due by a lease item in the
# ledger (a conditional put, and a delete when its drain ends: `shard_lease`), reads each page's items again with
# one consistent BatchGetItem (the cancel and move check: one read unit an item), and completes each sent item with
# a write conditional on it being as read (the item; its entry removed).
TODAY_WRITES = ItemWrites(assign=(4, 1), claim=(0, 0), completion=(1, 1), consistent_reads=1.0, shard_lease=2.0)
# `polling` as built, for writers that index their own items (`pending_attributes`): the user's write puts the
# entry (one index unit), and the assigner's filter passes no item that already has a status: no assign.
PRE_INDEXED_TODAY_WRITES = ItemWrites(
    assign=(0, 1), claim=(0, 0), completion=(1, 1), consistent_reads=1.0, shard_lease=2.0
)
# `polling` before the lease per shard key (the comparison's "before"): each item claimed by a conditional update
# that moved its index entry out of the due range until the claim's lease ended (the item; a delete and a put).
CLAIM_PER_ITEM_WRITES = ItemWrites(assign=(4, 1), claim=(1, 2), completion=(1, 1))
# The same, writers indexing their own items.
PRE_INDEXED_CLAIM_PER_ITEM_WRITES = ItemWrites(assign=(0, 1), claim=(1, 2), completion=(1, 1))
# Costed on paper (docs/performance.md, "A herd"), not built: due entries apart from the item (a small item per
# pending occurrence in a table of the component's, keyed by shard key and due time, which plays the index's part):
# the assigner puts one entry (no transaction: its key holds the record's sequence number, so a redelivered record
# rewrites the same entry), the drain (with a lease per shard key, as built) deletes it and writes the item's
# delivered-up-to mark in the ledger, which its consistent check reads with the item (a redelivered record's entry,
# its occurrence delivered, is dropped there).
ENTRIES_WRITES = ItemWrites(assign=(0, 1), claim=(0, 0), completion=(1, 1), consistent_reads=2.0, shard_lease=2.0)
ITEM_BYTES = 1024
# Due events per target request: SendMessageBatch, PublishBatch and PutEvents take 10.
SENDS_PER_CALL = 10


def polling_usage(writes: ItemWrites, reads_per_due: float, sends_per_call: int = SENDS_PER_CALL) -> dict[str, float]:
    """One delivered item's billed usage in `polling` (bench_scale's `per_action` shape): the design's writes, the
    index pages (`reads_per_due` items read per item delivered, half a unit each) and its consistent reads, one
    target request per `sends_per_call` items, and its share of two batches' invocations (the assigner's, the
    processor's)."""
    return {
        "api_calls": 1.0 + writes.drain_calls() + 1 / sends_per_call,
        "writes": writes.total(),
        "reads": 0.5 * reads_per_due + writes.consistent_reads,
        "scheduler": 0.0,
        "sqs": 1 / sends_per_call,
        "lambda": 2 / 100,
    }


def invocation_rate(
    calls_per_item: float, cpu_per_item: float, workers: int, latency: float, vcpu: float = VCPU_AT_DEFAULT_MEMORY
) -> float:
    """Items a second one processor invocation drains on AWS: its workers wait out each item's calls one after
    another (claim, send, completion: `calls_per_item` round trips of `latency`), unless its CPU runs out first
    (`cpu_per_item` seconds of the handler's and botocore's CPU, measured; the emulator's excluded)."""
    return min(workers / (calls_per_item * latency), vcpu / cpu_per_item)


@dataclass(frozen=True)
class Design:
    """One way of draining a herd in `polling`: `invocations` processor invocations a tick (1: a single tick;
    `shard_groups` with the fan-out), each draining `per_invocation` items a second (measured), over `shards` shard
    keys of the due index; a tick every `interval` seconds, each taking items for at most `working` seconds of it
    (the Lambda timeout less the processor's budget margin: 60 - 10 by default); `sends_per_call` due events a
    target request."""

    name: str
    invocations: int
    shards: int
    per_invocation: float
    interval: float = MINUTE
    working: float = 50.0
    writes: ItemWrites = TODAY_WRITES
    sends_per_call: int = SENDS_PER_CALL


@dataclass(frozen=True)
class Herd:
    """What a herd of `items` due in the same minute does to one design."""

    design: str
    items: int
    rate: float  # items a second, the herd's drain (over whole intervals: the ticks' idle tail included)
    limit: str  # what sets the rate
    drain_seconds: float
    last_late_seconds: float  # the worst lateness: wait for the tick, then the whole drain
    concurrency: int  # Lambda executions at once


def polling_rate(design: Design, quotas: Quotas = Quotas()) -> tuple[float, str]:
    """The drain rate (items a second, while the ticks work) and which cap sets it."""
    usable = min(design.invocations, quotas.lambda_concurrency)
    index, table = design.writes.drain_index(), design.writes.drain_table()
    caps = {"invocations": usable * design.per_invocation}
    if index:
        caps["index partitions (1,000 WCU/s each)"] = design.shards * quotas.partition_write_units / index
    # The table and each of its indexes have their own on-demand quota: the busier of the two binds.
    caps["table-level write quota"] = quotas.table_write_units / max(index, table)
    limit = min(caps, key=lambda name: caps[name])
    rate = caps[limit]
    if usable < design.invocations and limit == "invocations":
        limit = "Lambda concurrency"
    return rate, limit


def polling_herd(design: Design, items: int, quotas: Quotas = Quotas()) -> Herd:
    """A herd in `polling`: the tick after the minute reads it (at most one interval after an item's time), and
    the invocations drain it `working` seconds of every interval (a drain past one tick goes on in the next)."""
    rate, limit = polling_rate(design, quotas)
    per_tick = rate * min(design.working, design.interval)
    full_ticks, rest = divmod(items, per_tick)
    drain = full_ticks * design.interval + rest / rate if rest else (full_ticks - 1) * design.interval + design.working
    concurrency = min(design.invocations, quotas.lambda_concurrency)
    return Herd(design.name, items, items / drain, limit, drain, design.interval + drain, concurrency)


def eventbridge_herd(items: int, quotas: Quotas = Quotas()) -> Herd:
    """A herd in `eventbridge`: one schedule per item, all due in the minute; Scheduler fires an `at()` schedule
    anywhere in its minute (it may start the whole herd late in it) and delays what is over its invocation
    throttle, so the firings take `items / throttle` seconds and the last may come that long after the minute's end
    (its lateness: the minute + the drain)."""
    rate = min(items / MINUTE, float(quotas.scheduler_invocations))
    drain = items / quotas.scheduler_invocations
    return Herd("eventbridge", items, rate, "Scheduler invocation throttle", drain, MINUTE + drain, 0)


@dataclass(frozen=True)
class Pending:
    """What `pending` occurrences waiting need."""

    design: str
    pending: int
    needs_increase: bool
    detail: str


def polling_pending(design: Design, pending: int, quotas: Quotas = Quotas()) -> Pending:
    """The due index holds every pending item (its own storage, no quota); DynamoDB splits a shard key's
    partition by sort key past 10 GB, so size asks for no increase."""
    per_shard_gb = pending * ITEM_BYTES / design.shards / 1024**3
    splits = math.ceil(pending * ITEM_BYTES / design.shards / quotas.partition_bytes)
    return Pending(
        design.name,
        pending,
        False,
        f"{per_shard_gb:,.1f} GB of index per shard key ({splits} partition{'s' if splits > 1 else ''} each, DynamoDB "
        "splits past 10 GB); no quota",
    )


def eventbridge_pending(pending: int, quotas: Quotas = Quotas()) -> Pending:
    share = pending / quotas.schedules
    return Pending(
        "eventbridge",
        pending,
        pending > quotas.schedules,
        f"{pending:,} schedules: {share:.0%} of the Region's default {quotas.schedules:,}",
    )


def cost_per_million(base: float, herd: Herd, design: Design) -> float:
    """`polling`'s cost per million deliveries in a herd: the per-item cost (`base`, from `bench_scale`: writes,
    reads, the send, compute) plus what a tick costs per shard key or invocation rather than per item, for every
    tick the drain spans: the shard leases (`ItemWrites.shard_lease` ledger units for each shard key, every shard
    key having something due) and the fan-out's own invocations, one per shard group (their compute is the items',
    already in `base`)."""
    ticks = max(1, math.ceil(herd.drain_seconds / design.interval))
    requests = design.invocations * ticks if design.invocations > 1 else 0  # the fan-out's own invocations
    lease_units = design.writes.shard_lease * design.shards * ticks
    per_herd = requests * PRICES["lambda_request"] + lease_units * PRICES["dynamodb_write_unit"]
    return base + per_herd / herd.items * 1e6
