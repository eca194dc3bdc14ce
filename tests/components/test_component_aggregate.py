"""ScheduledTable in `aggregate` mode, under Pulumi mocks: one behaviour per test."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import Built

Build = Callable[..., Built]


def aggregate(build: Build, **kwargs: Any) -> Built:
    return build(mode="aggregate", **kwargs)


def test_creates_the_aggregate_resources_and_no_target_queue(build: Build) -> None:
    built = aggregate(build, alarms=False, dashboard=False)
    names = sorted(n for n, r in built.mocks.by_name.items() if r.type != "pulumi:pulumi:Stack")
    assert names == sorted(
        ["rem", "rem-table", "rem-ledger", "rem-stream-dlq", "rem-poison"]
        + [f"rem-aggregator{part}" for part in ("", "-logs", "-role", "-policy", "-mapping")]
    )


def test_the_stream_carries_both_images(build: Build) -> None:
    table = aggregate(build).one("rem-table").inputs
    assert table["streamEnabled"] is True and table["streamViewType"] == "NEW_AND_OLD_IMAGES"


def test_the_default_filter_is_exactly_the_seeds(build: Build) -> None:
    mapping = aggregate(build).one("rem-aggregator-mapping").inputs
    [pattern] = [json.loads(f["pattern"]) for f in mapping["filterCriteria"]["filters"]]
    assert pattern == {"eventName": ["INSERT"], "dynamodb": {"Keys": {"PK": {"S": [{"prefix": "SCORE"}]}}}}


def test_adjust_also_lets_through_changes_and_deletions_of_sources(build: Build) -> None:
    mapping = aggregate(build, on_change="adjust", source_prefix="POINTS#").one("rem-aggregator-mapping").inputs
    [pattern] = [json.loads(f["pattern"]) for f in mapping["filterCriteria"]["filters"]]
    assert pattern["eventName"] == ["INSERT", "MODIFY", "REMOVE"]
    assert pattern["dynamodb"]["Keys"]["PK"]["S"] == [{"prefix": "POINTS#"}]


def test_iam_allows_only_updating_totals_and_writing_markers(build: Build) -> None:
    built = aggregate(build)
    table_arn, ledger_arn = built.one("rem-table").outputs["arn"], built.one("rem-ledger").outputs["arn"]
    found = built.statements("rem-aggregator-policy")
    # Statements on the table or the ledger themselves (the stream grant is on `<table>/stream/*`).
    item_actions = [s for s in found if s["Resource"] in ([table_arn], [ledger_arn])]
    assert item_actions == [
        {"Effect": "Allow", "Action": ["dynamodb:UpdateItem"], "Resource": [table_arn]},
        {"Effect": "Allow", "Action": ["dynamodb:PutItem"], "Resource": [ledger_arn]},
    ]


def test_a_table_key_is_usable_by_the_aggregator(build: Build) -> None:
    key = "arn:aws:kms:eu-west-1:123456789012:key/abc"
    found = aggregate(build, kms_key_arn=key).statements("rem-aggregator-policy")
    through_dynamodb = {"StringEquals": {"kms:ViaService": "dynamodb.eu-west-1.amazonaws.com"}}
    use_key = {
        "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
        "Resource": [key],
        "Condition": through_dynamodb,
    }
    assert use_key in found


def test_handler_config_carries_the_aggregate_section(build: Build) -> None:
    built = aggregate(build, aggregation="count", total_attribute="scores", idempotency_window_seconds=90000)
    config = built.handler_config()
    assert config["target"] == {"kind": "none", "arn": ""}
    assert config["aggregate"] == {
        "sourcePrefix": "SCORE",
        "valueAttribute": "Score",
        "groupFrom": "SK",
        "totalSortKey": "TOTAL",
        "totalAttribute": "scores",
        "aggregation": "count",
        "onChange": "ignore",
        "ledgerTable": built.one("rem-ledger").outputs["name"],
        "windowSeconds": 90000,
        "horizonSeconds": 3600 + 60 + 300,
    }


def test_the_handler_keeps_ids_for_as_long_as_the_mapping_can_deliver_a_record(build: Build) -> None:
    """Maximum record age, plus the timeout of a delivery that starts just before it, plus a 300 s margin."""
    built = aggregate(build, maximum_record_age_seconds=21600, lambda_timeout_seconds=120)
    assert built.handler_config()["aggregate"]["horizonSeconds"] == 21600 + 120 + 300
    mapping = built.one("rem-aggregator-mapping").inputs
    assert mapping["maximumRecordAgeInSeconds"] == 21600


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"aggregation": "avg"}, "aggregation: 'avg' is not supported; use 'sum' or 'count'"),
        ({"on_change": "replace"}, "on_change: 'replace' is not valid"),
        ({"sort_key": None}, "sort_key: aggregate mode keeps totals at PK=<group>, SK=total_sort_key"),
        ({"total_attribute": "Score"}, "total_attribute: 'Score' is a key or the value attribute"),
        ({"source_prefix": ""}, "source_prefix: must not be empty"),
    ],
)
def test_aggregate_rules_name_the_field_and_the_fix(kwargs: dict[str, Any], message: str) -> None:
    from components import ScheduledTableArgs

    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ScheduledTableArgs(mode="aggregate", **kwargs)


def test_aggregate_options_are_refused_in_other_modes() -> None:
    from components import ScheduledTableArgs

    with pytest.raises(ValueError, match="source_prefix: only applies to mode='aggregate'"):
        ScheduledTableArgs(mode="eventbridge", source_prefix="X")


def test_a_target_is_refused() -> None:
    from components import QueueTarget, ScheduledTableArgs

    with pytest.raises(ValueError, match="target: aggregate mode writes totals to the table and has no target"):
        ScheduledTableArgs(mode="aggregate", target=QueueTarget("arn:aws:sqs:eu-west-1:123456789012:q"))
