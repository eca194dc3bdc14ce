"""The emulators' pure parts: schedule times, universal target calls, and the TTL process's delays and records."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from localcloud.emulators import at_epoch, universal_call
from localcloud.ttl import TtlProcess


def test_at_expressions_honour_their_time_zone() -> None:
    utc = datetime(2026, 11, 21, 10, 0, tzinfo=UTC).timestamp()
    assert at_epoch("at(2026-11-21T10:00:00)", None) == utc
    assert at_epoch("at(2026-11-21T11:00:00)", "Europe/Paris") == utc
    assert at_epoch("rate(5 minutes)", None) is None


def test_universal_target_arns_name_the_boto3_method() -> None:
    assert universal_call("arn:aws:scheduler:::aws-sdk:sesv2:sendEmail") == ("sesv2", "send_email")
    assert universal_call("arn:aws:scheduler:::aws-sdk:dynamodb:deleteItem") == ("dynamodb", "delete_item")


def test_the_ttl_process_marks_only_its_own_deletions_as_the_service_s() -> None:
    process = TtlProcess()
    user_delete = {"eventName": "REMOVE", "dynamodb": {"Keys": {"PK": {"S": "a"}}}}
    assert "userIdentity" not in process.mark(dict(user_delete))
    process._emitting.ttl = True
    assert process.mark(dict(user_delete))["userIdentity"] == {
        "type": "Service",
        "principalId": "dynamodb.amazonaws.com",
    }


def test_the_ttl_process_deletes_after_its_delay_once_switched_on() -> None:
    process = TtlProcess()
    assert not process.enabled
    process.configure({"start": ["1"], "delay": ["5"], "delays": [json.dumps({"offers-table": 200})]})
    assert process.enabled
    assert process.expires("sessions-table", 1000.0) == 1005.0
    assert process.expires("offers-table", 1000.0) == 1200.0
    process.configure({})  # a read changes nothing
    assert process.enabled
    process.configure({"stop": ["1"]})
    assert not process.enabled
