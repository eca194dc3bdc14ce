"""The written rules every deployment must pass, checked over what the component registers under mocks.

Each rule looks at the resources of one type and returns, per resource, a problem or None. Rules take the whole
registration list because some need another resource (a function's log group, a role's policy).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from components.policies import XRAY_ACTIONS
from localcloud.mocks import Registration

TABLE = "aws:dynamodb/table:Table"
QUEUE = "aws:sqs/queue:Queue"
FUNCTION = "aws:lambda/function:Function"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
MAPPING = "aws:lambda/eventSourceMapping:EventSourceMapping"
INVOKE_CONFIG = "aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
KMS_KEY = "aws:kms/key:Key"
DLQ_RETENTION = 14 * 24 * 3600

# Actions that AWS offers no narrower resource for: X-Ray's (only with tracing="Active").
STAR_RESOURCE_ALLOWED: frozenset[str] = frozenset(XRAY_ACTIONS)

Check = Callable[[Registration, list[Registration]], str | None]


@dataclass(frozen=True)
class Rule:
    name: str
    applies_to: str
    check: Check


def _statements(policy: Registration) -> list[dict[str, Any]]:
    document = policy.inputs["policy"]
    parsed = json.loads(document) if isinstance(document, str) else document
    return list(parsed["Statement"])


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def table_encrypted(r: Registration, _: list[Registration]) -> str | None:
    return None if (r.inputs.get("serverSideEncryption") or {}).get("enabled") else "server-side encryption is off"


def table_pitr(r: Registration, _: list[Registration]) -> str | None:
    return None if (r.inputs.get("pointInTimeRecovery") or {}).get("enabled") else "point-in-time recovery is off"


def queue_encrypted(r: Registration, _: list[Registration]) -> str | None:
    encrypted = r.inputs.get("sqsManagedSseEnabled") or r.inputs.get("kmsMasterKeyId")
    return None if encrypted else "not encrypted at rest"


def dead_letter_queue_shape(r: Registration, _: list[Registration]) -> str | None:
    if not r.name.endswith(("-dlq", "-poison")):
        return None
    if r.inputs.get("messageRetentionSeconds") != DLQ_RETENTION:
        return f"retention {r.inputs.get('messageRetentionSeconds')} s, not 14 days"
    if r.inputs.get("redrivePolicy"):
        return "a dead-letter queue has a dead-letter queue of its own"
    return None


def function_log_group(r: Registration, everything: list[Registration]) -> str | None:
    group = (r.inputs.get("loggingConfig") or {}).get("logGroup")
    groups = [g for g in everything if g.type == LOG_GROUP and g.outputs.get("name") == group]
    if not groups:
        return "no log group of its own"
    return None if groups[0].inputs.get("retentionInDays") else "its log group keeps logs forever"


def function_timeout(r: Registration, _: list[Registration]) -> str | None:
    timeout = r.inputs.get("timeout")
    return None if isinstance(timeout, int | float) and 0 < timeout <= 900 else f"timeout {timeout!r}"


def _queue_redrive(queue_arn: str, everything: list[Registration]) -> str | None:
    """An SQS event source's failure path is the queue's own redrive policy (Lambda has no on-failure destination
    for SQS): a dead-letter target after a finite number of receives."""
    queues = [q for q in everything if q.type == QUEUE and q.outputs.get("arn") == queue_arn]
    if not queues:
        return "its source queue is not the component's"
    policy = json.loads(queues[0].inputs.get("redrivePolicy") or "{}")
    if not policy.get("deadLetterTargetArn") or not 1 <= int(policy.get("maxReceiveCount", 0)) <= 100:
        return "its source queue has no redrive policy to a dead-letter queue after finite receives"
    return None


def function_failure_path(r: Registration, everything: list[Registration]) -> str | None:
    arn = r.outputs.get("arn")
    name = r.outputs.get("name")
    for other in everything:
        if (
            other.type == MAPPING
            and other.inputs.get("functionName") == arn
            and ":sqs:" in other.inputs.get("eventSourceArn", "")
        ):
            return _queue_redrive(other.inputs["eventSourceArn"], everything)
        if other.type == MAPPING and other.inputs.get("functionName") == arn:
            destination = ((other.inputs.get("destinationConfig") or {}).get("onFailure") or {}).get("destinationArn")
            return None if destination else "its event source mapping has no on-failure destination"
        if other.type == INVOKE_CONFIG and other.inputs.get("functionName") in (arn, name):
            destination = ((other.inputs.get("destinationConfig") or {}).get("onFailure") or {}).get("destination")
            return None if destination else "its async invoke config has no on-failure destination"
    return "neither an event source mapping nor an async invoke config: failures would vanish"


def mapping_settings(r: Registration, everything: list[Registration]) -> str | None:
    i = r.inputs
    problems = []
    if ":sqs:" in i.get("eventSourceArn", ""):  # a queue: retries and the dead letter are the queue's
        problems.append(_queue_redrive(i["eventSourceArn"], everything) or "")
        if "ReportBatchItemFailures" not in (i.get("functionResponseTypes") or []):
            problems.append("no partial batch responses")
        return "; ".join(p for p in problems if p) or None
    if not ((i.get("destinationConfig") or {}).get("onFailure") or {}).get("destinationArn"):
        problems.append("no on-failure destination")
    if not 0 <= int(i.get("maximumRetryAttempts", -1)) <= 10000:
        problems.append("retries are not finite")
    if not 60 <= int(i.get("maximumRecordAgeInSeconds", -1)) <= 604800:
        problems.append("record age is not finite")
    if not i.get("bisectBatchOnFunctionError"):
        problems.append("no bisect on error")
    if "ReportBatchItemFailures" not in (i.get("functionResponseTypes") or []):
        problems.append("no partial batch responses")
    return "; ".join(problems) or None


def no_star_action(r: Registration, _: list[Registration]) -> str | None:
    for statement in _statements(r):
        for action in _as_list(statement.get("Action", [])):
            if action == "*" or action.endswith(":*"):
                return f"action {action!r}"
    return None


def star_resource_only_where_needed(r: Registration, _: list[Registration]) -> str | None:
    for statement in _statements(r):
        if "*" in _as_list(statement.get("Resource", [])):
            needless = [a for a in _as_list(statement["Action"]) if a not in STAR_RESOURCE_ALLOWED]
            if needless:
                return f"resource '*' for {needless}"
    return None


def scheduler_trust_scoped(r: Registration, _: list[Registration]) -> str | None:
    document = r.inputs["assumeRolePolicy"]
    trust = json.loads(document) if isinstance(document, str) else document
    for statement in trust["Statement"]:
        if statement.get("Principal", {}).get("Service") == "scheduler.amazonaws.com":
            account = (statement.get("Condition") or {}).get("StringEquals", {}).get("aws:SourceAccount")
            if not account:
                return "Scheduler may assume it on behalf of any account (no aws:SourceAccount)"
    return None


def pass_role_scoped(r: Registration, everything: list[Registration]) -> str | None:
    scheduler_roles = {
        g.outputs.get("arn") for g in everything if g.type == ROLE and "scheduler.amazonaws.com" in str(g.inputs)
    }
    for statement in _statements(r):
        if "iam:PassRole" not in _as_list(statement.get("Action", [])):
            continue
        resources = set(_as_list(statement.get("Resource", [])))
        if not resources or not resources <= scheduler_roles:
            return f"iam:PassRole on {sorted(resources)}, not only the Scheduler role"
        service = (statement.get("Condition") or {}).get("StringEquals", {}).get("iam:PassedToService")
        if service != "scheduler.amazonaws.com":
            return "iam:PassRole without iam:PassedToService = scheduler.amazonaws.com"
    return None


def ses_from_sender_only(r: Registration, _: list[Registration]) -> str | None:
    for statement in _statements(r):
        if "ses:SendEmail" not in _as_list(statement.get("Action", [])):
            continue
        sender = (statement.get("Condition") or {}).get("StringEquals", {}).get("ses:FromAddress")
        if not sender:
            return "ses:SendEmail without ses:FromAddress: a domain identity would let it send as any address there"
    return None


def _is_account_root(principal: Any) -> bool:
    """`{"AWS": "arn:<partition>:iam::<account>:root"}`: the account itself, whose IAM policies then decide."""
    arn = principal.get("AWS") if isinstance(principal, dict) and len(principal) == 1 else None
    parts = arn.split(":") if isinstance(arn, str) else []
    return len(parts) == 6 and parts[2] == "iam" and parts[4].isdigit() and parts[5] == "root"


def key_policy_scoped(r: Registration, _: list[Registration]) -> str | None:
    """A key policy's `kms:*` is allowed only in the account-root statement (the standard key-admin statement:
    without it IAM could grant nothing on the key; `Resource: "*"` there means this key). This exemption is the
    only one from 'no * action', which is about role policies."""
    if not r.inputs.get("enableKeyRotation"):
        return "key rotation is off"
    for statement in _statements(r):
        principal = statement.get("Principal", {})
        wildcards = [a for a in _as_list(statement.get("Action", [])) if a == "*" or a.endswith(":*")]
        if wildcards and not _is_account_root(principal):
            return f"{wildcards} for {principal}: only the account root may administer the key"
        if isinstance(principal, dict) and "Service" in principal:
            account = (statement.get("Condition") or {}).get("StringEquals", {}).get("aws:SourceAccount")
            if not account:
                return f"{principal['Service']} may use the key on behalf of any account (no aws:SourceAccount)"
    return None


def described(r: Registration, _: list[Registration]) -> str | None:
    return None if str(r.inputs.get("description") or "").strip() else "no description"


RULES: tuple[Rule, ...] = (
    Rule("table: encrypted at rest", TABLE, table_encrypted),
    Rule("table: point-in-time recovery", TABLE, table_pitr),
    Rule("queue: encrypted at rest", QUEUE, queue_encrypted),
    Rule("dead-letter queue: 14-day retention, no DLQ of its own", QUEUE, dead_letter_queue_shape),
    Rule("function: own log group with retention", FUNCTION, function_log_group),
    Rule("function: finite timeout", FUNCTION, function_timeout),
    Rule("function: a dead-letter or on-failure path", FUNCTION, function_failure_path),
    Rule("mapping: on-failure, finite retries and age, bisect, partial batches", MAPPING, mapping_settings),
    Rule("function: a description", FUNCTION, described),
    Rule("IAM: role has a description", ROLE, described),
    Rule("IAM: no '*' action", ROLE_POLICY, no_star_action),
    Rule("IAM: '*' resource only where AWS has nothing narrower", ROLE_POLICY, star_resource_only_where_needed),
    Rule("IAM: Scheduler trust limited by aws:SourceAccount", ROLE, scheduler_trust_scoped),
    Rule("IAM: iam:PassRole only the Scheduler role, only to Scheduler", ROLE_POLICY, pass_role_scoped),
    Rule("IAM: ses:SendEmail only from the sender's address", ROLE_POLICY, ses_from_sender_only),
    Rule(
        "KMS key: rotated; kms:* only for the account root; services for this account only", KMS_KEY, key_policy_scoped
    ),
)


def evaluate(registrations: list[Registration]) -> dict[str, tuple[int, list[str]]]:
    """Rule name -> (resources that pass, problems as 'resource: problem')."""
    results: dict[str, tuple[int, list[str]]] = {}
    for rule in RULES:
        passed, problems = 0, []
        for registration in registrations:
            if registration.type != rule.applies_to:
                continue
            problem = rule.check(registration, registrations)
            if problem is None:
                passed += 1
            else:
                problems.append(f"{registration.name}: {problem}")
        results[rule.name] = (passed, problems)
    return results
