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
    # 10 invocations at 100/s: 1,000/s, under 8 partitions' 2,667/s
    assert herd_model.polling_rate(herd_model.Design("d", 10, 8, 100.0)) == (1000.0, "invocations")
    # 1 shard key takes 1,000 WCU/s, 3 units an item: 333/s whatever the invocations
    rate, limit = herd_model.polling_rate(herd_model.Design("d", 10, 1, 100.0))
    assert rate == pytest.approx(1000 / 3) and limit.startswith("index partitions")
    # 100 shards and invocations: the table-level 40,000 WCU/s, 13,333 items/s
    rate, limit = herd_model.polling_rate(herd_model.Design("d", 100, 100, 1000.0))
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
    assert herd_model.eventbridge_herd(10_000).drain_seconds == pytest.approx(60.0)  # Scheduler's minute
    assert herd_model.eventbridge_pending(100_000_000).needs_increase
    assert not herd_model.eventbridge_pending(1_000_000).needs_increase
    pending = herd_model.polling_pending(herd_model.Design("d", 100, 100, 1.0), 100_000_000)
    assert not pending.needs_increase and pending.detail.startswith("1.0 GB of index per shard key")


def test_the_fan_outs_invocations_add_a_request_per_group_per_tick() -> None:
    design = herd_model.Design("d", 100, 100, 1000.0)
    herd = herd_model.polling_herd(design, 1_000_000)  # 85 s: two ticks, 200 invocations
    assert herd_model.cost_per_million(6.0, herd, design) == pytest.approx(6.0 + 200 * 0.20 / 1_000_000)


@pytest.mark.parametrize("groups", [1, 4])
def test_a_tiny_herd_is_delivered_once_each_before_it_is_timed(groups: int) -> None:
    with aws():
        drain = bench_herd.drain(24, 4, groups, latency=0)
    # a claim and a completion each, at least, and a send for every 10
    assert drain.items == 24 and drain.calls >= 2 * 24 + 24 / 10
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
