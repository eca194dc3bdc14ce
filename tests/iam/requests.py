"""What IAM authorizes an AWS call as: the action(s), the resource ARN of each, and the request's values of the
condition keys policies can test; and how a refused call fails.

One small table for the operations handler code and the services acting for the component make, per the AWS
Service Authorization Reference: an action is the operation's name in the service's signing namespace (botocore's
`signingName`) except where AWS says otherwise (`_ACTION`: SQS batch calls authorize as the single-message action,
SNS's PublishBatch as Publish, Lambda's Invoke as InvokeFunction); a DynamoDB transaction is authorized per item, as
the item action it performs on that item's table; CreateSchedule/UpdateSchedule also pass the schedule's role
(iam:PassRole with iam:PassedToService). tests/iam/test_requests.py checks this table against botocore's service
models and against ministack's independent request -> action/resource map (the few documented differences listed
there).

An operation missing here raises: a handler calling something new must say how IAM sees it before it can pass."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parseaddr
from typing import Any
from urllib.parse import urlparse

from localcloud.iam import KEY_ACTIONS as LOCAL_KEY_ACTIONS
from localcloud.iam import SCHEDULE_CONTEXT_KEY, SCHEDULE_CREATE_KEY_ACTIONS, via_service_context

PARTITION = "aws"


@dataclass(frozen=True)
class Request:
    """One authorization AWS makes for a call: `action` on `resource`, with these condition key values (keys in
    lower case, as IAM compares them case-insensitively)."""

    action: str
    resource: str
    context: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class Where:
    region: str
    account: str

    def arn(self, service: str, resource: str) -> str:
        return f"arn:{PARTITION}:{service}:{self.region}:{self.account}:{resource}"


# (botocore service name, operation) -> IAM action name, where it is not the operation's own name.
_ACTION: dict[tuple[str, str], str] = {
    ("sqs", "SendMessageBatch"): "SendMessage",
    ("sqs", "DeleteMessageBatch"): "DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "ChangeMessageVisibility",
    ("sns", "PublishBatch"): "Publish",
    ("lambda", "Invoke"): "InvokeFunction",
    ("lambda", "InvokeAsync"): "InvokeFunction",
}
# botocore service name -> IAM namespace (the service model's signingName; DynamoDB Streams signs as dynamodb).
NAMESPACE = {
    "dynamodb": "dynamodb",
    "dynamodbstreams": "dynamodb",
    "sqs": "sqs",
    "scheduler": "scheduler",
    "sesv2": "ses",
    "events": "events",
    "lambda": "lambda",
    "stepfunctions": "states",
    "sns": "sns",
    "kms": "kms",
    "logs": "logs",
    "cloudwatch": "cloudwatch",
}
# A TransactWriteItems/TransactGetItems entry -> the item action it performs.
TRANSACT_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def action_of(service: str, operation: str) -> str:
    return f"{NAMESPACE[service]}:{_ACTION.get((service, operation), operation)}"


def table_arn(name: str, where: Where) -> str:
    return name if name.startswith("arn:") else where.arn("dynamodb", f"table/{name}")


def queue_arn_of_url(url: str) -> str:
    """`https://sqs.REGION.amazonaws.com/ACCOUNT/NAME` -> `arn:aws:sqs:REGION:ACCOUNT:NAME` (AWS authorizes the
    queue, which the call names by URL)."""
    parsed = urlparse(url)
    account, name = parsed.path.strip("/").split("/")[-2:]
    host = parsed.netloc.split(".")
    region = host[1] if len(host) > 2 and host[0] == "sqs" else host[0]
    return f"arn:{PARTITION}:sqs:{region}:{account}:{name}"


def function_arn(name: str, qualifier: str | None, where: Where) -> str:
    """FunctionName as a name, a partial (ACCOUNT:function:NAME) or a full ARN, with an optional qualifier."""
    if name.startswith("arn:"):
        arn = name
    elif ":function:" in name:
        arn = f"arn:{PARTITION}:lambda:{where.region}:{name}"
    else:
        arn = where.arn("lambda", f"function:{name}")
    return f"{arn}:{qualifier}" if qualifier and arn.count(":") == 6 else arn


def bus_arn(name: str | None, where: Where) -> str:
    name = name or "default"
    return name if name.startswith("arn:") else where.arn("events", f"event-bus/{name}")


def schedule_arn(group: str | None, name: str, where: Where) -> str:
    return where.arn("scheduler", f"schedule/{group or 'default'}/{name}")


def ses_identity_arn(sender: str, where: Where) -> str:
    return where.arn("ses", f"identity/{parseaddr(sender)[1]}")


Resolver = Callable[[str, dict[str, Any], Where], list[Request]]


def _on(resource: Callable[[dict[str, Any], Where], str]) -> Resolver:
    return lambda action, params, where: [Request(action, resource(params, where))]


def _table(params: dict[str, Any], where: Where) -> str:
    return table_arn(params["TableName"], where)


def _table_or_index(params: dict[str, Any], where: Where) -> str:
    arn = _table(params, where)
    return f"{arn}/index/{params['IndexName']}" if params.get("IndexName") else arn


def _per_table(action: str, params: dict[str, Any], where: Where) -> list[Request]:
    return [Request(action, table_arn(name, where)) for name in params["RequestItems"]]


def _transaction(action: str, params: dict[str, Any], where: Where) -> list[Request]:
    """Each item is authorized as the item action it performs, on its own table (TransactWriteItems itself is no
    action of its own in a policy)."""
    found = []
    for entry in params["TransactItems"]:
        ((kind, body),) = entry.items()
        found.append(Request(f"dynamodb:{TRANSACT_ITEM_ACTIONS[kind]}", table_arn(body["TableName"], where)))
    return found


def _queue(params: dict[str, Any], where: Where) -> str:
    return queue_arn_of_url(params["QueueUrl"])


def _queue_by_name(params: dict[str, Any], where: Where) -> str:
    account = params.get("QueueOwnerAWSAccountId") or where.account
    return f"arn:{PARTITION}:sqs:{where.region}:{account}:{params['QueueName']}"


def _schedule(params: dict[str, Any], where: Where) -> str:
    return schedule_arn(params.get("GroupName"), params["Name"], where)


def _write_schedule(action: str, params: dict[str, Any], where: Where) -> list[Request]:
    """Making or changing a schedule hands Scheduler its role: iam:PassRole on that role, to Scheduler
    (rule("iam-pass-role"))."""
    passed = {"iam:passedtoservice": "scheduler.amazonaws.com"}
    return [
        Request(action, _schedule(params, where)),
        Request("iam:PassRole", params["Target"]["RoleArn"], passed),
    ]


def _key(key_id: str, where: Where) -> str:
    """A KMS key named by ARN, alias name or key ID."""
    if key_id.startswith("arn:"):
        return key_id
    return where.arn("kms", key_id if key_id.startswith("alias/") else f"key/{key_id}")


def _invoke(params: dict[str, Any], where: Where) -> str:
    return function_arn(params["FunctionName"], params.get("Qualifier"), where)


def _send_email(action: str, params: dict[str, Any], where: Where) -> list[Request]:
    sender = params["FromEmailAddress"]
    identity = params.get("FromEmailAddressIdentityArn") or ses_identity_arn(sender, where)
    context = {"ses:fromaddress": parseaddr(sender)[1]}
    # SES also authorizes the send on the configuration set it names (its ARN in the sender's account and region).
    named = params.get("ConfigurationSetName")
    sets = [Request(action, where.arn("ses", f"configuration-set/{named}"), context)] if named else []
    return [Request(action, identity, context), *sets]


def _put_events(action: str, params: dict[str, Any], where: Where) -> list[Request]:
    return [
        Request(
            action,
            bus_arn(entry.get("EventBusName"), where),
            {"events:source": entry.get("Source", ""), "events:detailtype": entry.get("DetailType", "")},
        )
        for entry in params["Entries"]
    ]


_RESOLVERS: dict[tuple[str, str], Resolver] = {
    **{("dynamodb", op): _on(_table) for op in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "DescribeTable")},
    ("dynamodb", "Query"): _on(_table_or_index),
    ("dynamodb", "Scan"): _on(_table_or_index),
    ("dynamodb", "BatchWriteItem"): _per_table,
    ("dynamodb", "BatchGetItem"): _per_table,
    ("dynamodb", "TransactWriteItems"): _transaction,
    ("dynamodb", "TransactGetItems"): _transaction,
    **{("dynamodbstreams", op): _on(lambda p, w: str(p["StreamArn"])) for op in ("DescribeStream", "GetShardIterator")},
    **{
        ("sqs", op): _on(_queue)
        for op in (
            "SendMessage",
            "SendMessageBatch",
            "ReceiveMessage",
            "DeleteMessage",
            "DeleteMessageBatch",
            "ChangeMessageVisibility",
            "ChangeMessageVisibilityBatch",
            "GetQueueAttributes",
        )
    },
    ("sqs", "GetQueueUrl"): _on(_queue_by_name),
    ("scheduler", "CreateSchedule"): _write_schedule,
    ("scheduler", "UpdateSchedule"): _write_schedule,
    ("scheduler", "DeleteSchedule"): _on(_schedule),
    ("scheduler", "GetSchedule"): _on(_schedule),
    ("lambda", "Invoke"): _on(_invoke),
    # The operator's calls (tests/iam/operator.py). Listing mappings and schedules has no resource-level permission.
    ("lambda", "GetFunctionConfiguration"): _on(_invoke),
    ("lambda", "ListEventSourceMappings"): _on(lambda p, w: "*"),
    ("scheduler", "ListSchedules"): _on(lambda p, w: "*"),
    # The console's: the region's functions (no resource-level permission), a log group's events.
    ("lambda", "ListFunctions"): _on(lambda p, w: "*"),
    ("logs", "FilterLogEvents"): _on(lambda p, w: w.arn("logs", f"log-group:{p['logGroupName']}:*")),
    ("cloudwatch", "GetMetricData"): _on(lambda p, w: "*"),  # Scheduler's counts: no resource-level permission
    # What `scheduled-table policy` reads of the stack's encryption (the queues' with GetQueueAttributes).
    ("kms", "DescribeKey"): _on(lambda p, w: _key(str(p["KeyId"]), w)),
    ("sns", "GetTopicAttributes"): _on(lambda p, w: str(p["TopicArn"])),
    ("stepfunctions", "DescribeStateMachine"): _on(lambda p, w: str(p["stateMachineArn"])),
    # A DynamoDB Streams shard iterator begins with its stream's ARN (`<stream ARN>|1|<opaque>`), as AWS's do.
    ("dynamodbstreams", "GetRecords"): _on(lambda p, w: str(p["ShardIterator"]).split("|", 1)[0]),
    ("stepfunctions", "StartExecution"): _on(lambda p, w: str(p["stateMachineArn"])),
    ("sns", "Publish"): _on(lambda p, w: str(p.get("TopicArn") or p["TargetArn"])),
    ("sns", "PublishBatch"): _on(lambda p, w: str(p["TopicArn"])),
    ("sesv2", "SendEmail"): _send_email,
    ("events", "PutEvents"): _put_events,
}


def known_operations() -> list[tuple[str, str]]:
    return sorted(_RESOLVERS)


def authorizations(service: str, operation: str, params: dict[str, Any], where: Where) -> list[Request]:
    """Every authorization AWS makes for this call; all must be allowed for it to run."""
    resolver = _RESOLVERS.get((service, operation))
    if resolver is None:
        raise NotImplementedError(
            f"tests/iam/requests.py does not know how IAM authorizes {service}.{operation}: add it (action and "
            "resource per the AWS Service Authorization Reference) before a handler may call it"
        )
    return resolver(action_of(service, operation), params, where)


# How each service answers a refused call: (HTTP status, error code). DynamoDB and the other JSON-RPC services
# answer 400 AccessDeniedException; REST services 403; SQS (query-compatible JSON) reports the legacy code
# AccessDenied; SNS AuthorizationError.
_DENIED: dict[str, tuple[int, str]] = {
    "dynamodb": (400, "AccessDeniedException"),
    "dynamodbstreams": (400, "AccessDeniedException"),
    "events": (400, "AccessDeniedException"),
    "stepfunctions": (400, "AccessDeniedException"),
    "kms": (400, "AccessDeniedException"),
    "sqs": (403, "AccessDenied"),
    "sns": (403, "AuthorizationError"),
    "lambda": (403, "AccessDeniedException"),
    "scheduler": (403, "AccessDeniedException"),
    "sesv2": (403, "AccessDeniedException"),
    "logs": (400, "AccessDeniedException"),
}


def denial_message(principal: str, request: Request, *, explicit: bool) -> str:
    """AWS's words for a refusal an identity-based policy decided."""
    reason = (
        "with an explicit deny in an identity-based policy"
        if explicit
        else f"because no identity-based policy allows the {request.action} action"
    )
    return f"User: {principal} is not authorized to perform: {request.action} on resource: {request.resource} {reason}"


def denied_response(service: str, message: str) -> dict[str, Any]:
    """The parsed error response botocore builds a ClientError from, as the service sends it."""
    status, code = _DENIED[service]
    return {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0},
    }


# -- KMS: what a call does with the key that encrypts the resource it acts on ----------------------------------------
#
# What each call does with the key of the resource it acts on: the local cloud's table (localcloud/iam.py, with its
# sources), one model for both. EventBridge encrypts a bus's events as the service principal events.amazonaws.com,
# which only the key policy can allow (the EventBridge guide, "Authorizing EventBridge to use a customer managed
# key"): the PutEvents caller needs no KMS permission.
KEY_ACTIONS = LOCAL_KEY_ACTIONS
KMS_SEND = KEY_ACTIONS["sqs:SendMessage"]
# IAM action -> (the service principal that uses the key itself, what it does with it).
SERVICE_KEY_ACTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "events:PutEvents": ("events.amazonaws.com", KMS_SEND),
}


@dataclass(frozen=True)
class KeyUse:
    """One use of a customer-managed key a call makes: `request` (a kms: action on the key's ARN), by the caller
    (allowed only when the caller's policy and the key policy both allow it), or, with `service`, by that service
    principal on the resource owner's behalf (the key policy alone decides)."""

    request: Request
    service: str | None = None


@dataclass(frozen=True)
class Encryption:
    """Which resources a test encrypts with which customer-managed key (resource ARN -> key ARN: a table's covers
    its indexes and streams), and each key's policy (key ARN -> the policy document, JSON)."""

    keys: tuple[tuple[str, str], ...] = ()
    policies: tuple[tuple[str, str], ...] = ()

    def key_of(self, resource: str) -> str | None:
        base = resource.split("/index/", 1)[0].split("/stream/", 1)[0]
        return dict(self.keys).get(base)

    def policy_of(self, key: str) -> str | None:
        return dict(self.policies).get(key)


NO_KEYS = Encryption()


def key_uses(wanted: list[Request], encryption: Encryption) -> list[KeyUse]:
    """The key uses the authorizations `wanted` (one call's) bring with them on encrypted resources: each made by the
    service called, on the caller's behalf, so KMS sees `kms:ViaService` as that service's endpoint in the key's
    Region (localcloud/iam.py, `via_service_context`): rule("kms-via-service")."""
    found: list[KeyUse] = []
    for request in wanted:
        key = encryption.key_of(request.resource)
        if key is None:
            continue
        via = via_service_context(request.action.split(":", 1)[0], key)
        found += [KeyUse(Request(a, key, via)) for a in KEY_ACTIONS.get(request.action, ())]
        if request.action in SERVICE_KEY_ACTIONS:
            service, actions = SERVICE_KEY_ACTIONS[request.action]
            found += [KeyUse(Request(a, key), service) for a in actions]
    return list(dict.fromkeys(found))


def direct_key_use(action: str, key: str) -> KeyUse:
    """The caller's own call to KMS (`kms:Decrypt` with its credentials, say): no service in between, so no
    `kms:ViaService` in the request."""
    return KeyUse(Request(action, key))


def schedule_payload_uses(params: dict[str, Any], where: Where, *, firing: bool) -> list[KeyUse]:
    """What a schedule's `KmsKeyArn` makes KMS see (localcloud/iam.py, `SCHEDULE_PAYLOAD_USES`): when it is made or
    changed, Scheduler's use of the key on the caller's behalf; when it fires (`firing`), the execution role's own
    kms:Decrypt, which Scheduler makes directly with the role's session (no kms:ViaService). Both with the
    schedule's ARN as the encryption context: rule("scheduler-payload-key")."""
    key = params.get("KmsKeyArn")
    if not key:
        return []
    arn = schedule_arn(params.get("GroupName"), params["Name"], where)
    bound = {SCHEDULE_CONTEXT_KEY: arn}
    if firing:
        return [KeyUse(Request("kms:Decrypt", key, bound))]
    via = via_service_context("scheduler", key)
    return [
        KeyUse(Request(action, key, {**via, **(bound if action != "kms:DescribeKey" else {})}))
        for action in SCHEDULE_CREATE_KEY_ACTIONS
    ]


def default_key_policy(account: str) -> str:
    """The default key policy AWS gives a key made without one: the account root may do anything with it, which
    lets the account's IAM policies grant its use (and only them)."""
    return json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "Enable IAM User Permissions",
                    "Effect": "Allow",
                    "Principal": {"AWS": f"arn:{PARTITION}:iam::{account}:root"},
                    "Action": "kms:*",
                    "Resource": "*",
                }
            ],
        }
    )


# How each service answers a call KMS refused: (HTTP status, error code). SQS reports its KmsAccessDenied error as
# the query-compatible code KMS.AccessDeniedException; SNS KMSAccessDenied; DynamoDB AccessDeniedException, naming
# the kms: action; Step Functions KmsAccessDeniedException (its service model's error).
_KMS_DENIED: dict[str, tuple[int, str]] = {
    "sqs": (400, "KMS.AccessDeniedException"),
    "sns": (400, "KMSAccessDenied"),
    "dynamodb": (400, "AccessDeniedException"),
    "dynamodbstreams": (400, "AccessDeniedException"),
    "stepfunctions": (400, "KmsAccessDeniedException"),
    "scheduler": (403, "AccessDeniedException"),
}


def kms_denial_message(principal: str, request: Request, *, by_key_policy: bool) -> str:
    """KMS's words for a refused use of a key: by the caller's own policies, or by the key policy."""
    policy = "resource-based" if by_key_policy else "identity-based"
    return (
        f"User: {principal} is not authorized to perform: {request.action} on resource: {request.resource} because "
        f"no {policy} policy allows the {request.action} action"
    )


def kms_denied_response(service: str, message: str) -> dict[str, Any]:
    status, code = _KMS_DENIED[service]
    return {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}, "RetryAttempts": 0},
    }
