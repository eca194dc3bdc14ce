"""The local cloud's IAM fixes to ministack, in-process: Scheduler's request -> resource map honours the request's
group, and the action Scheduler's role needs for each templated target."""

from __future__ import annotations

import json

import pytest

from localcloud.iam import (
    batch_action,
    patch_scheduler_resources,
    schedule_resource_arn,
    send_email_identity,
    templated_action,
)

REGION, ACCOUNT = "eu-west-1", "123456789012"


def test_a_schedule_is_named_in_the_group_its_request_names() -> None:
    create = json.dumps({"GroupName": "reminders-schedules", "Target": {}}).encode()
    assert (
        schedule_resource_arn("POST", "/schedules/r-1", create, {}, REGION, ACCOUNT)
        == f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/reminders-schedules/r-1"
    )
    arn = f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule/"
    assert (
        schedule_resource_arn("PUT", "/schedules/r-1", create, {}, REGION, ACCOUNT) == arn + "reminders-schedules/r-1"
    )
    assert (
        schedule_resource_arn("DELETE", "/schedules/r-1", b"", {"groupName": ["g"]}, REGION, ACCOUNT) == arn + "g/r-1"
    )
    assert schedule_resource_arn("GET", "/schedules/r-1", b"", {}, REGION, ACCOUNT) == arn + "default/r-1"
    assert schedule_resource_arn("GET", "/schedules", b"", {}, REGION, ACCOUNT) is None  # ListSchedules: ministack's


def test_ministacks_map_is_patched_to_honour_the_group(monkeypatch: pytest.MonkeyPatch) -> None:
    from ministack.core import iam_actions

    monkeypatch.setattr(iam_actions, "extract_resource_arn", iam_actions.extract_resource_arn)  # restored after
    body = json.dumps({"GroupName": "tasks-schedules"}).encode()

    def resource(method: str, query: dict[str, list[str]], sent: bytes = b"") -> str:
        arn: str = iam_actions.extract_resource_arn(
            "scheduler", method, "/schedules/t-1", {}, sent, query, REGION, ACCOUNT
        )
        return arn

    # ministack as pinned: every schedule in `default`, so a policy on schedule/tasks-schedules/* never matches
    assert resource("POST", {}, body).endswith("schedule/default/t-1")
    patch_scheduler_resources()
    assert resource("POST", {}, body).endswith("schedule/tasks-schedules/t-1")
    assert resource("DELETE", {"groupName": ["tasks-schedules"]}).endswith("schedule/tasks-schedules/t-1")
    # other services keep ministack's map
    table = iam_actions.extract_resource_arn(
        "dynamodb", "POST", "/", {}, json.dumps({"TableName": "t"}).encode(), {}, REGION, ACCOUNT
    )
    assert table == f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/t"


def test_each_templated_target_needs_its_own_action_and_universal_targets_are_the_emulators() -> None:
    assert templated_action(f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:f") == ("lambda:InvokeFunction", "lambda")
    assert templated_action(f"arn:aws:sqs:{REGION}:{ACCOUNT}:q") == ("sqs:SendMessage", "sqs")
    assert templated_action(f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/b") == ("events:PutEvents", "events")
    assert templated_action(f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:m") == ("states:StartExecution", "states")
    assert templated_action(f"arn:aws:sns:{REGION}:{ACCOUNT}:t") == ("sns:Publish", "sns")
    assert templated_action("arn:aws:scheduler:::aws-sdk:dynamodb:deleteItem") is None


def test_batch_operations_are_authorized_as_their_single_message_actions() -> None:
    # The AWS Service Authorization Reference: SendMessageBatch needs sqs:SendMessage, and so on; SNS's API
    # permissions reference: sns:Publish grants both Publish and PublishBatch.
    assert batch_action("sqs:SendMessageBatch") == "sqs:SendMessage"
    assert batch_action("sqs:DeleteMessageBatch") == "sqs:DeleteMessage"
    assert batch_action("sqs:ChangeMessageVisibilityBatch") == "sqs:ChangeMessageVisibility"
    assert batch_action("sns:PublishBatch") == "sns:Publish"
    assert batch_action("sqs:ReceiveMessage") == "sqs:ReceiveMessage"
    assert batch_action("sns:Publish") == "sns:Publish"


def test_send_email_is_authorized_on_the_identity_ses_sends_as_with_the_from_address() -> None:
    def identity(sender: str, verified: set[str]) -> tuple[str, dict[str, str]]:
        return send_email_identity(sender, REGION, ACCOUNT, verified)

    prefix = f"arn:aws:ses:{REGION}:{ACCOUNT}:identity/"
    assert identity("Clinic <reminders@mail.example.com>", {"example.com"}) == (
        prefix + "example.com",
        {"ses:FromAddress": "reminders@mail.example.com", "ses:FromDisplayName": "Clinic"},
    )
    assert identity("reminders@example.com", {"reminders@example.com", "example.com"})[0] == (
        prefix + "reminders@example.com"
    )
    assert identity("a@unverified.example", set()) == (
        prefix + "unverified.example",
        {"ses:FromAddress": "a@unverified.example"},
    )
