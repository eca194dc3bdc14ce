"""The operation -> IAM action/resource table (tests/iam/requests.py) checked against references: botocore's service
models (the operation exists; the namespace is the service's signing name) and ministack's independent map from the
HTTP request botocore really sends to the IAM action and resource (`ministack.core.iam_actions`). Where the two
differ, AWS's Service Authorization Reference decides, and the difference is listed here with its source."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.awsrequest import AWSResponse
from ministack.core import iam_actions
from ministack.core.iam_evaluator import parse_policy_document

from tests.conftest import REGION
from tests.iam import enforce, requests
from tests.iam.roles import ACCOUNT, Role

WHERE = requests.Where(REGION, ACCOUNT)
TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/t"
QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/q"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/r"
KEY = {"PK": {"S": "a"}}
TARGET = {"Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:q", "RoleArn": ROLE}

# One sample call per operation the handlers make: (botocore service, ministack's service, operation, params).
SAMPLES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("dynamodb", "dynamodb", "GetItem", {"TableName": "t", "Key": KEY}),
    ("dynamodb", "dynamodb", "PutItem", {"TableName": "t", "Item": KEY}),
    ("dynamodb", "dynamodb", "UpdateItem", {"TableName": "t", "Key": KEY, "UpdateExpression": "SET x = :x"}),
    ("dynamodb", "dynamodb", "DeleteItem", {"TableName": "t", "Key": KEY}),
    ("dynamodb", "dynamodb", "Query", {"TableName": "t", "IndexName": "due", "KeyConditionExpression": "a = :a"}),
    ("dynamodb", "dynamodb", "BatchWriteItem", {"RequestItems": {"t": [{"PutRequest": {"Item": KEY}}]}}),
    ("sqs", "sqs", "SendMessage", {"QueueUrl": QUEUE_URL, "MessageBody": "x"}),
    ("sqs", "sqs", "GetQueueUrl", {"QueueName": "q", "QueueOwnerAWSAccountId": ACCOUNT}),
    ("scheduler", "scheduler", "DeleteSchedule", {"Name": "s", "GroupName": "g"}),
    ("lambda", "lambda", "Invoke", {"FunctionName": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:f"}),
    ("stepfunctions", "states", "StartExecution", {"stateMachineArn": f"arn:aws:states:{REGION}:{ACCOUNT}:x:m"}),
    ("sns", "sns", "Publish", {"TopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:t", "Message": "x"}),
    ("events", "events", "PutEvents", {"Entries": [{"Source": "s", "DetailType": "d", "Detail": "{}"}]}),
    (
        "sesv2",
        "ses",
        "SendEmail",
        {
            "FromEmailAddress": "r@example.com",
            "Destination": {"ToAddresses": ["a@example.com"]},
            "Content": {"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "b"}}}},
        },
    ),
]
# Where ministack's map and AWS differ, with AWS's answer (Service Authorization Reference) in our table.
DIFFERENT_FROM_MINISTACK = {
    ("scheduler", "DeleteSchedule"): "ministack names every schedule schedule/default/NAME, ignoring GroupName",
    ("events", "PutEvents"): "ministack does not name the bus; PutEvents is authorized on the event bus",
    ("sesv2", "SendEmail"): "ministack authorizes SES v2 on the identity it finds; we use the sender's address",
}


def _sent(service: str, operation: str, params: dict[str, Any]) -> Any:
    """The HTTP request botocore sends for this call (answered with an empty 200 before it leaves)."""
    client = boto3.client(service, region_name=REGION, aws_access_key_id="k", aws_secret_access_key="s")
    captured: list[Any] = []

    def capture(request: Any, **_: Any) -> AWSResponse:
        captured.append(request)
        return AWSResponse(request.url, 200, {}, None)

    client.meta.events.register_first("before-send", capture)
    with contextlib.suppress(Exception):  # the empty answer may not parse; the request is what we want
        getattr(client, botocore.xform_name(operation))(**params)
    return captured[0]


def _ministacks_map(service: str, ministack: str, operation: str, params: dict[str, Any]) -> tuple[str | None, str]:
    """(IAM action, resource ARN) ministack's map gives the HTTP request botocore really sends for this call (a
    query-protocol request's parameters read from its form body, as ministack's router reads them)."""
    from urllib.parse import parse_qs, urlparse

    sent = _sent(service, operation, params)
    url = urlparse(sent.url)
    headers = {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in sent.headers.items()}
    body = sent.body or b""
    body = body.encode() if isinstance(body, str) else body
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        query |= {k: v[0] for k, v in parse_qs(body.decode()).items()}
    action = iam_actions.extract_iam_action(ministack, sent.method, url.path, headers, body, query)
    resource = iam_actions.extract_resource_arn(ministack, sent.method, url.path, headers, body, query, REGION, ACCOUNT)
    return action, resource


@pytest.mark.parametrize(("service", "ministack", "operation", "params"), SAMPLES, ids=lambda v: str(v)[:20])
def test_the_table_agrees_with_ministacks_map_of_the_real_request(
    service: str, ministack: str, operation: str, params: dict[str, Any]
) -> None:
    ours = requests.authorizations(service, operation, params, WHERE)
    action, resource = _ministacks_map(service, ministack, operation, params)
    assert action is not None and action.lower() == ours[0].action.lower(), (action, ours)
    if (service, operation) in DIFFERENT_FROM_MINISTACK or resource == "*":
        return
    assert resource == ours[0].resource, (resource, ours)


# Batch calls, which ministack's own map names by operation (an action no policy grants); the local cloud's map
# (localcloud.iam.batch_action) names them as IAM does, as this table does.
BATCH_SAMPLES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("sqs", "sqs", "SendMessageBatch", {"QueueUrl": QUEUE_URL, "Entries": [{"Id": "0", "MessageBody": "x"}]}),
    (
        "sns",
        "sns",
        "PublishBatch",
        {
            "TopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:t",
            "PublishBatchRequestEntries": [{"Id": "0", "Message": "x"}],
        },
    ),
]


@pytest.mark.parametrize(("service", "ministack", "operation", "params"), BATCH_SAMPLES, ids=lambda v: str(v)[:20])
def test_the_local_clouds_map_of_a_real_batch_request_is_the_tables(
    service: str, ministack: str, operation: str, params: dict[str, Any]
) -> None:
    from localcloud.iam import batch_action

    ours = requests.authorizations(service, operation, params, WHERE)
    action, resource = _ministacks_map(service, ministack, operation, params)
    assert [(batch_action(action), resource)] == [(r.action, r.resource) for r in ours]


@pytest.mark.parametrize(("service", "operation"), requests.known_operations())
def test_every_operation_in_the_table_is_one_of_its_services_operations(service: str, operation: str) -> None:
    model = botocore.session.get_session().get_service_model(service)
    assert operation in model.operation_names
    # IAM's prefix is the signing name but for DynamoDB Streams (dynamodb:) and CloudWatch (cloudwatch:, signed as
    # monitoring).
    assert requests.NAMESPACE[service] == model.signing_name or (service, model.signing_name) in {
        ("dynamodbstreams", "dynamodb"),
        ("cloudwatch", "monitoring"),
    }


def test_the_facts_the_service_authorization_reference_states() -> None:
    batch = {"QueueUrl": QUEUE_URL, "Entries": [{"Id": "1", "MessageBody": "x"}]}
    assert {r.action for r in requests.authorizations("sqs", "SendMessageBatch", batch, WHERE)} == {"sqs:SendMessage"}
    # SNS's API permissions reference: sns:Publish "grants permission to both publish and publish batch".
    topic = f"arn:aws:sns:{REGION}:{ACCOUNT}:t"
    published = {"TopicArn": topic, "PublishBatchRequestEntries": [{"Id": "0", "Message": "x"}]}
    assert [(r.action, r.resource) for r in requests.authorizations("sns", "PublishBatch", published, WHERE)] == [
        ("sns:Publish", topic)
    ]
    transaction = {
        "TransactItems": [
            {"Put": {"TableName": "t", "Item": KEY}},
            {"Update": {"TableName": "l", "Key": KEY, "UpdateExpression": "SET x = :x"}},
        ]
    }
    assert [
        (r.action, r.resource) for r in requests.authorizations("dynamodb", "TransactWriteItems", transaction, WHERE)
    ] == [
        ("dynamodb:PutItem", TABLE),
        ("dynamodb:UpdateItem", TABLE.replace("table/t", "table/l")),
    ]
    create = {"Name": "n", "GroupName": "g", "ScheduleExpression": "at(2030-01-01T00:00:00)", "Target": TARGET}
    found = requests.authorizations("scheduler", "CreateSchedule", create, WHERE)
    assert [(r.action, r.resource) for r in found] == [
        ("scheduler:CreateSchedule", f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/g/n"),
        ("iam:PassRole", ROLE),
    ]
    assert found[1].context == {"iam:passedtoservice": "scheduler.amazonaws.com"}
    query = {"TableName": "t", "IndexName": "due", "KeyConditionExpression": "a = :a"}
    assert requests.authorizations("dynamodb", "Query", query, WHERE)[0].resource == f"{TABLE}/index/due"


# -- the evaluator, on policies written here ------------------------------------------------------------------------


def _role(*statements: dict[str, Any]) -> Role:
    document = {"Version": "2012-10-17", "Statement": list(statements)}
    return Role("r", ROLE, "fn", document, tuple(parse_policy_document(document)))


def _decide(role: Role, action: str, resource: str, **context: str) -> str:
    return enforce.decide(role, requests.Request(action, resource, {k.lower(): v for k, v in context.items()}))


def test_wildcard_actions_match_and_other_actions_do_not() -> None:
    role = _role({"Effect": "Allow", "Action": "dynamodb:*Item", "Resource": TABLE})
    assert _decide(role, "dynamodb:PutItem", TABLE) == "Allow"
    assert _decide(role, "dynamodb:BatchWriteItem", TABLE) == "Allow"  # IAM wildcards: *Item covers it too
    assert _decide(role, "dynamodb:Query", TABLE) == "ImplicitDeny"


def test_wildcard_resources_match_and_other_resources_do_not() -> None:
    role = _role(
        {"Effect": "Allow", "Action": "scheduler:CreateSchedule", "Resource": "arn:aws:scheduler:*:*:schedule/g/*"}
    )
    assert _decide(role, "scheduler:CreateSchedule", f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/g/n") == "Allow"
    assert _decide(role, "scheduler:CreateSchedule", f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/h/n") == (
        "ImplicitDeny"
    )
    assert _decide(role, "dynamodb:GetItem", f"{TABLE}/index/due") == "ImplicitDeny"


def test_a_condition_key_must_match_the_requests_value() -> None:
    role = _role(
        {
            "Effect": "Allow",
            "Action": "ses:SendEmail",
            "Resource": "*",
            "Condition": {"StringEquals": {"ses:FromAddress": "r@example.com"}},
        }
    )
    assert _decide(role, "ses:SendEmail", "arn:x", **{"ses:FromAddress": "r@example.com"}) == "Allow"
    assert _decide(role, "ses:SendEmail", "arn:x", **{"ses:FromAddress": "evil@example.com"}) == "ImplicitDeny"
    assert _decide(role, "ses:SendEmail", "arn:x") == "ImplicitDeny"  # the key absent


def test_an_explicit_deny_wins_over_any_allow() -> None:
    role = _role(
        {"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"},
        {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": TABLE},
    )
    assert _decide(role, "dynamodb:PutItem", TABLE) == "Allow"
    assert _decide(role, "dynamodb:DeleteItem", TABLE) == "Deny"
    message = requests.denial_message(role.principal, requests.Request("dynamodb:DeleteItem", TABLE), explicit=True)
    assert message.endswith("with an explicit deny in an identity-based policy")
    assert json.dumps(requests.denied_response("dynamodb", message)["Error"]["Code"]) == '"AccessDeniedException"'
