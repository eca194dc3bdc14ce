"""Create, update and delete the AWS resources a Pulumi program registers, for real, in the local AWS (ministack).

Each supported resource type has a `Kind`: `apply` creates the resource or brings an existing one in line with the
inputs (so deploying twice leaves the same state) and returns the outputs the AWS provider would, real ARNs, URLs and
ids included, so later resources are wired to real things; `delete` removes it and tolerates its absence. Inputs
arrive with the provider's camelCase property names. A type without a `Kind` is an error that names it.
"""

from __future__ import annotations

import io
import json
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
import pulumi
from botocore.config import Config
from botocore.exceptions import ClientError

from .component import error_code
from .mocks import fabricate

CREDENTIALS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
NOT_FOUND = frozenset(
    {
        "ResourceNotFoundException",
        "NoSuchEntity",
        "NoSuchEntityException",
        "AWS.SimpleQueueService.NonExistentQueue",
        "QueueDoesNotExist",
        "ResourceNotFound",
        "NotFoundException",
    }
)


# The stream every mode needs on a table it reads.
STREAM = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}


class MissingTable(ValueError):
    """The program acts on a table of its own (an `ExistingTable`) that the local cloud does not hold."""


class UnsupportedResource(Exception):
    """The program registered a resource type the local cloud cannot create."""


def clients(endpoint: str, region: str) -> Callable[[str], Any]:
    """A cached boto3 client factory bound to the local endpoint."""
    cache: dict[str, Any] = {}
    lock = threading.Lock()  # Pulumi registers resources from several threads; client creation is not thread-safe
    config = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=60)
    session = boto3.session.Session(region_name=region, **CREDENTIALS)

    def client(service: str) -> Any:
        with lock:
            if service not in cache:
                cache[service] = session.client(service, endpoint_url=endpoint, config=config)
            return cache[service]

    return client


def physical_name(name: str, inputs: dict[str, Any]) -> str:
    """The resource's own `name` if the program set one, else its logical name (the local cloud does not add
    Pulumi's random suffix, so a second deploy finds the first one's resources)."""
    return str(inputs.get("name") or name)


def name_from_arn(value: str) -> str:
    """`arn:...:function:NAME` or a bare name -> NAME."""
    return value.rsplit(":", 1)[-1] if value.startswith("arn:") else value


@dataclass
class Provisioner:
    """Applies registrations to the local AWS at `endpoint`."""

    endpoint: str
    region: str

    def __post_init__(self) -> None:
        self.client = clients(self.endpoint, self.region)

    def apply(self, typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return _kind(typ, name).apply(self, physical_name(name, inputs), inputs)

    def get_table(self, args: dict[str, Any]) -> dict[str, Any]:
        """`aws.dynamodb.getTable` answered from the local AWS, in the provider's wire shape (an existing table given
        by name only is looked up with it)."""
        ddb = self.client("dynamodb")
        try:
            table = ddb.describe_table(TableName=args["name"])["Table"]
        except ClientError as error:
            if error_code(error) != "ResourceNotFoundException":
                raise
            raise MissingTable(
                f"existing_table: table {args['name']!r} is not in the local cloud, which starts with none of your "
                f"tables; have `up` make it first: scheduled-table local up --existing-table {args['name']}:PK:SK "
                "(NAME:PK:SK with your table's partition and sort key names; NAME:PK without a sort key)"
            ) from None
        keys = {k["KeyType"]: k["AttributeName"] for k in table["KeySchema"]}
        stream = table.get("StreamSpecification") or {}
        ttl = ddb.describe_time_to_live(TableName=args["name"])["TimeToLiveDescription"]
        return {
            "name": table["TableName"],
            "arn": table["TableArn"],
            "hashKey": keys.get("HASH"),
            "rangeKey": keys.get("RANGE", ""),
            "streamEnabled": bool(stream.get("StreamEnabled")),
            "streamViewType": stream.get("StreamViewType", ""),
            "streamArn": table.get("LatestStreamArn", ""),
            "ttl": {"enabled": ttl.get("TimeToLiveStatus") == "ENABLED", "attributeName": ttl.get("AttributeName", "")},
            "globalSecondaryIndexes": [
                {
                    "name": index["IndexName"],
                    "hashKey": next(k["AttributeName"] for k in index["KeySchema"] if k["KeyType"] == "HASH"),
                    "rangeKey": next((k["AttributeName"] for k in index["KeySchema"] if k["KeyType"] == "RANGE"), ""),
                    "projectionType": (index.get("Projection") or {}).get("ProjectionType", ""),
                }
                for index in table.get("GlobalSecondaryIndexes", [])
            ],
        }

    def lookups(self) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
        """The data sources the program may call, answered from the local AWS."""
        return {
            "aws:dynamodb/getTable:getTable": self.get_table,
            "aws:index/getCallerIdentity:getCallerIdentity": self.caller_identity,
        }

    def caller_identity(self, args: dict[str, Any]) -> dict[str, Any]:
        """Who deploys, as the local AWS says (a key policy naming the account's root needs the account ministack
        makes the resources in, not the mocks' made-up one)."""
        found = self.client("sts").get_caller_identity()
        return {"accountId": found["Account"], "arn": found["Arn"], "id": found["Account"], "userId": found["UserId"]}

    def ensure_table(self, name: str, args: Any, stream: bool = True) -> bool:
        """Make a table the stack expects to exist but does not own (an `ExistingTable` given by name), as a user's
        own table would be: its keys, a NEW_AND_OLD_IMAGES stream (`stream=False`: none yet, for items written
        before it is enabled). True if it had to be made."""
        ddb = self.client("dynamodb")
        try:
            ddb.describe_table(TableName=name)
            return False
        except ClientError as error:
            if error_code(error) != "ResourceNotFoundException":
                raise
        keys = [(args.partition_key, "HASH", args.partition_key_type)]
        if args.sort_key:
            keys.append((args.sort_key, "RANGE", args.sort_key_type))
        ddb.create_table(
            TableName=name,
            KeySchema=[{"AttributeName": a, "KeyType": k} for a, k, _ in keys],
            AttributeDefinitions=[{"AttributeName": a, "AttributeType": t} for a, _, t in keys],
            BillingMode="PAY_PER_REQUEST",
            **({"StreamSpecification": STREAM} if stream else {}),
        )
        return True

    def plan(self, typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """What `apply` would name things, without touching the cloud (`down` replays the program with this)."""
        _kind(typ, name)
        physical = physical_name(name, inputs)
        return physical, fabricate(typ, name, {**inputs, "name": physical}, self.region)[1]

    def delete(self, typ: str, name: str, inputs: dict[str, Any]) -> None:
        try:
            _kind(typ, name).delete(self, physical_name(name, inputs), inputs)
        except ClientError as error:
            if error_code(error) not in NOT_FOUND:
                raise


Apply = Callable[[Provisioner, str, dict[str, Any]], tuple[str, dict[str, Any]]]
Delete = Callable[[Provisioner, str, dict[str, Any]], None]


@dataclass(frozen=True)
class Kind:
    apply: Apply
    delete: Delete


def _kind(typ: str, name: str) -> Kind:
    try:
        return KINDS[typ]
    except KeyError:
        raise UnsupportedResource(
            f"localcloud cannot create resource '{name}' of type {typ}; "
            f"supported types: {', '.join(sorted(KINDS))}. Add a Kind for it in localcloud/provision.py."
        ) from None


def _tags(inputs: dict[str, Any]) -> dict[str, str]:
    return dict(inputs.get("tags") or {})


def _exists(call: Callable[[], Any]) -> Any | None:
    try:
        return call()
    except ClientError as error:
        if error_code(error) in NOT_FOUND:
            return None
        raise


# -- DynamoDB ---------------------------------------------------------------------------------------------------


def _key_schema(hash_key: str, range_key: str | None) -> list[dict[str, str]]:
    schema = [{"AttributeName": hash_key, "KeyType": "HASH"}]
    if range_key:
        schema.append({"AttributeName": range_key, "KeyType": "RANGE"})
    return schema


def _gsi(index: dict[str, Any]) -> dict[str, Any]:
    projection: dict[str, Any] = {"ProjectionType": index.get("projectionType", "ALL")}
    if index.get("nonKeyAttributes"):
        projection["NonKeyAttributes"] = list(index["nonKeyAttributes"])
    if index.get("keySchemas"):
        schema = [{"AttributeName": k["attributeName"], "KeyType": k["keyType"]} for k in index["keySchemas"]]
    else:
        schema = _key_schema(index["hashKey"], index.get("rangeKey"))
    return {"IndexName": index["name"], "KeySchema": schema, "Projection": projection}


def _apply_table(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    ddb = p.client("dynamodb")
    described = _exists(lambda: ddb.describe_table(TableName=name))
    wanted_keys = _key_schema(inputs["hashKey"], inputs.get("rangeKey"))
    if described is None:
        create: dict[str, Any] = {
            "TableName": name,
            "AttributeDefinitions": [
                {"AttributeName": a["name"], "AttributeType": a["type"]} for a in inputs["attributes"]
            ],
            "KeySchema": wanted_keys,
            "BillingMode": inputs.get("billingMode", "PROVISIONED"),
            "DeletionProtectionEnabled": bool(inputs.get("deletionProtectionEnabled", False)),
        }
        if create["BillingMode"] == "PROVISIONED":
            create["ProvisionedThroughput"] = {
                "ReadCapacityUnits": int(inputs.get("readCapacity") or 1),
                "WriteCapacityUnits": int(inputs.get("writeCapacity") or 1),
            }
        if inputs.get("streamEnabled"):
            create["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": inputs["streamViewType"]}
        if inputs.get("globalSecondaryIndexes"):
            create["GlobalSecondaryIndexes"] = [_gsi(index) for index in inputs["globalSecondaryIndexes"]]
        if _tags(inputs):
            create["Tags"] = [{"Key": k, "Value": v} for k, v in _tags(inputs).items()]
        encryption = inputs.get("serverSideEncryption") or {}
        if encryption.get("enabled"):
            # A customer-managed key, as asked: the local IAM layer then checks its use on every call (iam.py).
            key = {"KMSMasterKeyId": encryption["kmsKeyArn"]} if encryption.get("kmsKeyArn") else {}
            create["SSESpecification"] = {"Enabled": True, "SSEType": "KMS", **key}
        ddb.create_table(**create)
    elif described["Table"]["KeySchema"] != wanted_keys:
        raise ValueError(f"table {name} exists with another key schema; run `python -m localcloud down` first")
    else:
        ddb.update_table(TableName=name, DeletionProtectionEnabled=bool(inputs.get("deletionProtectionEnabled", False)))
    ttl = inputs.get("ttl") or {}
    if ttl.get("enabled"):
        current = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
        if current.get("TimeToLiveStatus") != "ENABLED":
            ddb.update_time_to_live(
                TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["attributeName"]}
            )
    table = ddb.describe_table(TableName=name)["Table"]
    outputs = {
        **inputs,
        "name": name,
        "arn": table["TableArn"],
        "streamArn": table.get("LatestStreamArn", ""),
        "streamLabel": table.get("LatestStreamLabel", ""),
    }
    return name, outputs


def _delete_table(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    ddb = p.client("dynamodb")
    if _exists(lambda: ddb.describe_table(TableName=name)) is None:
        return
    ddb.update_table(TableName=name, DeletionProtectionEnabled=False)
    ddb.delete_table(TableName=name)


# -- SQS ------------------------------------------------------------------------------------------------------------

_QUEUE_ATTRIBUTES = {
    "messageRetentionSeconds": "MessageRetentionPeriod",
    "visibilityTimeoutSeconds": "VisibilityTimeout",
    "delaySeconds": "DelaySeconds",
    "receiveWaitTimeSeconds": "ReceiveMessageWaitTimeSeconds",
    "maxMessageSize": "MaximumMessageSize",
    "sqsManagedSseEnabled": "SqsManagedSseEnabled",
    "kmsMasterKeyId": "KmsMasterKeyId",
    "redrivePolicy": "RedrivePolicy",
    "policy": "Policy",
}


def _attribute(value: Any) -> str:
    """SQS attribute text; Pulumi hands numbers over as floats (`1209600.0`), which SQS rejects."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _queue_attributes(inputs: dict[str, Any]) -> dict[str, str]:
    attributes: dict[str, str] = {}
    for key, attribute in _QUEUE_ATTRIBUTES.items():
        value = inputs.get(key)
        if value is None or value == "":
            continue
        attributes[attribute] = _attribute(value)
    return attributes


def _apply_queue(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    sqs = p.client("sqs")
    attributes = _queue_attributes(inputs)
    found = _exists(lambda: sqs.get_queue_url(QueueName=name))
    if found is None:
        url = sqs.create_queue(QueueName=name, Attributes=attributes, tags=_tags(inputs))["QueueUrl"]
    else:
        url = found["QueueUrl"]
        if attributes:
            sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, {**inputs, "name": name, "arn": arn, "url": url}


def _delete_queue(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    sqs = p.client("sqs")
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName=name)["QueueUrl"])


# -- CloudWatch Logs and alarms -----------------------------------------------------------------------------------


def _apply_log_group(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    logs = p.client("logs")
    try:
        logs.create_log_group(logGroupName=name, tags=_tags(inputs))
    except ClientError as error:
        if error_code(error) != "ResourceAlreadyExistsException":
            raise
    if inputs.get("retentionInDays"):
        logs.put_retention_policy(logGroupName=name, retentionInDays=int(inputs["retentionInDays"]))
    groups = logs.describe_log_groups(logGroupNamePrefix=name)["logGroups"]
    arn = next(g["arn"] for g in groups if g["logGroupName"] == name).removesuffix(":*")
    return name, {**inputs, "name": name, "arn": arn}


def _delete_log_group(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    p.client("logs").delete_log_group(logGroupName=name)


def _apply_alarm(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    request: dict[str, Any] = {
        "AlarmName": name,
        "ComparisonOperator": inputs["comparisonOperator"],
        "EvaluationPeriods": int(inputs["evaluationPeriods"]),
        "Threshold": float(inputs.get("threshold", 0)),
        "ActionsEnabled": bool(inputs.get("actionsEnabled", True)),
        "AlarmActions": list(inputs.get("alarmActions") or []),
        "OKActions": list(inputs.get("okActions") or []),
        "TreatMissingData": inputs.get("treatMissingData", "missing"),
    }
    for key, field in (
        ("metricName", "MetricName"),
        ("namespace", "Namespace"),
        ("statistic", "Statistic"),
        ("alarmDescription", "AlarmDescription"),
    ):
        if inputs.get(key):
            request[field] = inputs[key]
    if inputs.get("period"):
        request["Period"] = int(inputs["period"])
    if inputs.get("dimensions"):
        request["Dimensions"] = [{"Name": k, "Value": v} for k, v in inputs["dimensions"].items()]
    p.client("cloudwatch").put_metric_alarm(**request)
    arn = p.client("cloudwatch").describe_alarms(AlarmNames=[name])["MetricAlarms"][0]["AlarmArn"]
    return name, {**inputs, "name": name, "arn": arn}


def _delete_alarm(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    p.client("cloudwatch").delete_alarms(AlarmNames=[name])


def _apply_dashboard(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    dashboard = str(inputs.get("dashboardName") or name)
    p.client("cloudwatch").put_dashboard(DashboardName=dashboard, DashboardBody=inputs["dashboardBody"])
    arn = f"arn:aws:cloudwatch::{_account(p)}:dashboard/{dashboard}"
    return dashboard, {**inputs, "dashboardName": dashboard, "dashboardArn": arn}


def _delete_dashboard(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    p.client("cloudwatch").delete_dashboards(DashboardNames=[str(inputs.get("dashboardName") or name)])


def _account(p: Provisioner) -> str:
    return str(p.client("sts").get_caller_identity()["Account"])


# -- SNS --------------------------------------------------------------------------------------------------------------


def _apply_topic(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    attributes = {"KmsMasterKeyId": inputs["kmsMasterKeyId"]} if inputs.get("kmsMasterKeyId") else {}
    tags = [{"Key": k, "Value": v} for k, v in _tags(inputs).items()]
    arn = p.client("sns").create_topic(Name=name, Attributes=attributes, Tags=tags)["TopicArn"]
    return arn, {**inputs, "name": name, "arn": arn}


def _delete_topic(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    arn = f"arn:aws:sns:{p.region}:{_account(p)}:{name}"
    p.client("sns").delete_topic(TopicArn=arn)


# -- KMS ------------------------------------------------------------------------------------------------------------


def key_alias(name: str) -> str:
    """A key has no name; the local cloud finds the one it made for `name` again through this alias."""
    return f"alias/localcloud/{name}"


def _apply_key(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    kms = p.client("kms")
    found = _exists(lambda: kms.describe_key(KeyId=key_alias(name)))
    if found is None or found["KeyMetadata"].get("KeyState") == "PendingDeletion":
        if found is not None:
            kms.delete_alias(AliasName=key_alias(name))
        request: dict[str, Any] = {"Description": str(inputs.get("description") or "")}
        if inputs.get("policy"):
            request["Policy"] = inputs["policy"]
        tags = [{"TagKey": k, "TagValue": v} for k, v in _tags(inputs).items()]
        metadata = kms.create_key(**request, **({"Tags": tags} if tags else {}))["KeyMetadata"]
        kms.create_alias(AliasName=key_alias(name), TargetKeyId=metadata["KeyId"])
    else:
        metadata = found["KeyMetadata"]
        if inputs.get("policy"):
            kms.put_key_policy(KeyId=metadata["KeyId"], PolicyName="default", Policy=inputs["policy"])
    if inputs.get("enableKeyRotation"):
        kms.enable_key_rotation(KeyId=metadata["KeyId"])
    return metadata["KeyId"], {**inputs, "arn": metadata["Arn"], "keyId": metadata["KeyId"]}


def _delete_key(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    kms = p.client("kms")
    key = kms.describe_key(KeyId=key_alias(name))["KeyMetadata"]
    kms.delete_alias(AliasName=key_alias(name))
    if key.get("KeyState") != "PendingDeletion":
        kms.schedule_key_deletion(KeyId=key["KeyId"], PendingWindowInDays=7)


# -- IAM ------------------------------------------------------------------------------------------------------------


def _apply_role(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    iam = p.client("iam")
    trust = inputs["assumeRolePolicy"]
    found = _exists(lambda: iam.get_role(RoleName=name))
    if found is None:
        tags = [{"Key": k, "Value": v} for k, v in _tags(inputs).items()]
        role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust, Tags=tags)["Role"]
    else:
        iam.update_assume_role_policy(RoleName=name, PolicyDocument=trust)
        role = found["Role"]
    return name, {**inputs, "name": name, "arn": role["Arn"], "uniqueId": role.get("RoleId", name)}


def _delete_role(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    iam = p.client("iam")
    for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
        iam.delete_role_policy(RoleName=name, PolicyName=policy)
    for attached in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
        iam.detach_role_policy(RoleName=name, PolicyArn=attached["PolicyArn"])
    iam.delete_role(RoleName=name)


def _apply_role_policy(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    role = name_from_arn(str(inputs["role"]))
    p.client("iam").put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=inputs["policy"])
    return f"{role}:{name}", {**inputs, "name": name, "role": role}


def _delete_role_policy(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    p.client("iam").delete_role_policy(RoleName=name_from_arn(str(inputs["role"])), PolicyName=name)


# -- Lambda ---------------------------------------------------------------------------------------------------------


def zip_archive(archive: pulumi.AssetArchive) -> bytes:
    """The deployment package Pulumi would upload for an archive of file and string assets."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as package:
        for member, asset in sorted(archive.assets.items()):
            if isinstance(asset, pulumi.FileAsset):
                package.write(str(asset.path), member)
            elif isinstance(asset, pulumi.StringAsset):
                package.writestr(member, asset.text)
            else:
                raise UnsupportedResource(f"function code member {member}: {type(asset).__name__} is not supported")
    return buffer.getvalue()


def _function_configuration(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    configuration: dict[str, Any] = {
        "FunctionName": name,
        "Role": inputs["role"],
        "Handler": inputs["handler"],
        "Runtime": inputs["runtime"],
        "Timeout": int(inputs.get("timeout", 3)),
        "MemorySize": int(inputs.get("memorySize", 128)),
        "Environment": {"Variables": dict((inputs.get("environment") or {}).get("variables") or {})},
    }
    logging = inputs.get("loggingConfig") or {}
    if logging:
        configuration["LoggingConfig"] = {
            "LogFormat": logging.get("logFormat", "Text"),
            **({"LogGroup": logging["logGroup"]} if logging.get("logGroup") else {}),
        }
    return configuration


def _apply_function(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    lam = p.client("lambda")
    code = zip_archive(inputs["code"])
    configuration = _function_configuration(name, inputs)
    if _exists(lambda: lam.get_function(FunctionName=name)) is None:
        architectures = list(inputs.get("architectures") or ["x86_64"])
        function = lam.create_function(
            **configuration, Code={"ZipFile": code}, Architectures=architectures, Tags=_tags(inputs)
        )
    else:
        lam.update_function_code(FunctionName=name, ZipFile=code)
        function = lam.update_function_configuration(**configuration)
    reserved = inputs.get("reservedConcurrentExecutions")
    if reserved is not None and int(reserved) >= 0:
        lam.put_function_concurrency(FunctionName=name, ReservedConcurrentExecutions=int(reserved))
    arn = function["FunctionArn"]
    outputs = {
        **inputs,
        "name": name,
        "arn": arn,
        "qualifiedArn": f"{arn}:$LATEST",
        "invokeArn": f"arn:aws:apigateway:{p.region}:lambda:path/2015-03-31/functions/{arn}/invocations",
        "version": "$LATEST",
    }
    return name, outputs


def _delete_function(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    p.client("lambda").delete_function(FunctionName=name)


def _mapping_request(inputs: dict[str, Any]) -> dict[str, Any]:
    request: dict[str, Any] = {"Enabled": bool(inputs.get("enabled", True))}
    for key, field in (
        ("batchSize", "BatchSize"),
        ("maximumBatchingWindowInSeconds", "MaximumBatchingWindowInSeconds"),
        ("maximumRetryAttempts", "MaximumRetryAttempts"),
        ("maximumRecordAgeInSeconds", "MaximumRecordAgeInSeconds"),
        ("parallelizationFactor", "ParallelizationFactor"),
    ):
        if inputs.get(key) is not None:
            request[field] = int(inputs[key])
    if inputs.get("bisectBatchOnFunctionError") is not None:
        request["BisectBatchOnFunctionError"] = bool(inputs["bisectBatchOnFunctionError"])
    if inputs.get("functionResponseTypes"):
        request["FunctionResponseTypes"] = list(inputs["functionResponseTypes"])
    on_failure = ((inputs.get("destinationConfig") or {}).get("onFailure") or {}).get("destinationArn")
    if on_failure:
        request["DestinationConfig"] = {"OnFailure": {"Destination": on_failure}}
    filters = (inputs.get("filterCriteria") or {}).get("filters") or []
    patterns = [local for f in filters for local in without_or(f["pattern"])]
    request["FilterCriteria"] = {"Filters": [{"Pattern": for_ministack(p)} for p in patterns]}
    return request


def without_or(pattern: str) -> list[str]:
    """ministack's filter engine has no `"$or"` (it would look for a field of that name and drop every record): the
    pattern as the equivalent patterns without it, one per alternative (Lambda ORs a mapping's filters). ministack
    takes any number of filters; the component's own stay within Lambda's five."""

    def expand(node: Any) -> list[Any]:
        if not isinstance(node, dict):
            return [node]
        options: list[dict[str, Any]] = [{}]
        for key, value in node.items():
            if key == "$or":
                choices = [alternative for a in value for alternative in expand(a)]
                options = [{**o, **c} for o in options for c in choices]
            else:
                options = [{**o, key: c} for o in options for c in expand(value)]
        return options

    return [json.dumps(p, separators=(",", ":"), sort_keys=True) for p in expand(json.loads(pattern))]


def for_ministack(pattern: str) -> str:
    """ministack's filter engine fails `{"attr": {"S": [{"exists": false}]}}` when `attr` is absent (it wants the
    parent to exist; AWS and EventBridge do not). In a DynamoDB image an attribute is absent exactly when its type
    map is, so `{"attr": [{"exists": false}]}` means the same and ministack evaluates it right. Only the copy
    deployed locally is rewritten; the component's pattern is the AWS one."""

    def rewrite(node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if (
                isinstance(value, dict)
                and len(value) == 1
                and next(iter(value)) in _DYNAMODB_TYPES
                and next(iter(value.values())) == [{"exists": False}]
            ):
                out[key] = [{"exists": False}]
            else:
                out[key] = rewrite(value)
        return out

    return json.dumps(rewrite(json.loads(pattern)), separators=(",", ":"), sort_keys=True)


_DYNAMODB_TYPES = frozenset({"S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS"})


def _source_table(stream_arn: str) -> str:
    """`arn:...:table/NAME/stream/LABEL` -> NAME (a stream's label changes when it is re-created; its table does
    not); a queue's ARN -> the queue's name (`down` replays the program with ARNs made up in another account)."""
    if ":sqs:" in stream_arn:
        return stream_arn.rsplit(":", 1)[-1]
    return stream_arn.split("/stream/")[0].split(":table/")[-1]


def _find_mapping(p: Provisioner, inputs: dict[str, Any]) -> dict[str, Any] | None:
    function = name_from_arn(str(inputs["functionName"]))
    listed = p.client("lambda").list_event_source_mappings(FunctionName=function)["EventSourceMappings"]
    source = _source_table(str(inputs["eventSourceArn"]))
    return next((m for m in listed if _source_table(m.get("EventSourceArn", "")) == source), None)


def _apply_mapping(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    lam = p.client("lambda")
    request = _mapping_request(inputs)
    existing = _find_mapping(p, inputs)
    if existing is None:
        # A queue has no starting position (AWS refuses one for SQS); a stream needs it.
        queue = ":sqs:" in str(inputs["eventSourceArn"])
        start = {} if queue else {"StartingPosition": inputs.get("startingPosition", "LATEST")}
        mapping = lam.create_event_source_mapping(
            EventSourceArn=inputs["eventSourceArn"], FunctionName=inputs["functionName"], **start, **request
        )
    else:
        mapping = lam.update_event_source_mapping(UUID=existing["UUID"], **request)
    uuid = mapping["UUID"]
    outputs = {
        **inputs,
        "uuid": uuid,
        "functionArn": mapping.get("FunctionArn", inputs["functionName"]),
        "arn": mapping.get("EventSourceMappingArn", f"arn:aws:lambda:{p.region}:event-source-mapping:{uuid}"),
    }
    return uuid, outputs


def _delete_mapping(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    existing = _find_mapping(p, inputs)
    if existing is not None:
        p.client("lambda").delete_event_source_mapping(UUID=existing["UUID"])


def _apply_invoke_config(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    function = name_from_arn(str(inputs["functionName"]))
    request: dict[str, Any] = {"FunctionName": function}
    if inputs.get("maximumRetryAttempts") is not None:
        request["MaximumRetryAttempts"] = int(inputs["maximumRetryAttempts"])
    if inputs.get("maximumEventAgeInSeconds") is not None:
        request["MaximumEventAgeInSeconds"] = int(inputs["maximumEventAgeInSeconds"])
    on_failure = ((inputs.get("destinationConfig") or {}).get("onFailure") or {}).get("destination")
    if on_failure:
        request["DestinationConfig"] = {"OnFailure": {"Destination": on_failure}}
    p.client("lambda").put_function_event_invoke_config(**request)
    return function, dict(inputs)


def _delete_invoke_config(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    p.client("lambda").delete_function_event_invoke_config(FunctionName=name_from_arn(str(inputs["functionName"])))


def _apply_permission(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    function = name_from_arn(str(inputs["function"]))
    statement = str(inputs.get("statementId") or name)
    request = {
        "FunctionName": function,
        "StatementId": statement,
        "Action": inputs["action"],
        "Principal": inputs["principal"],
        **({"SourceArn": inputs["sourceArn"]} if inputs.get("sourceArn") else {}),
        **({"SourceAccount": inputs["sourceAccount"]} if inputs.get("sourceAccount") else {}),
    }
    lam = p.client("lambda")
    try:
        lam.add_permission(**request)
    except ClientError as error:
        if error_code(error) != "ResourceConflictException":
            raise
        lam.remove_permission(FunctionName=function, StatementId=statement)
        lam.add_permission(**request)
    return statement, {**inputs, "statementId": statement}


def _delete_permission(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    statement = str(inputs.get("statementId") or name)
    p.client("lambda").remove_permission(FunctionName=name_from_arn(str(inputs["function"])), StatementId=statement)


# -- EventBridge and Scheduler --------------------------------------------------------------------------------------


def _apply_schedule_group(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    scheduler = p.client("scheduler")
    found = _exists(lambda: scheduler.get_schedule_group(Name=name))
    if found is None:
        tags = [{"Key": k, "Value": v} for k, v in _tags(inputs).items()]
        arn = scheduler.create_schedule_group(Name=name, **({"Tags": tags} if tags else {}))["ScheduleGroupArn"]
    else:
        arn = found["Arn"]
    return name, {**inputs, "name": name, "arn": arn}


def _delete_schedule_group(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    p.client("scheduler").delete_schedule_group(Name=name)


def _apply_rule(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    request: dict[str, Any] = {"Name": name, "State": inputs.get("state") or "ENABLED"}
    for key, field in (
        ("scheduleExpression", "ScheduleExpression"),
        ("eventPattern", "EventPattern"),
        ("description", "Description"),
        ("eventBusName", "EventBusName"),
        ("roleArn", "RoleArn"),
    ):
        if inputs.get(key):
            request[field] = inputs[key]
    arn = p.client("events").put_rule(**request)["RuleArn"]
    return name, {**inputs, "name": name, "arn": arn}


def _delete_rule(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    events, bus = p.client("events"), _on_bus(inputs)
    targets = events.list_targets_by_rule(Rule=name, **bus)["Targets"]
    if targets:
        events.remove_targets(Rule=name, Ids=[t["Id"] for t in targets], **bus)
    events.delete_rule(Name=name, **bus)


def _apply_event_bus(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A user's own event bus (an `EventBusTarget`'s): made if absent, as on AWS."""
    events = p.client("events")
    found = _exists(lambda: events.describe_event_bus(Name=name))
    # Encrypted with a customer-managed key if the program names one (EventBridge then uses it as itself).
    key = {"KmsKeyIdentifier": inputs["kmsKeyIdentifier"]} if inputs.get("kmsKeyIdentifier") else {}
    if found is None:
        arn = events.create_event_bus(Name=name, **key)["EventBusArn"]
    else:
        arn = found["Arn"]
        if key.get("KmsKeyIdentifier") != found.get("KmsKeyIdentifier"):
            events.update_event_bus(Name=name, **key)
    return name, {**inputs, "name": name, "arn": arn}


def _delete_event_bus(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    p.client("events").delete_event_bus(Name=name)


def _event_target(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    target: dict[str, Any] = {"Id": str(inputs.get("targetId") or name)[:64], "Arn": inputs["arn"]}
    for key, field in (("input", "Input"), ("inputPath", "InputPath"), ("roleArn", "RoleArn")):
        if inputs.get(key):
            target[field] = inputs[key]
    dead_letter = (inputs.get("deadLetterConfig") or {}).get("arn")
    if dead_letter:
        target["DeadLetterConfig"] = {"Arn": dead_letter}
    retry = inputs.get("retryPolicy") or {}
    if retry:
        target["RetryPolicy"] = {
            "MaximumRetryAttempts": int(retry.get("maximumRetryAttempts", 185)),
            "MaximumEventAgeInSeconds": int(retry.get("maximumEventAgeInSeconds", 86400)),
        }
    return target


def _on_bus(inputs: dict[str, Any]) -> dict[str, Any]:
    """The `EventBusName` of a rule's or target's request: the program's bus, or none (the default bus)."""
    return {"EventBusName": inputs["eventBusName"]} if inputs.get("eventBusName") else {}


def _apply_event_target(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    target = _event_target(name, inputs)
    p.client("events").put_targets(Rule=inputs["rule"], Targets=[target], **_on_bus(inputs))
    return f"{inputs['rule']}-{target['Id']}", {**inputs, "targetId": target["Id"]}


def _delete_event_target(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    target = _event_target(name, inputs)
    p.client("events").remove_targets(Rule=inputs["rule"], Ids=[target["Id"]], **_on_bus(inputs))


# -- SNS subscriptions (a user's program subscribing its own queue to its own topic) -------------------------------


def _apply_subscription(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    attributes = {"RawMessageDelivery": "true"} if inputs.get("rawMessageDelivery") else {}
    arn = p.client("sns").subscribe(
        TopicArn=inputs["topic"], Protocol=inputs["protocol"], Endpoint=inputs["endpoint"], Attributes=attributes
    )["SubscriptionArn"]
    return arn, {**inputs, "arn": arn}


def _delete_subscription(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    sns = p.client("sns")
    for subscription in sns.list_subscriptions_by_topic(TopicArn=inputs["topic"]).get("Subscriptions", []):
        if subscription.get("Endpoint") == inputs["endpoint"]:
            sns.unsubscribe(SubscriptionArn=subscription["SubscriptionArn"])


# -- Pulumi-only --------------------------------------------------------------------------------------------------


def _apply_component(p: Provisioner, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "", dict(inputs)


def _delete_nothing(p: Provisioner, name: str, inputs: dict[str, Any]) -> None:
    return None


KINDS: dict[str, Kind] = {
    "aws:dynamodb/table:Table": Kind(_apply_table, _delete_table),
    "aws:sqs/queue:Queue": Kind(_apply_queue, _delete_queue),
    "aws:cloudwatch/logGroup:LogGroup": Kind(_apply_log_group, _delete_log_group),
    "aws:cloudwatch/metricAlarm:MetricAlarm": Kind(_apply_alarm, _delete_alarm),
    "aws:cloudwatch/dashboard:Dashboard": Kind(_apply_dashboard, _delete_dashboard),
    "aws:sns/topic:Topic": Kind(_apply_topic, _delete_topic),
    "aws:sns/topicSubscription:TopicSubscription": Kind(_apply_subscription, _delete_subscription),
    "aws:kms/key:Key": Kind(_apply_key, _delete_key),
    "aws:iam/role:Role": Kind(_apply_role, _delete_role),
    "aws:iam/rolePolicy:RolePolicy": Kind(_apply_role_policy, _delete_role_policy),
    "aws:lambda/function:Function": Kind(_apply_function, _delete_function),
    "aws:lambda/eventSourceMapping:EventSourceMapping": Kind(_apply_mapping, _delete_mapping),
    "aws:lambda/permission:Permission": Kind(_apply_permission, _delete_permission),
    "aws:lambda/functionEventInvokeConfig:FunctionEventInvokeConfig": Kind(_apply_invoke_config, _delete_invoke_config),
    "aws:scheduler/scheduleGroup:ScheduleGroup": Kind(_apply_schedule_group, _delete_schedule_group),
    "aws:cloudwatch/eventRule:EventRule": Kind(_apply_rule, _delete_rule),
    "aws:cloudwatch/eventTarget:EventTarget": Kind(_apply_event_target, _delete_event_target),
    "aws:cloudwatch/eventBus:EventBus": Kind(_apply_event_bus, _delete_event_bus),
    "scheduled-table:index:ScheduledTable": Kind(_apply_component, _delete_nothing),
}


def describe(outputs: dict[str, Any]) -> str:
    """Outputs as indented JSON (for the CLI)."""
    return json.dumps(outputs, indent=2, sort_keys=True, default=str)
