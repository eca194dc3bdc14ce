"""Checking `eventbridge` and `ttl` items: what a fresh write of each would do that is not done (a schedule
missing, a past occurrence the ledger has not delivered, a precise ttl schedule holding another time), fed through
the mode's own code; plain ttl items are only reported (TTL deletes them, and the stream brings the deletion)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from backfill_feed import Run, feed_settled
from backfill_records import Record, change, describe, stream

# The AWS actions this module's own calls need (checked by tests/iam): look a schedule up.
AWS_ACTIONS = ("scheduler:GetSchedule",)


def act(run: Run, kind: str, items: list[Record]) -> None:
    """One page of eventbridge or precise ttl items (`kind` "eventbridge" or "ttl-precise")."""
    attribute = run.config["timeAttribute"]
    due: list[Record] = []
    timed: list[Record] = []
    unusable: set[int] = set()
    for image in items:
        value = image.get(attribute)
        if not isinstance(value, dict) or not ({"S", "N"} & set(value)):
            run.note("skipped", "no due time")
            continue
        timed.append(change(run.config, None, image, run.now()))
    # What exists already, asked with the consumer's concurrency (each a Scheduler or ledger read).
    with ThreadPoolExecutor(max_workers=max(1, int(run.config.get("maxWorkers") or 8))) as pool:
        needs = list(pool.map(lambda record: needs_of(run, kind, record), timed))
    for record, need in zip(timed, needs, strict=True):
        image = record["dynamodb"]["NewImage"]
        if not need:
            run.note("skipped", "already scheduled")
            continue
        if run.options.dry_run:
            run.note("acted", f"would {need}", describe(run.config, image))
            continue
        due.append(record)
        if need.startswith("park"):
            unusable.add(id(record))
    if due:
        feed_settled(run, due, calls_for(run, kind), unusable)


def calls_for(run: Run, kind: str) -> int:
    """Scheduler calls one fed record may make (its occurrences; one for precise ttl)."""
    if kind == "eventbridge":
        return max(1, len(run.config.get("eventbridge", {}).get("offsets") or [0]))
    return 1 if kind == "ttl-precise" else 0


def needs_of(run: Run, kind: str, record: Record) -> str:
    """What a fresh write of this item would do that is not done: "" when its schedules exist (as they should),
    else a word for it. Past occurrences are always fed: the handler's ledger delivers each once."""
    now = datetime.fromtimestamp(run.now(), UTC)
    if kind == "eventbridge":
        import eventbridge

        planned = eventbridge.plan(stream(record), run.config, now)
        if planned.poison_reason:
            return "park (unusable due time)"
        for step in planned.steps:
            occurrence = step.occurrence
            if occurrence.recurrence is None and occurrence.due <= now:
                if ledger(run).taken(occurrence.name, aliases=occurrence.aliases):
                    continue  # delivered already (by an earlier run, or the live function)
                return "deliver (past due)"
            if run.options.fresh or schedule(run, occurrence.name, *occurrence.aliases) is None:
                return "schedule"
        return ""
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
    found = schedule(run, *ttl.schedule_names(stream(record), run.config))
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
    return ""


def ledger(run: Run) -> Any:
    from st_core.idempotency import Ledger

    return Ledger.of(run.config["eventbridge"], run.clients)


def schedule(run: Run, *names: str) -> Record | None:
    """The first schedule of these names in the table's group (paced): an occurrence's name, then the names earlier
    versions gave it; None when there is none."""
    from st_core.errors import error_code

    for name in names:
        run.calls.take(1)
        try:
            found: Record = run.clients.get("scheduler").get_schedule(
                Name=name, GroupName=run.config["scheduler"]["group"]
            )
        except Exception as exc:
            if error_code(exc) == "ResourceNotFoundException":
                continue
            raise
        return found
    return None


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
