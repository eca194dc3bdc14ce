"""Feeding: records handed to the mode's own code (the deployed consumer invoked, or its `handle_batch` run
in-process), what every part of a run shares (`Run`), and the loop that makes a backfill safe beside live traffic.

After a batch is fed, each item is read again with a consistent read; one that a live write changed meanwhile
(moved, deleted, re-created) gets the change from what was fed to what it is now, as the stream would have carried
it (MODIFY, REMOVE or INSERT), until a read after a feed finds the item as fed. Any write after that read reaches
the live function after this run's calls for the item, so the live write has the last word: a deleted item's
schedule is not resurrected, a newer due time is not overridden. What cannot be fed is parked in the poison queue
with its reason (never lost)."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from st_core.clients import CLIENTS, Clients
from st_core.config import HandlerConfig

from backfill.records import Failure, Feed, Record, change, describe, identity, same, wire
from backfill.report import Tally
from backfill.resources import POISON, TABLE, flat
from backfill.scan import Clock, Throttle

# The AWS actions this module's own calls need, by resource (handlers/backfill/resources.py; checked by tests/iam):
# read items back, park what cannot be fed.
AWS_ACTIONS_ON = {TABLE: ("dynamodb:BatchGetItem",), POISON: ("sqs:SendMessage",)}
AWS_ACTIONS = flat(AWS_ACTIONS_ON)

# Feeds of one item that follow live writes before it is parked as "kept changing".
ROUNDS = 5


@dataclass
class Options:
    dry_run: bool = False
    reconcile: bool = False  # also repair what exists but disagrees (a schedule for another time, an index entry)
    started: float = field(default_factory=time.time)  # when the run's scan began (aggregate's busy rule)
    # A first attach: no item has its schedule yet, so none is looked up (one Scheduler call per occurrence instead
    # of two). Safe either way: the consumer updates a schedule that exists in place.
    fresh: bool = False
    # Deliver past occurrences whose delivery the ledger no longer remembers (see backfill.timed.remembered): a first
    # backfill, or the operator's `--deliver-past-due`. Otherwise they are reported, never delivered a second time.
    deliver_past_due: bool = False


@dataclass
class Run:
    """What every part of one run over one table shares: its configuration, the feed, clients, options, the
    ceilings, the clock and the tally (guarded by `lock`: pages of one segment act from worker threads)."""

    config: HandlerConfig
    feed: Feed
    clients: Clients = CLIENTS
    options: Options = field(default_factory=Options)
    reads: Throttle = field(default_factory=lambda: Throttle(None))
    calls: Throttle = field(default_factory=lambda: Throttle(None))
    now: Clock = time.time
    tally: Tally = field(default_factory=Tally)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Schedules the item pass found as their item (as scanned) wants them: reconcile's sweep need not read them
    # again (shared by every segment of a run that also sweeps, else the run's own).
    confirmed: set[str] = field(default_factory=set)
    # How long after its due time the ledger surely holds an occurrence's entry (backfill.timed.memory_seconds):
    # read from the ledger once per run.
    memory: float | None = None

    def note(self, outcome: str, kind: str, example: str = "") -> None:
        with self.lock:
            self.tally.note(outcome, kind, example)

    def tally_now(self) -> Tally:
        """A copy of the tally as of now (the segment's threads go on counting meanwhile)."""
        with self.lock:
            return Tally.from_json(self.tally.to_json())

    def read(self, keys: list[Record]) -> dict[str, Record]:
        """The items now (consistent reads, paced), by identity; absent items are missing from the answer."""
        from st_core.stream import to_request

        found: dict[str, Record] = {}
        ddb = self.clients.get("dynamodb")
        table = self.config["table"]
        for start in range(0, len(keys), 100):
            request: dict[str, Any] = {
                table: {"Keys": [to_request(k) for k in keys[start : start + 100]], "ConsistentRead": True}
            }
            while request:
                self.reads.take(len(request[table]["Keys"]))
                answer = ddb.batch_get_item(RequestItems=request)
                for item in answer.get("Responses", {}).get(table, []):
                    image = wire(item)
                    found[identity(self.config, image)] = image
                request = answer.get("UnprocessedKeys") or {}
        return found

    def park(self, record: Record, reason: str) -> None:
        """To the poison queue with the reason (never lost): `redrive poison` replays it once fixed."""
        from st_core.poison import message_limit, poison_message

        config = self.config
        body = poison_message(
            record=record,
            reason=reason,
            error="Backfill",
            mode=config["mode"],
            table=config["table"],
            limit=message_limit(config),
        )
        self.clients.get("sqs").send_message(QueueUrl=self.config["poisonQueueUrl"], MessageBody=body)


def feed_settled(run: Run, records: list[Record], calls_each: int, unusable: Collection[int] = ()) -> None:
    """Feed, then follow every item a live write changed meanwhile until a read after a feed finds it as fed.
    `calls_each`: Scheduler calls one fed record may make; `unusable`: ids of records the consumer will park."""
    pending = records
    first = True
    for _ in range(ROUNDS):
        run.calls.take(calls_each * len(pending))
        failed = {id(r): why for r, why in run.feed(pending)}
        fed: dict[str, Record] = {}
        for record in pending:
            data = record["dynamodb"]
            image = data.get("NewImage") if record["eventName"] != "REMOVE" else data.get("OldImage")
            where = describe(run.config, image or data["Keys"])
            if id(record) in failed:
                run.park(record, f"backfill: the consumer failed it: {failed[id(record)]}")
                run.note("failed", "failed (parked)", where)
                continue
            if first and id(record) in unusable:
                # The consumer parks it with its reason, as it parks such a live write.
                run.note("failed", "unusable time (the consumer parked it: see the poison queue)", where)
            elif first:
                run.note("acted", "fed as a fresh write", where)
            fed[identity(run.config, data["Keys"])] = record
        first = False
        current = run.read([r["dynamodb"]["Keys"] for r in fed.values()])
        pending = []
        for key, record in fed.items():
            data = record["dynamodb"]
            last = data.get("NewImage") if record["eventName"] != "REMOVE" else None
            now = current.get(key)
            if same(last, now):
                continue
            if last is None and now is None:
                continue
            pending.append(change(run.config, last, now, run.now()))
            run.note("acted", "followed a live write", describe(run.config, data["Keys"]))
        if not pending:
            return
    for record in pending:
        run.park(record, "backfill: the item kept changing while backfill followed it; run backfill again")
        run.note("failed", "kept changing (parked)", describe(run.config, record["dynamodb"]["Keys"]))


def answer_failures(records: list[Record], response: object) -> list[Failure]:
    """Lambda's partial-batch contract: the lowest reported sequence number failed, and every record after it was not
    confirmed (failed too, for a caller that cannot retry from there); an answer that is not one fails them all."""
    if not isinstance(response, dict):
        return [(r, "the function answered no batch response") for r in records]
    reported = [str((f or {}).get("itemIdentifier")) for f in response.get("batchItemFailures") or []]
    if not reported:
        return []
    sequences = [str(r["dynamodb"]["SequenceNumber"]) for r in records]
    positions = [sequences.index(s) for s in reported if s in sequences]
    first = min(positions) if positions else 0
    return [(r, "reported in batchItemFailures (transient: see the function's log)") for r in records[first:]]


def in_process(config: HandlerConfig, clients: Clients = CLIENTS) -> Feed:
    """The mode's own `handle_batch`, run here (the backfill function holds the consumer's permissions)."""
    mode = config["mode"]

    def feed(records: list[Record]) -> list[Failure]:
        event = {"Records": records}
        if mode == "eventbridge":
            import eventbridge

            response: object = eventbridge.handle_batch(event, config, clients=clients)
        elif mode == "ttl":
            import ttl

            response = ttl.handle_batch(event, config, clients=clients)
        elif mode == "polling":
            import polling_assign

            response = polling_assign.handle_assign_batch(event, config, clients=clients)
        else:
            raise ValueError(f"mode {mode!r} is not fed record by record")
        return answer_failures(records, response)

    return feed


def no_feed(records: Iterable[Record]) -> list[Failure]:
    """Aggregate's feed: its totals are computed and replaced, never fed record by record."""
    raise AssertionError("aggregate totals are not fed record by record")
