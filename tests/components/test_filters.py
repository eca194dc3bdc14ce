"""The eventbridge filters, matched against real stream records (from moto) with moto's EventBridge pattern matcher,
which implements the language Lambda event filtering uses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from components.filters import filter_patterns
from components.modes.eventbridge import eventbridge_filters
from components.modes.ttl import ttl_filters
from tests.conftest import REGION
from tests.support.patterns import passes


def matches(record: dict[str, Any], time_attribute: str = "dueAt") -> bool:
    """Lambda invokes the function when any one filter matches."""
    patterns = filter_patterns(eventbridge_filters(time_attribute))
    return passes(patterns, record)


def stream_table(name: str) -> tuple[Any, str]:
    """A moto table with a NEW_AND_OLD_IMAGES stream: its client and the stream's ARN."""
    ddb = boto3.client("dynamodb", region_name=REGION)
    arn = ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]["LatestStreamArn"]
    return ddb, str(arn)


def written(arn: str) -> list[dict[str, Any]]:
    """Every record of the stream so far, as moto gives them back."""
    streams = boto3.client("dynamodbstreams", region_name=REGION)
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")
    return list(streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"])


@pytest.fixture
def records() -> Iterator[dict[str, dict[str, Any]]]:
    """One record per situation, read back from a moto table's stream."""
    with mock_aws():
        ddb, arn = stream_table("filters")
        writes = [
            ("insert-iso", {"PK": {"S": "a"}, "dueAt": {"S": "2030-01-01T00:00:00Z"}}),
            ("modify-epoch", {"PK": {"S": "a"}, "dueAt": {"N": "1893456000"}}),
            ("modify-drops-time", {"PK": {"S": "a"}, "other": {"S": "x"}}),
            ("modify-without-time", {"PK": {"S": "a"}, "other": {"S": "y"}}),
            ("insert-without-time", {"PK": {"S": "b"}, "other": {"S": "x"}}),
        ]
        for _, item in writes:
            ddb.put_item(TableName="filters", Item=item)
        ddb.delete_item(TableName="filters", Key={"PK": {"S": "b"}})
        ddb.put_item(TableName="filters", Item={"PK": {"S": "c"}, "dueAt": {"S": "2030-01-01T00:00:00Z"}})
        ddb.delete_item(TableName="filters", Key={"PK": {"S": "c"}})
        raw = written(arn)
        names = [n for n, _ in writes] + ["remove-without-time", "insert-c", "remove-with-time"]
        yield {name: json.loads(json.dumps(r, default=str)) for name, r in zip(names, raw, strict=True)}


@pytest.mark.parametrize("situation", ["insert-iso", "modify-epoch", "modify-drops-time", "remove-with-time"])
def test_records_that_can_change_a_schedule_invoke_the_function(records: dict[str, Any], situation: str) -> None:
    assert matches(records[situation])


@pytest.mark.parametrize("situation", ["modify-without-time", "insert-without-time", "remove-without-time"])
def test_records_of_items_without_a_time_never_invoke_it(records: dict[str, Any], situation: str) -> None:
    assert not matches(records[situation])


def test_the_filter_follows_the_configured_attribute(records: dict[str, Any]) -> None:
    assert not matches(records["insert-iso"], time_attribute="remindAt")


def test_patterns_fit_in_one_mapping() -> None:
    assert len(filter_patterns(eventbridge_filters("dueAt"))) <= 5
    with pytest.raises(ValueError, match="1 to 5 filters"):
        filter_patterns([{"a": ["b"]}] * 6)


TTL_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def ttl_matches(record: dict[str, Any]) -> bool:
    patterns = filter_patterns(ttl_filters("dueAt", precise=False))
    return passes(patterns, record)


def test_a_remove_by_the_ttl_service_invokes_the_ttl_executor(records: dict[str, Any]) -> None:
    assert ttl_matches({**records["remove-with-time"], "userIdentity": TTL_IDENTITY})


@pytest.mark.parametrize("situation", ["remove-with-time", "remove-without-time", "insert-iso", "modify-epoch"])
def test_users_deletes_inserts_and_updates_never_invoke_it(records: dict[str, Any], situation: str) -> None:
    assert not ttl_matches(records[situation])


def test_an_insert_claiming_the_ttl_identity_still_does_not_invoke_it(records: dict[str, Any]) -> None:
    assert not ttl_matches({**records["insert-iso"], "userIdentity": TTL_IDENTITY})


def test_another_service_deleting_is_not_a_ttl_expiry(records: dict[str, Any]) -> None:
    other = {"type": "Service", "principalId": "replication.dynamodb.amazonaws.com"}
    assert not ttl_matches({**records["remove-with-time"], "userIdentity": other})


@pytest.fixture
def precise_records() -> Iterator[dict[str, dict[str, Any]]]:
    """The records of a precise ttl table's life, read back from a moto stream: the schedule's fire is the
    UpdateItem its universal target makes; the executor's delete follows it."""
    with mock_aws():
        ddb, arn = stream_table("precise")
        due = {"N": "1893456000"}
        names: list[str] = []

        def write(name: str, call: str, **request: Any) -> None:
            getattr(ddb, call)(TableName="precise", **request)
            names.append(name)

        write("insert", "put_item", Item={"PK": {"S": "a"}, "dueAt": due})
        write(
            "write-back",
            "update_item",
            Key={"PK": {"S": "a"}},
            UpdateExpression="SET v = :v",
            ExpressionAttributeValues={":v": {"S": "x"}},
        )
        write(
            "fire",
            "update_item",
            Key={"PK": {"S": "a"}},
            UpdateExpression="SET stFiredAt = :d REMOVE dueAt",
            ConditionExpression="dueAt = :d",
            ExpressionAttributeValues={":d": due},
        )
        write("own-delete", "delete_item", Key={"PK": {"S": "a"}})
        write("insert-b", "put_item", Item={"PK": {"S": "b"}, "dueAt": due})
        write("user-removes-due", "update_item", Key={"PK": {"S": "b"}}, UpdateExpression="REMOVE dueAt")
        write("insert-c", "put_item", Item={"PK": {"S": "c"}, "dueAt": due})
        write("user-delete", "delete_item", Key={"PK": {"S": "c"}})
        write("insert-iso", "put_item", Item={"PK": {"S": "d"}, "dueAt": {"S": "2030-01-01T00:00:00Z"}})
        write("remove-iso", "delete_item", Key={"PK": {"S": "d"}})
        write("insert-without-time", "put_item", Item={"PK": {"S": "e"}, "v": {"S": "x"}})
        write("remove-without-time", "delete_item", Key={"PK": {"S": "e"}})
        raw = written(arn)
        yield {name: json.loads(json.dumps(r, default=str)) for name, r in zip(names, raw, strict=True)}


def precise_matches(record: dict[str, Any]) -> bool:
    patterns = filter_patterns(ttl_filters("dueAt", precise=True))
    return passes(patterns, record)


@pytest.mark.parametrize(
    "situation", ["insert", "write-back", "fire", "insert-b", "user-removes-due", "user-delete", "insert-iso"]
)
def test_precise_ttl_passes_changes_of_due_items_and_the_schedules_fire(
    precise_records: dict[str, Any], situation: str
) -> None:
    assert precise_matches(precise_records[situation])


def test_precise_ttl_passes_ttl_deletions(precise_records: dict[str, Any]) -> None:
    assert precise_matches({**precise_records["user-delete"], "userIdentity": TTL_IDENTITY})


@pytest.mark.parametrize("situation", ["own-delete", "remove-iso", "insert-without-time", "remove-without-time"])
def test_precise_ttl_drops_its_own_delete_and_items_it_never_scheduled(
    precise_records: dict[str, Any], situation: str
) -> None:
    assert not precise_matches(precise_records[situation])


def test_precise_ttl_filters_fit_in_one_mapping() -> None:
    assert len(filter_patterns(ttl_filters("dueAt", precise=True))) == 5


# A due attribute of every DynamoDB type, as DynamoDB stores it (moto's stream gives back the record).
UNUSABLE = {
    "B": {"B": b"\x00\x01"},
    "BOOL": {"BOOL": False},
    "NULL": {"NULL": True},
    "SS": {"SS": ["a"]},
    "NS": {"NS": ["1"]},
    "BS": {"BS": [b"\x00"]},
}
UNMATCHABLE = {"M": {"M": {"at": {"S": "2030-01-01T00:00:00Z"}}}, "L": {"L": [{"N": "1893456000"}]}}


@pytest.fixture(scope="module")
def typed_records() -> Iterator[dict[str, dict[str, Any]]]:
    """For each type: the INSERT of an item whose due attribute is of it, then an update of the item that leaves the
    attribute alone but the item still holds it; and writes of an item without the attribute."""
    with mock_aws():
        ddb, arn = stream_table("typed")
        names: list[str] = []
        for tag, value in {**UNUSABLE, **UNMATCHABLE}.items():
            ddb.put_item(TableName="typed", Item={"PK": {"S": tag}, "dueAt": value})
            ddb.put_item(TableName="typed", Item={"PK": {"S": tag}, "dueAt": value, "v": {"S": "x"}})
            names += [f"insert-{tag}", f"modify-{tag}"]
        ddb.put_item(TableName="typed", Item={"PK": {"S": "none"}, "v": {"S": "x"}})
        ddb.put_item(TableName="typed", Item={"PK": {"S": "none"}, "v": {"S": "y"}})
        ddb.delete_item(TableName="typed", Key={"PK": {"S": "none"}})
        names += ["insert-without", "modify-without", "remove-without"]
        raw = written(arn)
        yield {name: as_lambda(r) for name, r in zip(names, raw, strict=True)}


def as_lambda(record: dict[str, Any]) -> dict[str, Any]:
    """A stream record in the JSON Lambda matches filters against (binary as base64 text)."""
    import base64

    def plain(value: Any) -> Any:
        if isinstance(value, bytes):
            return base64.b64encode(value).decode()
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    return json.loads(json.dumps(plain(record), default=str))


MODES = {"eventbridge": eventbridge_filters("dueAt"), "precise ttl": ttl_filters("dueAt", precise=True)}
# The unusable types each mode's five filters have room for (components/filters.py UNUSABLE_LEAF_TYPES' order).
PASSED = {"eventbridge": {"NULL"}, "precise ttl": {"NULL", "BOOL"}}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("tag", sorted(UNUSABLE))
@pytest.mark.parametrize("event", ["insert", "modify"])
def test_a_due_attribute_of_an_unusable_leaf_type_reaches_the_function_as_far_as_five_filters_go(
    typed_records: dict[str, Any], mode: str, tag: str, event: str
) -> None:
    """A null (and in precise ttl a boolean) reaches the function, to be parked with its reason; the other types
    find no room in Lambda's five filters and never reach it (`inspect` reports them, `reconcile` parks them).
    Both matchers agree: moto's EventBridge one and the redrive's."""
    from components.cli.redrive.matcher import passes as redrive_passes

    record = typed_records[f"{event}-{tag}"]
    assert passes(filter_patterns(MODES[mode]), record) == (tag in PASSED[mode])
    assert redrive_passes(MODES[mode], record) == (tag in PASSED[mode])


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_filters_use_no_or_across_fields_and_fit_lambdas_five(mode: str) -> None:
    """Lambda's filter rule syntax has no `$or` across fields (the Lambda developer guide's "Filter rule syntax";
    the EventBridge guide marks `$or` unsupported by Pipes, which filter as Lambda does): a pattern with it would be
    refused by CreateEventSourceMapping or match nothing. Each alternative is a filter of its own."""
    patterns = filter_patterns(MODES[mode])
    assert len(patterns) == 5 and not any("$or" in p for p in patterns)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("situation", ["insert-without", "modify-without", "remove-without", "insert-M", "insert-L"])
def test_writes_without_a_due_attribute_still_never_invoke_it(
    typed_records: dict[str, Any], mode: str, situation: str
) -> None:
    """A shared table's other writes cost the function nothing; a map or a list cannot be matched by a leaf filter
    (`inspect` lists such items)."""
    from components.cli.redrive.matcher import passes as redrive_passes

    assert not passes(filter_patterns(MODES[mode]), typed_records[situation])
    assert not redrive_passes(MODES[mode], typed_records[situation])


def test_a_sixth_filter_takes_the_place_of_the_last_unusable_type_filter() -> None:
    # GIVEN the eventbridge filters (all five of Lambda's default quota) and one more, as another account's table adds
    from components.existing import WRONG_VIEW_TYPE_FILTER
    from components.filters import within_filter_limit

    six = [*eventbridge_filters("dueAt"), WRONG_VIEW_TYPE_FILTER]
    # WHEN they are fitted to the quota
    fitted = filter_patterns(within_filter_limit(six))
    # THEN one mapping takes them; a record passes the five exactly when it passes one of the six, but for a null due
    # attribute (the filter given up; `inspect` reports such items then)
    assert len(fitted) == 5 and json.dumps(WRONG_VIEW_TYPE_FILTER, separators=(",", ":"), sort_keys=True) in fitted
    values: list[dict[str, Any]] = [
        {"S": "2030-01-01T00:00:00Z"},
        {"N": "1"},
        {"BOOL": False},
        {"NULL": True},
        {"M": {}},
    ]
    images: list[dict[str, Any]] = [
        {"NewImage": {"PK": {"S": "a"}, "dueAt": value}, "OldImage": {"PK": {"S": "a"}, "dueAt": value}}
        for value in values
    ] + [{"NewImage": {"PK": {"S": "a"}}}, {}]
    for view in ("NEW_AND_OLD_IMAGES", "KEYS_ONLY", "NEW_IMAGE"):
        for event in ("INSERT", "MODIFY", "REMOVE"):
            for image in images:
                record = {"eventName": event, "dynamodb": {"StreamViewType": view, "Keys": {"PK": {"S": "a"}}, **image}}
                given_up = view == "NEW_AND_OLD_IMAGES" and event != "REMOVE" and "NULL" in str(image)
                assert passes(fitted, record) == (any(passes([p], record) for p in six) and not given_up), record


def test_needed_filters_beyond_five_are_refused() -> None:
    from components.filters import within_filter_limit

    needed = [{"eventName": [str(n)]} for n in range(6)]
    with pytest.raises(ValueError, match="at most 5 filters, 6 are needed"):
        within_filter_limit(needed)
