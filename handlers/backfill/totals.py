"""Checking `aggregate` totals. Source items are not fed: each one's contribution is computed by the handler's
`contributions` (the same group and value rules), summed exactly (38 digits) per group across the scan, and a
total that differs is replaced by one conditional write on the total as read (its value, its applied-record ids and
its ledger guard): an increment applied concurrently fails the condition, so none is lost; such a group is reported
busy."""

from __future__ import annotations

import math
import time
from decimal import Decimal
from typing import Any

from backfill.feed import Run
from backfill.records import Record, change, describe, same, stream, wire
from backfill.resources import TOTALS, flat
from backfill.scan import Sleep

# The AWS actions this module's own calls need, by resource (handlers/backfill/resources.py; checked by tests/iam):
# read a total, replace one that drifted.
AWS_ACTIONS_ON = {TOTALS: ("dynamodb:GetItem", "dynamodb:UpdateItem")}
AWS_ACTIONS = flat(AWS_ACTIONS_ON)

# How long a record may take from its write to its total (stream lag); the total of a group with a record applied
# later than this before the scan began is left alone (busy).
SETTLE_SECONDS = 60.0


class Sums:
    """Per group: its key value (request form), the exact sum of its items' contributions and their count; and the
    totals as scanned. Carried between invocations and segments as `partial()`."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.sums: dict[str, list[Any]] = {}
        self.totals: dict[str, Record] = {}

    def act(self, items: list[Record]) -> None:
        """Sum each source item's contribution (the handler's own rules), exactly; remember the totals seen."""
        import aggregate
        from st_core.errors import PermanentError

        run = self.run
        settings = run.config["aggregate"]
        partition = run.config["partitionKey"]
        sort = run.config.get("sortKey")
        for image in items:
            key = image.get(partition, {})
            if isinstance(key.get("S"), str) and key["S"].startswith(settings["sourcePrefix"]):
                try:
                    parts = aggregate.contributions(stream(change(run.config, None, image, run.now())), settings)
                except PermanentError as exc:
                    if run.options.dry_run:  # a dry run changes nothing: reported, not parked
                        run.note("failed", "unusable item (a run parks it)", describe(run.config, image))
                        continue
                    # As the live function parks such a record: with its reason, for `redrive poison` once fixed.
                    run.park(change(run.config, None, image, run.now()), f"backfill: {exc}")
                    run.note("failed", "unusable item (parked)", describe(run.config, image))
                    continue
                with run.lock:
                    for part in parts:
                        entry = self.sums.setdefault(part.group, [part.key, Decimal(0), 0])
                        entry[1] = aggregate.DYNAMODB_NUMBERS.add(entry[1], part.delta)
                        entry[2] += 1
                run.note("", "source item counted")
            elif sort and image.get(sort, {}).get("S") == settings["totalSortKey"]:
                from st_core.stream import identity_of

                with run.lock:
                    self.totals[identity_of({"group": key})] = image
                run.note("", "total read")
            else:
                run.note("skipped", "not a source item")

    def partial(self) -> dict[str, Any]:
        """The state to carry in a checkpoint: the sums so far and the totals seen."""
        return {
            "sums": {g: [wire(k), str(s), n] for g, (k, s, n) in self.sums.items()},
            "totals": dict(self.totals),
        }

    def absorb(self, partial: dict[str, Any] | None) -> None:
        import aggregate
        from st_core.stream import request_value

        for group, (key, total, count) in ((partial or {}).get("sums") or {}).items():
            entry = self.sums.setdefault(group, [request_value(key), Decimal(0), 0])
            entry[1] = aggregate.DYNAMODB_NUMBERS.add(entry[1], Decimal(total))
            entry[2] += int(count)
        self.totals.update((partial or {}).get("totals") or {})

    def settle(self, sleep: Sleep = time.sleep) -> None:
        """After every segment: replace each total that differs from its items' sum, or report it (dry run; and in
        reconcile with `onChange=ignore`, where a total keeps the items' first values by design)."""
        run = self.run
        settings = run.config["aggregate"]
        wait = run.options.started + SETTLE_SECONDS - run.now()
        if wait > 0 and not run.options.dry_run:
            sleep(wait)  # a record written just before the scan began has reached its total by now
        for group in sorted(set(self.sums) | set(self.totals)):
            key, expected, count = self.sums.get(group, [None, Decimal(0), 0])
            total = self.totals.get(group)
            held = _number(total, settings["totalAttribute"]) if total else None
            if (held if held is not None else Decimal(0)) == expected and (total is not None or count == 0):
                run.note("skipped", "total agrees")
                continue
            where = f"group {group} total {held} items {expected} ({count} items)"
            if run.options.dry_run or (run.options.reconcile and settings["onChange"] != "adjust"):
                run.note("acted", "would replace total", where)
                continue
            if key is None and total is not None:
                key = {k: v for k, v in total.items() if k == run.config["partitionKey"]}[run.config["partitionKey"]]
            self.replace(key, expected, total, where)

    def replace(self, key: Record, expected: Decimal, seen: Record | None, where: str) -> None:
        """One conditional write of the total, on the total as read; a total written meanwhile is left (busy)."""
        import aggregate
        from st_core.errors import error_code
        from st_core.stream import request_value, to_request

        run = self.run
        settings = run.config["aggregate"]
        table, partition, sort = run.config["table"], run.config["partitionKey"], str(run.config["sortKey"])
        ddb = run.clients.get("dynamodb")
        item_key = {partition: request_value(key), sort: {"S": settings["totalSortKey"]}}
        run.reads.take(1)
        now_item = ddb.get_item(TableName=table, Key=item_key, ConsistentRead=True).get("Item")
        current = wire(now_item) if now_item else None
        first_bucket = math.floor((run.options.started - SETTLE_SECONDS) / aggregate.BUCKET_SECONDS)
        recent = [
            name
            for name in (current or {})
            if name.startswith(aggregate.RING_PREFIX)
            and name[len(aggregate.RING_PREFIX) :].isdigit()
            and int(name[len(aggregate.RING_PREFIX) :]) >= first_bucket
        ]
        if not same(current, seen) or recent:
            run.note("failed", "busy: written during the run (run again when quiet)", where)
            return
        names = {"#total": settings["totalAttribute"]}
        values: dict[str, Any] = {":sum": {"N": str(expected)}}
        if current is None:
            names["#pk"] = partition
            condition = ["attribute_not_exists(#pk)"]
        else:
            condition = []
            for n, (name, value) in enumerate(sorted(current.items())):
                if name in (partition, sort):
                    continue
                names[f"#a{n}"] = name
                values[f":a{n}"] = to_request({"v": value})["v"]
                condition.append(f"#a{n} = :a{n}")
            now_bucket = math.floor(run.now() / aggregate.BUCKET_SECONDS)
            for n, bucket in enumerate(range(first_bucket, now_bucket + 2)):
                names[f"#n{n}"] = aggregate.bucket_name(bucket)
                condition.append(f"attribute_not_exists(#n{n})")
            if aggregate.LEDGER_UNTIL not in current:
                names["#until"] = aggregate.LEDGER_UNTIL
                condition.append("attribute_not_exists(#until)")
        try:
            ddb.update_item(
                TableName=table,
                Key=item_key,
                UpdateExpression="SET #total = :sum",
                ConditionExpression=" AND ".join(condition),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            run.note("failed", "busy: written during the run (run again when quiet)", where)
            return
        run.note("acted", "total replaced", where)


def _number(item: Record, attribute: str) -> Decimal | None:
    value = item.get(attribute) or {}
    return Decimal(value["N"]) if "N" in value else None
