"""The alarm topic's KMS key policy, as the component writes it (`policies.alarm_topic_key_policy`, the key made in
`ScheduledTable._alarm_topic`): CloudWatch, publishing an alarm for this account, may use the key; no other service
(SNS needs no statement) and no other account's alarm may. Evaluated with ministack's resource-policy evaluator, as
KMS evaluates a key policy for a service principal (`aws:SourceAccount` is the account the service acts for)."""

from __future__ import annotations

import json

import pytest
from ministack.core.iam_evaluator import EvalContext, evaluate_resource_policy

from tests.iam.roles import ACCOUNT, NAME

OTHER_ACCOUNT = "210987654321"


def _key_policy() -> str:
    """The key policy the component registers for its alarm topic's key (default options make that topic)."""
    from components import ScheduledTable, ScheduledTableArgs
    from components.testing import run_with_mocks

    stack = run_with_mocks(
        lambda: ScheduledTable(NAME, ScheduledTableArgs(mode="aggregate", create_alarm_topic=True)),
        project="scheduled-table",
        stack="iam",
    )
    (key,) = stack.of_type("aws:kms/key:Key")
    return str(key.inputs["policy"])


def _decision(policy: str, service: str, action: str, source_account: str) -> str:
    context = EvalContext(
        principal_arn=service,
        principal_type="Service",
        principal_account=source_account,
        action=action,
        resource_arn="*",
        region="eu-west-1",
        service_context={"aws:sourceaccount": source_account},
    )
    return evaluate_resource_policy(policy, context, service=service).decision


@pytest.mark.parametrize("action", ["kms:GenerateDataKey", "kms:Decrypt"])
def test_cloudwatch_may_use_the_alarm_key_for_this_account_only_and_no_other_service(action: str) -> None:
    policy = _key_policy()
    assert json.loads(policy)["Statement"]
    assert _decision(policy, "cloudwatch.amazonaws.com", action, ACCOUNT) == "Allow"
    assert _decision(policy, "cloudwatch.amazonaws.com", action, OTHER_ACCOUNT) == "ImplicitDeny"
    # SNS needs no statement of its own (the publisher's use of the key is what encrypts): none is granted
    for service in ("sns.amazonaws.com", "events.amazonaws.com"):
        assert _decision(policy, service, action, ACCOUNT) == "ImplicitDeny"
