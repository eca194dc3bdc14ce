"""IAM in the local cloud, as AWS enforces it: ministack runs with `AUTH=true` (its policy evaluator, request ->
action map and per-function execution-role credentials), and this module puts right what it gets wrong or leaves
out for the calls this project makes.

- Scheduler's request -> resource map: ministack names every schedule `schedule/default/NAME`, whatever the request's
  `GroupName`, so a policy scoped to the component's own group (`schedule/GROUP/*`, right on AWS) never matched.
  `schedule_resource_arn` reads the group from the body (Create/UpdateSchedule) or `groupName` (Get/DeleteSchedule).
- A log group's events: AWS authorizes reading them (FilterLogEvents, GetLogEvents) on the group's streams, which a
  policy names as `log-group:NAME:*` (without `:*` it does not match); ministack checked `log-group:NAME`, so the
  policy right on AWS was refused (`log_events_resource`).
- Batch operations: SQS's `SendMessageBatch` is `sqs:SendMessage` in IAM (likewise `DeleteMessageBatch`,
  `ChangeMessageVisibilityBatch`), SNS's `PublishBatch` is `sns:Publish`; ministack authorized them as actions no
  policy names (`batch_action`), and so never checked a topic's key for PublishBatch either.
- SES v2 `SendEmail`: AWS authorizes it on the sending identity's ARN with `ses:FromAddress` (and
  `ses:FromDisplayName`) as condition keys; ministack checked it on `*` without them, so a policy scoped to the
  sender's identity and address (the component's) never matched (`send_email_identity`, `patch_ses_send_email`).
- `iam:PassRole`: AWS checks it on CreateSchedule/UpdateSchedule for the target's `RoleArn`, with
  `iam:PassedToService` = `scheduler.amazonaws.com`; ministack does not.
- KMS: a call on a queue, topic or table encrypted with a customer-managed key also uses the key, with the caller's
  permissions, and AWS refuses it unless the caller's policy and the key policy both allow that use (SQS
  SendMessage: kms:GenerateDataKey and kms:Decrypt; ReceiveMessage: kms:Decrypt; SNS Publish (and PublishBatch) as
  SQS's send; DynamoDB: reads kms:Decrypt, writes also kms:Encrypt and kms:GenerateDataKey; the same table as the
  tests', tests/iam/requests.py). ministack's SQS, SNS and DynamoDB never call KMS: `check_kms_keys` does, answering a
  refusal as each service does (SQS KMS.AccessDeniedException, SNS KMSAccessDenied, DynamoDB
  AccessDeniedException). Each such use is the service's on the caller's behalf, so it carries `kms:ViaService` (the
  service's endpoint in the key's Region, `via_service_context`); a caller's own call to KMS carries none, and a
  grant conditioned on the service does not cover it. A schedule's `KmsKeyArn` is checked too: at
  CreateSchedule/UpdateSchedule the caller's use through Scheduler, at a templated target's firing the execution
  role's own kms:Decrypt, both bound to the schedule's ARN (`schedule_key_refusal`; universal targets' firing is
  not checked). AWS-managed keys (no key record here) need nothing. An event bus's customer key is used
  by EventBridge itself, not the sender: `check_bus_keys` drops an event whose bus's key policy does not allow
  `events.amazonaws.com` (PutEvents still answers), so no rule of the bus sees it.
- Event source mappings: Lambda reads a function's stream or queue, and sends a failed stream batch's record to its
  on-failure destination, with the function's execution role (and the keys of what it reads or sends to);
  ministack does it as itself. `check_mappings` evaluates each batch's reads, and each on-failure send, as the
  function's role: a refused read delivers nothing, a refused send is lost (logged), as on AWS.
- Another account's table and stream (localcloud/accounts.py): a call naming the table by ARN is served from its
  owner's account when the caller's policy and the table's resource-based policy both allow it; a mapping on the
  stream is created, and each of its batches read, only when the stream's resource-based policy allows the
  function's role its reads too (`stream_policy_refusal`, `check_other_accounts_mappings`).
- Scheduler's event bus targets: AWS puts the event with the target's `EventBridgeParameters` (Source,
  DetailType) and the schedule's Input as its detail; ministack put it as `aws.scheduler`/`Scheduled Event`, which
  no rule of the bus's matched. `authorize_scheduler_targets` gives it the target's, and checks PutEvents with them
  (`events:source`, `events:detailType`).
- STS's sessions, registered one at a time: ministack keeps them in a plain dict that `register_session` walks
  (dropping expired ones) before adding one, with no lock. Lambda's warm-worker spawn registers the execution role's
  session there from each invocation's thread, `service_session` from the mapping pollers': a session added during
  another thread's walk raised `RuntimeError: dictionary changed size during iteration` and failed the invocation
  being spawned (`serialize_sts_sessions`).
- Service sessions: what AWS does on the component's behalf it does as a role (Scheduler as the schedule's
  `RoleArn`). `service_session` hands out credentials of a role for a service principal its trust policy names
  (conditions such as `aws:SourceAccount` evaluated), the way the service would assume it. ministack's Scheduler uses
  them to check each firing of a templated target (`authorize_scheduler_targets`); the emulators in the local cloud's
  own process (universal targets, dead-letter sends) fetch them from `SERVICE_SESSION_PATH` and sign with them.

Everything here runs inside ministack's process (`python -m localcloud.aws_behaviour`), except `schedule_resource_arn`
and `templated_action`, which are pure.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from . import accounts
from .accounts import STREAM_POLICY_READS, arn_scope, is_other_accounts_stream, owned_key, stream_policy
from .endpoints import Response, first, json_answer, serve

log = logging.getLogger("localcloud.iam")

AUTH_VARIABLE = "AUTH"
SERVICE_SESSION_PATH = "/_localcloud/service-session"
SCHEDULER_PRINCIPAL = "scheduler.amazonaws.com"
SCHEDULER_SERVICE = "scheduler"  # its IAM namespace and endpoint name
SESSION_SECONDS = 3600
# A session is handed out again until this many seconds before it expires.
SESSION_MARGIN_SECONDS = 600
DENIED = "AccessDeniedException"
# What a refusal is called, by protocol (SNS says AuthorizationError).
DENIED_CODES = frozenset({DENIED, "AccessDenied", "AuthorizationError"})


def schedule_resource_arn(
    method: str, path: str, body: bytes, query_params: dict[str, Any], region: str, account: str
) -> str | None:
    """The ARN a Scheduler request acts on when it names a schedule: `schedule/GROUP/NAME`, the group from the body
    (CreateSchedule, UpdateSchedule) or the `groupName` query parameter (GetSchedule, DeleteSchedule), `default`
    when neither names one (as AWS). None for any other request (left to ministack's map)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) != 2 or parts[0] != "schedules":
        return None
    group = ""
    if method in ("POST", "PUT"):
        try:
            document = json.loads(body or b"{}")
        except (ValueError, UnicodeDecodeError):
            document = {}
        group = str(document.get("GroupName") or "") if isinstance(document, dict) else ""
    else:
        group = first(query_params.get("groupName"))
    return f"arn:aws:scheduler:{region}:{account}:schedule/{group or 'default'}/{unquote(parts[1])}"


# The CloudWatch Logs reads of a group's events, authorized on its streams (`log-group:NAME:*`).
LOG_EVENT_READS = frozenset({"FilterLogEvents", "GetLogEvents"})


def log_events_resource(arn: str, target: str) -> str:
    """The resource a CloudWatch Logs request is authorized on, from ministack's (`arn`) and its X-Amz-Target: a read
    of a group's events is on its streams, `log-group:NAME:*`; anything else as ministack has it."""
    if target.rsplit(".", 1)[-1] in LOG_EVENT_READS and ":log-group:" in arn and not arn.endswith(":*"):
        return f"{arn}:*"
    return arn


# The batch operations IAM authorizes as their single-message action (the Service Authorization Reference; SNS's
# API permissions reference: sns:Publish "grants permission to both publish and publish batch").
BATCH_ACTIONS = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
    "sns:PublishBatch": "sns:Publish",
}


def batch_action(action: str | None) -> str | None:
    """The IAM action of an operation: a batch operation is authorized as its single-message action."""
    return BATCH_ACTIONS.get(action or "", action)


def send_email_identity(sender: str, region: str, account: str, verified: set[str]) -> tuple[str, dict[str, str]]:
    """(identity ARN, condition keys) of an SES v2 SendEmail from `sender` (`Name <address>` or an address): the
    address's own identity if it is verified, else its domain's (or a parent domain's, the nearest first), as SES
    picks the identity it sends as. `verified`: the verified identities, lower case."""
    from email.utils import parseaddr

    display, address = parseaddr(sender)
    domain = address.rpartition("@")[2].lower()
    labels = domain.split(".")
    candidates = [address.lower()] + [".".join(labels[i:]) for i in range(len(labels) - 1)]
    identity = next((c for c in candidates if c in verified), domain or address)
    keys = {"ses:FromAddress": address, **({"ses:FromDisplayName": display} if display else {})}
    return f"arn:aws:ses:{region}:{account}:identity/{identity}", keys


def templated_action(target_arn: str) -> tuple[str, str] | None:
    """(IAM action, its service) Scheduler's role needs to call a templated target; None for a universal target
    (`arn:aws:scheduler:::aws-sdk:...`: the emulators call those, with the role) or an unknown service."""
    from .component import runtime_module

    parts = target_arn.split(":")
    if len(parts) < 6 or parts[2] == "scheduler":
        return None
    # Each target kind's declaration (handlers/st_core/target_types/), as components/policies.py grants it.
    action = runtime_module("target_types").templated_actions().get(parts[2])
    return None if action is None else (action, parts[2])


# -- inside ministack ------------------------------------------------------------------------------------------------


def enabled() -> bool:
    from ministack import app

    return bool(app.AUTH)


def patch_scheduler_resources() -> None:
    """ministack's request -> resource map, with each schedule in its own group and a log group's events read on its
    streams."""
    from ministack.core import iam_actions

    original = iam_actions.extract_resource_arn

    def extract_resource_arn(
        service: str,
        method: str,
        path: str,
        headers: dict,
        body: bytes,
        query_params: dict,
        region: str,
        account_id: str,
    ) -> str:
        if service == "scheduler":
            arn = schedule_resource_arn(method, path, body, query_params, region, account_id)
            if arn is not None:
                return arn
        result: str = original(service, method, path, headers, body, query_params, region, account_id)
        if service == "logs":
            return log_events_resource(result, str(headers.get("x-amz-target", "")))
        return result

    iam_actions.extract_resource_arn = extract_resource_arn


def patch_batch_actions() -> None:
    """ministack's request -> action map, with SQS's and SNS's batch operations as the actions IAM knows them by
    (the key check, `kms_refusal`, reads the same map)."""
    from ministack.core import iam_actions

    original = iam_actions.extract_iam_action

    def extract_iam_action(
        service: str, method: str, path: str, headers: dict, body: bytes, query_params: dict
    ) -> str | None:
        action: str | None = original(service, method, path, headers, body, query_params)
        return batch_action(action)

    iam_actions.extract_iam_action = extract_iam_action


def patch_ses_send_email() -> None:
    """SES v2 SendEmail authorized on the sending identity, with the sender's address as `ses:FromAddress`."""
    from ministack import app
    from ministack.core.responses import get_account_id
    from ministack.services import ses, ses_v2

    original = app._enforce_ses_v2

    def enforce_ses_v2(method: str, path: str, headers: dict, body: bytes, query_params: dict, request_id: str) -> Any:
        if not (enabled() and method == "POST" and path.rstrip("/").endswith("/v2/email/outbound-emails")):
            return original(method, path, headers, body, query_params, request_id)
        try:
            document = json.loads(body or b"{}")
        except (ValueError, UnicodeDecodeError):
            document = {}
        sender = str((document if isinstance(document, dict) else {}).get("FromEmailAddress") or "")
        if not sender:  # a raw message names its sender inside; ministack's check stands
            return original(method, path, headers, body, query_params, request_id)
        verified = {str(k).lower() for k, r in ses_v2._identities.items() if (r or {}).get("VerifiedForSendingStatus")}
        verified |= {
            str(k).lower() for k, r in ses._identities.items() if (r or {}).get("VerificationStatus") == "Success"
        }
        region = app.extract_region(headers, query_params)
        identity, keys = send_email_identity(sender, region, get_account_id(), verified)
        return app._enforce_data_plane(
            "sesv2",
            "ses:SendEmail",
            headers,
            query_params,
            request_id,
            resource_arn=identity,
            service_context=keys,
            named_resource=identity,
        )

    app._enforce_ses_v2 = enforce_ses_v2


def _denied_json(message: str) -> tuple[int, dict[str, str], bytes]:
    return (
        403,
        {"Content-Type": "application/json", "x-amzn-ErrorType": DENIED},
        json.dumps({"__type": DENIED, "Message": message, "message": message}).encode(),
    )


def check_pass_role() -> None:
    """CreateSchedule/UpdateSchedule: the caller must be allowed `iam:PassRole` on the target's role, for
    Scheduler (`iam:PassedToService`), as AWS checks: rule("iam-pass-role"); and, with a `KmsKeyArn`, the use of
    that key through Scheduler (`schedule_key_refusal`)."""
    from ministack.core.iam_evaluator import AuthError, enforce
    from ministack.core.router import extract_access_key_id, extract_region
    from ministack.services import scheduler

    handle = scheduler.handle_request

    async def handle_request(method: str, path: str, headers: dict, body: bytes, query_params: dict) -> Any:
        if enabled() and method in ("POST", "PUT") and path.startswith("/schedules/"):
            try:
                document = json.loads(body or b"{}")
            except (ValueError, UnicodeDecodeError):
                document = {}
            document = document if isinstance(document, dict) else {}
            role = str((document.get("Target") or {}).get("RoleArn") or "")
            access_key, region = extract_access_key_id(headers, query_params), extract_region(headers, query_params)
            if role:
                denied = enforce(
                    access_key,
                    "iam:PassRole",
                    "iam",
                    region,
                    resource_arn=role,
                    service_context={"iam:PassedToService": SCHEDULER_PRINCIPAL},
                )
                if denied is not None:
                    who = "" if isinstance(denied, AuthError) else denied.principal_arn
                    return _denied_json(f"User: {who} is not authorized to perform: iam:PassRole on resource: {role}")
            key = str(document.get("KmsKeyArn") or "")
            if key:  # Scheduler encrypts the payload with the caller's permissions
                from ministack.core.responses import get_account_id

                group = str(document.get("GroupName") or "default")
                name = unquote(path.rstrip("/").rsplit("/", 1)[-1])
                arn = f"arn:aws:scheduler:{region}:{get_account_id()}:schedule/{group}/{name}"
                refused = schedule_key_refusal(access_key, key, arn, region, firing=False)
                if refused:
                    return _denied_json(refused)
        return await handle(method, path, headers, body, query_params)

    scheduler.handle_request = handle_request


_sessions: dict[tuple[str, str], dict[str, Any]] = {}
_sessions_lock = threading.Lock()


def serialize_sts_sessions() -> None:
    """ministack's STS adds a session (`register_session`) after walking all of them to drop the expired ones, and
    nothing stops two threads doing it at once: Lambda's warm-worker spawn does it for each new worker
    (`execution_credentials`), and concurrent invocations spawn from their own threads (a backfill's fan-out, its
    stream's consumers), as `service_session` does from the mapping pollers. A session added (or all forgotten, by
    STS's `reset`) during another's walk broke it, and with it the invocation. Here they take turns; the reads of
    a session by its key (every signed request's) need no turn."""
    from ministack.services import sts as sts_svc

    register, forget = sts_svc.register_session, sts_svc.reset
    turn = threading.Lock()

    def register_session(access_key: str, session: dict[str, Any]) -> None:
        with turn:
            register(access_key, session)

    def reset() -> None:
        with turn:
            forget()

    sts_svc.register_session, sts_svc.reset = register_session, reset


class Refused(Exception):
    """The service may not act as the role: it does not exist or its trust policy does not name the service."""


def _trusts(document: Any, service: str, context: dict[str, str]) -> bool:
    from ministack.core.iam_evaluator import (
        EvalContext,
        _action_matches,
        _conditions_met,
        _service_principal_matches,
    )

    if isinstance(document, str):
        try:
            document = json.loads(unquote(document) if document.startswith("%") else document)
        except ValueError:
            return False
    statements = document.get("Statement", []) if isinstance(document, dict) else []
    statements = [statements] if isinstance(statements, dict) else statements
    ctx = EvalContext(
        principal_arn=service,
        principal_type="Service",
        principal_account="",
        action="sts:AssumeRole",
        resource_arn="*",
        region="",
        service_context={k.lower(): v for k, v in context.items()},
    )
    allowed = False
    for statement in statements if isinstance(statements, list) else []:
        if not isinstance(statement, dict) or statement.get("Effect") not in ("Allow", "Deny"):
            continue
        actions, excluded = statement.get("Action", []), statement.get("NotAction", [])
        actions = [actions] if isinstance(actions, str) else actions
        excluded = [excluded] if isinstance(excluded, str) else excluded
        if not (actions or excluded) or not _action_matches("sts:AssumeRole", actions, excluded):
            continue
        if not _service_principal_matches(statement.get("Principal", {}), service):
            continue
        if not _conditions_met(statement.get("Condition", {}), ctx):
            continue
        if statement["Effect"] == "Deny":
            return False
        allowed = True
    return allowed


def service_session(role_arn: str, service: str, source_arn: str = "") -> dict[str, Any]:
    """Credentials of `role_arn` as the AWS service `service` assumes it (on behalf of the role's own account, with
    `source_arn` as `aws:SourceArn` if given), registered with ministack's STS. Raises `Refused` as AWS would fail
    to assume it. Reused until shortly before it expires."""
    from ministack.services import iam as iam_svc
    from ministack.services import sts as sts_svc

    parts = role_arn.split(":")
    if len(parts) < 6 or not parts[5].startswith("role/"):
        raise Refused(f"{role_arn} is not a role ARN")
    account, name = parts[4], parts[5].rsplit("/", 1)[-1]
    with _sessions_lock:
        cached = _sessions.get((role_arn, service))
        # A reset of the local cloud (`/_ministack/reset`) forgets STS's sessions, not this cache: a cached key STS
        # no longer knows would be refused every call, so it is reused only while STS still holds it.
        known = cached is not None and cached["AccessKeyId"] in sts_svc._sessions
        if cached and known and cached["Expiration"] - SESSION_MARGIN_SECONDS > time.time():
            return cached
        role = iam_svc._roles.get_scoped(account, None, name)
        if role is None:
            raise Refused(f"{service} cannot assume {role_arn}: no such role")
        context = {"aws:SourceAccount": account, **({"aws:SourceArn": source_arn} if source_arn else {})}
        if not _trusts(role.get("AssumeRolePolicyDocument", "{}"), service, context):
            raise Refused(f"{service} is not allowed to assume {role_arn}: its trust policy does not name it")
        session_name = service.split(".", 1)[0]
        access_key = sts_svc._gen_session_access_key()
        session = {
            "AccessKeyId": access_key,
            "SecretAccessKey": sts_svc._gen_secret(),
            "SessionToken": sts_svc._gen_session_token(),
            "Expiration": time.time() + SESSION_SECONDS,
        }
        sts_svc.register_session(
            access_key,
            {
                "Arn": f"arn:aws:sts::{account}:assumed-role/{name}/{session_name}",
                "UserId": f"{sts_svc._role_id(role_arn)}:{session_name}",
                "SecretAccessKey": session["SecretAccessKey"],
                "SessionToken": session["SessionToken"],
                "Expiration": session["Expiration"],
                "AccountId": account,
                "PrincipalType": "AssumedRole",
                "SourcePrincipalArn": f"arn:aws:iam::{account}:root",
            },
        )
        _sessions[(role_arn, service)] = session
        return session


def serve_service_sessions() -> None:
    """`GET /_localcloud/service-session?role=ARN&service=scheduler.amazonaws.com[&source=ARN]`: a role's session
    for the local cloud's emulators (JSON `Credentials`), or 403 with the reason. Local only, like
    `/_ministack/reset`: it stands for AWS's own services, which need no credentials to assume a role."""

    def answer(query_params: dict[str, Any]) -> Response:
        try:
            role, service = first(query_params.get("role")), first(query_params.get("service"))
            session = service_session(role, service, first(query_params.get("source")))
        except Refused as refusal:
            return _denied_json(str(refusal))
        return json_answer({"Credentials": session})

    serve(SERVICE_SESSION_PATH, answer)


def _local_endpoint() -> str:
    return f"http://127.0.0.1:{os.environ.get('GATEWAY_PORT', '4566')}"


def role_client(session: dict[str, Any], service: str, region: str) -> Any:
    import boto3

    return boto3.client(
        service,
        region_name=region,
        endpoint_url=_local_endpoint(),
        aws_access_key_id=session["AccessKeyId"],
        aws_secret_access_key=session["SecretAccessKey"],
        aws_session_token=session["SessionToken"],
    )


def scheduler_refusal(target: dict[str, Any], schedule: dict[str, Any], region: str) -> str:
    """Why Scheduler, as the schedule's role, may not call its templated target (or use its key), or "" if it
    may."""
    from ministack.core.iam_evaluator import AuthError, enforce

    wanted = templated_action(str(target.get("Arn", "")))
    if wanted is None:
        return ""
    action, service = wanted
    try:
        session = service_session(str(target.get("RoleArn", "")), SCHEDULER_PRINCIPAL, str(schedule.get("Arn", "")))
    except Refused as refusal:
        return str(refusal)
    payload_key = str(schedule.get("KmsKeyArn") or "")
    if payload_key:  # the payload is read first, as the role
        arn = str(schedule.get("Arn", ""))
        refused = schedule_key_refusal(session["AccessKeyId"], payload_key, arn, region, firing=True)
        if refused:
            return refused
    parameters = target.get("EventBridgeParameters") or {}
    context = (
        {"events:source": str(parameters.get("Source", "")), "events:detailType": str(parameters.get("DetailType", ""))}
        if service == "events"
        else None
    )
    arn = str(target["Arn"])
    # rule("iam-evaluation"): ministack's evaluator (explicit deny, then allow, else implicit deny)
    denied = enforce(session["AccessKeyId"], action, service, region, resource_arn=arn, service_context=context)
    if denied is not None:
        who = "" if isinstance(denied, AuthError) else denied.principal_arn
        return f"User: {who} is not authorized to perform: {action} on resource: {arn}"
    return key_refusal(session["AccessKeyId"], action, service, arn, region)


def key_refusal(access_key: str, action: str, service: str, resource: str, region: str) -> str:
    """Why the caller may not use the key of `resource` for `action` (its own policy or the key policy), or "":
    rule("kms-key-policy"); the service uses it on the caller's behalf, so KMS sees that service as
    `kms:ViaService`."""
    key = resource_key(service, resource)
    return key_uses_refusal(access_key, KEY_ACTIONS.get(action, ()) if key else (), key or "", region, service)


def key_uses_refusal(
    access_key: str,
    uses: tuple[str, ...],
    key: str,
    region: str,
    service: str | None,
    context: Mapping[str, str] | None = None,
) -> str:
    """Why the caller may not make each of `uses` with `key`, or "": through `service` (`kms:ViaService`; None: the
    caller's own call to KMS), with the request's other condition keys `context` (an encryption context)."""
    from ministack.core.iam_evaluator import AuthError, enforce

    keys = {**(via_service_context(service, key) if service else {}), **(context or {})}
    for use in uses:
        denied = enforce(access_key, use, "kms", region, resource_arn=key, service_context=keys)
        if denied is not None:
            who = "" if isinstance(denied, AuthError) else denied.principal_arn
            return f"User: {who} is not authorized to perform: {use} on resource: {key}"
    return ""


def via_service_context(service: str, key_arn: str) -> dict[str, str]:
    """The `kms:ViaService` a service's use of a key on a caller's behalf carries: the service's endpoint in the
    key's Region (the AWS KMS developer guide, "kms:ViaService"; the AWS managed keys' policies, e.g. aws/dynamodb's
    `dynamodb.<region>.amazonaws.com`). A caller's own call to KMS carries none. Written here, apart from the
    component's own (components/arns.py), so the evaluator does not take the rule from the code it checks:
    rule("kms-via-service")."""
    parts = key_arn.split(":")
    partition, region = (parts[1], parts[3]) if len(parts) > 3 else ("aws", "")
    domain = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    return {"kms:viaservice": f"{service}.{region}.{domain}"}


# A schedule's customer-managed key (`KmsKeyArn`): Scheduler encrypts the payload with the caller's permissions when
# the schedule is made or changed (kms:DescribeKey, kms:GenerateDataKey, kms:Decrypt, through Scheduler), and the
# execution role decrypts it when the schedule fires, Scheduler calling KMS itself with the role's session (no
# kms:ViaService); each data key bound to the schedule's ARN as the encryption context (the EventBridge Scheduler
# user guide, "Encryption at rest" and its identity-based policy example for CreateSchedule).
SCHEDULE_CONTEXT_KEY = "kms:encryptioncontext:aws:scheduler:schedule:arn"
SCHEDULE_CREATE_KEY_ACTIONS = ("kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt")


def schedule_key_refusal(access_key: str, key: str, schedule_arn: str, region: str, *, firing: bool) -> str:
    """Why the caller (`firing`: the execution role) may not use the schedule's payload key, or "":
    rule("scheduler-payload-key")."""
    bound = {SCHEDULE_CONTEXT_KEY: schedule_arn}
    if firing:
        return key_uses_refusal(access_key, ("kms:Decrypt",), key, region, None, bound)
    refused = key_uses_refusal(access_key, ("kms:DescribeKey",), key, region, SCHEDULER_SERVICE)
    return refused or key_uses_refusal(
        access_key, SCHEDULE_CREATE_KEY_ACTIONS[1:], key, region, SCHEDULER_SERVICE, bound
    )


def dead_letter(target: dict[str, Any], schedule: dict[str, Any], payload: str, code: str, message: str) -> None:
    """Scheduler's dead-letter event, sent with the schedule's role (which needs `sqs:SendMessage` on the queue);
    a role that may not send it loses the event, as on AWS."""
    queue_arn = str((target.get("DeadLetterConfig") or {}).get("Arn") or "")
    name = schedule.get("Name", "?")
    if not queue_arn:
        log.warning("schedule %s: %s; no dead-letter queue, the event is dropped", name, message)
        return
    parts = queue_arn.split(":")
    try:
        session = service_session(str(target.get("RoleArn", "")), SCHEDULER_PRINCIPAL, str(schedule.get("Arn", "")))
        queue_url = f"{_local_endpoint()}/{parts[4]}/{parts[5]}"
        role_client(session, "sqs", parts[3]).send_message(
            QueueUrl=queue_url,
            MessageBody=payload,
            MessageAttributes={
                key: {"DataType": "String", "StringValue": value}
                for key, value in {
                    "ERROR_CODE": code,
                    "ERROR_MESSAGE": message[:1000],
                    "EXHAUSTED_RETRY_CONDITION": "MaximumRetryAttempts",
                    "RETRY_ATTEMPTS": "0",
                    "SCHEDULE_ARN": str(schedule.get("Arn", "")),
                    "TARGET_ARN": str(target.get("Arn", "")),
                }.items()
            },
        )
    except Exception as error:  # the role may not send either: the event is lost, as on AWS
        log.warning("schedule %s: %s; its dead-letter event was not sent either: %s", name, message, error)
        return
    log.warning("schedule %s: %s; dead-lettered to %s", name, message, queue_arn)


def authorize_scheduler_targets() -> None:
    """Each firing of a templated target (ministack's own at() and ours for rate()/cron(), both through
    `eventbridge._invoke_target`) is made as the schedule's role: denied, it goes to the schedule's DLQ instead."""
    from ministack.core.responses import get_region
    from ministack.services import eventbridge

    invoke = eventbridge._invoke_target

    def invoke_as_role(target: dict, event: dict, rule: dict, view: Any = None) -> Any:
        from_scheduler = event.get("Source") == "aws.scheduler" and "ScheduleExpression" in (rule or {})
        parameters = target.get("EventBridgeParameters") or {}
        if from_scheduler and parameters:  # an event bus target: the event is the target's, as AWS puts it
            event = {**event, "Source": parameters.get("Source"), "DetailType": parameters.get("DetailType")}
        if not from_scheduler or not enabled():
            return invoke(target, event, rule, view)
        refusal = scheduler_refusal(target, rule, get_region())
        if not refusal:
            return invoke(target, event, rule, view)
        payload = target.get("Input")
        dead_letter(target, rule, payload if payload is not None else json.dumps(event, default=str), DENIED, refusal)
        return None

    eventbridge._invoke_target = invoke_as_role


# What a call does with the key of the resource it acts on, by IAM action, per the services' documentation: SQS
# SendMessage generates a data key and decrypts it, ReceiveMessage decrypts (the SQS developer guide, "Key
# management"); SNS Publish as SQS's send; DynamoDB uses the table's key (its streams' and indexes' too) with the
# caller's permissions: a read decrypts, a write is granted kms:Decrypt, kms:Encrypt and kms:GenerateDataKey, as
# AWS's own grant for a table's writers gives (the CDK's `grantWriteData`), where AWS lists no one call's use.
# DescribeTable, DescribeStream and GetShardIterator read no data. The handler tests' model uses this table too.
_READ = ("kms:Decrypt",)
_WRITE = ("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey")
_SEND = ("kms:GenerateDataKey", "kms:Decrypt")  # a send makes its data key first
KEY_ACTIONS: dict[str, tuple[str, ...]] = {
    **{
        f"dynamodb:{a}": _READ for a in ("GetItem", "BatchGetItem", "Query", "Scan", "ConditionCheckItem", "GetRecords")
    },
    **{f"dynamodb:{a}": _WRITE for a in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")},
    "sqs:SendMessage": _SEND,
    "sqs:ReceiveMessage": _READ,
    "sns:Publish": _SEND,
    # A state machine with a customer managed key encrypts each execution's input with a data key it reuses for a
    # while (the Step Functions API reference, EncryptionConfiguration: "When the period expires, Step Functions
    # will call GenerateDataKey"): StartExecution makes its data key as a send does.
    "states:StartExecution": _SEND,
}


def kms_denied(service: str, message: str) -> tuple[int, dict[str, str], bytes]:
    """A refused use of a key, as each service answers it."""
    if service == "sns":
        body = (
            "<ErrorResponse><Error><Type>Sender</Type><Code>KMSAccessDenied</Code>"
            f"<Message>{message}</Message></Error></ErrorResponse>"
        )
        return 400, {"Content-Type": "text/xml"}, body.encode()
    if service == "sqs":
        headers = {
            "Content-Type": "application/x-amz-json-1.0",
            "x-amzn-query-error": "KMS.AccessDeniedException;Sender",
        }
        document = {"__type": "com.amazonaws.sqs#KmsAccessDenied", "message": message}
        return 400, headers, json.dumps(document).encode()
    document = {"__type": f"com.amazonaws.dynamodb.v20120810#{DENIED}", "message": message}
    return 400, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(document).encode()


def resource_key(service: str, resource_arn: str) -> str | None:
    """The ARN of the customer-managed key that encrypts the queue, topic or table (None: none, or AWS's own)."""
    from ministack.services import dynamodb, kms, sns, sqs

    key: str | None = None
    if service == "sqs":
        queue = sqs._queue_by_arn(resource_arn)
        key = (queue or {}).get("attributes", {}).get("KmsMasterKeyId")
    elif service == "sns":
        topic = sns._topic_by_arn_any_scope(sns._normalize_arn(resource_arn))
        key = (topic or {}).get("attributes", {}).get("KmsMasterKeyId")
    elif service == "dynamodb" and ":table/" in resource_arn:
        _, _, _, region, account, rest = resource_arn.split(":", 5)
        table = dynamodb._tables.get_scoped(account, region, rest.split("/")[1]) or {}
        sse = table.get("SSEDescription") or {}
        key = sse.get("KMSMasterKeyArn") if sse.get("SSEType") == "KMS" else None
    # (another account's table has its key in that account: kms._resolve_key looks only in the caller's)
    record = (owned_key(key) or kms._resolve_key(key)) if key else None
    if not record or record.get("KeyManager", "CUSTOMER") != "CUSTOMER":
        return None
    return str(record["Arn"])


def kms_refusal(
    service: str, method: str, path: str, headers: dict, body: bytes, query_params: dict
) -> tuple[int, dict[str, str], bytes] | None:
    """The service's answer when the caller may not use the key of what it calls (through that service: its
    `kms:ViaService`); None when it may."""
    from ministack.core import iam_actions
    from ministack.core.responses import get_account_id
    from ministack.core.router import extract_access_key_id, extract_region

    if service == "sns" and method == "POST" and body:  # the query protocol's parameters come in the form body
        from urllib.parse import parse_qs

        query_params = {**query_params, **parse_qs(body.decode("utf-8", errors="replace"))}
    action = iam_actions.extract_iam_action(service, method, path, headers, body, query_params)
    uses = KEY_ACTIONS.get(action or "", ())
    if not uses:
        return None
    region = extract_region(headers, query_params)
    resource = iam_actions.extract_resource_arn(
        service, method, path, headers, body, query_params, region, get_account_id()
    )
    key = resource_key(service, resource) if resource and resource != "*" else None
    if key is None:
        return None
    refused = key_uses_refusal(extract_access_key_id(headers, query_params), uses, key, region, service)
    return kms_denied(service, refused) if refused else None


def check_kms_keys() -> None:
    """SQS, SNS and DynamoDB calls on resources encrypted with a customer-managed key use it as AWS does: refused
    unless the caller's policy and the key policy allow each use (after ministack's own check of the call)."""
    from ministack.services import dynamodb, sns, sqs

    for service, module in (("sqs", sqs), ("sns", sns), ("dynamodb", dynamodb)):
        handle = module.handle_request

        def checked(
            method: str,
            path: str,
            headers: dict,
            body: bytes,
            query_params: dict,
            *,
            _s: str = service,
            _h: Any = handle,
        ) -> Any:
            async def run() -> Any:
                if enabled():
                    refused = kms_refusal(_s, method, path, headers, body, query_params)
                    if refused is not None:
                        return refused
                return await _h(method, path, headers, body, query_params)

            return run()

        module.handle_request = checked


# What an event source mapping reads its batch with, by the records' eventSource: (IAM actions, their service).
MAPPING_READS: dict[str, tuple[tuple[str, ...], str]] = {
    "aws:dynamodb": (
        ("dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords", "dynamodb:ListStreams"),
        "dynamodb",
    ),
    "aws:sqs": (("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"), "sqs"),
}
LAMBDA_PRINCIPAL = "lambda.amazonaws.com"  # a function's execution role is assumed by Lambda


def _as_function(func: dict) -> str:
    """The access key of the function's execution role, as Lambda assumes it (Refused if it cannot)."""
    role = str((func.get("config") or func).get("Role", ""))
    return str(service_session(role, LAMBDA_PRINCIPAL)["AccessKeyId"])


def mapping_refusal(func: dict, event: Any) -> str:
    """Why the function's event source mapping may not read the batch `event` with the function's role (the
    stream's or queue's actions, and the key of the table or queue), or ""."""
    from ministack.core.iam_evaluator import AuthError, enforce
    from ministack.core.responses import get_region

    records = event.get("Records") if isinstance(event, dict) else None
    # A mapping's records always name their source; a batch without one was handed to Invoke by someone (the
    # operator's redrive of a parked record), which reads nothing from the stream or queue.
    sources = {
        (str(r.get("eventSource")), str(r.get("eventSourceARN") or r.get("eventSourceArn") or ""))
        for r in records or []
        if isinstance(r, dict) and r.get("eventSource") in MAPPING_READS
    }
    sources = {(source, arn) for source, arn in sources if arn}
    if not sources:
        return ""
    try:
        access_key = _as_function(func)
    except Refused as refusal:
        return str(refusal)
    for source, arn in sorted(sources):
        actions, service = MAPPING_READS[source]
        for action in actions:
            denied = enforce(access_key, action, service, get_region(), resource_arn=arn)
            if denied is not None:
                who = "" if isinstance(denied, AuthError) else denied.principal_arn
                return f"User: {who} is not authorized to perform: {action} on resource: {arn}"
        refused = stream_policy_refusal(str((func.get("config") or func).get("Role", "")), arn, get_region())
        if refused:
            return refused
        read = "dynamodb:GetRecords" if service == "dynamodb" else "sqs:ReceiveMessage"
        encrypted = arn.split("/stream/", 1)[0]
        refused = key_refusal(access_key, read, service, encrypted, get_region())
        if refused:
            return refused
    return ""


def stream_policy_refusal(role_arn: str, stream_arn: str, region: str) -> str:
    """Why the function's role may not read another account's DynamoDB stream: the stream's resource-based policy
    does not allow its session each of STREAM_POLICY_READS (across accounts the owner's side must allow too); ""
    when it may, or when the stream is the role's own account's (its policy alone decides)."""
    from ministack.core.iam_evaluator import EvalContext, evaluate_resource_policy

    scope = arn_scope(stream_arn) if "/stream/" in stream_arn else None
    parts = role_arn.split(":")
    if scope is None or len(parts) < 6 or scope[0] == parts[4]:
        return ""
    session = f"arn:aws:sts::{parts[4]}:assumed-role/{parts[5].rsplit('/', 1)[-1]}/{LAMBDA_PRINCIPAL.split('.')[0]}"
    policy = stream_policy(stream_arn)
    for action in STREAM_POLICY_READS:
        ctx = EvalContext(
            principal_arn=session,
            principal_type="AssumedRole",
            principal_account=parts[4],
            action=action,
            resource_arn=stream_arn,
            region=region,
        )
        if not policy or evaluate_resource_policy(policy, ctx).decision != "Allow":
            return (
                f"User: {session} is not authorized to perform: {action} on resource: {stream_arn} because no "
                f"resource-based policy allows the {action} action"
            )
    return ""


def check_other_accounts_mappings() -> None:
    """CreateEventSourceMapping on another account's DynamoDB stream: refused, as Lambda refuses it when it cannot
    read the stream, unless the stream's resource-based policy allows the function's role its reads (the role's
    own policy is checked on every batch, `check_mappings`)."""
    from ministack.services import lambda_svc

    create = lambda_svc._create_esm

    def create_esm(data: dict) -> Any:
        arn = str(data.get("EventSourceArn") or "")
        if enabled() and is_other_accounts_stream(arn):
            name, qualifier, err = lambda_svc._resolve_existing_esm_function(data.get("FunctionName", ""))
            func, _ = lambda_svc._get_func_record_for_qualifier(name, qualifier) if not err else (None, None)
            role = str(((func or {}).get("config") or {}).get("Role", ""))
            refusal = stream_policy_refusal(role, arn, lambda_svc.get_region()) if func else ""
            if refusal:
                return lambda_svc._invalid_parameter_value(
                    f"Cannot access stream {arn}. Please ensure the role can perform the GetRecords, "
                    f"GetShardIterator, DescribeStream, and ListStreams Actions on your stream. {refusal}"
                )
        return create(data)

    lambda_svc._create_esm = create_esm


def check_mappings() -> None:
    """Each batch a mapping hands a function is read with the function's role: refused, it is not delivered (the
    function is not invoked; the mapping retries it). Each on-failure record is sent with the role: refused, it is
    lost, as on AWS."""
    from ministack.core.iam_evaluator import AuthError, enforce
    from ministack.core.responses import get_region
    from ministack.services import lambda_svc

    execute = lambda_svc._execute_function
    send_failure = lambda_svc._send_ddb_stream_failure_record

    def execute_as_role(func: dict, event: Any) -> Any:
        refusal = mapping_refusal(func, event) if enabled() else ""
        if refusal:
            log.warning("event source mapping of %s could not read its batch: %s", func.get("FunctionName"), refusal)
            return {"error": True, "body": {"errorType": DENIED, "errorMessage": refusal}}
        return execute(func, event)

    def send_as_role(esm: dict, func_rec: dict, *args: Any) -> Any:
        destination = str(((esm.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination") or "")
        if enabled() and destination.startswith("arn:aws:sqs:"):
            try:
                access_key = _as_function(func_rec)
                denied = enforce(access_key, "sqs:SendMessage", "sqs", get_region(), resource_arn=destination)
                refusal = (
                    ""
                    if denied is None
                    else (
                        f"User: {'' if isinstance(denied, AuthError) else denied.principal_arn} is not authorized to "
                        f"perform: sqs:SendMessage on resource: {destination}"
                    )
                )
                refusal = refusal or key_refusal(access_key, "sqs:SendMessage", "sqs", destination, get_region())
            except Refused as refused:
                refusal = str(refused)
            if refusal:
                log.warning("on-failure record of a stream batch lost: %s", refusal)
                return None
        return send_failure(esm, func_rec, *args)

    lambda_svc._execute_function = execute_as_role
    lambda_svc._send_ddb_stream_failure_record = send_as_role


EVENTS_PRINCIPAL = "events.amazonaws.com"
# What EventBridge does with a bus's customer-managed key, as itself (the key policy must allow
# `events.amazonaws.com`; the sender needs no KMS permission): it makes a data key to store each event, and decrypts
# it to match the bus's rules (the EventBridge user guide, "Authorizing EventBridge to use a customer managed key").
BUS_KEY_USES = ("kms:GenerateDataKey", "kms:Decrypt")


def bus_key_refusal(bus_arn: str, key_arn: str, policy: Any, region: str) -> str:
    """Why EventBridge may not use the bus's key `key_arn` (its key policy, `policy`, does not allow
    `events.amazonaws.com` each of BUS_KEY_USES, with the bus as `aws:SourceArn`, its account as
    `aws:SourceAccount` and as the encryption context), or "" if it may."""
    from ministack.core.iam_evaluator import EvalContext, evaluate_resource_policy

    context = {
        "aws:sourcearn": bus_arn,
        "aws:sourceaccount": bus_arn.split(":")[4] if bus_arn.count(":") >= 5 else "",
        "kms:encryptioncontext:aws:events:event-bus:arn": bus_arn,
    }
    for use in BUS_KEY_USES:
        ctx = EvalContext(
            principal_arn=EVENTS_PRINCIPAL,
            principal_type="Service",
            principal_account="",
            action=use,
            resource_arn=key_arn,
            region=region,
            service_context=context,
        )
        if evaluate_resource_policy(policy or None, ctx, service=EVENTS_PRINCIPAL).decision != "Allow":
            return (
                f"the key policy of {key_arn} does not allow {EVENTS_PRINCIPAL} to perform {use} for event bus "
                f"{bus_arn}: EventBridge cannot store or match the event"
            )
    return ""


def bus_key(bus: dict[str, Any]) -> dict[str, Any] | None:
    """The key record of the customer-managed key encrypting the bus (None: none, or AWS's own)."""
    from ministack.services import kms

    key = bus.get("KmsKeyIdentifier")
    record = kms._resolve_key(key) if key else None
    if not record or record.get("KeyManager", "CUSTOMER") != "CUSTOMER":
        return None
    return dict(record)


def check_bus_keys() -> None:
    """An event on a bus encrypted with a customer-managed key (put by anyone: a function's PutEvents, Scheduler's
    templated target, another rule) is stored and matched by EventBridge with that key, as itself: when the key
    policy does not allow `events.amazonaws.com`, PutEvents still answers, but no rule of the bus ever sees the event
    (AWS sends it to the bus's own dead-letter queue if it has one: not modelled here, it is logged and dropped)."""
    from ministack.core.responses import get_region
    from ministack.services import eventbridge

    dispatch = eventbridge._dispatch_event

    def dispatch_with_key(event: dict, view: Any = None) -> Any:
        bus = eventbridge._event_buses.get(event.get("EventBusName", "default")) or {}
        record = bus_key(bus) if enabled() and bus else None
        if record is not None:
            refusal = bus_key_refusal(str(bus.get("Arn", "")), str(record["Arn"]), record.get("Policy"), get_region())
            if refusal:
                log.warning("event %s on bus %s dropped: %s", event.get("EventId"), bus.get("Name"), refusal)
                return None
        return dispatch(event, view)

    eventbridge._dispatch_event = dispatch_with_key


def install() -> None:
    serialize_sts_sessions()
    patch_scheduler_resources()
    patch_batch_actions()
    patch_ses_send_email()
    check_pass_role()
    check_kms_keys()
    check_bus_keys()
    check_mappings()
    check_other_accounts_mappings()
    accounts.install()  # after check_mappings: a mapping's batch is checked in the mapping's own account
    serve_service_sessions()
    authorize_scheduler_targets()
