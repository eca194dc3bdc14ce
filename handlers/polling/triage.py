"""What becomes of one item read again before any send: sent; skipped (settled, moved or deleted since the index
showed it); indexed again at the time its time attribute now gives (`reindex`); taken out of the index (its time
removed); its owed dead letter sent (`Settler.owed`); or parked in the poison queue when it cannot be read
(`park`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from st_core import log
from st_core.pending import ATTEMPTS, ERROR, SHARD, STATUS, TASK_DUE, TIMED, Status
from st_core.stream import decode_image
from st_core.timeparse import format_due

from polling.items import (
    MODE,
    Unusable,
    as_indexed,
    attempts_of,
    cancelled,
    delay_of,
    in_place,
    key_of,
    moved,
    task_due,
    unchanged,
)
from polling.report import Outcome

if TYPE_CHECKING:
    from st_core.clients import Clients
    from st_core.config import HandlerConfig

    from polling.settle import Settler

# Its writes are the settler's (`Settler.write_if`); the poison queue's send is st_core.poison's.
AWS_ACTIONS: tuple[str, ...] = ()


class Triage:
    """Judges each item of a page, as read consistently, against the index entry that listed it, and makes the
    writes that keep the index true to the item (with the settler's conditional write)."""

    def __init__(
        self, config: HandlerConfig, clients: Clients, settler: Settler, now: Callable[[], float], keys: tuple[str, ...]
    ) -> None:
        self.config = config
        self.polling = config["polling"]
        self.clients = clients
        self.settler = settler
        self.now = now
        self.keys = keys

    def triage(self, item: dict[str, Any], entry: dict[str, Any]) -> Outcome | None:
        """What becomes of one read item before any send: None to send it, or its outcome (not sent). `Unusable`
        for an item whose bookkeeping or time cannot be read."""
        status = item.get(STATUS, {}).get("S")
        if status == Status.FAILED.value and in_place(item, entry):
            return self.settler.owed(item)  # failed for good, still in the index: its dead letter is owed
        if not as_indexed(item, entry):
            return Outcome.SKIPPED
        task_due(item)
        attempts_of(item)
        if cancelled(item, self.config):
            delay = delay_of(item, self.polling)
            if status == Status.PENDING.value:
                if delay is None:
                    self._unindex(item)  # the assigner parks it (an item without a time), and indexes it nowhere
                return Outcome.SKIPPED  # with a delay, the assigner indexes it again at it
            # Backed off: the assigner's filter never passes its user's writes.
            if delay is None:
                time_attribute, delay_attribute = self.config["timeAttribute"], self.polling["delayAttribute"]
                raise Unusable(
                    time_attribute,
                    f"was removed while the item waited to be tried again, and it has no {delay_attribute!r} "
                    "(seconds >= 0) and the component no default_delay_seconds",
                    f"write {time_attribute!r} again (ISO-8601 or epoch seconds) or {delay_attribute!r}, or delete "
                    "the item",
                )
            self._reindex(item, int(self.now()) + delay, timed=False)
            return Outcome.SKIPPED
        at = moved(item, self.config)
        if at is not None:
            self._reindex(item, at)
            return Outcome.SKIPPED
        return None

    def park(self, raw: dict[str, Any], problem: Unusable) -> Outcome:
        """Park an item that cannot be handled in the table's poison queue, with a reason naming its keys, the
        attribute and the fix, then take it out of the index (`_unindex`), so it is not read again every tick. The
        send comes first: if the write then fails, the next tick parks it again (twice, never lost)."""
        from st_core.jsontext import dumps
        from st_core.poison import UNUSABLE_ITEM, PoisonQueue, message_limit
        from st_core.stream import lambda_keys

        key = key_of(raw, self.keys)
        keys = decode_image(key)
        reason = f"item {dumps(keys)} cannot be delivered: {problem}; taken out of the due index"
        queue = PoisonQueue(
            self.config["poisonQueueUrl"],
            mode=MODE,
            table=self.config["table"],
            clients=self.clients,
            limit=message_limit(self.config),
        )
        queue.send({"keys": keys, "Keys": lambda_keys(key), "item": decode_image(raw)}, reason, UNUSABLE_ITEM)
        log.error("poisoned", keys=keys, reason=reason)
        self._unindex(raw, reason)
        return Outcome.POISONED

    def _unindex(self, raw: dict[str, Any], reason: str | None = None) -> None:
        """Take the item out of the due index, conditional on it being as read, and leave it waiting (PENDING),
        so that a user's next write of its time indexes it again (the assigner's filter passes updates of
        waiting items). `reason` (why it was parked) is kept in `stError`."""
        condition, names, values = unchanged(raw, self.config["timeAttribute"])
        names.update({"#status": STATUS, "#shard": SHARD, "#task": TASK_DUE, "#timed": TIMED})
        values[":pending"] = {"S": Status.PENDING.value}
        update = "SET #status = :pending REMOVE #shard, #due, #task, #timed"
        if reason is not None:
            names["#error"] = ERROR
            values[":error"] = {"S": reason}
            update = "SET #status = :pending, #error = :error REMOVE #shard, #due, #task, #timed"
        if self.settler.write_if(raw, update, condition, names, values):
            log.info("unindexed", keys=decode_image(key_of(raw, self.keys)), parked=reason is not None)

    def _reindex(self, raw: dict[str, Any], at: int, *, timed: bool = True) -> None:
        """Index an item whose time attribute no longer gives its `stDue` again at the time it gives (`at`), as the
        assigner indexes a move (conditional on the item being as it was read); the next tick that finds it due
        sends it. The assigner does not see every such item: its filter passes moves of waiting items only (not
        those of a backed-off one), and a writer's own index entry never (an
        insert carrying `stStatus`, or an `stDue` rewritten alone, is no change of the time attribute). So neither
        waits for it: when both index the same move, the second one's condition fails (the `stDue` it was read
        with is gone), and the item has one place in the index. The assigner ignores this write (it keeps the
        time attribute). `timed=False` indexes a backed-off item whose time was removed at its delay, as the
        assigner indexes a waiting one (not marked as indexed from its time)."""
        condition, names, values = unchanged(raw, self.config["timeAttribute"])
        names.update({"#status": STATUS, "#task": TASK_DUE, "#attempts": ATTEMPTS, "#error": ERROR})
        names["#timed"] = TIMED
        values.update({":moved": {"N": str(at)}, ":pending": {"S": Status.PENDING.value}})
        update = "SET #due = :moved, #status = :pending REMOVE #task, #attempts, #error, #timed"
        if timed:
            values[":timed"] = {"BOOL": True}
            update = "SET #due = :moved, #status = :pending, #timed = :timed REMOVE #task, #attempts, #error"
        if not self.settler.write_if(raw, update, condition, names, values):
            return
        log.info(
            "reindexed",
            keys=decode_image(key_of(raw, self.keys)),
            dueAt=format_due(datetime.fromtimestamp(at, UTC)),
            indexedAt=format_due(datetime.fromtimestamp(task_due(raw), UTC)),
            note=f"its {self.config['timeAttribute']!r} does not give the stDue it was indexed at: indexed again"
            + ("" if timed else ", at its delay (the attribute was removed)"),
        )
