"""DynamoDB's TTL process, inside ministack's own process, so a TTL deletion is what it is on AWS: the item goes, and
the table's stream gets one REMOVE record with `userIdentity` = the DynamoDB service, which each event source mapping
delivers in its ordinary batches (its batch size, filter, retries, and the local cloud's redelivery and faults).

ministack's own reaper deletes expired items silently (no stream record) about once a minute; it is kept off
(`aws_behaviour.silence_ttl_reaper`) and this process does the deleting instead, once the local cloud has switched it
on (the emulators do, as they start: `GET /_localcloud/ttl?start=1&delay=5&delays={"offers-table": 200}`; `stop=1`
switches it off). Each item is deleted `delay` seconds after the time its TTL attribute names (AWS: minutes to
days; the local cloud's few seconds keep a demo short), a table named in `delays` after its own delay. The same
endpoint answers how many items it deleted per table and which tables it watches (`{"deleted": {...}, "tables":
[...]}`). Local only, like `/_ministack/reset`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .endpoints import Response, first, json_answer, serve
from .stores import snapshot

TTL_PATH = "/_localcloud/ttl"
TTL_PRINCIPAL = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
SWEEP_SECONDS = 1.0


@dataclass
class TtlProcess:
    """What the TTL process is told (on, its delays) and what it did (deleted, per table)."""

    enabled: bool = False
    delay: float = 0.0
    delays: dict[str, float] = field(default_factory=dict)
    deleted: Counter[str] = field(default_factory=Counter)
    _emitting: threading.local = field(default_factory=threading.local)

    def configure(self, query: dict[str, Any]) -> None:
        """From the endpoint's query: `start=1` with `delay` and `delays` (JSON), or `stop=1`; neither only reads."""
        if first(query.get("stop")):
            self.enabled = False
        elif first(query.get("start")):
            self.delay = float(first(query.get("delay")) or 0)
            self.delays = {str(k): float(v) for k, v in json.loads(first(query.get("delays")) or "{}").items()}
            self.enabled = True

    def expires(self, table: str, ttl: float) -> float:
        """When an item goes: a stated delay after its TTL, where AWS takes typically days (rule("dynamodb-ttl-lag");
        relaxed here on purpose, RELAXATIONS "local-ttl-delay")."""
        return ttl + self.delays.get(table, self.delay)

    def sweep(self, now: float) -> None:
        """Delete every item whose expiry (its TTL + the delay) has passed, each with its REMOVE record."""
        from ministack.core.responses import get_account_id, get_region, set_request_account_id, set_request_region
        from ministack.services import dynamodb

        previous = (get_account_id(), get_region())
        try:
            for (account, region, name), setting in list(dynamodb._ttl_settings.all_items()):
                attribute = setting.get("AttributeName", "")
                if setting.get("TimeToLiveStatus") != "ENABLED" or not attribute:
                    continue
                set_request_account_id(account)
                set_request_region(region)
                self._sweep_table(dynamodb, name, attribute, now)
        finally:
            set_request_account_id(previous[0])
            set_request_region(previous[1])

    def _sweep_table(self, dynamodb: Any, name: str, attribute: str, now: float) -> None:
        table = dynamodb._tables.get(name)
        if not table:
            return
        for pk, by_sort in snapshot(table["items"]):
            for sk, item in snapshot(by_sort):
                value = item.get(attribute)
                if value is None or "N" not in value:  # AWS's TTL ignores an attribute that is not a number
                    continue
                try:
                    if self.expires(name, float(value["N"])) > now:
                        continue
                except ValueError:
                    continue
                with dynamodb._lock:
                    if table["items"].get(pk, {}).get(sk) is not item:
                        continue  # rewritten since it was read: the next sweep sees its new state
                    dynamodb._remove_item(table, pk, sk)
                    self._emitting.ttl = True
                    try:
                        dynamodb._emit_stream_event(name, "REMOVE", item, None)
                    finally:
                        self._emitting.ttl = False
                self.deleted[name] += 1

    def tables(self) -> list[str]:
        """The tables whose TTL is enabled, of every account and region."""
        from ministack.services import dynamodb

        return sorted(
            name
            for (account, region, name), setting in list(dynamodb._ttl_settings.all_items())
            if setting.get("TimeToLiveStatus") == "ENABLED" and dynamodb._tables.get_scoped(account, region, name)
        )

    def mark(self, record: dict[str, Any]) -> dict[str, Any]:
        """A stream record built while this process deletes: the service's deletion, as AWS writes it."""
        if getattr(self._emitting, "ttl", False):
            record["userIdentity"] = dict(TTL_PRINCIPAL)
        return record

    def run(self) -> None:
        import logging

        log = logging.getLogger("localcloud.ttl")
        while True:
            time.sleep(SWEEP_SECONDS)
            if not self.enabled:
                continue
            try:
                self.sweep(time.time())
            except Exception:  # keep sweeping; the error is in ministack's log
                log.exception("TTL sweep failed")


def install() -> TtlProcess:
    """Start the TTL process in ministack's process and serve `TTL_PATH`."""
    from ministack.services import dynamodb

    process = TtlProcess()
    build = dynamodb._build_change_record

    def build_record(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return process.mark(build(*args, **kwargs))

    dynamodb._build_change_record = build_record

    def answer(query: dict[str, Any]) -> Response:
        process.configure(query)
        return json_answer({"deleted": dict(process.deleted), "tables": process.tables()})

    serve(TTL_PATH, answer)
    threading.Thread(target=process.run, name="localcloud-ttl", daemon=True).start()
    return process
