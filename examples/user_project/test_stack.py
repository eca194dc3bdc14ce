"""Unit tests of __main__.py under scheduled_table.testing's mocks: no AWS account, no Pulumi CLI, a second each."""

from __future__ import annotations

from pathlib import Path

from scheduled_table import ScheduledTable, ScheduledTableArgs
from scheduled_table.testing import run_with_mocks

PROGRAM = Path(__file__).with_name("__main__.py")


def test_exports_the_tables_real_names() -> None:
    stack = run_with_mocks(PROGRAM)
    assert stack.exports["reminders_table"] == stack.one("reminders-table").outputs["name"]


def test_every_table_is_protected_from_deletion() -> None:
    stack = run_with_mocks(PROGRAM)
    assert all(table.inputs["deletionProtectionEnabled"] for table in stack.of_type("aws:dynamodb/table:Table"))


def test_protect_false_lets_pulumi_destroy_remove_the_tables() -> None:
    stack = run_with_mocks(PROGRAM, config={"protect": "false"})
    assert not any(table.inputs["deletionProtectionEnabled"] for table in stack.of_type("aws:dynamodb/table:Table"))


def test_only_the_work_processor_may_send_to_the_jobs_queue() -> None:
    stack = run_with_mocks(PROGRAM, config={"aws:region": "us-east-2"})
    jobs_arn = stack.one("jobs").outputs["arn"]  # arn:aws:sqs:us-east-2:123456789012:jobs-<suffix>
    assert [p.name for p in stack.of_type(":RolePolicy") if jobs_arn in p.inputs["policy"]] == ["work-processor-policy"]


def test_emails_go_out_from_the_configured_sender() -> None:
    stack = run_with_mocks(PROGRAM, config={"sender": "team@example.org"})
    assert ":identity/team@example.org" in stack.one("reminders-scheduler-policy").inputs["policy"]


def test_a_table_built_in_the_test_itself() -> None:
    stack = run_with_mocks(lambda: ScheduledTable("audit", ScheduledTableArgs(mode="ttl")).outputs)
    assert stack.result["stream_arn"].startswith(stack.result["table_arn"] + "/stream/")
