"""The provisioner's translation of Pulumi inputs to AWS requests (no cloud needed), and the KMS key it makes in a
throwaway ministack (a key has no name, so finding it again is the provisioner's own doing)."""

from __future__ import annotations

import io
import json
import zipfile

import pulumi
import pytest

from components import policies
from localcloud.provision import (
    KINDS,
    Provisioner,
    UnsupportedResource,
    _mapping_request,
    _queue_attributes,
    physical_name,
    zip_archive,
)
from localcloud.server import Ministack


def test_an_unknown_resource_type_is_an_error_that_names_it() -> None:
    with pytest.raises(UnsupportedResource, match=r"'x-bucket' of type aws:s3/bucketV2:BucketV2"):
        Provisioner("http://127.0.0.1:9", "eu-west-1").apply("aws:s3/bucketV2:BucketV2", "x-bucket", {})


def test_every_type_the_component_registers_is_supported() -> None:
    from localcloud.program import run_program

    types = {r.type for r in run_program("local").registrations()}
    assert types <= set(KINDS)


def test_names_are_the_programs_own_or_the_logical_name_without_a_random_suffix() -> None:
    assert physical_name("rem-table", {}) == "rem-table"
    assert physical_name("rem-table", {"name": "custom"}) == "custom"


def test_queue_attributes_are_sqs_strings() -> None:
    attributes = _queue_attributes(
        {"messageRetentionSeconds": 1209600.0, "sqsManagedSseEnabled": True, "maxMessageSize": 1048576.0}
    )
    assert attributes == {
        "MessageRetentionPeriod": "1209600",
        "SqsManagedSseEnabled": "true",
        "MaximumMessageSize": "1048576",
    }


def test_mapping_settings_are_carried_over() -> None:
    request = _mapping_request(
        {
            "batchSize": 100.0,
            "bisectBatchOnFunctionError": True,
            "functionResponseTypes": ["ReportBatchItemFailures"],
            "destinationConfig": {"onFailure": {"destinationArn": "arn:q"}},
            "filterCriteria": {"filters": [{"pattern": "{}"}]},
        }
    )
    assert request["BatchSize"] == 100 and request["BisectBatchOnFunctionError"] is True
    assert request["DestinationConfig"] == {"OnFailure": {"Destination": "arn:q"}}
    assert request["FilterCriteria"] == {"Filters": [{"Pattern": "{}"}]}


def test_function_code_is_zipped_from_file_and_string_assets() -> None:
    archive = pulumi.AssetArchive({"a.py": pulumi.StringAsset("x = 1\n"), "pkg/b.py": pulumi.StringAsset("")})
    with zipfile.ZipFile(io.BytesIO(zip_archive(archive))) as package:
        assert package.namelist() == ["a.py", "pkg/b.py"]
        assert package.read("a.py") == b"x = 1\n"


def test_absent_attribute_patterns_are_rewritten_for_ministack_only() -> None:
    from localcloud.provision import for_ministack

    pattern = '{"dynamodb":{"NewImage":{"stStatus":{"S":[{"exists":false}]},"x":{"S":["a"]}}},"eventName":["INSERT"]}'
    rewritten = json.loads(for_ministack(pattern))
    assert rewritten["dynamodb"]["NewImage"] == {"stStatus": [{"exists": False}], "x": {"S": ["a"]}}
    assert rewritten["eventName"] == ["INSERT"]


def test_the_alarm_topic_key_is_created_once_used_by_the_topic_and_scheduled_for_deletion() -> None:
    policy = policies.alarm_topic_key_policy("arn:aws:dynamodb:eu-west-1:000000000000:table/t")
    inputs = {"description": "alarms", "enableKeyRotation": True, "policy": policy, "tags": {"stage": "local"}}
    with Ministack() as cloud:
        provisioner = Provisioner(cloud.endpoint, "eu-west-1")
        kms = provisioner.client("kms")
        # WHEN the key is applied twice
        key_id, outputs = provisioner.apply("aws:kms/key:Key", "t-alarms-key", inputs)
        again, _ = provisioner.apply("aws:kms/key:Key", "t-alarms-key", inputs)
        # THEN it is one key, with the policy, rotation and tags asked for
        assert again == key_id and outputs["arn"].endswith(f":key/{key_id}") and outputs["keyId"] == key_id
        assert json.loads(kms.get_key_policy(KeyId=key_id, PolicyName="default")["Policy"]) == json.loads(policy)
        assert kms.get_key_rotation_status(KeyId=key_id)["KeyRotationEnabled"] is True
        assert kms.list_resource_tags(KeyId=key_id)["Tags"] == [{"TagKey": "stage", "TagValue": "local"}]
        # AND a topic can be encrypted with it
        topic, _ = provisioner.apply("aws:sns/topic:Topic", "t-alarms", {"kmsMasterKeyId": outputs["arn"]})
        attributes = provisioner.client("sns").get_topic_attributes(TopicArn=topic)["Attributes"]
        assert attributes["KmsMasterKeyId"] == outputs["arn"]
        # WHEN it is deleted (twice: the second finds nothing), THEN it waits out KMS's deletion window
        provisioner.delete("aws:kms/key:Key", "t-alarms-key", inputs)
        provisioner.delete("aws:kms/key:Key", "t-alarms-key", inputs)
        assert kms.describe_key(KeyId=key_id)["KeyMetadata"]["KeyState"] == "PendingDeletion"
        # AND a later deploy makes a new one
        assert provisioner.apply("aws:kms/key:Key", "t-alarms-key", inputs)[0] != key_id


def test_or_patterns_are_expanded_for_ministack_which_has_no_or() -> None:
    """The component's filters use no `$or` (Lambda's syntax has none: components/filters.py), so they reach
    ministack as they are; a pattern with one (a mapping made before) would make ministack's engine look for a field
    named `$or` and drop the record, so the local mapping gets one pattern per alternative, evaluated by ministack
    itself."""
    import json

    from ministack.services import lambda_svc

    from components.filters import UNUSABLE_LEAF_TYPES, filter_patterns
    from components.modes.eventbridge import eventbridge_filters
    from localcloud.provision import for_ministack, without_or

    component = filter_patterns(eventbridge_filters("dueAt"))
    assert [p for f in component for p in without_or(f)] == component
    either = [{tag: [{"exists": True}]} for tag in UNUSABLE_LEAF_TYPES]
    before = json.dumps({"eventName": ["INSERT", "MODIFY"], "dynamodb": {"NewImage": {"dueAt": {"$or": either}}}})
    local = [for_ministack(p) for f in [*component[:4], before] for p in without_or(f)]
    assert len(local) == 4 + 6 and not any("$or" in p for p in local)
    esm = {"FilterCriteria": {"Filters": [{"Pattern": p} for p in local]}}

    def record(due: dict[str, object] | None) -> dict[str, object]:
        image: dict[str, object] = {"PK": {"S": "a"}, **({"dueAt": due} if due else {})}
        return {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "a"}}, "NewImage": image}}

    passed = lambda_svc._apply_filter_criteria(  # ministack's own filtering, as its mappings apply it
        [record({"BOOL": True}), record({"NULL": True}), record({"NS": ["1"]}), record(None), record({"M": {}})], esm
    )
    assert [next(iter(r["dynamodb"]["NewImage"]["dueAt"])) for r in passed] == ["BOOL", "NULL", "NS"]
