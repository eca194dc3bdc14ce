"""The emulators' pure parts: schedule times, universal target calls, TTL records and filter matching."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from localcloud.emulators import _TtlTable, at_epoch, expired_record, filters_match, universal_call

TABLE = _TtlTable("t", "expiresAt", ["PK"], "arn:aws:dynamodb:eu-west-1:0:table/t/stream/x", "NEW_AND_OLD_IMAGES")


def test_at_expressions_honour_their_time_zone() -> None:
    utc = datetime(2026, 11, 21, 10, 0, tzinfo=UTC).timestamp()
    assert at_epoch("at(2026-11-21T10:00:00)", None) == utc
    assert at_epoch("at(2026-11-21T11:00:00)", "Europe/Paris") == utc
    assert at_epoch("rate(5 minutes)", None) is None


def test_universal_target_arns_name_the_boto3_method() -> None:
    assert universal_call("arn:aws:scheduler:::aws-sdk:sesv2:sendEmail") == ("sesv2", "send_email")
    assert universal_call("arn:aws:scheduler:::aws-sdk:dynamodb:deleteItem") == ("dynamodb", "delete_item")


def test_a_ttl_record_is_a_service_remove_with_the_old_image() -> None:
    keys, image = {"PK": {"S": "a"}}, {"PK": {"S": "a"}, "expiresAt": {"N": "1"}}
    record = expired_record(TABLE, keys, image, "eu-west-1")
    assert record["eventName"] == "REMOVE" and record["eventSourceARN"] == TABLE.stream_arn
    assert record["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert record["dynamodb"]["Keys"] == keys and record["dynamodb"]["OldImage"] == image


def test_filters_match_like_lambda_event_filtering() -> None:
    record = expired_record(TABLE, {"PK": {"S": "a"}}, {"PK": {"S": "a"}}, "eu-west-1")
    ttl_only = {"userIdentity": {"principalId": ["dynamodb.amazonaws.com"]}, "eventName": ["REMOVE"]}
    inserts = {"eventName": ["INSERT"]}
    assert filters_match({}, record)
    assert filters_match({"FilterCriteria": {"Filters": [{"Pattern": json.dumps(ttl_only)}]}}, record)
    assert not filters_match({"FilterCriteria": {"Filters": [{"Pattern": json.dumps(inserts)}]}}, record)
    user_delete = {**record, "userIdentity": None}
    assert not filters_match({"FilterCriteria": {"Filters": [{"Pattern": json.dumps(ttl_only)}]}}, user_delete)
