"""What ministack does not do and the stack relies on, done from outside through public AWS APIs only.

- `TtlService`: switches DynamoDB's TTL process on, with its delays, while the emulators run. The process itself
  runs in ministack's own process (localcloud/ttl.py), so that each deletion is one REMOVE record in the table's
  stream (`userIdentity` = the DynamoDB service), delivered by the mappings in their ordinary batches, as on AWS.
- `UniversalTargets`: Scheduler's universal targets (`arn:aws:scheduler:::aws-sdk:<service>:<action>`), which
  ministack drops. The local cloud's ministack lists them (one request a second); each definition is read when it
  appears or changes, the API is called with the schedule's `Input` when due, failures go to the
  schedule's dead-letter queue, and `ActionAfterCompletion` is honoured. Each firing first waits its turn from
  Scheduler's invocation throttle, the one the templated targets' firings take theirs from (localcloud/throttle.py).

IAM: what AWS does on the component's behalf is done here with the credentials of the role AWS would use
(`RoleSessions`, sessions handed out by the local cloud's ministack, see localcloud/iam.py): a universal target's
call and its dead-letter send as the schedule's `RoleArn`. Listing and reading the schedules is the service's own
doing, with no role of the account: it uses the local cloud's admin credentials.

The stack may be removed under them (`python -m localcloud down` while `up --stay` runs): a table, queue, function
or schedule group that is gone is let go of with one line in the log, never a traceback.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import ClientError

from .component import constants, error_code, runtime_module
from .endpoints import UNIVERSAL_SCHEDULES_PATH, ask
from .iam import DENIED, DENIED_CODES, SCHEDULER_PRINCIPAL, SERVICE_SESSION_PATH
from .provision import NOT_FOUND, clients, name_from_arn
from .scheduler_minute import MinuteWindow, seed
from .throttle import remote_turn
from .ttl import TTL_PATH

log = logging.getLogger("localcloud")

TTL_DELAY_SECONDS = 5.0
FIRING_THREADS = 16  # universal targets called at once (AWS's Scheduler runs thousands)
# Scheduler retries a target call that failed for a reason that may pass (throttling, a 5xx) as the schedule's
# RetryPolicy allows (attempts and event age; AWS's defaults when it has none), with a growing wait; it dead-letters
# what fails for good at once. The local waits are seconds, not AWS's minutes, so a soak is not held up by them.
RETRY_FIRST_WAIT_SECONDS = 1.0
RETRY_MAX_WAIT_SECONDS = 30.0
DEFAULT_RETRY_ATTEMPTS = 185
DEFAULT_EVENT_AGE_SECONDS = 86400

Client = Callable[[str], Any]


def retryable(error: BaseException) -> bool:
    """A target call's failure that Scheduler retries: throttling or the service's own trouble (5xx), by the
    handlers' own list of such codes; connection trouble as the handlers judge it. Unlike the handlers, never a
    refusal (they retry one while a deploy's IAM change propagates; Scheduler dead-letters it)."""
    errors = runtime_module("errors")
    if not isinstance(error, ClientError):
        return bool(errors.is_transient(error))
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return error_code(error) in errors.TRANSIENT_CODES or status >= 500 or status == 429


def gone(error: BaseException) -> bool:
    """The resource a call named does not exist (any more)."""
    return isinstance(error, ClientError) and error_code(error) in NOT_FOUND


# -- roles -------------------------------------------------------------------------------------------------------


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
class TtlService:
    """DynamoDB's TTL process, which runs in ministack's own process (localcloud/ttl.py), so each deletion reaches the
    stream as the one REMOVE record AWS writes and the mappings deliver it in their batches. Switched on, with its
    delays, while the emulators run. `delay`: seconds after expiry before an item is deleted (AWS takes minutes to
    days; the local cloud defaults to a few seconds, so a demo stays short); `delays` overrides it per table: a table
    whose precise schedules should be seen to win gets a delay longer than Scheduler's minute."""

    endpoint: str
    delay: float = 0.0
    delays: dict[str, float] = field(default_factory=dict)
    _watched: set[str] = field(default_factory=set)

    def start(self) -> None:
        try:
            ask(self.endpoint, TTL_PATH, start="1", delay=str(self.delay), delays=json.dumps(self.delays))
        except (OSError, ValueError) as error:  # a ministack the local cloud did not start has no TTL process
            log.warning("TTL not emulated: %s has no local TTL process (%s)", self.endpoint, error)

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            ask(self.endpoint, TTL_PATH, stop="1")

    def watch(self) -> None:
        """Say once when tables it watched were deleted (`down` while `up --stay` runs)."""
        try:
            tables = set(ask(self.endpoint, TTL_PATH).get("tables") or [])
        except (OSError, ValueError):
            return
        deleted = sorted(self._watched - tables)
        if deleted:
            log.info("TTL no longer emulated for deleted table(s): %s", ", ".join(deleted))
        self._watched = tables

    @property
    def deleted(self) -> Counter[str]:
        """Items deleted so far, per table."""
        try:
            return Counter(ask(self.endpoint, TTL_PATH).get("deleted") or {})
        except (OSError, ValueError):
            return Counter()

    @property
    def delivered(self) -> int:
        return sum(self.deleted.values())


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
    endpoint: str
    region: str
    window: MinuteWindow = field(default_factory=lambda: MinuteWindow(seed()))
    roles: RoleSessions | None = None
    fired: int = 0
    failed: int = 0
    _captured: dict[tuple[str, str], _Captured] = field(default_factory=dict)
    _inspected: dict[tuple[str, str], str] = field(default_factory=dict)
    _firing: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=FIRING_THREADS, thread_name_prefix="localcloud-fire")
    )
    _counting: threading.Lock = field(default_factory=threading.Lock)
    sleep: Callable[[float], None] = time.sleep  # the waits between retries and for a turn (a test's clock)
    # Scheduler's invocation throttle (localcloud/throttle.py), shared with the templated targets' firings in
    # ministack's process: the seconds this firing waits for its turn. None: not throttled.
    turn: Callable[[], float] | None = None

    def close(self) -> None:
        """Let the firings under way finish; no more start."""
        self._firing.shutdown(wait=True, cancel_futures=True)

    def tick(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        listed: set[tuple[str, str]] = set()
        for schedule in ask(self.endpoint, UNIVERSAL_SCHEDULES_PATH, region=self.region)["Schedules"]:
            key = (schedule["GroupName"], schedule["Name"])
            listed.add(key)
            modified = str(schedule.get("LastModificationDate", ""))
            if self._inspected.get(key) != modified:
                self._inspected[key] = modified
                self._capture(key, schedule, modified)
        self._inspected = {key: self._inspected[key] for key in listed if key in self._inspected}
        for key, captured in list(self._captured.items()):
            if captured.due <= now:
                del self._captured[key]
                self._firing.submit(self._fire_logged, captured)  # as Scheduler: many at once, none waits
            elif key not in listed:
                del self._captured[key]  # deleted before it was due: it never fires

    def _capture(self, key: tuple[str, str], schedule: dict[str, Any], modified: str) -> None:
        target = schedule.get("Target") or {}
        named = at_epoch(schedule.get("ScheduleExpression", ""), schedule.get("ScheduleExpressionTimezone"))
        # As AWS: anywhere in the named minute, possibly before the named second.
        due = None if named is None else self.window.instant(schedule.get("ScheduleExpression", ""), named)
        if schedule.get("State") == "DISABLED":
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

    def _fire_logged(self, captured: _Captured) -> None:
        """`_fire` in a firing thread, what it raises logged there (a schedule or queue removed under it: one line)."""
        try:
            self._fire(captured)
        except Exception as error:
            if gone(error):
                log.warning("schedule %s/%s: %s", captured.group, captured.name, error)
            else:
                log.exception("schedule %s/%s failed to fire", captured.group, captured.name)

    def _fire(self, captured: _Captured) -> None:
        service, method = universal_call(captured.target["Arn"])
        request = json.loads(captured.target.get("Input") or "{}")
        policy = captured.target.get("RetryPolicy") or {}
        attempts = int(policy.get("MaximumRetryAttempts", DEFAULT_RETRY_ATTEMPTS))
        deadline = captured.due + float(policy.get("MaximumEventAgeInSeconds", DEFAULT_EVENT_AGE_SECONDS))
        retries, wait = 0, RETRY_FIRST_WAIT_SECONDS
        queued = self.turn() if self.turn is not None else 0.0
        if queued > 0:
            self.sleep(queued)  # over the throttle: later, never dropped
        while True:
            try:
                getattr(self._as_role(captured, service), method)(**request)
                with self._counting:
                    self.fired += 1
                break
            except Exception as error:
                if retryable(error) and retries < attempts and time.time() + wait <= deadline:
                    retries += 1
                    self.sleep(wait)
                    wait = min(wait * 2, RETRY_MAX_WAIT_SECONDS)
                    continue
                self._dead_letter(captured, service, method, error, retries)
                break
        if captured.after == "DELETE":
            try:
                self.client("scheduler").delete_schedule(GroupName=captured.group, Name=captured.name)
            except ClientError as error:
                if error_code(error) != "ResourceNotFoundException":
                    raise

    def _dead_letter(self, captured: _Captured, service: str, method: str, error: Exception, retries: int) -> None:
        """A call that failed for good (or ran out of retries) goes to the schedule's dead-letter queue, if any."""
        with self._counting:
            self.failed += 1
        log.warning("schedule %s/%s: %s.%s failed: %s", captured.group, captured.name, service, method, error)
        dead_letter = (captured.target.get("DeadLetterConfig") or {}).get("Arn")
        if dead_letter:
            code = error_code(error)
            attributes = {
                "ERROR_CODE": code or "Error",
                "ERROR_MESSAGE": str(error)[:1000],
                "EXHAUSTED_RETRY_CONDITION": "MaximumRetryAttempts",
                "RETRY_ATTEMPTS": str(retries),
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
    """Switches the TTL process on and runs the universal targets in a daemon thread, every `interval` seconds (the
    local Scheduler's own sweep), until stopped."""

    def __init__(
        self,
        endpoint: str,
        region: str,
        interval: float = 1.0,
        ttl_delay: float = TTL_DELAY_SECONDS,
        ttl_delays: dict[str, float] | None = None,
    ) -> None:
        client = clients(endpoint, region)
        self.ttl = TtlService(endpoint, delay=ttl_delay, delays=dict(ttl_delays or {}))
        roles = RoleSessions(endpoint, region)
        self.universal = UniversalTargets(client, endpoint, region, roles=roles, turn=remote_turn(endpoint))
        self.interval = interval
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="localcloud-universal-targets", daemon=True)

    def _run(self) -> None:
        service = self.universal
        while not self._stop.is_set():
            self.ttl.watch()
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
        self.ttl.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.ttl.stop()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self.universal.close()

    def __enter__(self) -> Emulators:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
