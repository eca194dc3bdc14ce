"""Checking `eventbridge` and `ttl` items: what a fresh write of each would do that is not done (a schedule
missing, a past occurrence the ledger has not delivered, a precise ttl schedule holding another time), fed through
the mode's own code; plain ttl items are only reported (TTL deletes them, and the stream brings the deletion)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, NamedTuple

from st_core import idempotency
from st_core.schedules import MIN_LEAD

from backfill.feed import Run, feed_settled
from backfill.records import Record, change, describe, stream
from backfill.resources import MARKER, SCHEDULES, flat

# The AWS actions this module's own calls need, by resource (handlers/backfill/resources.py; checked by tests/iam):
# look a schedule up; read and write backfill's own marker in the ledger (the first backfill has run).
AWS_ACTIONS_ON = {SCHEDULES: ("scheduler:GetSchedule",), MARKER: ("dynamodb:GetItem", "dynamodb:PutItem")}
AWS_ACTIONS = flat(AWS_ACTIONS_ON)

# The ledger's record that a backfill of the table has finished once (never expires): later backfills deliver past
# occurrences the ledger has forgotten only when asked (`--deliver-past-due`), as reconcile does.
BACKFILLED = "scheduled-table#backfilled"
# The ledger's record of the narrowest `windowSeconds` a backfill or reconcile of the table has run with (never
# expires): entries keep the expiry they were written with, so a raised window does not make the ledger remember
# longer what it was told under the old one (`memory_seconds`).
WINDOW = idempotency.NARROWEST_WINDOW


class Need(NamedTuple):
    """What a fresh write of an item would do that is not done ("" when nothing), its past occurrences due
    longer ago than the ledger remembers (delivered long ago, or never: `deliver_past_due` decides), and, in a run
    that delivers those, the past occurrences it delivers (an earlier reconcile may have withheld them)."""

    word: str = ""
    forgotten: tuple[str, ...] = ()
    delivering: tuple[str, ...] = ()


# No filter of the mapping matches a map or a list (filters test leaf values): a write of such an item never reached
# the function, so nothing was parked for it either.
UNMATCHABLE = "due attribute is a map or a list: never seen by the mapping's filter (write a string or a number)"
FORGOTTEN = "past due longer ago than the ledger remembers: not delivered again (--deliver-past-due delivers it)"


def act(run: Run, kind: str, items: list[Record]) -> None:
    """One page of eventbridge or precise ttl items (`kind` "eventbridge" or "ttl-precise")."""
    attribute = run.config["timeAttribute"]
    if kind == "eventbridge":
        memory_seconds(run)  # every run records the window it runs with, before one that is raised can come
    due: list[Record] = []
    timed: list[Record] = []
    unusable: set[int] = set()
    for image in items:
        value = image.get(attribute)
        if not isinstance(value, dict):
            run.note("skipped", "no due time")
            continue
        if {"M", "L"} & set(value):
            run.note("skipped", UNMATCHABLE, describe(run.config, image))
            continue
        # Another type (binary, boolean, null, a set) passes the mapping's filter and is parked: fed, it is too.
        timed.append(change(run.config, None, image, run.now()))
    # What exists already, asked with the consumer's concurrency (each a Scheduler or ledger read).
    with ThreadPoolExecutor(max_workers=max(1, int(run.config.get("maxWorkers") or 8))) as pool:
        needs = list(pool.map(lambda record: needs_of(run, kind, record), timed))
    for record, need in zip(timed, needs, strict=True):
        image = record["dynamodb"]["NewImage"]
        where = describe(run.config, image)
        for name in need.forgotten:
            run.note("skipped", FORGOTTEN, f"{name} ({where})")
        if not need.word:
            if not need.forgotten:
                run.note("skipped", "already scheduled")
            continue
        if run.options.dry_run:
            run.note("acted", f"would {need.word}", where)
            continue
        if need.forgotten and not hold_back(run, need.forgotten):
            run.note("failed", "busy: a past occurrence is being delivered (run again)", where)
            continue
        for name in need.delivering:
            ledger(run).unwithhold(name)  # the operator asked: the handler's claim now delivers it (once)
        due.append(record)
        if need.word.startswith("park"):
            unusable.add(id(record))
    if due:
        feed_settled(run, due, calls_for(run, kind), unusable)


def calls_for(run: Run, kind: str) -> int:
    """Scheduler calls one fed record may make (its occurrences; one for precise ttl)."""
    if kind == "eventbridge":
        return max(1, len(run.config.get("eventbridge", {}).get("offsets") or [0]))
    return 1 if kind == "ttl-precise" else 0


def remembered(run: Run, due: datetime, now: datetime) -> bool:
    """Whether the ledger would still hold a delivery of an occurrence due at `due` (`idempotency.remembered`, the
    live handler's rule too), judged by the window its entries were written with (`memory_seconds`)."""
    return idempotency.remembered(due, now, memory_seconds(run))


def memory_seconds(run: Run) -> float:
    """The window the ledger's entries are judged by: the narrowest `windowSeconds` of this run and of every backfill
    or reconcile before it (the ledger's `WINDOW` record, lowered here when this run's is narrower; a dry run only
    reads it). An entry keeps the expiry it was written with, and a schedule's marker may have been written months
    before its time: after the window is raised, the entries written under the old one still go at the old one, and
    judging their absence by the new one would deliver every occurrence between the two windows again. Never raised
    back: which entries a narrower window wrote cannot be told apart. Read once per run."""
    if run.memory is not None:
        return run.memory
    from st_core.errors import error_code

    current = int(run.config["eventbridge"]["windowSeconds"])
    table = run.config["eventbridge"]["ledgerTable"]
    ddb = run.clients.get("dynamodb")
    found = ddb.get_item(TableName=table, Key={"id": {"S": WINDOW}}, ConsistentRead=True).get("Item")
    recorded = int(found["seconds"]["N"]) if found and "seconds" in found else None
    if (recorded is None or current < recorded) and not run.options.dry_run:
        try:
            ddb.put_item(
                TableName=table,
                Item={"id": {"S": WINDOW}, "seconds": {"N": str(current)}, "at": {"N": str(int(run.now()))}},
                ConditionExpression="attribute_not_exists(id) OR #seconds > :seconds",
                ExpressionAttributeNames={"#seconds": "seconds"},  # a name DynamoDB may reserve: never bare
                ExpressionAttributeValues={":seconds": {"N": str(current)}},
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise  # else another run has just recorded one as narrow or narrower: the next run judges by it
    run.memory = float(min(current, recorded if recorded is not None else current))
    return run.memory


def needs_of(run: Run, kind: str, record: Record) -> Need:
    """What a fresh write of this item would do that is not done: "" when its schedules exist (as they should),
    else a word for it. A past occurrence due longer ago than the ledger remembers is reported, never fed, unless
    the run delivers such occurrences (`deliver_past_due`: backfill's first run, or the operator's flag); one more
    recent (or when it does) is fed unless the ledger holds it (delivered): the handler's ledger delivers it once."""
    now = datetime.fromtimestamp(run.now(), UTC)
    if kind == "eventbridge":
        import eventbridge

        planned = eventbridge.plan(stream(record), run.config, now)
        if planned.poison_reason:
            return Need("park (unusable due time)")
        word = ""
        forgotten: list[str] = []
        delivering: list[str] = []
        for step in planned.steps:
            occurrence = step.occurrence
            if occurrence.recurrence is None and occurrence.due <= now:
                if not (run.options.deliver_past_due or remembered(run, occurrence.due, now)):
                    # Delivered long ago or never, whatever the ledger says now: not delivered again, and no ledger
                    # read (a nightly reconcile of years of items would read one entry per old occurrence).
                    forgotten.append(occurrence.name)
                elif not ledger(run).taken(occurrence.name):  # else delivered already
                    word = word or "deliver (past due)"
                    delivering.append(occurrence.name)
                continue
            if word:
                continue
            found = None if run.options.fresh else schedule(run, occurrence.name)
            if occurrence.recurrence is not None and ended(occurrence.recurrence, now):
                # Nothing is left to fire: a schedule that ends where the rule does goes by itself at its end.
                if found is not None and _second(found.get("EndDate")) != _second(occurrence.recurrence.end):
                    word = "delete schedule (its rule has ended)"
            elif found is None:
                word = "schedule"
            elif occurrence.recurrence is not None and not rule_agrees(found, occurrence.recurrence, now):
                word = "reschedule (the schedule holds another rule, zone, start or end)"
            else:
                run.confirmed.add(occurrence.name)
        return Need(word, tuple(forgotten), tuple(delivering) if run.options.deliver_past_due else ())
    return Need(ttl_need(run, record, now))


def ttl_need(run: Run, record: Record, now: datetime) -> str:
    """Precise ttl: the delete schedule of an item whose TTL is ahead, or the delete of one whose TTL passed."""
    import ttl

    decision = ttl.decide(stream(record), run.config, now)
    if decision.poison:
        return "park (unusable TTL)"
    if decision.step is not ttl.Step.SCHEDULE or decision.due is None:
        return ""
    if decision.due <= now:
        return "delete now (past due)"
    if run.options.fresh:
        return "schedule"
    found = schedule(run, ttl.schedule_name(stream(record), run.config))
    if found is None:
        return "schedule"
    held = record["dynamodb"]["NewImage"][run.config["timeAttribute"]]
    try:
        request = json.loads(found["Target"]["Input"])
        kept = request["ExpressionAttributeValues"][":due"]
    except (KeyError, TypeError, ValueError):
        kept = None
    if kept != held:
        return "reschedule (the schedule holds another time)"
    run.confirmed.add(decision.name)
    return ""


def ended(spec: Any, now: datetime) -> bool:
    """Whether a recurring rule (`eventbridge.Recurrence`) has nothing left to fire: no schedule is wanted."""
    import eventbridge
    from st_core import recurrence

    return eventbridge.recurring_window(spec, recurrence.parse(spec.expression), now) is None


def rule_agrees(found: Record, spec: Any, now: datetime) -> bool:
    """Whether a recurring schedule holds the item's rule (`eventbridge.Recurrence`): its expression, zone and end,
    and a start a schedule made for that rule could have (`eventbridge.recurring_window`): the item's start while
    it is ahead; once it has passed, a rate's start on the rule's grid and no later than its next firing, a cron
    expression's start gone or passed. A rule whose end has passed agrees with no schedule."""
    import eventbridge
    from st_core import recurrence

    parsed = recurrence.parse(spec.expression)
    window = eventbridge.recurring_window(spec, parsed, now)
    if window is None:
        return False
    if found.get("ScheduleExpression") != spec.expression:
        return False
    if (found.get("ScheduleExpressionTimezone") or "UTC") != spec.zone:
        return False
    if _second(found.get("EndDate")) != _second(spec.end):
        return False
    start = _second(found.get("StartDate"))
    expected = _second(window[0])
    if spec.start is not None and spec.start > now + MIN_LEAD:
        return start == _second(spec.start)
    if isinstance(parsed, recurrence.Rate):
        origin = _second(spec.start or datetime.fromtimestamp(0, UTC))
        assert origin is not None and expected is not None
        return start is not None and origin <= start <= expected and (start - origin) % parsed.seconds == 0
    return start is None or start <= int((now + MIN_LEAD).timestamp())


def _second(moment: object) -> int | None:
    """A schedule's or a rule's moment (a datetime, naive meaning UTC) as whole epoch seconds."""
    if not isinstance(moment, datetime):
        return None
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return int(aware.timestamp())


def hold_back(run: Run, names: tuple[str, ...]) -> bool:
    """Mark past occurrences the ledger has forgotten as withheld before their item is fed for another of its
    occurrences, so the handler does not deliver them again (it delivers every past occurrence the ledger does not
    hold). Withheld, not done: one that was never delivered stays deliverable by `--deliver-past-due`. False when
    one is being delivered right now (the item is left for the next run)."""
    from st_core.errors import TransientError

    book = ledger(run)
    try:
        for name in names:
            if book.claim(name):
                book.withhold(name)
    except TransientError:
        return False
    return True


def ledger(run: Run) -> Any:
    from st_core.idempotency import Ledger

    return Ledger.of(run.config["eventbridge"], run.clients)


def schedule(run: Run, name: str) -> Record | None:
    """The schedule of this name in the table's group (paced); None when there is none."""
    from st_core.errors import error_code

    run.calls.take(1)
    try:
        found: Record = run.clients.get("scheduler").get_schedule(Name=name, GroupName=run.config["scheduler"]["group"])
    except Exception as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return None
        raise
    return found


def plain_ttl(run: Run, items: list[Record]) -> None:
    """Nothing to create (TTL deletes and the stream brings the deletion); items whose time has passed and
    that TTL has not deleted yet are reported: TTL deletes within days, not at the second."""
    from st_core.stream import decode_image

    attribute = run.config["timeAttribute"]
    for image in items:
        value = (decode_image({"t": image[attribute]}) or {}).get("t") if attribute in image else None
        if isinstance(value, bool) or not isinstance(value, int | Decimal):
            run.note("skipped", "no TTL")
        elif value <= run.now():
            run.note("skipped", "past its TTL, not deleted yet", describe(run.config, image))
        else:
            run.note("skipped", "TTL ahead (TTL deletes it)")


def backfilled(run: Run) -> bool:
    """Whether a backfill of this table has finished before (eventbridge; its marker in the ledger)."""
    section = run.config.get("eventbridge")
    if not section:
        return True
    found = run.clients.get("dynamodb").get_item(
        TableName=section["ledgerTable"], Key={"id": {"S": BACKFILLED}}, ConsistentRead=True
    )
    return "Item" in found


def mark_backfilled(run: Run) -> None:
    """Record that a backfill finished (no expiry: the ledger's TTL never deletes it)."""
    section = run.config.get("eventbridge")
    if not section:
        return
    run.clients.get("dynamodb").put_item(
        TableName=section["ledgerTable"],
        Item={"id": {"S": BACKFILLED}, "status": {"S": "DONE"}, "at": {"N": str(int(run.now()))}},
    )
