"""A model check of `precision="second"`: the `eventbridge` model's random writes, time passing, stream lag and batch
redeliveries, with release schedules that run anywhere in their minute and a release queue that delivers every
message a second time (a lost delete), compared with the same plain reference.

The guarantee is stricter than minute precision's: an occurrence is delivered once if the item held that due time
when it came, never before its due second, and never if the item left it before it came, however late the stream
tells the handler so (the releaser reads the item at the second).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule
from st_core.clients import CLIENTS
from st_core.release import release_fire_time
from st_core.timeparse import format_due

from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT
from tests.handlers.model_support import model_test
from tests.handlers.test_model_eventbridge import START, EventBridgeModel
from tests.handlers.test_precision import Clock, ReleaseQueue


class SecondPrecisionModel(EventBridgeModel):
    def __init__(self) -> None:
        super().__init__()
        env = self.env
        name = f"release-{env.table}"
        url = env.sqs.create_queue(QueueName=name, Attributes={"MaximumMessageSize": str(1024 * 1024)})["QueueUrl"]
        arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
        env.second_precision(arn, url)
        self.queue = ReleaseQueue(env, Clock(START), url, arn, redeliver_once=True)
        self.queue.install(CLIENTS.get("sqs"))
        self.queue.install(env.sqs)
        self.slack = 0.0  # seconds the releaser stalled (cold starts, throttling): lateness it may add

    def schedule_minute(self, due: datetime) -> datetime:
        return release_fire_time(due)  # a release schedule runs in the minute before the due time's

    @rule(seconds=st.integers(1, 180))
    def releaser_stalls(self, seconds: int) -> None:
        """Every waiting message is taken that much later (a cold start, throttling), so writes can land between a
        due second and its release."""
        for message in self.queue.messages:
            message.visible_at += timedelta(seconds=seconds)
        self.slack += seconds

    @invariant()
    def on_time(self) -> None:
        """An occurrence the handler knew of before its second, and the item still held when it was delivered, is
        delivered within half a second of it (plus any stall): SQS's whole-second delay, rounded to the nearest
        second (a message visible early waits in the function for the rest)."""
        for pk, due, at in self.delivered:
            occurrence = [o for o in self.reference.all if o.pk == pk and o.due == due][-1]
            if occurrence.ended is not None and occurrence.ended <= at:
                continue  # settled by the stream after it left the time, or gone
            known = [
                seen
                for record, seen in self._seen_records()
                if record["eventName"] != "REMOVE"
                and record["dynamodb"]["Keys"]["PK"]["S"] == pk
                and (record["dynamodb"].get("NewImage") or {}).get("dueAt") == {"S": format_due(due)}
                and int(record["dynamodb"]["ApproximateCreationDateTime"]) >= int(occurrence.written.timestamp())
            ]
            if known and min(known) < due:
                assert at <= due + timedelta(seconds=0.5 + self.slack), f"{pk} due {due} delivered late at {at}"

    def check_the_end(self) -> None:
        self.lambda_delivers()
        self.now += timedelta(hours=1)
        self._fire()
        self.never_early_never_twice()
        self.on_time()
        delivered = {(pk, due) for pk, due, _ in self.delivered}
        due = {(o.pk, o.due) for o in self.reference.all if o.came_due()}
        assert due <= delivered, f"lost: {sorted(due - delivered)}"
        assert delivered <= due, f"delivered though it left its due time before it came: {sorted(delivered - due)}"
        assert self.queue.messages == [] and self.env.schedules() == []
        assert self.env.messages(self.env.config["eventbridge"]["release"]["deadLetterUrl"]) == []

    def _collect(self, at: datetime) -> None:
        """Each delivery at the instant it was sent (the releaser's threads wait out their own sleeps), or `at`."""
        sent = list(self.queue.deliveries)
        self.queue.deliveries.clear()
        for message in self.env.messages(self.env.due_queue_url):
            index = next((i for i, (_, event) in enumerate(sent) if event == message), None)
            moment = at if index is None else sent.pop(index)[0]
            due = datetime.fromisoformat(message["dueAt"].replace("Z", "+00:00"))
            self.delivered.append((message["keys"]["PK"], due, moment))

    def _handle(self, records: list[dict[str, Any]]) -> None:
        self.queue.clock.t = self.now  # the stream handler's sends into the release queue happen now
        super()._handle(records)

    def _fire(self) -> None:
        """Schedules and release queue messages, in time order, up to now."""
        while True:
            runs = sorted((self.clock.instant(s), s["Name"], s) for s in self.env.schedules())
            visible = self.queue.next_visible()
            moments = [m for m in (runs[0][0] if runs else None, visible) if m is not None]
            if not moments or min(moments) > self.now:
                break
            self.queue.clock.t = max(self.queue.clock.t, min(moments))
            if runs and runs[0][0] <= self.queue.clock.t:
                self.clock.run(runs[0][2])
            while self.queue.receivable():
                self.queue.consume()
                self._collect(self.queue.clock.t)
        self.queue.clock.t = self.now


test_second_precision_model = model_test(SecondPrecisionModel)
