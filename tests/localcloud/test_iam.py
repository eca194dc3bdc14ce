"""The local cloud's IAM fixes to ministack, in-process: Scheduler's request -> resource map honours the request's
group, the action Scheduler's role needs for each templated target, and STS's sessions registered one at a time."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from localcloud.iam import (
    batch_action,
    log_events_resource,
    patch_scheduler_resources,
    schedule_resource_arn,
    send_email_identity,
    serialize_sts_sessions,
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


def spawned_at_once(sts: Any) -> list[Any]:
    """Two functions' warm workers spawning at once, each registering its execution role's session with STS as
    ministack's `_spawn` does (`execution_credentials`), the second while the first walks the sessions: the thread
    switch in the middle of the walk, which happens at random under load, made certain here (the walk pauses on a
    session until the second has registered, or a second has passed: with the sessions taking turns, it cannot
    register before). Each spawn's credentials, or what it raised; the sessions STS holds afterwards are in
    `sts._sessions`."""
    from ministack.core.lambda_runtime import execution_credentials

    walking, registered = threading.Event(), threading.Event()

    class Paused(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            if key == "Expiration" and not walking.is_set():
                walking.set()
                registered.wait(timeout=1.0)
            return super().get(key, default)

    live = time.time() + 3600
    sts._sessions = {"ASIAPAUSED": Paused(Expiration=live), "ASIALIVE": {"Expiration": live}}

    def spawn(name: str) -> Any:
        try:
            return execution_credentials(
                {
                    "FunctionName": name,
                    "FunctionArn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
                    "Role": f"arn:aws:iam::{ACCOUNT}:role/{name}-role",
                }
            )
        except RuntimeError as error:
            return error

    def spawn_during_the_walk() -> Any:
        walking.wait(timeout=5)
        try:
            return spawn("backfill")
        finally:
            registered.set()

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.submit(spawn, "scheduler"), pool.submit(spawn_during_the_walk)
        return [first.result(timeout=10), second.result(timeout=10)]


def test_lambda_workers_spawning_at_once_each_get_their_roles_session(monkeypatch: pytest.MonkeyPatch) -> None:
    from ministack import app
    from ministack.services import sts

    monkeypatch.setattr(app, "AUTH", True)  # as the local cloud runs it: each function's calls as its role
    for name in ("register_session", "reset", "_sessions"):
        monkeypatch.setattr(sts, name, getattr(sts, name))  # restored after

    # ministack as pinned: the walk fails when a session is added during it, and with it the first spawn
    pinned = spawned_at_once(sts)
    assert isinstance(pinned[0], RuntimeError)
    assert str(pinned[0]) == "dictionary changed size during iteration"

    serialize_sts_sessions()
    spawned = spawned_at_once(sts)
    assert all(isinstance(credentials, dict) for credentials in spawned), spawned
    keys = [credentials["AWS_ACCESS_KEY_ID"] for credentials in spawned]
    assert set(keys) <= set(sts._sessions) and len(set(keys)) == 2
    assert sts._sessions[keys[0]]["Arn"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/scheduler-role/scheduler"


def test_reading_a_log_groups_events_is_authorized_on_its_streams_as_on_aws() -> None:
    """A policy allowing logs:FilterLogEvents on `log-group:NAME:*` (what AWS requires: without `:*` it matches
    nothing) was refused in the local cloud, which checked `log-group:NAME`."""
    group = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/lambda/f"
    assert log_events_resource(group, "Logs_20140328.FilterLogEvents") == f"{group}:*"
    assert log_events_resource(group, "Logs_20140328.GetLogEvents") == f"{group}:*"
    assert log_events_resource(f"{group}:*", "Logs_20140328.FilterLogEvents") == f"{group}:*"
    assert log_events_resource(group, "Logs_20140328.CreateLogStream") == group  # as ministack has it
    assert log_events_resource("*", "Logs_20140328.FilterLogEvents") == "*"
