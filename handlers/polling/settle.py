"""The settlement of what a send did, item by item: a sent item completed (marked done or deleted), a refused one
backed off or, after its last attempt, dead-lettered. Each write is conditional on the item being unchanged since
its consistent read, so a user's move meanwhile keeps the item waiting at its new time; each entry's bookkeeping is
its own, so one write that fails leaves that entry due and never stops the others' completions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from st_core import log
from st_core.errors import advice, error_code, is_transient, kms_reason, persist
from st_core.naming import item_keys, occurrence_id
from st_core.pending import ATTEMPTS, DONE_AT, DUE, ERROR, SHARD, STATUS, TASK_DUE, TIMED, Status, without_index
from st_core.stream import decode_image
from st_core.timeparse import format_due

from polling.budget import SLACK_SECONDS
from polling.items import MODE, attempts_of, key_of, task_due, unchanged
from polling.report import Outcome

if TYPE_CHECKING:
    from st_core.clients import Clients
    from st_core.config import HandlerConfig

# Complete an item (update; delete with on_done="delete"), back it off or mark it failed (update), dead-letter it
# to the target DLQ.
AWS_ACTIONS = ("dynamodb:DeleteItem", "dynamodb:UpdateItem", "sqs:SendMessage")


class Settler:
    """The item writes that follow a send (completions, backoffs, dead letters), made with the processor's own call
    limits (`send_clients`, `budget.call_limits`), which a send's budget counts on: a completion is retried only
    while the time left still holds it and the rest of its batch's, each at its worst (`call_seconds`)."""

    def __init__(
        self,
        config: HandlerConfig,
        send_clients: Clients,
        now: Callable[[], float],
        time_left: Callable[[], float],
        call_seconds: float,
        keys: tuple[str, ...],
    ) -> None:
        self.config = config
        self.polling = config["polling"]
        self.send_clients = send_clients
        self.now = now
        self.time_left = time_left
        self.call_seconds = call_seconds
        self.keys = keys

    def settle(
        self,
        outcomes: list[Outcome],
        errors: list[Exception],
        key: dict[str, Any],
        step: Callable[[], Outcome],
        *,
        sent: bool,
    ) -> None:
        """Record one entry's outcome, by itself: a bookkeeping write that fails (the completion, the backoff, the
        dead letter) is logged and kept in `errors`, and the entry counted UNSETTLED; it stays in the index, due
        at the next tick: sent again then if it was sent (at least once, never lost), sent for the first time
        if not."""
        try:
            outcomes.append(step())
        except Exception as exc:
            unsettled(outcomes, errors, key, exc, sent=sent)

    def dispatched(self, item: dict[str, Any], due: int, later: int = 0) -> Outcome:
        """Complete a sent item. Its write is tried again (a throttle, a 500) only while the time left still holds
        the retry and the `later` completions of its batch, each at its worst."""

        def may_retry(wait: float) -> bool:
            return wait + (later + 1) * self.call_seconds <= self.time_left() - SLACK_SECONDS

        persist(partial(self.done, item), may_retry=may_retry)
        log.info(
            "dispatched",
            keys=decode_image(key_of(item, self.keys)),
            dueAt=format_due(datetime.fromtimestamp(due, UTC)),
            lateSeconds=round(self.now() - due, 3),
        )
        return Outcome.DISPATCHED

    def done(self, item: dict[str, Any]) -> None:
        """Mark the sent occurrence done (or delete the item, `on_done="delete"`), only if the item is still as it
        was read: a user's move since keeps it waiting at its new time."""
        ddb = self.send_clients.get("dynamodb")
        condition, names, values = unchanged(item, self.config["timeAttribute"])
        key = key_of(item, self.keys)
        try:
            if self.polling["onDone"] == "delete":
                ddb.delete_item(
                    TableName=self.config["table"],
                    Key=key,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
                return
            names.update({"#status": STATUS, "#doneAt": DONE_AT, "#shard": SHARD, "#error": ERROR})
            names.update({"#task": TASK_DUE, "#timed": TIMED})
            ddb.update_item(
                TableName=self.config["table"],
                Key=key,
                UpdateExpression=("SET #status = :done, #doneAt = :at REMOVE #shard, #due, #error, #task, #timed"),
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={
                    **values,
                    ":done": {"S": Status.DONE.value},
                    ":at": {"S": format_due(datetime.fromtimestamp(self.now(), UTC))},
                },
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            log.warning(
                "changed-since-sent",
                keys=decode_image(key),
                note="the item was moved, rewritten or deleted between its read and its completion; left as it is",
            )

    def failed(self, item: dict[str, Any], exc: Exception) -> Outcome:
        """Back the item off (back in the index at a later `stDue`, its occurrence's time kept in `stTaskDue`, so
        the next attempt is the same occurrence), or after the last attempt dead-letter it (`_give_up`)."""
        attempts = attempts_of(item) + 1
        reason = kms_reason(exc) or f"{type(exc).__name__}: {str(exc)[:500]}{advice(exc)}"
        final = not is_transient(exc) or attempts >= self.polling["maxAttempts"]
        log.warning(
            "dispatch-failed", keys=decode_image(key_of(item, self.keys)), attempts=attempts, final=final, reason=reason
        )
        if final:
            return self._give_up(item, reason, attempts)
        condition, names, values = unchanged(item, self.config["timeAttribute"])
        names.update({"#status": STATUS, "#attempts": ATTEMPTS, "#error": ERROR, "#task": TASK_DUE})
        backoff = self.polling["backoffSeconds"] * 2 ** (attempts - 1)
        values.update(
            {
                ":attempts": {"N": str(attempts)},
                ":error": {"S": reason},
                ":retry": {"S": Status.RETRY.value},
                ":next": {"N": str(int(self.now()) + backoff)},
                ":task": {"N": str(task_due(item))},
            }
        )
        self.write_if(
            item,
            "SET #status = :retry, #attempts = :attempts, #error = :error, #due = :next, #task = :task",
            condition,
            names,
            values,
        )
        return Outcome.RETRIED

    def _give_up(self, item: dict[str, Any], reason: str, attempts: int) -> Outcome:
        """Dead-letter an occurrence that failed for good, in three steps, so that a dead letter is sent only for
        an item still as it was read, and is never lost:

        1. mark it FAILED with the reason, conditional on the item being unchanged since its read (a user who moved
           or rewrote it meanwhile keeps it waiting at its new time: no dead letter), and keep it in the index;
        2. send the dead letter;
        3. take it out of the index (conditional on it still being that FAILED entry).

        Sending first (as before) dead-lettered an item the user had changed meanwhile. Marking it and taking it out
        of the index in one write would lose the dead letter if the send then failed (nothing would read the item
        again). A FAILED item still in the index is a dead letter owed: the next tick that reads it sends it
        (`owed`) and takes it out, so a send or clean-up that fails is repeated, at least once, never lost. Only a
        dead letter whose clean-up failed can be sent twice."""
        condition, names, values = unchanged(item, self.config["timeAttribute"])
        names.update({"#status": STATUS, "#attempts": ATTEMPTS, "#error": ERROR, "#task": TASK_DUE})
        values.update(
            {
                ":attempts": {"N": str(attempts)},
                ":error": {"S": reason},
                ":failed": {"S": Status.FAILED.value},
                ":task": {"N": str(task_due(item))},
            }
        )
        marked = self.write_if(
            item,
            "SET #status = :failed, #attempts = :attempts, #error = :error, #task = :task",
            condition,
            names,
            values,
        )
        if not marked:
            log.warning(
                "changed-since-read",
                keys=decode_image(key_of(item, self.keys)),
                note="failed for good, but the item was moved, rewritten or deleted since its read: no dead letter",
            )
            return Outcome.SKIPPED
        return self.owed(
            {
                **item,
                STATUS: {"S": Status.FAILED.value},
                ATTEMPTS: {"N": str(attempts)},
                ERROR: {"S": reason},
                TASK_DUE: {"N": str(task_due(item))},
            }
        )

    def owed(self, item: dict[str, Any]) -> Outcome:
        """Send the dead letter a FAILED item still in the index is owed, then take it out of the index (see
        `_give_up`): after a send or a clean-up that failed, the next tick that reads the entry repeats them."""
        self._dead_letter(item, item.get(ERROR, {}).get("S", "failed"), attempts_of(item))
        self.write_if(
            item,
            "REMOVE #shard, #due, #task, #timed",
            "#status = :failed AND #due = :due",
            {"#status": STATUS, "#due": DUE, "#shard": SHARD, "#task": TASK_DUE, "#timed": TIMED},
            {":failed": {"S": Status.FAILED.value}, ":due": item[DUE]},
        )
        return Outcome.FAILED

    def write_if(
        self, item: dict[str, Any], update: str, condition: str, names: dict[str, str], values: dict[str, Any]
    ) -> bool:
        """One conditional update of the item; False when its condition failed (the item changed: nothing
        written)."""
        try:
            self.send_clients.get("dynamodb").update_item(
                TableName=self.config["table"],
                Key=key_of(item, self.keys),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except Exception as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def _dead_letter(self, raw: dict[str, Any], reason: str, attempts: int) -> None:
        from st_core.poison import fit  # only a task that failed for good compiles it, not every tick's cold start

        key = key_of(raw, self.keys)
        body = {
            "reason": reason,
            "attempts": attempts,
            "mode": MODE,
            "table": self.config["table"],
            "keys": decode_image(key),
            # What `scheduled-table redrive target` needs to send the same due event again, under the same name.
            "dueAt": format_due(datetime.fromtimestamp(task_due(raw), UTC)),
            "occurrence": occurrence_id(item_keys(key, self.config), datetime.fromtimestamp(task_due(raw), UTC)),
            "item": without_index(decode_image(raw) or {}),
        }
        # A 400 KB item still dead-letters: without its body if need be, never retried forever for its size.
        self.send_clients.get("sqs").send_message(
            QueueUrl=self.polling["deadLetterUrl"], MessageBody=fit(body, "item", {})
        )


def unsettled(
    outcomes: list[Outcome], errors: list[Exception], key: dict[str, Any], exc: Exception, *, sent: bool
) -> None:
    """Count an entry whose bookkeeping failed UNSETTLED, keep its error, and log why it stays due."""
    errors.append(exc)
    outcomes.append(Outcome.UNSETTLED)
    log.error(
        "unsettled",
        keys=decode_image(key),
        sent=sent,
        reason=f"{type(exc).__name__}: {str(exc)[:500]}",
        note="stays due: taken again by the next tick" + (", and sent again" if sent else ""),
    )
