"""Checking `polling` items: an item without the mode's status was never indexed, and an INSERT through the
assigner indexes it (on conditions about the item as the record shows it, so a live write wins and no follow-up
loop is needed). With `reconcile`, a waiting item whose index entry disagrees with its time (or lacks one) is
indexed again through the assigner."""

from __future__ import annotations

from datetime import UTC, datetime

from backfill.feed import Run
from backfill.records import Record, change, describe, identity, same

# The AWS actions this module's own calls need (checked by tests/iam): none (reads and parks go through Run).
AWS_ACTIONS: tuple[str, ...] = ()


def act(run: Run, items: list[Record]) -> None:
    """One page of polling items."""
    from st_core.pending import DUE, SHARD, STATUS, Status, shard_of
    from st_core.stream import decode_image

    config = run.config
    fresh: list[Record] = []
    for image in items:
        status = image.get(STATUS, {}).get("S")
        if status is None:
            if run.options.dry_run:
                run.note("acted", "would index", describe(config, image))
            else:
                fresh.append(change(config, None, image, run.now()))
            continue
        if not run.options.reconcile or status != Status.PENDING.value:
            run.note("skipped", "already indexed")
            continue
        plain = decode_image(image) or {}
        shard = shard_of(identity(config, image), config["polling"]["shards"])
        expected_due = None
        if plain.get(config["timeAttribute"]) is not None:
            import polling_assign as polling

            try:
                expected_due = int(polling.due_of(plain, config, datetime.now(UTC)).timestamp())
            except Exception:
                expected_due = None
        wrong = plain.get(SHARD) != shard or DUE not in plain
        wrong = wrong or (expected_due is not None and plain.get(DUE) != expected_due)
        if not wrong:
            run.note("skipped", "index entry agrees")
            continue
        if run.options.dry_run:
            run.note("acted", "would re-index (entry disagrees)", describe(config, image))
            continue
        # The item's time "written again": the assigner re-indexes a waiting item whose time changed.
        old = {k: v for k, v in image.items() if k != config["timeAttribute"]}
        fresh.append(change(config, old, image, run.now()))
    if fresh:
        feed(run, fresh)


def feed(run: Run, fresh: list[Record]) -> None:
    """Through the assigner, then each item read back: one the assigner parked (no usable time) is still as fed,
    without a status; one a live write replaced meanwhile is left to that write's record."""
    from st_core.pending import STATUS

    config = run.config
    failed = {id(r): why for r, why in run.feed(fresh)}
    current = run.read([r["dynamodb"]["Keys"] for r in fresh if id(r) not in failed])
    for record in fresh:
        where = describe(config, record["dynamodb"]["Keys"])
        if id(record) in failed:
            run.park(record, f"backfill: the assigner failed it: {failed[id(record)]}")
            run.note("failed", "failed (parked)", where)
            continue
        now = current.get(identity(config, record["dynamodb"]["Keys"]))
        if now is None:
            run.note("skipped", "deleted meanwhile (nothing to index)", where)
        elif STATUS not in now and not same(now, record["dynamodb"]["NewImage"]):
            # A live write replaced the item after the scan: the assigner's condition on the item as fed refused
            # it, and the live write's own record indexes it once the live function reaches it.
            run.note("skipped", "replaced meanwhile (its own stream record indexes it)", where)
        elif STATUS not in now:
            run.note("failed", "not indexed (the assigner parked it: see the poison queue)", where)
        else:
            run.note("acted", "indexed" if record["eventName"] == "INSERT" else "re-indexed", where)
