"""The send of one batch of a page's items, on the worker pool: their due events built, as many sent a call as the
target takes and as fit the time left with their completions (`budget.fitting`), then each entry settled by itself
(`Settler`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from st_core.dispatch import due_event, prepare, send_many, target_input
from st_core.naming import item_keys, occurrence_id
from st_core.pending import without_index
from st_core.stream import decode_image

from polling.budget import fitting
from polling.items import MODE, key_of, task_due
from polling.report import Outcome

if TYPE_CHECKING:
    from st_core.clients import Clients
    from st_core.config import HandlerConfig

    from polling.settle import Settler

# Its sends are st_core.dispatch's (the target kind's actions), its writes the settler's.
AWS_ACTIONS: tuple[str, ...] = ()

# An entry ready to send: (item, due time, occurrence id, payload).
Ready = tuple[dict[str, Any], int, str, str]


class Sender:
    """Sends batches of items to the target with the processor's own clients (`send_clients`), each send sized to
    the time left, and hands each entry to the settler."""

    def __init__(
        self,
        config: HandlerConfig,
        send_clients: Clients,
        settler: Settler,
        time_left: Callable[[], float],
        call_seconds: float,
        keys: tuple[str, ...],
    ) -> None:
        self.config = config
        self.send_clients = send_clients
        self.settler = settler
        self.time_left = time_left
        self.call_seconds = call_seconds
        self.keys = keys

    def run(self, batch: list[dict[str, Any]]) -> tuple[list[Outcome], Exception | None]:
        """Dispatch a batch in one call to the target where it takes a batch (`dispatch.send_many`), then complete
        each the target took, and back off (or dead-letter) each it refused, by itself: one refused entry is
        retried alone, never with the ones already sent. Each entry's bookkeeping is its own (`Settler.settle`): one
        that fails (a throttle outlasting the retries) leaves that entry due, and the others are still completed, so
        none the target took is sent again; the first such error is returned, for the tick to fail with after the
        rest is done. A send takes only the entries whose send and completions fit the time left at their worst
        (`budget.fitting`), the next send the next ones, and so on; what does not fit even alone is left for the
        next tick, unsent: a send the Lambda timeout cuts off before its completions would be sent again once the
        shard's lease ends."""
        if self.time_left() < self.config["polling"]["budgetMarginSeconds"]:
            return [Outcome.LEFT] * len(batch), None
        target = self.config["target"]
        settler = self.settler
        outcomes: list[Outcome] = []
        errors: list[Exception] = []
        ready: list[Ready] = []
        for item in batch:
            key = key_of(item, self.keys)
            try:
                due = task_due(item)
                named = item_keys(key, self.config)
                moment = datetime.fromtimestamp(due, UTC)
                occurrence = occurrence_id(named, moment)
                event = due_event(
                    mode=MODE,
                    table=self.config["table"],
                    keys=named.plain,
                    due=moment,
                    item=without_index(decode_image(item) or {}),
                    occurrence=occurrence,
                )
                payload = target_input(target, event)
            except Exception as exc:
                settler.settle(outcomes, errors, key, partial(settler.failed, item, exc), sent=False)
                continue
            ready.append((item, due, occurrence, payload))
        if ready:
            try:
                prepare(target, clients=self.send_clients)
            except Exception as exc:  # the target cannot be looked up (a queue deleted): a send that failed, each
                for item, *_ in ready:
                    key = key_of(item, self.keys)
                    settler.settle(outcomes, errors, key, partial(settler.failed, item, exc), sent=False)
                return outcomes, errors[0] if errors else None
        while ready:
            # As many as fit, sent and settled, then the next: a short time left sends smaller batches.
            entries = [(payload, occurrence) for *_, occurrence, payload in ready]
            count = fitting(target, entries, self.call_seconds, self.time_left())
            if count == 0:
                outcomes.extend([Outcome.LEFT] * len(ready))
                break
            self._send(ready[:count], outcomes, errors)
            ready = ready[count:]
        return outcomes, errors[0] if errors else None

    def _send(self, ready: list[Ready], outcomes: list[Outcome], errors: list[Exception]) -> None:
        """Send entries that fit the time left (`budget.fitting`), then settle each: the completions first (the
        budget counts one each), then the refused entries' backoffs (nothing was sent)."""
        settler = self.settler
        refused = send_many(
            self.config["target"],
            [(payload, occurrence) for *_, occurrence, payload in ready],
            clients=self.send_clients,
        )
        sent = [(item, due) for (item, due, _, _), error in zip(ready, refused, strict=True) if error is None]
        for position, (item, due) in enumerate(sent):
            later = len(sent) - position - 1
            step = partial(settler.dispatched, item, due, later)
            settler.settle(outcomes, errors, key_of(item, self.keys), step, sent=True)
        for (item, _, _, _), error in zip(ready, refused, strict=True):
            if error is not None:
                step = partial(settler.failed, item, error)
                settler.settle(outcomes, errors, key_of(item, self.keys), step, sent=False)
