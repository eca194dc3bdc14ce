"""IAM builders and ARN helpers, without Pulumi."""

from __future__ import annotations

import json

import pytest

from components import arns, policies

TABLE = "arn:aws:dynamodb:eu-west-1:123456789012:table/t"


def test_schedules_in_group_turns_a_group_arn_into_its_schedule_pattern() -> None:
    group = "arn:aws:scheduler:eu-west-1:123456789012:schedule-group/g-1"
    assert arns.schedules_in_group(group) == "arn:aws:scheduler:eu-west-1:123456789012:schedule/g-1/*"
    with pytest.raises(ValueError, match="not a schedule group ARN"):
        arns.schedules_in_group(TABLE)


def test_arn_parts_refuses_non_arns() -> None:
    assert arns.arn_parts(TABLE) == ("aws", "dynamodb", "eu-west-1", "123456789012", "table/t")
    with pytest.raises(ValueError, match="not an ARN"):
        arns.arn_parts("table/t")


def test_trust_policy_without_and_with_source_account() -> None:
    plain = json.loads(policies.assume_role_policy("lambda.amazonaws.com"))["Statement"][0]
    assert "Condition" not in plain and plain["Principal"] == {"Service": "lambda.amazonaws.com"}
    scoped = json.loads(policies.assume_role_policy("scheduler.amazonaws.com", "123456789012"))["Statement"][0]
    assert scoped["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}


def test_email_target_needs_a_sender() -> None:
    with pytest.raises(ValueError, match="needs its sender"):
        policies.target_statements("email", "x", home_arn=TABLE)


def test_direct_sqs_dispatch_may_look_up_the_queue_url() -> None:
    statements = policies.direct_dispatch_statements(
        "sqs", "arn:aws:sqs:eu-west-1:123456789012:q", home_arn=TABLE, sender=None
    )
    assert {
        "Effect": "Allow",
        "Action": ["sqs:GetQueueUrl"],
        "Resource": ["arn:aws:sqs:eu-west-1:123456789012:q"],
    } in statements


def test_stream_consumer_statements_scope_everything() -> None:
    statements = policies.stream_consumer_statements(
        table_arn=TABLE,
        log_group_arn="arn:aws:logs:eu-west-1:1:log-group:g",
        send_queue_arns=["b", "a"],
        kms_key_arn=None,
    )
    resources = [r for s in statements for r in s["Resource"]]
    assert "*" not in resources
    assert statements[2] == {"Effect": "Allow", "Action": ["sqs:SendMessage"], "Resource": ["a", "b"]}


def test_scheduling_statements_create_update_delete_and_never_read() -> None:
    group = "arn:aws:scheduler:eu-west-1:123456789012:schedule-group/g"
    manage, pass_role = policies.scheduling_statements(group_arn=group, scheduler_role_arn="arn:aws:iam::1:role/r")
    assert manage["Action"] == ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"]
    assert pass_role["Action"] == ["iam:PassRole"]


def test_a_display_name_sender_is_granted_by_its_bare_address_and_domain() -> None:
    assert arns.email_address("Reminders <r@example.com>") == "r@example.com"
    assert arns.ses_identity_arns(TABLE, "Reminders <r@example.com>") == [
        "arn:aws:ses:eu-west-1:123456789012:identity/r@example.com",
        "arn:aws:ses:eu-west-1:123456789012:identity/example.com",
    ]
    [send] = policies.target_statements("email", "x", home_arn=TABLE, sender="Reminders <r@example.com>")
    assert send["Condition"] == {"StringEquals": {"ses:FromAddress": "r@example.com"}}


def test_key_statements_name_one_key_through_one_service_and_nothing_without_one() -> None:
    key = "arn:aws:kms:eu-west-1:123456789012:key/k"
    assert policies.key_statements(None, policies.TABLE_KEY_ACTIONS, "dynamodb") == []
    assert policies.key_statements(key, ["kms:GenerateDataKey", "kms:Decrypt"], "sqs") == [
        {
            "Effect": "Allow",
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Resource": [key],
            "Condition": {"StringEquals": {"kms:ViaService": "sqs.eu-west-1.amazonaws.com"}},
        }
    ]
    statements = policies.target_statements(
        "sns", "arn:aws:sns:eu-west-1:123456789012:t", home_arn=TABLE, target_key_arn=key
    )
    assert statements[1] == {
        "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Resource": [key],
        "Condition": {"StringEquals": {"kms:ViaService": "sns.eu-west-1.amazonaws.com"}},
    }
    china = "arn:aws-cn:kms:cn-north-1:123456789012:key/k"
    [state_machine] = policies.key_statements(china, ["kms:Decrypt"], "states")
    assert state_machine["Condition"] == {"StringEquals": {"kms:ViaService": "states.cn-north-1.amazonaws.com.cn"}}


def test_scheduler_deletes_items_through_the_tables_key() -> None:
    key = "arn:aws:kms:eu-west-1:123456789012:key/k"
    assert policies.scheduled_delete_statements(TABLE, None) == [
        {"Effect": "Allow", "Action": ["dynamodb:UpdateItem"], "Resource": [TABLE]}
    ]
    assert policies.scheduled_delete_statements(TABLE, key)[1]["Action"] == [
        "kms:Decrypt",
        "kms:Encrypt",
        "kms:GenerateDataKey",
    ]
