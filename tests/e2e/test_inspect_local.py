"""`scheduled-table inspect` against the local cloud (ministack, IAM enforced) as an operator runs it: the stack named
by its table (`--table`: the consumer found from the table's stream), credentials from a profile (`--profile`, in
an AWS config of the test's own), the output as JSON; items written under another time attribute than the stack's
are counted from a sample read page by page, and the attribute they carry is named.

GIVEN a deployed eventbridge stack reading `dueAt` and three items written with `remindAt` WHEN inspect reads a
sample of two THEN the JSON says 2 of 2 sampled lack `dueAt`, suggests `remindAt`, and says only a sample was read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localcloud.deploy import TableKeys, up
from localcloud.provision import CREDENTIALS, clients
from localcloud.server import Ministack

PROJECT = "name: tasks\nruntime: python\n"
PROGRAM = """\
import pulumi_aws as aws
from scheduled_table import ExistingTable, QueueTarget, ScheduledTable, ScheduledTableArgs

inbox = aws.sqs.Queue("tasks-inbox")
ScheduledTable(
    "tasks",
    ScheduledTableArgs(mode="eventbridge", existing_table=ExistingTable(name="tasks"), target=QueueTarget(inbox.arn)),
)
"""
REGION = "eu-west-1"


def test_inspect_by_table_and_profile_reports_items_without_the_time_attribute_as_json(
    tmp_path: Path, fresh_cloud: Ministack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.cli.command import main as operator

    program = tmp_path / "tasks"
    program.mkdir()
    (program / "Pulumi.yaml").write_text(PROJECT)
    (program / "__main__.py").write_text(PROGRAM)
    up(fresh_cloud.endpoint, "local", program, existing=[TableKeys("tasks", "PK", "SK")])
    table = clients(fresh_cloud.endpoint, REGION)("dynamodb")
    for n in range(3):
        table.put_item(
            TableName="tasks", Item={"PK": {"S": f"t{n}"}, "SK": {"S": "A"}, "remindAt": {"S": "2099-01-01T00:00:00Z"}}
        )
    # The operator's profile holds the local cloud's admin keys; nothing in the environment names AWS.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "config").write_text(f"[profile local]\nregion = {REGION}\n")
    (tmp_path / "credentials").write_text(
        f"[local]\naws_access_key_id = {CREDENTIALS['aws_access_key_id']}\n"
        f"aws_secret_access_key = {CREDENTIALS['aws_secret_access_key']}\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))

    lines: list[str] = []
    argv = ["inspect", "--table", "tasks", "--profile", "local", "--endpoint-url", fresh_cloud.endpoint]
    status = operator([*argv, "--output", "json", "--sample-items", "2"], emit=lines.append)

    assert status == 0, lines
    found = json.loads("\n".join(lines))
    assert found["table"] == "tasks" and found["mode"] == "eventbridge", found
    assert found["missing_time"] == {
        "attribute": "dueAt",
        "sampled": 2,
        "whole": False,
        "missing": 2,
        "candidates": ["remindAt"],
        "message": "2 of 2 items sampled have no `dueAt`; they have `remindAt` (2): set time_attribute='remindAt'?",
        "note": "a sample: the first 2 items a scan returns",
    }
    assert {queue["queue"] for queue in found["parked"]} >= {"poison queue"}
