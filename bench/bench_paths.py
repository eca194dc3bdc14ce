"""Benchmark 6: paths that were only computed before, counted call by call against moto, each beside the nearest
hand-written alternative in the same run (`python -m bench paths`).

- second precision (`precision="second"`): what the stream handler calls per new item (a release schedule and a
  ledger marker), then the releaser per occurrence when its second comes (GetItem, claim, send, complete), with
  the releaser's process CPU and a Lambda cost per million occurrences; beside seed 000's hand-written handler,
  one CreateSchedule per item straight to the target (minute precision: Scheduler fires anywhere in the minute).
- recurring items: calls per create and per update of an item holding `rate(...)`; beside a hand-written handler
  (seed 000 has no recurring items) making one CreateSchedule per INSERT and one UpdateSchedule per MODIFY.
- event bus and FIFO queue targets: calls per delivered item (`dispatch.send_now`, as every mode delivers);
  beside a hand-written loop making the same PutEvents / SendMessage (with MessageGroupId and a deduplication id)
  per item.

Calls are counted by operation on the instrumented clients (`BenchClients`, 10 ms injected per call); what a
path costs on AWS follows from its calls, priced as in bench/bench_scale.py's notes (us-east-1 list prices, taken
2026-11-21: Lambda $0.0000166667 per GB-s at 1,024 MB, $0.20 per million requests)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from .baselines import seed000
from .bench_eventbridge import config_for
from .harness import ACCOUNT, REGION, BenchClients, aws, expect, sized, stream_record, table

ITEMS = 200


def _count() -> int:
    """Items a path: ITEMS, or a few in the small run."""
    return sized(ITEMS, 10)


GB_SECOND = 0.0000166667
REQUEST = 0.20 / 1_000_000


def _setup(clients: BenchClients) -> dict[str, Any]:
    group = f"g-{uuid.uuid4().hex[:8]}"
    clients.get("scheduler").create_schedule_group(Name=group)
    queue = clients.get("sqs").create_queue(QueueName=f"q-{group}")["QueueUrl"]
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:q-{group}"
    ddb = clients.get("dynamodb")
    for name, key in ((f"ledger-{group}", [("id", "HASH")]), ("bench", [("PK", "HASH"), ("SK", "RANGE")])):
        ddb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": a, "KeyType": k} for a, k in key],
            AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a, _ in key],
            BillingMode="PAY_PER_REQUEST",
        )
    return config_for(group, queue, arn, f"ledger-{group}")


def _per_item(clients: BenchClients, items: int) -> tuple[float, str]:
    calls = clients.log.calls
    return clients.log.total() / items, ", ".join(f"{op} {n / items:.2f}" for op, n in sorted(calls.items()))


def _seed(event: dict[str, Any], config: dict[str, Any], clients: BenchClients) -> int:
    """Seed 000's handler on `event`; the records it could not handle (it raises on the first)."""
    scheduler, arn = config["scheduler"], config["target"]["arn"]
    failed = 0
    for record in event["Records"]:
        try:
            seed000.handler(
                {"Records": [record]},
                clients=clients,
                group=scheduler["group"],
                role_arn=scheduler["roleArn"],
                target_arn=arn,
                dlq_arn=arn,
            )
        except Exception:
            failed += 1
    return failed


def _hand_recurring(event: dict[str, Any], config: dict[str, Any], clients: BenchClients) -> int:
    """The nearest hand-written recurring handler (seed 000 has none): the item's expression as the schedule's,
    named after the item's key; CreateSchedule on INSERT, UpdateSchedule on MODIFY, one call each, no checks."""
    scheduler, arn = clients.get("scheduler"), config["target"]["arn"]
    failed = 0
    for record in event["Records"]:
        request = {
            "Name": record["dynamodb"]["Keys"]["PK"]["S"].replace("#", "-"),
            "GroupName": config["scheduler"]["group"],
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "ScheduleExpression": record["dynamodb"]["NewImage"]["dueAt"]["S"],
            "Target": {"RoleArn": config["scheduler"]["roleArn"], "Arn": arn, "Input": "{}"},
        }
        try:
            if record["eventName"] == "INSERT":
                scheduler.create_schedule(**request)
            else:
                scheduler.update_schedule(**request)
        except Exception:
            failed += 1
    return failed


def _records(value: Any, *, modify_to: Any = None) -> list[dict[str, Any]]:
    out = []
    for n in range(_count()):
        keys = {"PK": {"S": f"user#{n}"}, "SK": {"S": "x"}}
        first = value(n)
        record = stream_record(keys, {"dueAt": {"S": first}}, n)
        out.append(record)
        if modify_to is not None:
            moved = stream_record(keys, {"dueAt": {"S": modify_to(n)}}, _count() + n)
            moved["eventName"] = "MODIFY"
            moved["dynamodb"]["OldImage"] = {**keys, "dueAt": {"S": first}}
            out.append(moved)
    return out


def _hold(clients: BenchClients, value: Callable[[int], str]) -> None:
    """The table holds every item with its due time or expression (as it does when its stream record is
    processed: the handler reads the batch's items back before it schedules)."""
    ddb = clients.get("dynamodb")
    for n in range(_count()):
        ddb.put_item(TableName="bench", Item={"PK": {"S": f"user#{n}"}, "SK": {"S": "x"}, "dueAt": {"S": value(n)}})


def _schedules(clients: BenchClients, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The group's schedules, each as Scheduler describes it (read after the measured calls were counted)."""
    scheduler, group = clients.get("scheduler"), config["scheduler"]["group"]
    names = [
        s["Name"] for p in scheduler.get_paginator("list_schedules").paginate(GroupName=group) for s in p["Schedules"]
    ]
    return [scheduler.get_schedule(Name=name, GroupName=group) for name in names]


def _recurring() -> tuple[list[list[Any]], dict[str, float]]:
    from eventbridge import handle_batch

    creates = _records(lambda n: "rate(1 day)")
    updates = [
        r for r in _records(lambda n: "rate(1 day)", modify_to=lambda n: "rate(2 days)") if r["eventName"] == "MODIFY"
    ]
    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    with aws():
        clients = BenchClients()
        config = _setup(clients)
        _hold(clients, lambda n: "rate(1 day)")
        clients.log.reset()
        assert handle_batch({"Records": creates}, config, clients=clients) == {"batchItemFailures": []}  # type: ignore[arg-type]
        per, detail = _per_item(clients, _count())
        expressions = [s["ScheduleExpression"] for s in _schedules(clients, config)]
        expect("paths: recurring schedules made", expressions, ["rate(1 day)"] * _count())
        rows.append(["ours: recurring, create", _count(), per, detail, 0])
        figures["paths_recurring_calls_per_create"] = per
        _hold(clients, lambda n: "rate(2 days)")
        clients.log.reset()
        assert handle_batch({"Records": updates}, config, clients=clients) == {"batchItemFailures": []}  # type: ignore[arg-type]
        per, detail = _per_item(clients, _count())
        expressions = [s["ScheduleExpression"] for s in _schedules(clients, config)]
        expect("paths: recurring schedules updated", expressions, ["rate(2 days)"] * _count())
        rows.append(["ours: recurring, update (expression changed)", _count(), per, detail, 0])
        figures["paths_recurring_calls_per_update"] = per
    with aws():
        clients = BenchClients()
        config = _setup(clients)
        clients.log.reset()
        failed = _hand_recurring({"Records": creates}, config, clients)
        per, detail = _per_item(clients, _count())
        rows.append(["hand-written (Create/UpdateSchedule per record): create", _count(), per, detail, failed])
        clients.log.reset()
        failed = _hand_recurring({"Records": updates}, config, clients)
        per, detail = _per_item(clients, _count())
        rows.append(["hand-written: update", _count(), per, detail, failed])
    return rows, figures


def _second() -> tuple[list[list[Any]], dict[str, float]]:
    from eventbridge import handle_batch
    from st_core import release

    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    ahead = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)

    def ahead_by(n: int) -> str:
        return (ahead + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")

    creates = _records(ahead_by)
    with aws():
        clients = BenchClients()
        config = _setup(clients)
        _hold(clients, ahead_by)
        sqs = clients.get("sqs")
        url = sqs.create_queue(QueueName=f"release-{uuid.uuid4().hex[:6]}")["QueueUrl"]
        name = url.rsplit("/", 1)[-1]
        queue = (f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}", url)
        scheduler, ledger = config["scheduler"], config["eventbridge"]["ledgerTable"]
        config = config_for(scheduler["group"], config["poisonQueueUrl"], config["target"]["arn"], ledger, queue)
        clients.log.reset()
        assert handle_batch({"Records": creates}, config, clients=clients) == {"batchItemFailures": []}  # type: ignore[arg-type]
        per, detail = _per_item(clients, _count())
        expect("paths: release schedules made", len(_schedules(clients, config)), _count())
        rows.append(["ours: second precision, stream handler per new item", _count(), per, detail, 0])
        figures["paths_second_calls_per_create"] = per
        # The releaser, once each occurrence's second has come (the item holds it; the message arrives on time).
        due = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
        ddb = clients.get("dynamodb")
        messages = []
        for n in range(_count()):
            keys = {"PK": {"S": f"due#{n}"}, "SK": {"S": "x"}}
            ddb.put_item(TableName="bench", Item={**keys, "dueAt": {"S": due.strftime("%Y-%m-%dT%H:%M:%SZ")}})
            payload = json.dumps({"keys": {"PK": f"due#{n}", "SK": "x"}, "dueAt": due.isoformat(), "item": {}})
            body = release.envelope(release.Release(f"occ-{n}", due, due, keys, payload))
            messages.append({"messageId": str(n), "body": body, "attributes": {"ApproximateReceiveCount": "1"}})
        clients.log.reset()
        cpu = time.process_time()
        for start in range(0, _count(), 10):  # the release queue's batches of 10
            answer = release.handle_messages({"Records": messages[start : start + 10]}, config, clients=clients)  # type: ignore[arg-type]
            assert answer == {"batchItemFailures": []}, answer
        cpu = (time.process_time() - cpu) / _count()
        per, detail = _per_item(clients, _count())
        delivered = clients.log.calls.get("SendMessage", 0)
        expect("paths: occurrences the releaser delivered", delivered, _count())
        # Lambda at 1,024 MB: the occurrence's CPU plus its calls' round trips (10 ms each, one after another),
        # and a request per batch of 10.
        cost = ((cpu + per * 0.010) * GB_SECOND + REQUEST / 10) * 1_000_000
        rows.append(
            [
                f"ours: second precision, releaser per occurrence ({cpu * 1000:.2f} ms CPU, ${cost:.2f} per million)",
                _count(),
                per,
                detail,
                _count() - delivered,
            ]
        )
        figures.update(
            paths_second_release_calls_per_occurrence=per,
            paths_second_release_cpu_ms=cpu * 1000,
            paths_second_release_usd_per_million=cost,
        )
        rows += _recurring_firings(clients, config)
    with aws():
        clients = BenchClients()
        config = _setup(clients)
        clients.log.reset()
        failed = _seed({"Records": creates}, config, clients)
        per, detail = _per_item(clients, _count())
        expect("paths: seed 000's schedules made", len(_schedules(clients, config)), _count())
        rows.append(["seed 000 (hand-written), minute precision: per new item", _count(), per, detail, failed])
    return rows, figures


def _recurring_firings(clients: BenchClients, config: dict[str, Any]) -> list[list[Any]]:
    """The releaser per recurring firing at second precision (Scheduler's copy, through the release queue), then
    the same messages again (Scheduler invoking twice, SQS delivering again): a claim refused, nothing sent."""
    from st_core import release
    from st_core.naming import SCHEDULED_TIME
    from st_core.timeparse import format_due

    fired = format_due(datetime.now(UTC).replace(second=0, microsecond=0))
    messages = []
    for n in range(_count()):
        keys = {"PK": {"S": f"rate#{n}"}, "SK": {"S": "x"}}
        payload = json.dumps({"keys": {"PK": f"rate#{n}", "SK": "x"}, "dueAt": SCHEDULED_TIME, "item": {}})
        body = release.recurring_envelope(f"rate-{n}", keys, payload).replace(SCHEDULED_TIME, fired)
        messages.append({"messageId": str(n), "body": body, "attributes": {"ApproximateReceiveCount": "1"}})
    rows: list[list[Any]] = []
    for label in ("releaser per recurring firing", "the same firings again (duplicates)"):
        clients.log.reset()
        for start in range(0, _count(), 10):
            answer = release.handle_messages({"Records": messages[start : start + 10]}, config, clients=clients)  # type: ignore[arg-type]
            assert answer == {"batchItemFailures": []}, answer
        per, detail = _per_item(clients, _count())
        sent = clients.log.calls.get("SendMessage", 0)
        expect(f"paths: recurring firings sent ({label})", sent, _count() if not rows else 0)
        rows.append([f"ours: second precision, {label}", _count(), per, detail, 0])
    return rows


def _targets() -> tuple[list[list[Any]], dict[str, float]]:
    from st_core.dispatch import send_now

    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    with aws():
        clients = BenchClients()
        events = clients.get("events")
        bus = events.create_event_bus(Name="due")["EventBusArn"]
        sqs = clients.get("sqs")
        fifo_url = sqs.create_queue(
            QueueName="due.fifo", Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "false"}
        )["QueueUrl"]
        fifo = f"arn:aws:sqs:{REGION}:{ACCOUNT}:due.fifo"
        payloads = [json.dumps({"keys": {"PK": f"u{n}"}, "dueAt": "2026-11-25T12:00:00Z"}) for n in range(_count())]
        for label, target in (
            ("event bus", {"kind": "events", "arn": bus, "detailType": "scheduled-table.due", "source": "st"}),
            ("FIFO queue", {"kind": "sqs", "arn": fifo}),
        ):
            clients.log.reset()
            for n, payload in enumerate(payloads):
                send_now(target, payload, occurrence=f"occ-{n}", clients=clients)  # type: ignore[arg-type]
            per, detail = _per_item(clients, _count())
            expect(f"paths: {label} sends", clients.log.calls["PutEvents"] + clients.log.calls["SendMessage"], _count())
            rows.append([f"ours: {label} dispatch (send_now)", _count(), per, detail, 0])
            figures[f"paths_{label.split()[1]}_calls_per_item"] = per
            clients.log.reset()
            for n, payload in enumerate(payloads):  # the hand-written loop
                if target["kind"] == "events":
                    entry = {"EventBusName": bus, "Source": "st", "DetailType": "due", "Detail": payload}
                    events.put_events(Entries=[entry])
                else:
                    sqs.send_message(
                        QueueUrl=fifo_url, MessageBody=payload, MessageGroupId=f"u{n}", MessageDeduplicationId=f"o{n}"
                    )
            per, detail = _per_item(clients, _count())
            rows.append([f"hand-written loop: {label}", _count(), per, detail, 0])
    return rows, figures


def run() -> tuple[str, dict[str, float]]:
    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    for part in (_second, _recurring, _targets):
        found_rows, found = part()
        rows += found_rows
        figures.update(found)
    note = (
        f"{_count()} items per path, moto with 10 ms injected per call, calls counted by operation (per item). "
        "'not handled': records a hand-written handler raised on, or occurrences the releaser did not deliver. "
        "Second precision costs, per occurrence, its release schedule and ledger marker at write time and the "
        "releaser's calls at its second, against one schedule for minute precision; the releaser's CPU is this "
        "process's, so a busy machine inflates it. See bench/bench_paths.py."
    )
    header = ["path", "items", "calls / item", "by operation (per item)", "not handled"]
    return table(
        "6. second precision, recurring items, bus and FIFO targets: calls per item", header, rows, note
    ), figures
