"""st_core/batch.py on its own: the per-item ordering, the three outcomes of a record (done, parked, retried) and
the partial-batch response Lambda reads, without any mode's logic in the way."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError
from st_core import batch as st_batch
from st_core.batch import permanent_outcome, sequence_order
from st_core.errors import PermanentError, TransientError

from components import ScheduledTableArgs
from components.runtime_config import Value
from tests.support.handler_config import handler_config


class FakePoison:
    """The poison queue's interface: `send` and `sent`; `broken` makes every send fail (the queue unreachable)."""

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken
        self.parked: list[tuple[Any, str, str]] = []
        self.lock = threading.Lock()

    @property
    def sent(self) -> int:
        return len(self.parked)

    def send(self, record: Any, reason: str, error: str) -> None:
        if self.broken:
            raise ClientError({"Error": {"Code": "AWS.SimpleQueueService.NonExistentQueue", "Message": "gone"}}, "Send")
        with self.lock:
            self.parked.append((record, reason, error))


# The fakes stand in for the real types (a poison queue, stream records as plain dicts): call through Any.
process_batch: Any = st_batch.process_batch
handle_stream_batch: Any = st_batch.handle_stream_batch


def record(pk: str, seq: int, **extra: Any) -> dict[str, Any]:
    return {
        "eventID": f"e{seq}",
        "eventName": "MODIFY",
        "dynamodb": {"Keys": {"PK": {"S": pk}}, "SequenceNumber": str(seq), **extra},
    }


def throttled() -> ClientError:
    return ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "PutItem")


def test_each_items_records_run_in_stream_order_and_items_run_concurrently() -> None:
    seen: dict[str, list[int]] = {}
    threads: set[int] = set()
    barrier = threading.Barrier(3, timeout=5)

    def handle(r: dict[str, Any]) -> None:
        pk = r["dynamodb"]["Keys"]["PK"]["S"]
        if r["dynamodb"]["SequenceNumber"] in {"1", "2", "3"}:
            barrier.wait()  # the three items' first records run at the same time, or this times out
        threads.add(threading.get_ident())
        seen.setdefault(pk, []).append(int(r["dynamodb"]["SequenceNumber"]))

    batch = [record("a", 1), record("b", 2), record("c", 3), record("a", 4), record("b", 5), record("a", 6)]
    assert process_batch(batch, handle, poison=FakePoison(), max_workers=8) == {"batchItemFailures": []}
    assert seen == {"a": [1, 4, 6], "b": [2, 5], "c": [3]}
    assert len(threads) == 3


def test_a_transient_failure_stops_that_item_only_and_reports_where_to_retry_from() -> None:
    done: list[int] = []

    def handle(r: dict[str, Any]) -> None:
        seq = int(r["dynamodb"]["SequenceNumber"])
        if seq == 4:
            raise throttled()
        done.append(seq)

    batch = [record("a", 1), record("b", 2), record("a", 4), record("b", 5), record("a", 6)]
    poison = FakePoison()
    response = process_batch(batch, handle, poison=poison, max_workers=1)
    # a's later change (6) is not applied before its earlier one (4): Lambda retries from 4, with 6 after it.
    assert response == {"batchItemFailures": [{"itemIdentifier": "4"}]}
    assert sorted(done) == [1, 2, 5] and poison.parked == []


def test_a_permanent_failure_is_parked_with_its_reason_and_the_items_later_records_go_on() -> None:
    done: list[int] = []

    def handle(r: dict[str, Any]) -> None:
        seq = int(r["dynamodb"]["SequenceNumber"])
        if seq == 1:
            raise PermanentError("dueAt: 'tomorrow' is not a time")
        if seq == 2:
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "bad"}}, "CreateSchedule")
        done.append(seq)

    poison = FakePoison()
    response = process_batch([record("a", 1), record("a", 2), record("a", 3)], handle, poison=poison, max_workers=4)
    assert response == {"batchItemFailures": []}
    assert done == [3]
    assert [(r["dynamodb"]["SequenceNumber"], reason, code) for r, reason, code in poison.parked] == [
        ("1", "dueAt: 'tomorrow' is not a time", "PermanentError"),
        (
            "2",
            "ValidationException: An error occurred (ValidationException) when calling the CreateSchedule "
            "operation: bad",
            "ValidationException",
        ),
    ]


def test_a_record_the_poison_queue_cannot_take_stays_in_the_stream() -> None:
    def handle(r: dict[str, Any]) -> None:
        raise PermanentError("never")

    response = process_batch([record("a", 7)], handle, poison=FakePoison(broken=True), max_workers=1)
    assert response == {"batchItemFailures": [{"itemIdentifier": "7"}]}  # never lost: Lambda retries it


def test_a_record_without_keys_is_parked_not_grouped_with_others() -> None:
    poison = FakePoison()
    handled: list[str] = []

    def handle(r: dict[str, Any]) -> None:
        if "Keys" not in r["dynamodb"]:
            raise PermanentError("stream record has no dynamodb.Keys")
        handled.append(r["dynamodb"]["SequenceNumber"])

    unkeyed = {"eventID": "x", "dynamodb": {"SequenceNumber": "9"}}
    response = process_batch([unkeyed, record("a", 10)], handle, poison=poison, max_workers=2)
    assert response == {"batchItemFailures": []}
    assert handled == ["10"] and [reason for _, reason, _ in poison.parked] == ["stream record has no dynamodb.Keys"]


def test_a_group_handler_failing_transiently_retries_the_item_from_its_first_record() -> None:
    def group(records: list[dict[str, Any]]) -> list[Any]:
        raise TransientError("a race")

    response = process_batch(
        [record("a", 3), record("a", 8)],
        lambda r: None,
        poison=FakePoison(),
        max_workers=1,
        handle_group=group,
    )
    assert response == {"batchItemFailures": [{"itemIdentifier": "3"}]}


def test_a_group_handler_failing_for_good_falls_back_to_record_by_record() -> None:
    one_by_one: list[str] = []

    def group(records: list[dict[str, Any]]) -> list[Any]:
        raise ValueError("cannot merge these")

    def handle(r: dict[str, Any]) -> None:
        one_by_one.append(r["dynamodb"]["SequenceNumber"])

    response = process_batch(
        [record("a", 3), record("a", 8)],
        handle,
        poison=FakePoison(),
        max_workers=1,
        handle_group=group,
    )
    assert response == {"batchItemFailures": []} and one_by_one == ["3", "8"]


def test_permanent_outcome_classifies_and_bounds_the_reason() -> None:
    assert permanent_outcome(throttled(), "1") is None
    reason, code = permanent_outcome(ValueError("x" * 5000), "1") or ("", "")
    assert code == "ValueError" and len(reason) == 1000


@pytest.mark.parametrize(
    ("values", "expected"),
    [(["10", "9", "100"], ["9", "10", "100"]), (["49000000000000000000001", "5"], ["5", "49000000000000000000001"])],
)
def test_sequence_numbers_sort_as_numbers_not_text(values: list[str], expected: list[str]) -> None:
    assert sorted(values, key=sequence_order) == expected


def test_the_whole_batch_parks_malformed_records_and_merges_finish_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """handle_stream_batch: malformed records parked, `finish`'s sequence numbers joined to the failures, lowest
    first (Lambda retries from the lowest it is given)."""
    poison = FakePoison()
    monkeypatch.setattr(st_batch, "PoisonQueue", lambda *a, **k: poison)
    config = handler_config(ScheduledTableArgs(mode="eventbridge", max_workers=4), {Value.TABLE: "t"}, unnamed="q")

    def handle(r: dict[str, Any]) -> None:
        if r["dynamodb"]["SequenceNumber"] == "30":
            raise throttled()

    event = {"Records": [record("a", 30), "not a record", record("b", 12)]}
    response = handle_stream_batch(
        event, config, mode="eventbridge", handle=handle, clients=None, finish=lambda: ["12"]
    )
    assert response == {"batchItemFailures": [{"itemIdentifier": "12"}, {"itemIdentifier": "30"}]}
    assert [(thing, code) for thing, _, code in poison.parked] == [("not a record", "MalformedRecord")]


def test_in_parallel_keeps_the_order_runs_every_item_and_raises_the_first_failure_after() -> None:
    ran: list[int] = []
    lock = threading.Lock()
    at_once = threading.Barrier(4, timeout=5)

    def work(n: int) -> int:
        if n < 4:
            at_once.wait()  # four items run at the same time, or this times out
        with lock:
            ran.append(n)
        if n in (7, 3):
            raise ValueError(f"item {n}")
        return n * n

    assert st_batch.in_parallel(lambda n: n * n, list(range(30)), 4) == [n * n for n in range(30)]
    with pytest.raises(ValueError, match="item 3"):
        st_batch.in_parallel(work, list(range(12)), 4)
    assert sorted(ran) == list(range(12))  # every item ran, the failures' neighbours included
