"""No role the component writes may use a customer-managed key directly: each grant holds only through the service
that uses the key on the role's behalf (`kms:ViaService`), evaluated as KMS does (tests/iam/enforce.py: a service's
use of a key carries its endpoint as kms:ViaService, the role's own call to KMS none). Scheduler's execution role,
which Scheduler lets call KMS itself for a schedule's payload, may decrypt only what is bound to its group's
schedules (the encryption context). A schedule's payload under the table's key is encrypted with the scheduling
function's permissions, through Scheduler, for its own group's schedules only."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import REGION
from tests.iam import enforce, requests
from tests.iam.roles import ACCOUNT, Keys, Options, Role, rendered, role_for
from tests.iam.test_granted import option_id, option_sets

KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1111aaaa-11aa-11aa-11aa-111111aaaaaa"
ENCRYPTION = requests.Encryption((), ((KEY, requests.default_key_policy(ACCOUNT)),))
SCHEDULE_CONTEXT = "kms:EncryptionContext:aws:scheduler:schedule:arn"


def _key_statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in document["Statement"] if any(str(a).startswith("kms:") for a in s["Action"])]


@pytest.mark.parametrize(
    "options", [o for o in option_sets() if o.table_key or o.target_key or o.queue_key], ids=option_id
)
def test_every_key_statement_holds_through_a_service_only(options: Options) -> None:
    for role, text in rendered(options).documents.items():
        for statement in _key_statements(json.loads(text)):
            condition = statement.get("Condition") or {}
            via = condition.get("StringEquals", {}).get("kms:ViaService")
            if via is None:
                # Only Scheduler's own read of a payload, bound to the group's schedules
                assert role == "scheduler-exec" and statement["Action"] == ["kms:Decrypt"], (role, statement)
                assert SCHEDULE_CONTEXT in condition.get("ArnLike", {}), (role, statement)
                continue
            service, region, domain = via.split(".", 2)
            assert (region, domain) == (REGION, "amazonaws.com"), (role, statement)
            assert service in ("dynamodb", "sqs", "sns", "states", "scheduler"), (role, statement)


def _role(name: str, options: Options) -> Role:
    """The role `name` as the component renders it for `options`, told the table's key."""
    return role_for(rendered(options).config, name, Keys(table=KEY))


def _decision(role: Role, use: requests.KeyUse) -> str:
    return enforce.decide_key(role, use, ENCRYPTION)


@pytest.mark.parametrize(
    ("options", "role"),
    [
        (Options(mode="eventbridge", kind="sqs", table_key=True), "scheduler"),
        (Options(mode="ttl", kind="sqs", table_key=True), "executor"),
        (Options(mode="polling", kind="sqs", table_key=True), "processor"),
        (Options(mode="aggregate", kind="none", table_key=True), "aggregator"),
    ],
    ids=["scheduler", "executor", "processor", "aggregator"],
)
@pytest.mark.parametrize("action", ["kms:Decrypt", "kms:GenerateDataKey"])
def test_a_direct_use_of_the_tables_key_is_refused_and_its_use_through_dynamodb_allowed(
    options: Options, role: str, action: str
) -> None:
    # GIVEN the function's role as deployed for a table encrypted with a customer-managed key
    found = _role(role, options)
    # WHEN it calls KMS itself (a Decrypt of a data key it got hold of some other way), THEN KMS refuses
    assert _decision(found, requests.direct_key_use(action, KEY)) == "ImplicitDeny"
    # AND the same use made by DynamoDB on its behalf (reading or writing an item, a stream record) is allowed
    table = requests.Request("dynamodb:PutItem", f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/t")
    (through,) = [
        u
        for u in requests.key_uses([table], requests.Encryption(((table.resource, KEY),)))
        if u.request.action == action
    ]
    assert through.request.context == {"kms:viaservice": f"dynamodb.{REGION}.amazonaws.com"}
    assert _decision(found, through) == "Allow"
    # AND the same use through another service (SQS, for a queue the role has no business with) is refused
    other = requests.Request(action, KEY, {"kms:viaservice": f"sns.{REGION}.amazonaws.com"})
    assert _decision(found, requests.KeyUse(other)) == "ImplicitDeny"


def test_the_component_queues_key_is_used_through_sqs_only() -> None:
    # GIVEN the releaser (it consumes the release queue and parks in the poison queue and the target DLQ, all the
    # component's own, under the table's key)
    found = _role("releaser", Options(mode="eventbridge", kind="sqs", precision_second=True, table_key=True))
    queue = requests.Request("sqs:SendMessage", f"arn:aws:sqs:{REGION}:{ACCOUNT}:poison")
    uses = requests.key_uses([queue], requests.Encryption(((queue.resource, KEY),)))
    assert {u.request.action for u in uses} == {"kms:Decrypt", "kms:GenerateDataKey"}
    assert all(_decision(found, u) == "Allow" for u in uses)
    assert _decision(found, requests.direct_key_use("kms:Decrypt", KEY)) == "ImplicitDeny"


def _schedule(group: str, name: str = "occurrence-1") -> dict[str, Any]:
    return {"Name": name, "GroupName": group, "KmsKeyArn": KEY}


@pytest.mark.parametrize(
    ("options", "role"),
    [
        (Options(mode="eventbridge", kind="sqs", table_key=True), "scheduler"),
        (Options(mode="ttl", kind="sqs", precise=True, table_key=True), "executor"),
    ],
    ids=["eventbridge", "precise-ttl"],
)
def test_a_schedules_payload_is_encrypted_as_the_function_for_its_own_group_only(options: Options, role: str) -> None:
    built = rendered(options)
    group = built.config["scheduler"]["group"]
    assert built.config["scheduler"]["kmsKeyArn"]  # the handlers are told the key (the stand-in for the table's)
    writer, reader = _role(role, options), _role("scheduler-exec", options)
    # WHEN the function makes a schedule of its group under the key, THEN Scheduler may encrypt it as the function
    made = requests.schedule_payload_uses(_schedule(group), enforce.WHERE, firing=False)
    assert {u.request.action for u in made} == {"kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt"}
    assert [_decision(writer, u) for u in made] == ["Allow"] * 3
    # AND when it fires, Scheduler's role may read it back (a direct call, bound to the schedule)
    (read,) = requests.schedule_payload_uses(_schedule(group), enforce.WHERE, firing=True)
    assert "kms:viaservice" not in read.request.context and _decision(reader, read) == "Allow"
    # BUT not for another group's schedules, nor the function's own call to KMS, nor the role's unbound Decrypt
    elsewhere = requests.schedule_payload_uses(_schedule("another-group"), enforce.WHERE, firing=False)
    assert [_decision(writer, u) for u in elsewhere if u.request.action != "kms:DescribeKey"] == ["ImplicitDeny"] * 2
    (foreign,) = requests.schedule_payload_uses(_schedule("another-group"), enforce.WHERE, firing=True)
    assert _decision(reader, foreign) == "ImplicitDeny"
    for action in ("kms:DescribeKey", "kms:GenerateDataKey", "kms:Decrypt"):
        assert _decision(writer, requests.direct_key_use(action, KEY)) == "ImplicitDeny", action
    assert _decision(reader, requests.direct_key_use("kms:Decrypt", KEY)) == "ImplicitDeny"
