"""One ministack for the whole session (started on a free loopback port, stopped at the end); each test module
resets it before it deploys, so modules do not see each other's resources."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from localcloud.deploy import Deployment, up
from localcloud.provision import CREDENTIALS, clients
from localcloud.server import Ministack


@pytest.fixture(scope="session")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ministack]:
    with Ministack(log_dir=tmp_path_factory.mktemp("ministack")) as server:
        yield server


@pytest.fixture(scope="module")
def fresh_cloud(cloud: Ministack) -> Ministack:
    cloud.reset()
    return cloud


@pytest.fixture
def operator_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator's command runs with their own credentials; against the local cloud (IAM enforced) those are its
    admin's (provision.CREDENTIALS), not the suite's placeholder keys, which it does not know."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", CREDENTIALS["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CREDENTIALS["aws_secret_access_key"])
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


def deploy(cloud: Ministack, folder: Any, stack: str, config: str, region: str = "eu-west-1") -> Deployment:
    """`up` of the repository's program with this stack configuration, ACCOUNT in it replaced by the local cloud's
    account (a target's ARN names it); `folder` a scratch directory for the configuration file."""
    account = clients(cloud.endpoint, region)("sts").get_caller_identity()["Account"]
    path = folder / f"Pulumi.{stack}.yaml"
    path.write_text(config.replace("ACCOUNT", account))
    return up(cloud.endpoint, stack=stack, config_file=path)


def snapshot(endpoint: str, region: str = "eu-west-1") -> dict[str, Any]:
    """Everything a deployment can leave behind, read through the AWS APIs."""
    client = clients(endpoint, region)
    lam = client("lambda")
    tables = sorted(client("dynamodb").list_tables()["TableNames"])
    return {
        "tables": tables,
        "ttl": {t: client("dynamodb").describe_time_to_live(TableName=t)["TimeToLiveDescription"] for t in tables},
        "queues": sorted(client("sqs").list_queues().get("QueueUrls", [])),
        "functions": sorted(f["FunctionName"] for f in lam.list_functions()["Functions"]),
        "mappings": sorted(
            (m["FunctionArn"], m["EventSourceArn"], m.get("BatchSize"))
            for m in lam.list_event_source_mappings()["EventSourceMappings"]
        ),
        "roles": sorted(r["RoleName"] for r in client("iam").list_roles()["Roles"]),
        "role_policies": sorted(
            (r["RoleName"], p)
            for r in client("iam").list_roles()["Roles"]
            for p in client("iam").list_role_policies(RoleName=r["RoleName"])["PolicyNames"]
        ),
        "log_groups": sorted(g["logGroupName"] for g in client("logs").describe_log_groups()["logGroups"]),
        "rules": sorted(r["Name"] for r in client("events").list_rules()["Rules"]),
        "permissions": sorted(
            json.dumps(lam.get_policy(FunctionName=f["FunctionName"])["Policy"], sort_keys=True)
            for f in lam.list_functions()["Functions"]
            if f["FunctionName"].endswith("-processor")
        ),
        "schedule_groups": sorted(
            g["Name"] for g in client("scheduler").list_schedule_groups()["ScheduleGroups"] if g["Name"] != "default"
        ),
    }


def wait_until(condition: Callable[[], Any], seconds: float = 60.0) -> Any:
    """The condition's first truthy answer, asked once a second for `seconds`; None if it never gave one."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(1.0)
    return None
