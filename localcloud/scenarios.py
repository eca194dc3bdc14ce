"""Workloads that drive the deployed local stack and count what the cloud delivered, through AWS APIs only.

Each scenario writes items, says which actions it expects (one per key, not before its due time) and which it
forbids, then observes deliveries. `tally` turns that into the numbers the demo prints and the e2e tests assert.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Protocol

from .deploy import Deployment
from .emulators import fire_rule
from .provision import clients
from .server import ses_outbox

Client = Callable[[str], Any]
SENDER_DOMAIN = "example.com"
# Longer than the plain ttl tables' bound (`LOCAL_TTL`, 15 s: the local TTL delay plus the stream), so the repeat's
# next due time is still ahead when it is written: the handler skips occurrences already past (never fires a burst),
# and a shorter interval made a loaded machine's first firing skip the second occurrence the scenario expects.
REPEAT_EVERY = 20
# The precise table's TTL runs later than its delete schedules can (up to 180 s after the due time: the minute after
# it, anywhere in that minute, one minute more when processed close to it), as AWS's TTL (minutes to days) does, so
# the schedules are what removes the offers; plain TTL tables keep the quick 5 s.
TTL_DELAYS = {"offers-table": 200.0}


@dataclass(frozen=True)
class Delivery:
    key: str
    at: float


@dataclass(frozen=True)
class Bound:
    """A documented lateness bound: `seconds` after the due time, and in words where it comes from, so the demo's
    "late max 67 s" reads against it."""

    seconds: float
    why: str


# docs/guarantees.md, per mode, as the local cloud reproduces it.
MINUTE_SCHEDULE = Bound(
    180.0,
    "a schedule on the minute at or after the due time, run anywhere in that minute: 120 s, "
    "180 s when the change is handled within 10 s of that minute",
)
LOCAL_TTL = Bound(15.0, "DynamoDB TTL's own delay (minutes to days on AWS, 5 s here) + 10 s for the stream")
POLL_TICK = Bound(12.0, "the rule's interval (poll_interval_minutes on AWS, 2 s here) + 10 s for the tick's work")
SECOND = Bound(2.0, "precision second: under 2 s at p99")


@dataclass
class Outcome:
    scenario: str
    mode: str
    written: int
    expected: int
    delivered: int
    duplicates: int
    missing: list[str]
    unexpected: list[str]
    early: list[str]
    lateness: list[float]
    dead_letters: dict[str, int] = field(default_factory=dict)
    expected_dead_letters: dict[str, int] = field(default_factory=dict)
    redelivered: int = 0  # stream batches the local cloud delivered again (LOCALCLOUD_REDELIVER)
    # The lateness this scenario's mode promises (docs/guarantees.md), None where it promises none (aggregate).
    bound: Bound | None = None

    def within_bound(self) -> bool:
        """No delivery later than the documented bound (True without a bound or without deliveries)."""
        worst = self.lateness_max()
        return self.bound is None or worst is None or worst <= self.bound.seconds

    def unexpected_dead_letters(self) -> dict[str, int]:
        """Queues holding a different number of messages than the scenario put there on purpose. Parking is at least
        once: a bad record in a redelivered batch is parked again (its `eventID` tells the copies apart), so the
        poison queue may hold up to one more copy per redelivered batch."""
        found = {}
        for queue, depth in self.dead_letters.items():
            expected = self.expected_dead_letters.get(queue, 0)
            copies = self.redelivered if queue == "poison_queue" and expected else 0
            if not expected <= depth <= expected + copies:
                found[queue] = depth
        return found

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.missing or self.unexpected or self.early or self.unexpected_dead_letters())

    def lateness_p50(self) -> float | None:
        return statistics.median(self.lateness) if self.lateness else None

    def lateness_max(self) -> float | None:
        return max(self.lateness) if self.lateness else None


def tally(
    scenario: str,
    mode: str,
    written: int,
    expected: dict[str, float],
    forbidden: set[str],
    deliveries: list[Delivery],
    tolerance: float = 1.0,
) -> Outcome:
    """Compare deliveries with expectations: each expected key exactly once and not before its due time (less
    `tolerance`: Scheduler's at() has one-second resolution), no other key at all."""
    by_key: dict[str, list[float]] = {}
    for delivery in deliveries:
        by_key.setdefault(delivery.key, []).append(delivery.at)
    first = {key: min(times) for key, times in by_key.items() if key in expected}
    return Outcome(
        scenario=scenario,
        mode=mode,
        written=written,
        expected=len(expected),
        delivered=len(first),
        duplicates=sum(len(times) - 1 for key, times in by_key.items() if key in expected),
        missing=sorted(set(expected) - set(by_key)),
        unexpected=sorted(k for k in by_key if k not in expected or k in forbidden),
        early=sorted(k for k, at in first.items() if at < expected[k] - tolerance),
        lateness=[max(0.0, at - expected[k]) for k, at in first.items()],
    )


class Scenario(Protocol):
    name: str
    mode: str

    def start(self, now: float) -> None: ...
    def observe(self) -> list[Delivery]: ...
    def done(self) -> bool: ...
    def outcome(self) -> Outcome: ...


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def queue_depth(client: Client, url: str) -> int:
    attributes = client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def dead_letters(client: Client, outputs: dict[str, Any]) -> dict[str, int]:
    """Messages in each of a table's dead-letter and poison queues."""
    return {
        key.removesuffix("_url"): queue_depth(client, url)
        for key, url in outputs.items()
        if key in ("stream_dlq_url", "poison_queue_url", "target_dlq_url")
    }


def put(client: Client, table: str, item: dict[str, Any]) -> None:
    from boto3.dynamodb.types import TypeSerializer

    serializer = TypeSerializer()
    client("dynamodb").put_item(TableName=table, Item={k: serializer.serialize(v) for k, v in item.items()})


def put_many(client: Client, table: str, items: list[dict[str, Any]]) -> None:
    """BatchWriteItem, 25 at a time, resending what DynamoDB reports unprocessed."""
    from boto3.dynamodb.types import TypeSerializer

    serializer = TypeSerializer()
    requests = [{"PutRequest": {"Item": {k: serializer.serialize(v) for k, v in item.items()}}} for item in items]
    while requests:
        chunk, requests = requests[:25], requests[25:]
        left = client("dynamodb").batch_write_item(RequestItems={table: chunk}).get("UnprocessedItems", {})
        requests = list(left.get(table, [])) + requests


@dataclass
class Workload:
    deployment: Deployment
    table_key: str
    name: str
    mode: str
    lead: float = 8.0
    count: int = 10
    expected: dict[str, float] = field(default_factory=dict)
    forbidden: set[str] = field(default_factory=set)
    deliveries: list[Delivery] = field(default_factory=list)
    written: int = 0
    expected_dead: dict[str, int] = field(default_factory=dict)
    bound: Bound | None = None
    # The public article the scenario's pattern comes from (docs/local-cloud.md names them all), if any.
    article: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.client = clients(self.deployment.endpoint, self.deployment.region)
        self.outputs: dict[str, Any] = self.deployment.outputs[self.table_key]

    def done(self) -> bool:
        seen = {d.key for d in self.deliveries}
        return set(self.expected) <= seen

    def outcome(self) -> Outcome:
        result = tally(self.name, self.mode, self.written, self.expected, self.forbidden, self.deliveries)
        result.dead_letters = dead_letters(self.client, self.outputs)
        result.expected_dead_letters = dict(self.expected_dead)
        result.bound = self.bound
        return result


@dataclass
class EmailReminders(Workload):
    """Appointment reminders by email (the first article's pattern, see `scenarios`). Ten appointments with reminders a
    few seconds apart, one more cancelled before its reminder (no email), one rescheduled to a later reminder (one
    email, at the new time)."""

    def start(self, now: float) -> None:
        table = self.outputs["table_name"]
        for i in range(self.count + 2):
            remind_at = now + self.lead + i
            email = f"patient{i}@{SENDER_DOMAIN}"
            appointment = {
                "PK": f"APPOINTMENT#{i}",
                "SK": "REMINDER",
                "name": f"Patient {i}",
                "email": email,
                "appointmentAt": iso(remind_at + 3600),
                "remindAt": iso(remind_at),
            }
            put(self.client, table, appointment)
            self.written += 1
            if i == self.count:  # cancelled
                self.forbidden.add(email)
                self.client("dynamodb").delete_item(
                    TableName=table, Key={"PK": {"S": appointment["PK"]}, "SK": {"S": "REMINDER"}}
                )
            elif i == self.count + 1:  # rescheduled four seconds later
                appointment["remindAt"] = iso(remind_at + 4)
                put(self.client, table, appointment)
                self.expected[email] = remind_at + 4
            else:
                self.expected[email] = remind_at

    def observe(self) -> list[Delivery]:
        messages = ses_outbox(self.deployment.endpoint)
        self.deliveries = [
            Delivery(str(recipient), float(message["Timestamp"]))
            for message in messages
            for recipient in message.get("To", [])
            if str(recipient).endswith("@" + SENDER_DOMAIN) and str(recipient).startswith("patient")
        ]
        return self.deliveries


@dataclass
class QueuedTasks(Workload):
    """Tasks due a few seconds ahead, delivered as due events to the queue the component owns (ministack's own
    Scheduler fires these; it checks every 10 s, which is the lateness you see)."""

    def start(self, now: float) -> None:
        table = self.outputs["table_name"]
        for i in range(self.count):
            due = now + self.lead + i
            put(self.client, table, {"PK": f"TASK#{i}", "SK": "TASK", "dueAt": iso(due), "payload": {"n": i}})
            self.expected[f"TASK#{i}"] = due
            self.written += 1

    def observe(self) -> list[Delivery]:
        for body, at in drain_due_events(self.client, self.outputs["due_queue_url"]):
            self.deliveries.append(Delivery(str(body["keys"]["PK"]), at))
        return self.deliveries


def drain_due_events(client: Client, url: str) -> list[tuple[dict[str, Any], float]]:
    """Receive and delete every due event waiting in a queue; each with the time it was received."""
    sqs = client("sqs")
    found: list[tuple[dict[str, Any], float]] = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get("Messages", [])
        if not messages:
            return found
        now = time.time()
        for message in messages:
            found.append((json.loads(message["Body"]), now))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


@dataclass
class ExpiringSessions(Workload):
    """Sessions (the TTL articles' pattern, see `scenarios`) whose TTL (epoch seconds) is a few seconds ahead, acted on
    when they expire. One repeats once, `REPEAT_EVERY` seconds after its first due time; one is deleted by its user
    first (must not fire); one has a TTL that is not a number (DynamoDB ignores it: it never expires and never fires).

    `repeat=False` leaves out the repeating session: a precise table acts up to two minutes after the due time (the
    minute after it, then anywhere in that minute), so a 20 s repeat's second occurrence would already be past when
    the first fires, and is skipped by design. Repeats are shown by the plain table and tested in the handlers."""

    never_expired: int = 0
    repeat: bool = True
    _repeat: tuple[str, str, float] | None = None

    def start(self, now: float) -> None:
        table = self.outputs["table_name"]
        first = int(now + self.lead)
        for i in range(self.count):
            due = first + i
            put(self.client, table, {"PK": f"SESSION#{i}", "SK": "SESSION", "expiresAt": due, "user": f"user{i}"})
            self.expected[self._key(f"SESSION#{i}", due)] = due
        if self.repeat:
            repeat_due = first + 1
            # Repeats must outlast the TTL delay, or the next occurrence is already past when the first fires (and is
            # skipped, by design: no bursts of missed occurrences).
            repeating = {"PK": "REPEAT#1", "SK": "SESSION", "expiresAt": repeat_due, "repeatEvery": REPEAT_EVERY}
            put(self.client, table, {**repeating, "repeatUntil": repeat_due + REPEAT_EVERY})
            for n in range(2):
                due = repeat_due + REPEAT_EVERY * n
                self.expected[self._key("REPEAT#1", due)] = due
            second_due = float(repeat_due + REPEAT_EVERY)
            self._repeat = (self._key("REPEAT#1", repeat_due), self._key("REPEAT#1", second_due), second_due)
        # Cancelled well before its due minute: a delete inside the due minute counts as due in precise mode (that is
        # when Scheduler may run the delete), so a cancellation must come before it.
        cancelled_due = first + 120
        put(self.client, table, {"PK": "CANCELLED#1", "SK": "SESSION", "expiresAt": cancelled_due})
        self.client("dynamodb").delete_item(TableName=table, Key={"PK": {"S": "CANCELLED#1"}, "SK": {"S": "SESSION"}})
        self.forbidden.add(self._key("CANCELLED#1", cancelled_due))
        put(self.client, table, {"PK": "BADTTL#1", "SK": "SESSION", "expiresAt": iso(first)})
        if self.outputs.get("schedule_group_name"):
            # Precise mode sees the insert, so it can say why this item will never expire: one poison message.
            self.expected_dead["poison_queue"] = 1
        self.written = self.count + (3 if self.repeat else 2)

    @staticmethod
    def _key(pk: str, due: float) -> str:
        return f"{pk}@{datetime.fromtimestamp(due, UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"

    def observe(self) -> list[Delivery]:
        for body, at in drain_due_events(self.client, self.outputs["due_queue_url"]):
            self.deliveries.append(Delivery(self._key(body["keys"]["PK"], _epoch(body["dueAt"])), at))
        self._skip_a_repeat_already_past()
        return self.deliveries

    def _skip_a_repeat_already_past(self) -> None:
        """The handler writes a repeating item back with its next due time after `now`, skipping occurrences already
        past (never a burst): when the first occurrence arrives after the second was due (a loaded machine's TTL and
        stream lag beyond `REPEAT_EVERY`), the second is skipped by design, so it is no longer expected. It still
        counts against the mode if it arrives twice or early; the first's lateness is judged by the bound."""
        if not self._repeat:
            return
        first, second, second_due = self._repeat
        arrived = [d.at for d in self.deliveries if d.key == first]
        skipped = bool(arrived) and min(arrived) > second_due and all(d.key != second for d in self.deliveries)
        if skipped:
            self.expected.pop(second, None)
        else:  # expected again if it arrives after all (the write-back came before the first's delivery was seen)
            self.expected[second] = second_due

    def outcome(self) -> Outcome:
        result = super().outcome()
        bad = self.client("dynamodb").get_item(
            TableName=self.outputs["table_name"], Key={"PK": {"S": "BADTTL#1"}, "SK": {"S": "SESSION"}}
        )
        if "Item" not in bad:
            result.unexpected.append("BADTTL#1 (a string TTL must never expire)")
        return result


@dataclass
class PollingJobs(Workload):
    """Jobs (the polling article's pattern) due at scattered, off-grid times (some already past), in every accepted
    format, found by a processor that the scenario fires every `fire_every` seconds instead of waiting for the rule's
    minute. One job names no time at all: the assigner parks it in the poison queue with the reason."""

    fire_every: float = 2.0
    fired: int = 0
    _last_fire: float = 0.0

    def start(self, now: float) -> None:
        table = self.outputs["table_name"]
        offsets = [-30.0, -7.0, 3.3, 4.7, 6.1, 8.9, 9.4, 11.2, 12.8, 14.5]
        for i, offset in enumerate(offsets[: self.count]):
            due = now + offset
            # Alternate the formats the assigner accepts: ISO with Z, ISO with an offset, epoch seconds.
            written: Any = (
                iso(due)
                if i % 3 == 0
                else datetime.fromtimestamp(due, UTC).astimezone(timezone(timedelta(hours=2))).isoformat()
                if i % 3 == 1
                else int(due)
            )
            put(self.client, table, {"PK": f"JOB#{i}", "SK": "JOB", "dueAt": written, "n": i})
            # Due times are whole seconds; one already past is due as soon as it is indexed.
            self.expected[f"JOB#{i}"] = max(float(int(due)), now)
        put(self.client, table, {"PK": "DELAYED#1", "SK": "JOB", "delaySeconds": 5})
        self.expected["DELAYED#1"] = now + 5
        put(self.client, table, {"PK": "NOTIME#1", "SK": "JOB", "note": "no dueAt, no delaySeconds"})
        self.forbidden.add("NOTIME#1")
        self.expected_dead["poison_queue"] = 1
        self.written = len(self.expected) + 1

    def observe(self) -> list[Delivery]:
        if time.time() - self._last_fire >= self.fire_every:
            self._last_fire = time.time()
            self.fired += fire_rule(self.client, self.outputs["tick_rule_name"], self.deployment.region)
        for body, at in drain_due_events(self.client, self.outputs["due_queue_url"]):
            self.deliveries.append(Delivery(str(body["keys"]["PK"]), at))
        return self.deliveries


@dataclass
class ScoreTotals(Workload):
    """200 scores for 10 players (the aggregate article's pattern) written as fast as possible; each player's total must
    end equal to the sum of their scores (more would be double counting), and one score that is not a number is parked
    in the poison queue. A player's "delivery" is the moment their total first matches."""

    players: int = 10
    scores: int = 200
    sums: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)

    def start(self, now: float) -> None:
        table = self.outputs["table_name"]
        rng = random.Random(3)
        items: list[dict[str, Any]] = []
        for n in range(self.scores):
            player = f"USER#player{n % self.players}"
            value = rng.randrange(1, 100)
            items.append({"PK": f"SCORE#{n:04}", "SK": player, "Score": value})
            self.sums[player] = self.sums.get(player, 0) + value
        items.append({"PK": "SCORE#bad", "SK": "USER#player0", "Score": "ninety"})
        put_many(self.client, table, items)
        self.expected_dead["poison_queue"] = 1
        self.written = self.scores + 1
        written = time.time()
        self.expected = {player: written for player in self.sums}

    def observe(self) -> list[Delivery]:
        ddb = self.client("dynamodb")
        for player in self.sums:
            found = ddb.get_item(
                TableName=self.outputs["table_name"], Key={"PK": {"S": player}, "SK": {"S": "TOTAL"}}
            ).get("Item")
            self.totals[player] = int(found["totalScore"]["N"]) if found else 0
            reached = any(d.key == player for d in self.deliveries)
            if not reached and self.totals[player] == self.sums[player]:
                self.deliveries.append(Delivery(player, time.time()))
        return self.deliveries

    def outcome(self) -> Outcome:
        result = super().outcome()
        over = [p for p, t in self.totals.items() if t > self.sums[p]]
        result.duplicates += len(over)
        result.missing = sorted(set(result.missing) | {p for p, t in self.totals.items() if t != self.sums[p]})
        result.delivered = len(self.sums) - len(result.missing)
        return result

    def report(self) -> str:
        return "totals: " + ", ".join(
            f"{p.split('#')[1]}={self.totals.get(p, 0)}/{s}" for p, s in sorted(self.sums.items())
        )


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def verify_sender(deployment: Deployment) -> None:
    """SES sends only from verified identities (and, in the sandbox, to them); verify the demo's domain."""
    clients(deployment.endpoint, deployment.region)("sesv2").create_email_identity(EmailIdentity=SENDER_DOMAIN)


@dataclass
class Clinic(Workload):
    """Beyond the articles, on a table the stack does not own (`clinic`), shared by two components: `clinic`
    (eventbridge: reminders in the patient's time zone, a day-before-style reminder by `offsets`, a weekly one from a
    cron expression) and `visits` (aggregate: minutes per patient).

    - A weekly reminder, `cron(M H ? * DOW *)` in Asia/Kolkata (UTC+05:30), set for the first local minute at least
      40 s ahead: it must arrive once, in that minute, its `dueAt` that minute in UTC (Scheduler's scheduled time).
    - An appointment at the same local time (written without an offset, read in its zone), with offsets [-60, 0]:
      a reminder a minute before (already due, so delivered at once) and one at the time, each once,
      `offsetSeconds` saying which.
    - Visits of two patients: each total must end equal to the sum of their minutes, on the same table."""

    zone: str = "Asia/Kolkata"
    visits: dict[str, int] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)
    due_at: dict[str, str] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)

    def start(self, now: float) -> None:
        from zoneinfo import ZoneInfo

        table = self.outputs["table_name"]
        zone = ZoneInfo(self.zone)
        weekly = datetime.fromtimestamp(now + 40, UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        local = weekly.astimezone(zone)
        dow = (local.weekday() + 1) % 7 + 1  # AWS numbering: 1 = Sunday
        expression = f"cron({local.minute} {local.hour} ? * {dow} *)"
        put(self.client, table, {"PK": "PATIENT#1", "SK": "WEEKLY", "remindAt": expression, "timeZone": self.zone})
        # At the weekly one's minute: its reminder a minute before is then due now or just past (delivered at once,
        # as any offset already past), so the scenario ends a minute sooner.
        appointment = local.replace(tzinfo=None)
        put(
            self.client,
            table,
            {"PK": "PATIENT#2", "SK": "APPT#1", "remindAt": appointment.isoformat(), "timeZone": self.zone},
        )
        at = appointment.replace(tzinfo=zone).timestamp()
        self.expected = {"WEEKLY": weekly.timestamp(), "APPT#1-60": at - 60, "APPT#10": at}
        self.due_at = {
            "WEEKLY": iso_seconds(weekly.timestamp()),
            "APPT#1-60": iso_seconds(at),
            "APPT#10": iso_seconds(at),
        }
        visits = [("PATIENT#1", 30), ("PATIENT#2", 45), ("PATIENT#1", 20), ("PATIENT#2", 15), ("PATIENT#1", 10)]
        put_many(self.client, table, [{"PK": f"VISIT#{n}", "SK": p, "minutes": m} for n, (p, m) in enumerate(visits)])
        for patient, minutes in visits:
            self.visits[patient] = self.visits.get(patient, 0) + minutes
        self.expected.update({f"total {p}": time.time() for p in self.visits})
        self.written = 2 + len(visits)

    def observe(self) -> list[Delivery]:
        for body, at in drain_due_events(self.client, self.outputs["due_queue_url"]):
            key = f"{body['keys']['SK']}{body.get('offsetSeconds', '')}"
            self.deliveries.append(Delivery(key, at))
            if body["dueAt"] != self.due_at.get(key):
                self.wrong.append(f"{key}: dueAt {body['dueAt']}, expected {self.due_at.get(key)}")
            if key == "WEEKLY":
                # Once is enough for the demo: the item goes, and with it its recurring schedule.
                self.client("dynamodb").delete_item(
                    TableName=self.outputs["table_name"], Key={"PK": {"S": "PATIENT#1"}, "SK": {"S": "WEEKLY"}}
                )
        ddb = self.client("dynamodb")
        for patient, minutes in self.visits.items():
            found = ddb.get_item(
                TableName=self.outputs["table_name"], Key={"PK": {"S": patient}, "SK": {"S": "TOTAL"}}
            ).get("Item")
            self.totals[patient] = int(found["totalMinutes"]["N"]) if found else 0
            key = f"total {patient}"
            if self.totals[patient] == minutes and not any(d.key == key for d in self.deliveries):
                self.deliveries.append(Delivery(key, time.time()))
        return self.deliveries

    def outcome(self) -> Outcome:
        result = super().outcome()
        result.unexpected += self.wrong
        over = [p for p, t in self.totals.items() if t > self.visits[p]]
        result.duplicates += len(over)
        return result


def percentile(values: list[float], fraction: float) -> float | None:
    """The value at `fraction` (0.99: p99) of the sorted values, nearest rank; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]


@dataclass
class FlashSale(Workload):
    """Beyond the articles, `precision="second"` (table `flash`): sales that open at odd seconds over two minutes
    (now + 9, 19, ..., 119 s), each of which must reach the due queue once, at its second and never before it. The
    first few are too close for a schedule in the minute before and go straight into the release queue; the others
    are released by a schedule that runs anywhere in that minute, as on AWS. Lateness is from the due second to
    when the release function sent the due event (the message's `SentTimestamp`), printed beside the minute
    precision `tasks` table's (`compare`)."""

    compare: Workload | None = None

    def start(self, now: float) -> None:
        table = self.outputs["table_name"]
        first = math.ceil(now)
        for i in range(self.count):
            due = first + 9 + 10 * i
            put(self.client, table, {"PK": f"SALE#{i}", "SK": "OPEN", "dueAt": iso(due), "discount": 10 + i})
            self.expected[f"SALE#{i}"] = float(due)
            self.written += 1

    def observe(self) -> list[Delivery]:
        sqs = self.client("sqs")
        url = self.outputs["due_queue_url"]
        while True:
            messages = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0, AttributeNames=["SentTimestamp"]
            ).get("Messages", [])
            if not messages:
                return self.deliveries
            for message in messages:
                sent = int(message["Attributes"]["SentTimestamp"]) / 1000
                self.deliveries.append(Delivery(str(json.loads(message["Body"])["keys"]["PK"]), sent))
                sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    def outcome(self) -> Outcome:
        # No tolerance: the due event must not leave before its second (Scheduler's minute is not an excuse here).
        result = tally(self.name, self.mode, self.written, self.expected, self.forbidden, self.deliveries, 0.0)
        result.dead_letters = dead_letters(self.client, self.outputs)
        result.expected_dead_letters = dict(self.expected_dead)
        result.bound = self.bound
        return result

    def report(self) -> str:
        """Lateness p50/p99 here and in the minute precision table, from what was observed (the cloud may be gone)."""

        def figures(s: Workload, tolerance: float) -> str:
            lateness = tally(s.name, s.mode, s.written, s.expected, s.forbidden, s.deliveries, tolerance).lateness
            p50, p99 = percentile(lateness, 0.5), percentile(lateness, 0.99)
            return "-" if p50 is None or p99 is None else f"p50 {p50:.2f}s, p99 {p99:.2f}s"

        text = f"lateness, precision second: {figures(self, 0.0)}"
        if self.compare is not None:
            text += f"; precision minute ({self.compare.table_key}): {figures(self.compare, 1.0)}"
        return text


def iso_seconds(epoch: float) -> str:
    """The due event's form of a time: whole seconds, Z."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def scenarios(deployment: Deployment) -> list[Scenario]:
    """The workload for each table of the local stack."""
    tasks = QueuedTasks(deployment, "tasks", "tasks (due queue)", "eventbridge", bound=MINUTE_SCHEDULE)
    return [
        EmailReminders(
            deployment,
            "reminders",
            "reminders (email)",
            "eventbridge",
            bound=MINUTE_SCHEDULE,
            article=("Implement event-driven architectures with Amazon DynamoDB, Part 3",),
        ),
        tasks,
        ExpiringSessions(
            deployment,
            "sessions",
            "sessions (act on expiry)",
            "ttl",
            count=8,
            bound=LOCAL_TTL,
            article=(
                "How I solved Dynamic Task Scheduling using AWS DynamoDB TTL, Stream and Lambda",
                "Job Scheduling in AWS Using DDB Streams",
            ),
        ),
        ExpiringSessions(
            deployment, "offers", "offers (precise expiry)", "ttl", count=8, repeat=False, bound=MINUTE_SCHEDULE
        ),
        PollingJobs(
            deployment,
            "jobs",
            "jobs (sharded index)",
            "polling",
            bound=POLL_TICK,
            article=("Scheduled Task Processing with DynamoDB and Eventbridge",),
        ),
        ScoreTotals(
            deployment,
            "scores",
            "scores (running totals)",
            "aggregate",
            article=("Building event-driven workflows with DynamoDB Streams",),
        ),
        Clinic(
            deployment,
            "clinic",
            "clinic (existing table, zone, offsets, weekly cron)",
            "eventbridge",
            bound=MINUTE_SCHEDULE,
        ),
        FlashSale(
            deployment, "flash", "flash (precision second)", "eventbridge", count=12, compare=tasks, bound=SECOND
        ),
    ]


def count_redeliveries(outcomes: list[Outcome], counts: dict[str, int]) -> None:
    """Attribute the redelivered batches (per function name, `<table>-<role>`) to the scenario of that table."""
    for outcome in outcomes:
        prefix = outcome.scenario.split()[0] + "-"
        outcome.redelivered = sum(n for name, n in counts.items() if name.startswith(prefix))


def run(
    chosen: list[Scenario], timeout: float = 300.0, settle: float = 10.0, on_tick: Callable[[], None] | None = None
) -> list[Outcome]:
    """Start every scenario, observe until all expected actions arrived (or `timeout`), then keep watching for
    `settle` seconds so a duplicate or a forbidden action would still be caught."""
    start = time.time()
    for scenario in chosen:
        scenario.start(start)
    deadline = start + timeout
    while time.time() < deadline:
        for scenario in chosen:
            scenario.observe()
        if on_tick:
            on_tick()
        if all(s.done() for s in chosen):
            break
        time.sleep(0.25)
    settle_until = time.time() + settle
    while time.time() < settle_until:
        for scenario in chosen:
            scenario.observe()
        time.sleep(0.25)
    return [s.outcome() for s in chosen]
