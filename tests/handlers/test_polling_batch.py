"""polling's batched sends: the processor sends what it claimed up to 10 due events a call (SendMessageBatch to a
queue, PutEvents to a bus), so a herd costs a tenth of the requests. A batch call answers 200 even when it refused
some entries: each refused entry is backed off (or dead-lettered) by itself, never taken as sent, and what the
target took is completed once and never sent again."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import polling
import pytest
from botocore.exceptions import ClientError
from polling import sending
from st_core import dispatch
from st_core.clients import CLIENTS
from st_core.errors import PermanentError
from st_core.fifo import fifo_parameters

from components.targets import TopicTarget
from tests.conftest import REGION
from tests.handlers.conftest import Env, use_shards, with_due_index
from tests.handlers.faults import RefusedEntries, Throttled
from tests.handlers.test_polling import item as status
from tests.handlers.test_polling import pending
from tests.handlers.test_targets_bus_fifo import fifo_messages

NOW = float(int(time.time()))


@pytest.fixture
def polling_env(env: Env) -> Iterator[Env]:
    env = with_due_index(env)
    use_shards(env, 1)
    yield env


def received(env: Env) -> Counter[str]:
    return Counter(m["keys"]["PK"] for m in env.messages(env.due_queue_url))


def calls(operations: tuple[str, ...], service: str = "sqs") -> Counter[str]:
    """How many calls of each operation the handlers' client of `service` makes from now on, and how many entries
    (SendMessageBatch's `Entries`, PublishBatch's `PublishBatchRequestEntries`; one for a single send)."""
    counted: Counter[str] = Counter()

    def count(params: dict[str, Any], model: Any, **_: Any) -> None:
        counted[model.name] += 1
        counted["entries"] += len(params.get("Entries", params.get("PublishBatchRequestEntries", [params])))

    for operation in operations:
        CLIENTS.get(service).meta.events.register(f"before-parameter-build.{service}.{operation}", count)
    return counted


def test_a_tick_sends_its_due_events_ten_a_call(polling_env: Env) -> None:
    for n in range(25):
        pending(polling_env, f"r{n:02}", NOW - 5)
    counted = calls(("SendMessage", "SendMessageBatch"))
    assert polling.process(polling_env.config, now=lambda: NOW).dispatched == 25
    assert counted["SendMessage"] == 0 and counted["entries"] == 25
    assert 3 <= counted["SendMessageBatch"] <= 5  # 10 a call; the cold first page is smaller (16 items)
    assert received(polling_env) == Counter({f"r{n:02}": 1 for n in range(25)})


def test_a_refused_entry_is_backed_off_alone_and_the_others_are_done_once(polling_env: Env) -> None:
    for n in range(10):
        pending(polling_env, f"r{n}", NOW - 5)
    # GIVEN SQS refusing two entries of the batch (200, listed in Failed, an internal error)
    refusal = RefusedEntries(lambda entry: json.loads(entry["MessageBody"])["keys"]["PK"] in ("r3", "r7"))
    refusal.attach(CLIENTS.get("sqs"))
    report = polling.process(polling_env.config, now=lambda: NOW)
    # THEN the eight it took are done and received once; the two it refused wait for their backoff
    assert (report.dispatched, report.retried) == (8, 2) and len(refusal.refused) == 2
    assert received(polling_env) == Counter({f"r{n}": 1 for n in range(10) if n not in (3, 7)})
    for pk in ("r3", "r7"):
        backed_off = status(polling_env, pk)
        assert backed_off["stStatus"]["S"] == "RETRY" and backed_off["stAttempts"]["N"] == "1"
        assert backed_off["stDue"]["N"] == str(int(NOW) + 60) and "InternalError" in backed_off["stError"]["S"]
    assert polling.process(polling_env.config, now=lambda: NOW + 30).dispatched == 0  # not before the backoff
    # WHEN SQS takes them again: only those two are sent, once each
    refusal.refuse = lambda entry: False
    assert polling.process(polling_env.config, now=lambda: NOW + 61).dispatched == 2
    assert received(polling_env) == Counter({"r3": 1, "r7": 1})
    assert all(status(polling_env, f"r{n}")["stStatus"]["S"] == "DONE" for n in range(10))


def test_an_entry_refused_for_good_is_dead_lettered_with_the_reason(polling_env: Env) -> None:
    for n in range(3):
        pending(polling_env, f"r{n}", NOW - 5)
    refusal = RefusedEntries(
        lambda entry: json.loads(entry["MessageBody"])["keys"]["PK"] == "r1",
        code="InvalidParameterValue",
        sender_fault=True,
    )
    refusal.attach(CLIENTS.get("sqs"))
    report = polling.process(polling_env.config, now=lambda: NOW)
    assert (report.dispatched, report.failed) == (2, 1)
    assert status(polling_env, "r1")["stStatus"]["S"] == "FAILED" and "stDue" not in status(polling_env, "r1")
    CLIENTS.reset()
    sqs = boto3.client("sqs", region_name=REGION)
    [letter] = [
        json.loads(m["Body"])
        for m in sqs.receive_message(QueueUrl=polling_env.config["polling"]["deadLetterUrl"])["Messages"]
    ]
    assert letter["keys"]["PK"] == "r1" and "InvalidParameterValue" in letter["reason"]
    assert received(polling_env) == Counter({"r0": 1, "r2": 1})


def test_a_failed_batch_call_backs_off_every_entry_and_sends_none_twice(polling_env: Env) -> None:
    for n in range(4):
        pending(polling_env, f"r{n}", NOW - 5)
    throttled = iter([True])

    def throttle(**_: Any) -> None:
        if next(throttled, False):
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "SendMessageBatch")

    CLIENTS.get("sqs").meta.events.register("before-call.sqs.SendMessageBatch", throttle)
    assert polling.process(polling_env.config, now=lambda: NOW).retried == 4
    assert received(polling_env) == Counter()
    assert polling.process(polling_env.config, now=lambda: NOW + 61).dispatched == 4
    assert received(polling_env) == Counter({f"r{n}": 1 for n in range(4)})


def completing(pk: str, status_value: str) -> Callable[[dict[str, Any]], bool]:
    """Picks the processor's UpdateItem that settles `pk` (`:done`, `:failed` or `:retry`)."""
    return lambda params: params["Key"]["PK"]["S"] == pk and f":{status_value}" in params["ExpressionAttributeValues"]


def ten_due_in_one_batch(env: Env) -> None:
    env.configure(max_workers=10)  # the tick's first page is the ten: one batch
    for n in range(10):
        pending(env, f"r{n}", NOW - 5)


def statuses(env: Env, count: int) -> dict[str, str]:
    return {f"r{n}": status(env, f"r{n}")["stStatus"]["S"] for n in range(count)}


def test_a_completion_throttled_for_good_leaves_its_entry_alone_due_and_the_rest_done_once(
    polling_env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    ten_due_in_one_batch(polling_env)
    # GIVEN DynamoDB throttling r2's completion, past the SDK's and the processor's retries (a herd's hot partition)
    throttle = Throttled(completing("r2", "done"))
    throttle.attach(CLIENTS.get("dynamodb"), "UpdateItem")
    # WHEN the tick sends the ten in one batch: it fails (the error the alarm counts), after completing the others
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):
        polling.process(polling_env.config, now=lambda: NOW)
    assert throttle.throttled == 5  # persist's five attempts
    assert received(polling_env) == Counter({f"r{n}": 1 for n in range(10)})
    assert statuses(polling_env, 10) == {f"r{n}": "PENDING" if n == 2 else "DONE" for n in range(10)}
    [metric] = [json.loads(r.getMessage()) for r in caplog.records if '"_aws"' in r.getMessage()]
    assert (metric["Dispatched"], metric["Unsettled"]) == (9, 1)
    # THEN the next tick sends only r2 again (at least once for the one whose completion failed), none other
    throttle.detach()
    assert polling.process(polling_env.config, now=lambda: NOW + 60).dispatched == 1
    assert received(polling_env) == Counter({"r2": 1})
    assert set(statuses(polling_env, 10).values()) == {"DONE"}


def test_a_backoff_or_dead_letter_write_that_fails_leaves_the_rest_of_the_batch_settled(
    polling_env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    ten_due_in_one_batch(polling_env)
    # GIVEN two items whose due event cannot be built (refused for good before any send: an email target's rendering
    # over its limit, say), and SQS refusing two entries of the batch for good (a sender fault)...
    build = sending.target_input

    def target_input(target: Any, event: Any, **kwargs: Any) -> str:
        if event["keys"]["PK"] in ("r1", "r4"):
            raise PermanentError("the email rendered from this item is 300000 bytes, over the 262000 allowed")
        return build(target, event, **kwargs)

    monkeypatch.setattr(sending, "target_input", target_input)
    refusal = RefusedEntries(
        lambda entry: json.loads(entry["MessageBody"])["keys"]["PK"] in ("r6", "r8"),
        code="InvalidParameterValue",
        sender_fault=True,
    )
    refusal.attach(CLIENTS.get("sqs"))
    # ... and DynamoDB throttling the write that parks r1 (before the send) and r6 (after it)
    throttle = Throttled(lambda params: completing("r1", "failed")(params) or completing("r6", "failed")(params))
    throttle.attach(CLIENTS.get("dynamodb"), "UpdateItem")
    with pytest.raises(ClientError, match="ProvisionedThroughputExceeded"):
        polling.process(polling_env.config, now=lambda: NOW)
    # THEN the batch was still sent, and every other entry settled: r4 and r8 parked, the rest done, once each
    assert received(polling_env) == Counter({f"r{n}": 1 for n in (0, 2, 3, 5, 7, 9)})
    settled = {"r1": "PENDING", "r4": "FAILED", "r6": "PENDING", "r8": "FAILED"}
    assert statuses(polling_env, 10) == {f"r{n}": settled.get(f"r{n}", "DONE") for n in range(10)}


def test_an_item_deleted_after_the_index_read_is_not_sent_nor_written_back(polling_env: Env) -> None:
    for n in range(5):
        pending(polling_env, f"r{n}", NOW - 5)
    cancelled = iter(["r1"])

    def user_deletes(**_: Any) -> None:  # right after the page is read: the index (and the page) still show it
        pk = next(cancelled, None)
        if pk is not None:
            polling_env.delete(pk, "T")

    CLIENTS.get("dynamodb").meta.events.register("after-call.dynamodb.Query", user_deletes)
    report = polling.process(polling_env.config, now=lambda: NOW)
    assert (report.dispatched, report.skipped) == (4, 1)
    assert received(polling_env) == Counter({"r0": 1, "r2": 1, "r3": 1, "r4": 1})
    # no phantom: the consistent read did not find it, nothing wrote the deleted item back
    assert status(polling_env, "r1") == {}


@pytest.mark.parametrize("on_done", ["mark", "delete"])
def test_a_cancel_between_the_read_and_the_batch_is_too_late_it_is_sent_once_and_not_written_back(
    polling_env: Env, on_done: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A delete that lands after the consistent read, while the batch is on its way, does not stop the send (the
    due event was built from that read): the item is sent once, its completion is refused (the item is not as it
    was read), and nothing writes the deleted item back."""
    polling_env.configure(on_done=on_done)
    for n in range(5):
        pending(polling_env, f"r{n}", NOW - 5)
    cancelled = iter(["r1"])

    def user_deletes(**_: Any) -> None:  # every item of the batch read, the batch about to be sent
        pk = next(cancelled, None)
        if pk is not None:
            assert status(polling_env, pk)["stStatus"]["S"] == "PENDING"
            polling_env.delete(pk, "T")

    CLIENTS.get("sqs").meta.events.register("before-parameter-build.sqs.SendMessageBatch", user_deletes)
    assert polling.process(polling_env.config, now=lambda: NOW).dispatched == 5
    assert received(polling_env) == Counter({f"r{n}": 1 for n in range(5)})
    assert status(polling_env, "r1") == {}
    assert any('"changed-since-sent"' in r.getMessage() and '"r1"' in r.getMessage() for r in caplog.records)
    # and no later tick sends it again
    assert polling.process(polling_env.config, now=lambda: NOW + 60).dispatched == 0
    assert received(polling_env) == Counter()


# -- dispatch.send_many, the registry's batch path ------------------------------------------------------------------


class Recorder:
    """A client registry whose SQS, SNS and EventBridge clients record calls and answer as AWS does."""

    def __init__(self, refuse: set[int] | None = None, queue_bytes: int = 1024 * 1024) -> None:
        self.calls: list[tuple[str, int]] = []
        self.refuse = refuse or set()
        # the queue's (or topic's) MaximumMessageSize, which bounds a batch's total too
        self.queue_bytes = queue_bytes

    def get(self, service: str) -> Recorder:
        return self

    def get_queue_url(self, **_: Any) -> dict[str, str]:
        return {"QueueUrl": "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"}

    def send_message(self, MessageBody: str, **_: Any) -> dict[str, str]:
        self.calls.append(("SendMessage", 1))
        if len(MessageBody) > self.queue_bytes:
            raise self._refused("InvalidParameterValue", "One or more parameters are invalid", "SendMessage")
        return {"MessageId": "m"}

    def send_message_batch(self, Entries: list[dict[str, Any]], **_: Any) -> dict[str, Any]:
        self.calls.append(("SendMessageBatch", len(Entries)))
        if sum(len(e["MessageBody"]) for e in Entries) > self.queue_bytes:
            raise self._refused("AWS.SimpleQueueService.BatchRequestTooLong", "too long", "SendMessageBatch")
        return self._listed(Entries)

    def publish(self, Message: str, **_: Any) -> dict[str, str]:
        self.calls.append(("Publish", 1))
        if len(Message) > self.queue_bytes:
            raise self._refused("InvalidParameter", "Message too long", "Publish")
        return {"MessageId": "m"}

    def publish_batch(self, PublishBatchRequestEntries: list[dict[str, Any]], **_: Any) -> dict[str, Any]:
        entries = PublishBatchRequestEntries
        self.calls.append(("PublishBatch", len(entries)))
        if sum(len(e["Message"]) for e in entries) > self.queue_bytes:
            raise self._refused("BatchRequestTooLong", "too long", "PublishBatch")
        return self._listed(entries)

    def _listed(self, entries: list[dict[str, Any]]) -> dict[str, Any]:
        """A 200 listing the entries taken and those refused (an internal error)."""
        return {
            "Successful": [{"Id": e["Id"], "MessageId": "m"} for e in entries if int(e["Id"]) not in self.refuse],
            "Failed": [
                {"Id": e["Id"], "Code": "InternalError", "SenderFault": False, "Message": "try again"}
                for e in entries
                if int(e["Id"]) in self.refuse
            ],
        }

    @staticmethod
    def _refused(code: str, message: str, operation: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": message}}, operation)

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(("PutEvents", len(Entries)))
        answers = [
            {"ErrorCode": "ThrottlingException", "ErrorMessage": "slow"} if n in self.refuse else {"EventId": "e"}
            for n in range(len(Entries))
        ]
        return {"FailedEntryCount": len(self.refuse), "Entries": answers}


QUEUE = {"kind": "sqs", "arn": "arn:aws:sqs:eu-west-1:123456789012:jobs"}
BUS = {
    "kind": "events",
    "arn": "arn:aws:events:eu-west-1:123456789012:event-bus/orders",
    "source": "scheduled-table",
    "detailType": "due",
}


def test_batches_hold_ten_entries_and_at_most_the_calls_bytes() -> None:
    assert dispatch.packed([1] * 25, 10, 100) == [list(range(10)), list(range(10, 20)), list(range(20, 25))]
    # 50 + 60 would pass 100: a new batch; 200 alone is over the limit: a batch of its own
    assert dispatch.packed([50, 60, 10, 200, 5], 10, 100) == [[0], [1, 2], [3], [4]]
    assert dispatch.packed([], 10, 100) == []


def test_send_many_reports_each_refused_entry_and_sends_the_oversized_alone() -> None:
    clients = Recorder(refuse={1})
    batch = [("a", "o1"), ("b", "o2"), ("x" * 300 * 1024, "o3"), ("c", "o4")]
    results = dispatch.send_many(QUEUE, batch, clients=clients)  # type: ignore[arg-type]
    assert [r is None for r in results] == [True, False, True, True]
    assert "InternalError" in str(results[1])
    # 300 KiB is over SendMessageBatch's 256 KiB: SendMessage by itself, between the batches around it
    assert clients.calls == [("SendMessageBatch", 2), ("SendMessage", 1), ("SendMessageBatch", 1)]


def test_a_batch_refused_whole_for_its_total_size_sends_each_entry_alone() -> None:
    # GIVEN a 64 KiB queue: three 30 KiB entries fit it one by one, not together; a 70 KiB one fits neither way
    clients = Recorder(queue_bytes=64 * 1024)
    batch = [("a" * 30 * 1024, "o1"), ("b" * 30 * 1024, "o2"), ("c" * 70 * 1024, "o3"), ("d" * 30 * 1024, "o4")]
    results = dispatch.send_many(QUEUE, batch, clients=clients)  # type: ignore[arg-type]
    # THEN the refused call is followed by one SendMessage an entry: the three that fit are sent, the other is
    # refused by itself (parked with SQS's reason, its neighbours not)
    assert clients.calls == [("SendMessageBatch", 4)] + [("SendMessage", 1)] * 4
    assert [r is None for r in results] == [True, True, False, True] and "InvalidParameterValue" in str(results[2])


def test_put_events_entries_refused_in_a_200_are_errors_of_their_own() -> None:
    clients = Recorder(refuse={0, 2})
    results = dispatch.send_many(BUS, [("{}", f"o{n}") for n in range(12)], clients=clients)  # type: ignore[arg-type]
    assert clients.calls == [("PutEvents", 10), ("PutEvents", 2)]
    refused = [n for n, r in enumerate(results) if r is not None]
    assert refused == [0, 2, 10] and "ThrottlingException" in str(results[0])


def test_a_kind_without_a_batch_call_is_sent_one_call_an_entry() -> None:
    sent: list[str] = []

    class Lambda:
        def invoke(self, **kwargs: Any) -> None:
            sent.append(kwargs["Payload"].decode())

    class Clients:
        def get(self, service: str) -> Lambda:
            return Lambda()

    target = {"kind": "lambda", "arn": "arn:aws:lambda:eu-west-1:123456789012:function:notify"}
    results = dispatch.send_many(target, [("1", "o1"), ("2", "o2")], clients=Clients())  # type: ignore[arg-type]
    assert results == [None, None] and sent == ["1", "2"] and dispatch.batch_entries(target) == 1  # type: ignore[arg-type]


# -- SNS topics: PublishBatch ---------------------------------------------------------------------------------------


def topic_target(env: Env, *, fifo: bool = False) -> str:
    """The env's target moved to a topic (FIFO: without content-based deduplication) with a queue of its kind
    subscribed raw, so what the topic publishes is read as the due queue's messages: the queue's URL."""
    sns = boto3.client("sns", region_name=REGION)
    name = f"due-{env.table}" + (".fifo" if fifo else "")
    topic_attributes = {"FifoTopic": "true", "ContentBasedDeduplication": "false"} if fifo else {}
    topic = sns.create_topic(Name=name, Attributes=topic_attributes)["TopicArn"]
    queue_attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "false"} if fifo else {}
    url = env.sqs.create_queue(QueueName=name, Attributes=queue_attributes)["QueueUrl"]
    queue_arn = env.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    env.configure(target=TopicTarget(topic_arn=topic))
    env.due_queue_url = url
    return url


def published() -> Counter[str]:
    """How many Publish and PublishBatch calls the handlers' SNS client makes from now on, and how many entries."""
    return calls(("Publish", "PublishBatch"), "sns")


def test_a_tick_publishes_its_due_events_to_a_topic_ten_a_call(polling_env: Env) -> None:
    topic_target(polling_env)
    for n in range(25):
        pending(polling_env, f"r{n:02}", NOW - 5)
    counted = published()
    assert polling.process(polling_env.config, now=lambda: NOW).dispatched == 25
    assert counted["Publish"] == 0 and counted["entries"] == 25
    assert 3 <= counted["PublishBatch"] <= 5  # 10 a call; the cold first page is smaller (16 items)
    assert received(polling_env) == Counter({f"r{n:02}": 1 for n in range(25)})


def test_an_entry_the_topic_refuses_is_backed_off_alone_and_the_others_are_done_once(polling_env: Env) -> None:
    topic_target(polling_env)
    for n in range(10):
        pending(polling_env, f"r{n}", NOW - 5)
    # GIVEN SNS refusing one entry of the batch (200, listed in Failed, throttled) and leaving one out of its answer
    refusal = RefusedEntries(lambda entry: json.loads(entry["Message"])["keys"]["PK"] == "r3", code="Throttled")
    refusal.attach(CLIENTS.get("sns"))
    unlisted: list[str] = []

    def keep_entries(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["entries"] = params["PublishBatchRequestEntries"]

    def leave_out_r7(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        ids = [e["Id"] for e in context["entries"] if json.loads(e["Message"])["keys"]["PK"] == "r7"]
        parsed["Successful"] = [e for e in parsed["Successful"] if e["Id"] not in ids]
        unlisted.extend(ids)

    CLIENTS.get("sns").meta.events.register("before-parameter-build.sns.PublishBatch", keep_entries)
    CLIENTS.get("sns").meta.events.register("after-call.sns.PublishBatch", leave_out_r7)
    report = polling.process(polling_env.config, now=lambda: NOW)
    # THEN the eight it took are done; the refused one and the one in neither list wait for their backoff
    assert (report.dispatched, report.retried, report.failed) == (8, 2, 0)
    assert len(refusal.refused) == 1 and len(unlisted) == 1
    for pk in ("r3", "r7"):
        backed_off = status(polling_env, pk)
        assert backed_off["stStatus"]["S"] == "RETRY" and backed_off["stAttempts"]["N"] == "1"
        assert backed_off["stDue"]["N"] == str(int(NOW) + 60)
    assert "Throttled" in status(polling_env, "r3")["stError"]["S"]
    assert statuses(polling_env, 10) == {f"r{n}": "RETRY" if n in (3, 7) else "DONE" for n in range(10)}
    assert received(polling_env)["r3"] == 0


# What refusing a whole batch for its size looks like, by the target's service: (batch operation, its entries'
# parameter, an entry's body, the code of the refusal, the single send).
TOO_LONG = {
    "sqs": ("SendMessageBatch", "Entries", "MessageBody", "AWS.SimpleQueueService.BatchRequestTooLong", "SendMessage"),
    "sns": ("PublishBatch", "PublishBatchRequestEntries", "Message", "BatchRequestTooLong", "Publish"),
}


@pytest.mark.parametrize("service", ["sqs", "sns"])
def test_a_batch_refused_for_its_total_size_is_sent_one_entry_a_call(polling_env: Env, service: str) -> None:
    # GIVEN a queue whose MaximumMessageSize (64 KiB) is below what a batch may total (256 KiB), or a topic: the
    # service refuses the whole batch of five 20 KiB due events, though each fits the queue or topic by itself
    if service == "sns":
        topic_target(polling_env)
    operation, listed, body, code, single = TOO_LONG[service]
    for n in range(5):
        pending(polling_env, f"r{n}", NOW - 5, blob="x" * 20 * 1024)
    refused: list[int] = []

    def too_long(params: dict[str, Any], **_: Any) -> None:
        if sum(len(entry[body]) for entry in params[listed]) > 64 * 1024:
            refused.append(len(params[listed]))
            error = {"Code": code, "Message": "Batch requests cannot be longer"}
            raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)

    CLIENTS.get(service).meta.events.register(f"before-parameter-build.{service}.{operation}", too_long)
    counted = calls((single, operation), service)
    # THEN each is sent alone and done, once; none is backed off or dead-lettered for its neighbours' size
    report = polling.process(polling_env.config, now=lambda: NOW)
    assert (report.dispatched, report.retried, report.failed) == (5, 0, 0) and refused == [5]
    assert counted[single] == 5
    assert received(polling_env) == Counter({f"r{n}": 1 for n in range(5)})
    assert set(statuses(polling_env, 5).values()) == {"DONE"}


def test_a_fifo_topics_batch_carries_each_entrys_group_and_deduplication_id(polling_env: Env) -> None:
    url = topic_target(polling_env, fifo=True)
    for n in range(3):
        pending(polling_env, f"r{n}", NOW - 5)
    sent: list[dict[str, Any]] = []
    CLIENTS.get("sns").meta.events.register(
        "before-parameter-build.sns.PublishBatch",
        lambda params, **_: sent.extend(params["PublishBatchRequestEntries"]),
    )
    assert polling.process(polling_env.config, now=lambda: NOW).dispatched == 3
    # THEN one call; each entry with its item's group and its occurrence's deduplication id, as Publish gives them
    assert len(sent) == 3
    for entry in sent:
        occurrence = json.loads(entry["Message"])["occurrenceId"]
        fifo = fifo_parameters(polling_env.config["target"], entry["Message"], occurrence)
        assert fifo["MessageGroupId"] and fifo["MessageDeduplicationId"] == occurrence
        assert (entry["MessageGroupId"], entry["MessageDeduplicationId"]) == (
            fifo["MessageGroupId"],
            fifo["MessageDeduplicationId"],
        )
    found = fifo_messages(polling_env, url)
    assert sorted(body["keys"]["PK"] for body, _, _ in found) == ["r0", "r1", "r2"]
    assert {(group, dedupe) for _, group, dedupe in found} == {
        (e["MessageGroupId"], e["MessageDeduplicationId"]) for e in sent
    }


TOPIC = {"kind": "sns", "arn": "arn:aws:sns:eu-west-1:123456789012:news"}


def test_send_many_publishes_ten_a_call_and_the_oversized_alone() -> None:
    clients = Recorder(refuse={1}, queue_bytes=256 * 1024)
    batch = [("a", "o1"), ("b", "o2"), ("x" * 300 * 1024, "o3")] + [(str(n), f"p{n}") for n in range(12)]
    results = dispatch.send_many(TOPIC, batch, clients=clients)  # type: ignore[arg-type]
    assert dispatch.batch_entries(TOPIC) == 10  # type: ignore[arg-type]
    # 300 KiB is over PublishBatch's 256 KiB: Publish by itself (refused, as the topic refuses it), between batches
    assert clients.calls == [("PublishBatch", 2), ("Publish", 1), ("PublishBatch", 10), ("PublishBatch", 2)]
    # each call's second entry refused (its Id "1"): positions 1, 4 and 14, matched by Id to the right due event
    assert [n for n, r in enumerate(results) if r is not None] == [1, 2, 4, 14]
    assert "InternalError" in str(results[1]) and "InvalidParameter" in str(results[2])


def test_a_publish_batch_refused_whole_for_its_total_size_publishes_each_entry_alone() -> None:
    clients = Recorder(queue_bytes=64 * 1024)
    batch = [("a" * 30 * 1024, "o1"), ("b" * 30 * 1024, "o2"), ("c" * 70 * 1024, "o3"), ("d" * 30 * 1024, "o4")]
    results = dispatch.send_many(TOPIC, batch, clients=clients)  # type: ignore[arg-type]
    assert clients.calls == [("PublishBatch", 4)] + [("Publish", 1)] * 4
    assert [r is None for r in results] == [True, True, False, True] and "InvalidParameter" in str(results[2])
