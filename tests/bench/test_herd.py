"""The herd benchmark and its model: the model's arithmetic (pure, checked by hand), and a tiny run of the
benchmark that must deliver every due item once, so a benchmark measuring a no-op (or a drain that loses or
repeats items) breaks the build. No timing is asserted."""

from __future__ import annotations

import json

import pytest

from bench import bench_herd, herd_model
from bench.harness import aws

QUOTAS = herd_model.Quotas()


def test_an_invocation_is_bound_by_its_round_trips_or_its_cpu() -> None:
    # 16 workers, 3 calls of 10 ms an item: 533 items/s, unless the CPU (2 ms an item on 0.5 vCPU: 250/s) binds
    assert herd_model.invocation_rate(3, 0.0001, 16, 0.010, vcpu=1.0) == pytest.approx(16 / 0.03)
    assert herd_model.invocation_rate(3, 0.002, 16, 0.010, vcpu=0.5) == pytest.approx(250)


def test_the_drain_is_set_by_the_least_of_the_invocations_the_partitions_and_the_table_quota() -> None:
    # 10 invocations at 100/s: 1,000/s, under 8 partitions' 8,000/s
    assert herd_model.polling_rate(herd_model.Design("d", 10, 8, 100.0)) == (1000.0, "invocations")
    # as built, 1 index unit an item while draining (the completion): 1 shard key takes 1,000 items/s
    rate, limit = herd_model.polling_rate(herd_model.Design("d", 10, 1, 500.0))
    assert rate == pytest.approx(1000) and limit.startswith("index partitions")
    # with a claim per item (3 index units: its entry moved, then removed), 333/s whatever the invocations
    before = herd_model.CLAIM_PER_ITEM_WRITES
    rate, limit = herd_model.polling_rate(herd_model.Design("d", 10, 1, 100.0, writes=before))
    assert rate == pytest.approx(1000 / 3) and limit.startswith("index partitions")
    # 100 shards and invocations: the table-level 40,000 WCU/s, 13,333 items/s with a claim per item
    rate, limit = herd_model.polling_rate(herd_model.Design("d", 100, 100, 1000.0, writes=before))
    assert rate == pytest.approx(40000 / 3) and limit == "table-level write quota"
    # more invocations than the account's concurrency: only 1,000 run
    rate, limit = herd_model.polling_rate(herd_model.Design("d", 2000, 100, 1.0))
    assert (rate, limit) == (1000.0, "Lambda concurrency")


def test_a_herd_drains_the_working_part_of_each_interval() -> None:
    # 1,000/s for 50 s of each 60: 100,000 items take one full tick (50,000) ... wait 10 s ... and 50 s more
    herd = herd_model.polling_herd(herd_model.Design("d", 10, 8, 100.0), 100_000)
    assert herd.drain_seconds == pytest.approx(110.0) and herd.last_late_seconds == pytest.approx(170.0)
    # within one tick: items / rate
    herd = herd_model.polling_herd(herd_model.Design("d", 10, 8, 100.0), 10_000)
    assert herd.drain_seconds == pytest.approx(10.0) and herd.concurrency == 10


def test_eventbridge_drains_at_schedulers_throttle_and_holds_a_schedule_per_item() -> None:
    assert herd_model.eventbridge_herd(100_000).drain_seconds == pytest.approx(100.0)
    assert herd_model.eventbridge_herd(1_000_000).drain_seconds == pytest.approx(1000.0)
    # Scheduler may start a herd anywhere in its minute: the last item up to the minute + the drain late
    assert herd_model.eventbridge_herd(100_000).last_late_seconds == pytest.approx(160.0)
    assert herd_model.eventbridge_herd(10_000).last_late_seconds == pytest.approx(70.0)
    assert herd_model.eventbridge_pending(100_000_000).needs_increase
    assert not herd_model.eventbridge_pending(1_000_000).needs_increase
    pending = herd_model.polling_pending(herd_model.Design("d", 100, 100, 1.0), 100_000_000)
    assert not pending.needs_increase and pending.detail.startswith("1.0 GB of index per shard key")


def test_the_fan_outs_invocations_and_the_shard_leases_are_added_per_tick() -> None:
    design = herd_model.Design("d", 100, 100, 100.0)
    herd = herd_model.polling_herd(design, 1_000_000)  # 10,000/s for 50 s of each minute: two ticks
    # 200 invocations at $0.20 a million; each tick takes and releases each of the 100 shard keys' leases: 400 units
    invocations, leases = 200 * 0.20 / 1_000_000, 400 * 0.625 / 1_000_000
    assert herd_model.cost_per_million(6.0, herd, design) == pytest.approx(6.0 + invocations + leases)
    # a claim per item holds no lease
    before = herd_model.Design("d", 100, 100, 100.0, writes=herd_model.CLAIM_PER_ITEM_WRITES)
    herd = herd_model.polling_herd(before, 1_000_000)
    assert herd_model.cost_per_million(6.0, herd, before) == pytest.approx(6.0 + invocations)


@pytest.mark.parametrize("groups", [1, 4])
def test_a_tiny_herd_is_delivered_once_each_before_it_is_timed(groups: int) -> None:
    with aws():
        drain = bench_herd.drain(24, 4, groups, latency=0)
    # a completion each, at least, a send for every 10, and a lease taken and released for each of the 4 shards
    assert drain.items == 24 and drain.calls >= 24 + 24 / 10 + 2 * 4
    assert drain.invocations == groups


def test_the_check_refuses_a_herd_not_delivered_once_each() -> None:
    with aws():
        herd = bench_herd.Herd(3, 2, 1_800_000_000.0)
        with pytest.raises(AssertionError, match="3 missing"):
            herd.check_delivered()
        for pk in ("r#0", "r#0", "r#1", "r#2"):
            body = {"keys": {"PK": pk, "SK": "T"}, "dueAt": "2027-01-15T08:00:00Z"}
            herd.sqs.send_message(QueueUrl=herd.queue_url, MessageBody=json.dumps(body))
        with pytest.raises(AssertionError, match="1 twice"):
            herd.check_delivered()


def test_a_designs_writes_are_counted_by_step() -> None:
    built = herd_model.TODAY_WRITES
    # assign: a transaction of the item and its ledger marker (2 + 2) and the index entry; no claim per item (a
    # lease per shard key instead: 2 ledger units a shard key and tick); completion: the item and its entry removed
    # (1 + 1); a consistent read of each page's items, 100 keys a call
    assert (built.total(), built.drain_index(), built.drain_table(), built.drain_calls()) == (
        7,
        1,
        1,
        pytest.approx(1.01),
    )
    assert (built.consistent_reads, built.shard_lease) == (1, 2)
    # built: a writer's own index entry (pending_attributes) spares the assign and its ledger marker
    pre_indexed = herd_model.PRE_INDEXED_TODAY_WRITES
    assert (pre_indexed.total(), pre_indexed.drain_index(), pre_indexed.consistent_reads) == (3, 1, 1)
    # before: each item claimed by a conditional update moving its index entry (1 + 2), no read, no lease
    before = herd_model.CLAIM_PER_ITEM_WRITES
    assert (before.total(), before.drain_index(), before.drain_table(), before.drain_calls()) == (10, 3, 2, 2)
    assert (before.consistent_reads, before.shard_lease) == (0, 0)
    assert herd_model.PRE_INDEXED_CLAIM_PER_ITEM_WRITES.total() == 6
    assert herd_model.ENTRIES_WRITES.total() == 3 and herd_model.ENTRIES_WRITES.consistent_reads == 2


def test_the_cost_per_million_is_computed_from_the_designs_usage() -> None:
    from bench.bench_scale import cost_per_million, per_action

    usage = herd_model.polling_usage(herd_model.TODAY_WRITES, 1.0)
    assert usage["writes"] == 7 and usage["sqs"] == pytest.approx(0.1)  # ten due events a SendMessageBatch
    # 7 write units at $0.625/M; half a read unit of the index page and one consistent read unit at $0.125/M; a
    # tenth of an SQS request at $0.40/M; and two batches' share of 100 (a request and 0.25 s at 1 GB each)
    lambda_share = 0.02 * (0.20 + 0.25 * 13.3334)
    assert cost_per_million(usage) == pytest.approx(7 * 0.625 + 1.5 * 0.125 + 0.04 + lambda_share)
    assert per_action({})["polling"] == usage  # the scale benchmark's row is this, not typed apart
    eventbridge = cost_per_million(per_action({})["eventbridge"])
    one_a_call = herd_model.polling_usage(herd_model.TODAY_WRITES, 1.0, sends_per_call=1)
    assert cost_per_million(one_a_call) - cost_per_million(usage) == pytest.approx(0.36)
    # the goal (at most 1.2x eventbridge's) is met by writers indexing their own items, and by entries kept apart
    assert cost_per_million(usage) > 1.2 * eventbridge
    for met in (herd_model.PRE_INDEXED_TODAY_WRITES, herd_model.ENTRIES_WRITES):
        assert cost_per_million(herd_model.polling_usage(met, 1.0)) <= 1.2 * eventbridge
    # a claim per item, before, is over it either way
    for before in (herd_model.CLAIM_PER_ITEM_WRITES, herd_model.PRE_INDEXED_CLAIM_PER_ITEM_WRITES):
        assert cost_per_million(herd_model.polling_usage(before, 1.0)) > 1.2 * eventbridge


def test_one_index_write_per_item_while_draining_raises_the_partition_and_table_caps() -> None:
    # one index unit an item while draining (the completion): a shard key takes 1,000 items/s, the table 40,000/s
    assert herd_model.polling_rate(herd_model.Design("d", 100, 100, 1000.0)) == (40000.0, "table-level write quota")
    rate, limit = herd_model.polling_rate(herd_model.Design("d", 10, 2, 1000.0))
    assert (rate, limit) == (2000.0, "index partitions (1,000 WCU/s each)")


def test_the_model_table_marks_what_costs_over_the_goal() -> None:
    models = [
        herd_model.Design("polling, one send a call (before)", 1, 8, 100.0, sends_per_call=1),
        herd_model.Design("polling", 1, 8, 100.0),
        herd_model.Design("fanned", 100, 100, 1000.0),
        herd_model.Design("pre-indexed", 100, 100, 1000.0, writes=herd_model.PRE_INDEXED_TODAY_WRITES),
        herd_model.Design("claim per item (before)", 100, 100, 1000.0, writes=herd_model.CLAIM_PER_ITEM_WRITES),
    ]
    text = bench_herd.model_rows(models, 2.19)
    cells = [line.split("|") for line in text.splitlines() if line.startswith("| ") and "design" not in line]
    rows = {c[2].strip() + c[1].strip(): "|".join(c) for c in cells}
    assert len(rows) == 2 * (1 + len(models))  # eventbridge and each design, at 100,000 and 1,000,000
    assert "over the goal" in rows["fanned1,000,000"] and "over the goal" not in rows["pre-indexed1,000,000"]
    assert "over the goal" in rows["claim per item (before)1,000,000"]
    # one send a call (the design's own field): 7 write units $4.375, 1.5 read units $0.19, a whole SQS request
    # $0.40, the Lambda share $0.07; 20 ticks of 8 shard leases (2 units each) add $0.002
    assert "$5.04 (over the goal)" in rows["polling, one send a call (before)100,000"]
