"""What ministack does not do and the stack relies on, done from outside through public AWS APIs only.

- `TtlService`: DynamoDB's TTL process. It deletes expired items of TTL-enabled tables and hands each deletion, as
  the REMOVE record AWS writes (`userIdentity` = the DynamoDB service), to every event source mapping of the table's
  stream whose filter criteria match it. ministack's own reaper also deletes expired items, silently, about once a
  minute; the service watches items before they expire so a deletion it loses to the reaper is still delivered.
- `UniversalTargets`: Scheduler's universal targets (`arn:aws:scheduler:::aws-sdk:<service>:<action>`), which
  ministack drops. Definitions are captured as soon as they appear (ministack deletes such a schedule at its due
  time as though it had fired it), the API is called with the schedule's `Input` when due, failures go to the
  schedule's dead-letter queue, and `ActionAfterCompletion` is honoured.

IAM: what AWS does on the component's behalf is done here with the credentials of the role AWS would use
(`RoleSessions`, sessions handed out by the local cloud's ministack, see localcloud/iam.py): a universal target's
call and its dead-letter send as the schedule's `RoleArn`, a TTL record's on-failure destination as the function's
execution role. Reading the tables, the TTL deletion itself and invoking a function for a stream record are the
services' own doing, with no role of the account: they use the local cloud's admin credentials.

The stack may be removed under them (`python -m localcloud down` while `up --stay` runs): a table, queue, function
or schedule group that is gone is let go of with one line in the log, never a traceback.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import ClientError

from .component import constants, error_code
from .iam import DENIED, DENIED_CODES, SCHEDULER_PRINCIPAL, SERVICE_SESSION_PATH
from .provision import NOT_FOUND, clients, name_from_arn
from .window import MinuteWindow, seed

log = logging.getLogger("localcloud")

TTL_PRINCIPAL = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
WATCH_HORIZON_SECONDS = 120.0
TTL_DELAY_SECONDS = 5.0
TABLES_REFRESH_SECONDS = 3.0
MAX_LOCAL_RETRIES = 2

Client = Callable[[str], Any]


def gone(error: BaseException) -> bool:
    """The resource a call named does not exist (any more)."""
    return isinstance(error, ClientError) and error_code(error) in NOT_FOUND


def _pages(call: Callable[..., dict[str, Any]], key: str, token: str = "NextToken", **kwargs: Any) -> list[Any]:
    found: list[Any] = []
    while True:
        page = call(**kwargs)
        found.extend(page.get(key, []))
        if not page.get(token):
            return found
        kwargs[token] = page[token]


# -- roles -------------------------------------------------------------------------------------------------------


LAMBDA_PRINCIPAL = "lambda.amazonaws.com"
SESSION_REFRESH_SECONDS = 300.0


class RoleSessions:
    """Clients signed with a role's credentials, as an AWS service assumes it (ministack's local-only
    `/_localcloud/service-session`, which checks the role's trust policy names the service). A service that may not
    assume the role gets `AccessDeniedException`, as its call would on AWS."""

    def __init__(self, endpoint: str, region: str) -> None:
        self.endpoint = endpoint
        self.region = region
        self._lock = threading.Lock()
        self._sessions: dict[tuple[str, str], tuple[float, boto3.session.Session]] = {}
        self._clients: dict[tuple[str, str, str], Any] = {}
        self._config = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=60)

    def _session(self, role_arn: str, principal: str, source_arn: str) -> boto3.session.Session:
        from urllib.parse import urlencode

        key = (role_arn, principal)
        cached = self._sessions.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        query = urlencode({"role": role_arn, "service": principal, "source": source_arn})
        request = urllib.request.Request(f"{self.endpoint}{SERVICE_SESSION_PATH}?{query}")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                credentials = json.loads(response.read())["Credentials"]
        except urllib.error.HTTPError as error:
            try:
                reason = str(json.loads(error.read() or b"{}").get("Message", error))
            except ValueError:
                reason = str(error)
            raise ClientError({"Error": {"Code": DENIED, "Message": reason}}, "AssumeRole") from None
        session = boto3.session.Session(
            region_name=self.region,
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
        )
        self._sessions[key] = (time.monotonic() + SESSION_REFRESH_SECONDS, session)
        return session

    def client(self, role_arn: str, service: str, principal: str, source_arn: str = "") -> Any:
        """A `service` client signed as `role_arn` assumed by `principal` (e.g. `scheduler.amazonaws.com`)."""
        with self._lock:
            session = self._session(role_arn, principal, source_arn)
            key = (role_arn, principal, service)
            cached = self._clients.get(key)
            if cached is None or cached[0] is not session:
                cached = (session, session.client(service, endpoint_url=self.endpoint, config=self._config))
                self._clients[key] = cached
            return cached[1]


# -- TTL -------------------------------------------------------------------------------------------------------------


@dataclass
class _Watched:
    table: str
    keys: dict[str, Any]
    image: dict[str, Any]
    expires: float
    seen_at: float


@dataclass
class _TtlTable:
    name: str
    attribute: str
    key_names: list[str]
    stream_arn: str
    view_type: str


def expired_record(table: _TtlTable, keys: dict[str, Any], image: dict[str, Any], region: str) -> dict[str, Any]:
    """The stream record DynamoDB writes when TTL deletes an item, shaped as Lambda receives it."""
    view = table.view_type
    data: dict[str, Any] = {
        "ApproximateCreationDateTime": float(int(time.time())),
        "Keys": keys,
        "SequenceNumber": str(time.time_ns()),
        "SizeBytes": len(json.dumps(image)),
        "StreamViewType": view,
    }
    if view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
        data["OldImage"] = image
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": region,
        "dynamodb": data,
        "userIdentity": dict(TTL_PRINCIPAL),
        "eventSourceARN": table.stream_arn,
    }


def filters_match(mapping: dict[str, Any], record: dict[str, Any]) -> bool:
    """Lambda's filter semantics: no criteria passes everything; otherwise any one pattern must match."""
    from moto.events.models import EventPattern  # a real EventBridge pattern matcher; imported only when needed

    patterns = [f["Pattern"] for f in (mapping.get("FilterCriteria") or {}).get("Filters") or []]
    return not patterns or any(EventPattern.load(p).matches_event(record) for p in patterns)  # type: ignore[arg-type]


@dataclass
class TtlService:
    """`delay`: seconds after expiry before an item is deleted. AWS takes minutes to days; the local cloud defaults
    to a few seconds, so a demo stays short. `delays` overrides it per table: a table whose precise schedules
    should be seen to win gets a delay longer than Scheduler's minute (AWS's TTL is slower still)."""

    client: Client
    region: str
    delay: float = 0.0
    delays: dict[str, float] = field(default_factory=dict)
    roles: RoleSessions | None = None
    delivered: int = 0
    failed: int = 0
    deleted: Counter[str] = field(default_factory=Counter)
    _tables: tuple[float, list[_TtlTable]] = (0.0, [])
    _watched: dict[tuple[str, str], _Watched] = field(default_factory=dict)

    def tables(self) -> list[_TtlTable]:
        """TTL-enabled tables, looked up again every few seconds (not every tick: that is many API calls)."""
        looked_up, cached = self._tables
        if time.monotonic() - looked_up < TABLES_REFRESH_SECONDS:
            return cached
        found = self._lookup_tables()
        self._forget({t.name for t in cached} - {t.name for t in found})
        self._tables = (time.monotonic(), found)
        return found

    def _forget(self, names: set[str]) -> None:
        """Stop watching tables that were deleted, saying so once."""
        looked_up, cached = self._tables
        known = sorted(names & {t.name for t in cached})
        if known:
            log.info("TTL no longer emulated for deleted table(s): %s", ", ".join(known))
        self._tables = (looked_up, [t for t in cached if t.name not in names])
        for ident in [i for i in self._watched if i[0] in names]:
            del self._watched[ident]

    def _lookup_tables(self) -> list[_TtlTable]:
        ddb = self.client("dynamodb")
        found = []
        for name in _pages(ddb.list_tables, "TableNames", token="LastEvaluatedTableName"):
            try:
                ttl = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
                if ttl.get("TimeToLiveStatus") != "ENABLED":
                    continue
                table = ddb.describe_table(TableName=name)["Table"]
            except ClientError as error:
                if gone(error):
                    continue  # deleted since it was listed
                raise
            spec = table.get("StreamSpecification") or {}
            found.append(
                _TtlTable(
                    name=name,
                    attribute=ttl["AttributeName"],
                    key_names=[k["AttributeName"] for k in table["KeySchema"]],
                    stream_arn=table.get("LatestStreamArn", "") if spec.get("StreamEnabled") else "",
                    view_type=spec.get("StreamViewType", ""),
                )
            )
        return found

    def tick(self, now: float | None = None) -> None:
        for table in self.tables():
            try:
                self._sweep(table, time.time() if now is None else now)
            except ClientError as error:
                if not gone(error):
                    raise
                if self._exists(table.name):
                    # Its function or queue went first (`down` removes dependents first); the table is next.
                    log.warning("TTL deletion in %s not delivered: %s", table.name, error)
                else:
                    self._forget({table.name})

    def _exists(self, name: str) -> bool:
        try:
            self.client("dynamodb").describe_table(TableName=name)
        except ClientError as error:
            if gone(error):
                return False
            raise
        return True

    def _sweep(self, table: _TtlTable, now: float) -> None:
        ddb = self.client("dynamodb")
        items = _pages(
            ddb.scan,
            "Items",
            token="ExclusiveStartKey",
            TableName=table.name,
            ConsistentRead=True,
            FilterExpression="#ttl <= :horizon",
            ExpressionAttributeNames={"#ttl": table.attribute},
            ExpressionAttributeValues={":horizon": {"N": str(int(now + WATCH_HORIZON_SECONDS))}},
        )
        current: set[tuple[str, str]] = set()
        for item in items:
            keys = {k: item[k] for k in table.key_names}
            ident = (table.name, json.dumps(keys, sort_keys=True))
            current.add(ident)
            self._watched[ident] = _Watched(table.name, keys, item, float(item[table.attribute]["N"]), now)
        for ident, watched in list(self._watched.items()):
            if watched.table != table.name or watched.expires + self.delays.get(table.name, self.delay) > now:
                continue
            if ident in current:
                self._expire(table, watched)
            else:
                self._vanished(table, watched)
            self._watched.pop(ident, None)

    def _expire(self, table: _TtlTable, watched: _Watched) -> None:
        try:
            old = self.client("dynamodb").delete_item(
                TableName=table.name,
                Key=watched.keys,
                ConditionExpression="#ttl = :seen",
                ExpressionAttributeNames={"#ttl": table.attribute},
                ExpressionAttributeValues={":seen": watched.image[table.attribute]},
                ReturnValues="ALL_OLD",
            )
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return  # changed since the scan: the next sweep sees its new state
            raise
        self._deliver(table, expired_record(table, watched.keys, old.get("Attributes", watched.image), self.region))

    def _vanished(self, table: _TtlTable, watched: _Watched) -> None:
        """Expired and gone before this service deleted it: ministack's reaper (no stream record) or a user's
        delete (a REMOVE record without userIdentity). Only the first is a TTL deletion."""
        ddb = self.client("dynamodb")
        if ddb.get_item(TableName=table.name, Key=watched.keys, ConsistentRead=True).get("Item"):
            return  # rewritten with a later expiry
        if not self._removed_by_user(table, watched):
            self._deliver(table, expired_record(table, watched.keys, watched.image, self.region))

    def _removed_by_user(self, table: _TtlTable, watched: _Watched) -> bool:
        if not table.stream_arn:
            return False
        streams = self.client("dynamodbstreams")
        shards = streams.describe_stream(StreamArn=table.stream_arn)["StreamDescription"]["Shards"]
        for shard in shards:
            iterator = streams.get_shard_iterator(
                StreamArn=table.stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            while iterator:
                page = streams.get_records(ShardIterator=iterator, Limit=1000)
                for record in page["Records"]:
                    data = record["dynamodb"]
                    created = data["ApproximateCreationDateTime"]
                    created = created.timestamp() if isinstance(created, datetime) else float(created)
                    if (
                        record["eventName"] == "REMOVE"
                        and data["Keys"] == watched.keys
                        and created >= watched.seen_at - 1
                    ):
                        return True
                iterator = page.get("NextShardIterator") if page["Records"] else None
        return False

    def _deliver(self, table: _TtlTable, record: dict[str, Any]) -> None:
        self.deleted[table.name] += 1
        if not table.stream_arn:
            return
        lam = self.client("lambda")
        for mapping in _pages(
            lam.list_event_source_mappings, "EventSourceMappings", "NextMarker", EventSourceArn=table.stream_arn
        ):
            if mapping.get("State", "Enabled") not in ("Enabled", "Enabling", "Updating") or not filters_match(
                mapping, record
            ):
                continue
            self._invoke(mapping, record)

    def _invoke(self, mapping: dict[str, Any], record: dict[str, Any]) -> None:
        lam = self.client("lambda")
        payload = json.dumps({"Records": [record]}).encode()
        attempts = 1 + min(MAX_LOCAL_RETRIES, max(0, int(mapping.get("MaximumRetryAttempts", MAX_LOCAL_RETRIES))))
        reason = ""
        for attempt in range(attempts):
            response = lam.invoke(FunctionName=mapping["FunctionArn"], Payload=payload)
            body = response["Payload"].read()
            result = json.loads(body or b"null")
            if response.get("FunctionError"):
                reason = f"function error: {body[:300]!r}"
            elif isinstance(result, dict) and result.get("batchItemFailures"):
                reason = "the function reported the record as failed"
            else:
                self.delivered += 1
                return
            time.sleep(0.2 * (attempt + 1))
        self.failed += 1
        log.warning("TTL record for %s not processed: %s", mapping["FunctionArn"], reason)
        destination = ((mapping.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if destination:
            failure = {
                "requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": attempts},
                "responseContext": {"functionError": reason},
                "DDBStreamBatchInfo": {"streamArn": record["eventSourceARN"], "batchSize": 1},
                "record": record,
            }
            # Lambda sends it with the function's execution role (which needs sqs:SendMessage on the queue).
            role = self.client("lambda").get_function_configuration(FunctionName=mapping["FunctionArn"])["Role"]
            try:
                _send_to_queue(self.client, destination, json.dumps(failure), {}, self._sender(role, LAMBDA_PRINCIPAL))
            except ClientError as error:
                if error_code(error) not in DENIED_CODES:
                    raise
                log.warning("TTL record for %s: on-failure destination refused: %s", mapping["FunctionArn"], error)

    def _sender(self, role: str, principal: str) -> Any:
        return self.client("sqs") if self.roles is None else self.roles.client(role, "sqs", principal)


# -- Scheduler universal targets ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Captured:
    group: str
    name: str
    arn: str
    due: float
    target: dict[str, Any]
    after: str
    modified: str


def at_epoch(expression: str, zone: str | None) -> float | None:
    """`at(2026-11-21T10:00:00)` in `zone` (default UTC) -> epoch seconds; None for rate()/cron()."""
    if not expression.startswith("at(") or not expression.endswith(")"):
        return None
    moment = datetime.fromisoformat(expression[3:-1])
    return moment.replace(tzinfo=ZoneInfo(zone) if zone else UTC).timestamp()


def universal_call(arn: str) -> tuple[str, str]:
    """`arn:aws:scheduler:::aws-sdk:sesv2:sendEmail` -> ("sesv2", "send_email")."""
    service, action = arn.removeprefix(constants.UNIVERSAL_TARGET_PREFIX).split(":", 1)
    return service, botocore.xform_name(action[:1].upper() + action[1:])


def _send_to_queue(client: Client, queue_arn: str, body: str, attributes: dict[str, str], sender: Any) -> None:
    """Send as `sender` (a client signed with the role AWS sends with, which needs `sqs:SendMessage` only: the queue
    is found by its ARN, here with the admin `client`)."""
    url = client("sqs").get_queue_url(QueueName=name_from_arn(queue_arn))["QueueUrl"]
    sender.send_message(
        QueueUrl=url,
        MessageBody=body,
        MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
    )


@dataclass
class UniversalTargets:
    """`roles`: the schedules' roles, which every call is made with (None: the admin `client`, no IAM)."""

    client: Client
    window: MinuteWindow = field(default_factory=lambda: MinuteWindow(seed()))
    roles: RoleSessions | None = None
    fired: int = 0
    failed: int = 0
    _captured: dict[tuple[str, str], _Captured] = field(default_factory=dict)
    _inspected: dict[tuple[str, str], str] = field(default_factory=dict)

    def tick(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        scheduler = self.client("scheduler")
        listed: set[tuple[str, str]] = set()
        for group in _pages(scheduler.list_schedule_groups, "ScheduleGroups"):
            try:
                summaries = _pages(scheduler.list_schedules, "Schedules", GroupName=group["Name"])
            except ClientError as error:
                if gone(error):
                    continue  # deleted since it was listed
                raise
            for summary in summaries:
                key = (group["Name"], summary["Name"])
                listed.add(key)
                modified = str(summary.get("LastModificationDate", ""))
                universal = str((summary.get("Target") or {}).get("Arn", "")).startswith(
                    constants.UNIVERSAL_TARGET_PREFIX
                )
                if universal and self._inspected.get(key) != modified:
                    self._inspected[key] = modified
                    self._capture(key, modified)
        for key, captured in list(self._captured.items()):
            if captured.due <= now:
                del self._captured[key]
                self._fire(captured)
            elif key not in listed:
                del self._captured[key]  # deleted before it was due: it never fires

    def _capture(self, key: tuple[str, str], modified: str) -> None:
        try:
            schedule = self.client("scheduler").get_schedule(GroupName=key[0], Name=key[1])
        except ClientError as error:
            if error_code(error) == "ResourceNotFoundException":
                return
            raise
        target = schedule.get("Target") or {}
        named = at_epoch(schedule.get("ScheduleExpression", ""), schedule.get("ScheduleExpressionTimezone"))
        # As AWS: anywhere in the named minute, possibly before the named second.
        due = None if named is None else self.window.instant(schedule.get("ScheduleExpression", ""), named)
        if (
            not str(target.get("Arn", "")).startswith(constants.UNIVERSAL_TARGET_PREFIX)
            or schedule.get("State") == "DISABLED"
        ):
            self._captured.pop(key, None)
            return
        if due is None:
            log.warning("schedule %s/%s: only at() universal targets are emulated", *key)
            return
        self._captured[key] = _Captured(
            key[0],
            key[1],
            schedule.get("Arn", ""),
            due,
            target,
            schedule.get("ActionAfterCompletion", "NONE"),
            modified,
        )

    def _as_role(self, captured: _Captured, service: str) -> Any:
        """A client for `service` signed as the schedule's role, as Scheduler calls its target and its DLQ."""
        if self.roles is None:
            return self.client(service)
        role = str(captured.target.get("RoleArn", ""))
        return self.roles.client(role, service, SCHEDULER_PRINCIPAL, captured.arn)

    def _fire(self, captured: _Captured) -> None:
        service, method = universal_call(captured.target["Arn"])
        request = json.loads(captured.target.get("Input") or "{}")
        try:
            getattr(self._as_role(captured, service), method)(**request)
            self.fired += 1
        except Exception as error:  # any failure of the call is what Scheduler would dead-letter
            self.failed += 1
            log.warning("schedule %s/%s: %s.%s failed: %s", captured.group, captured.name, service, method, error)
            dead_letter = (captured.target.get("DeadLetterConfig") or {}).get("Arn")
            if dead_letter:
                code = error_code(error)
                attributes = {
                    "ERROR_CODE": code or "Error",
                    "ERROR_MESSAGE": str(error)[:1000],
                    "EXHAUSTED_RETRY_CONDITION": "MaximumRetryAttempts",
                    "RETRY_ATTEMPTS": "0",
                    "SCHEDULE_ARN": captured.arn,
                    "TARGET_ARN": captured.target["Arn"],
                }
                try:
                    sender = self._as_role(captured, "sqs")
                    _send_to_queue(self.client, dead_letter, captured.target.get("Input") or "{}", attributes, sender)
                except ClientError as queue_error:
                    if error_code(queue_error) in DENIED_CODES:  # the role may not send it either: lost, as on AWS
                        log.warning("schedule %s: dead letter refused: %s", captured.name, queue_error)
                    elif gone(queue_error):
                        log.warning("schedule %s/%s: its dead-letter queue is gone", captured.group, captured.name)
                    else:
                        raise
        if captured.after == "DELETE":
            try:
                self.client("scheduler").delete_schedule(GroupName=captured.group, Name=captured.name)
            except ClientError as error:
                if error_code(error) != "ResourceNotFoundException":
                    raise


# -- EventBridge rules, on demand ---------------------------------------------------------------------------------


def fire_rule(client: Client, rule: str, region: str) -> int:
    """Invoke a schedule rule's Lambda targets now, asynchronously and with the event EventBridge would send, rather
    than waiting for its rate() to come round. Returns how many targets were invoked."""
    events, lam = client("events"), client("lambda")
    described = events.describe_rule(Name=rule)
    event = {
        "version": "0",
        "id": uuid.uuid4().hex,
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": described["Arn"].split(":")[4],
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [described["Arn"]],
        "detail": {},
    }
    invoked = 0
    for target in events.list_targets_by_rule(Rule=rule)["Targets"]:
        if ":lambda:" in target["Arn"]:
            payload = target.get("Input") or json.dumps(event)
            lam.invoke(FunctionName=target["Arn"], InvocationType="Event", Payload=payload.encode())
            invoked += 1
    return invoked


# -- running them --------------------------------------------------------------------------------------------------


class Emulators:
    """Runs each service in its own daemon thread, every `interval` seconds, until stopped (separate threads, so a
    slow function invoked for a TTL deletion never holds back a schedule that is due)."""

    def __init__(
        self,
        endpoint: str,
        region: str,
        interval: float = 0.25,
        ttl_delay: float = TTL_DELAY_SECONDS,
        ttl_delays: dict[str, float] | None = None,
    ) -> None:
        client = clients(endpoint, region)
        roles = RoleSessions(endpoint, region)
        self.ttl = TtlService(client, region, delay=ttl_delay, delays=dict(ttl_delays or {}), roles=roles)
        self.universal = UniversalTargets(client, roles=roles)
        self.interval = interval
        self.errors = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, args=(service,), name=f"localcloud-{name}", daemon=True)
            for name, service in (("universal-targets", self.universal), ("ttl", self.ttl))
        ]

    def _run(self, service: TtlService | UniversalTargets) -> None:
        while not self._stop.is_set():
            try:
                service.tick()
            except Exception as error:  # keep emulating; the error is logged and counted
                self.errors += 1
                if gone(error):  # removed under it (`down`): nothing to debug, one line
                    log.warning("emulator %s: %s", type(service).__name__, error)
                else:
                    log.exception("emulator %s failed a tick", type(service).__name__)
            self._stop.wait(self.interval)

    def start(self) -> Emulators:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout=10)

    def __enter__(self) -> Emulators:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
