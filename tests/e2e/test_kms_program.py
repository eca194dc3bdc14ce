"""A user's program with a customer-managed KMS key on every encryptable resource it gives the component, deployed
into the local cloud with IAM and KMS enforced (localcloud/iam.py): its tables and the ledgers with one key, its
targets (a queue, a topic, an event bus) with another, every mode, and the calls each makes as its role (the
functions' reads, writes and sends, each mapping's stream reads, Scheduler's sends and deletions, EventBridge's own
use of the bus's key). Every mode delivers; with one KMS grant or key-policy statement removed, exactly the call that
needed it fails, as AWS fails it.

The queues the component makes to park items (stream DLQ, poison, target DLQ, release) are encrypted with the
table's key (`kms_key_arn`), and each schedule's payload too (its `KmsKeyArn`); the due queue keeps SQS's own key.
The user's own poison queue and Scheduler dead-letter queue (`ExistingQueue` with `kms_key_arn`) are encrypted with
the user's key, and are sent to with it. Every grant of a key holds through the service that uses it
(`kms:ViaService`): a function's role calling KMS itself with the table's key is refused.

Scheduler (eventbridge mode, minute precision) sends to the encrypted queue and puts on the encrypted bus itself, as
its role, anywhere in the due minute, and deletes the precise ttl table's items (with its table-key grant); the TTL
process deletes the plain ttl table's expired items five seconds after their time (localcloud's TtlService);
polling's tick is fired as soon as the item is written (`fire_rule`, as `make demo` does; its minute tick runs too)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from localcloud.deploy import up
from localcloud.emulators import Emulators, fire_rule
from localcloud.provision import clients
from localcloud.server import Ministack

from .conftest import wait_until as _wait

PROJECT = "name: vault\nruntime: python\ndescription: a user's project, encrypted\n"
PROGRAM = """\
import json

import pulumi
import pulumi_aws as aws
from scheduled_table import (
    EventBusTarget, ExistingQueue, QueueTarget, ScheduledTable, ScheduledTableArgs, TopicTarget
)

account = aws.get_caller_identity().account_id
root = {"Sid": "Admin", "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{account}:root"}, "Action": "kms:*",
        "Resource": "*"}
events = {"Sid": "EventBridge", "Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"},
          "Action": ["kms:GenerateDataKey", "kms:Decrypt"], "Resource": "*",
          "Condition": {"StringEquals": {"aws:SourceAccount": account}}}
table_key = aws.kms.Key("vault-tables", description="the user's key for tables")
target_key = aws.kms.Key(
    "vault-targets",
    description="the user's key for targets",
    policy=json.dumps({"Version": "2012-10-17", "Statement": [root, events]}),
)
inbox = aws.sqs.Queue("inbox", kms_master_key_id=target_key.arn)
alerts = aws.sns.Topic("alerts", kms_master_key_id=target_key.arn)
alerts_inbox = aws.sqs.Queue("alerts-inbox", policy=alerts.arn.apply(lambda topic: json.dumps({"Statement": [
    {"Effect": "Allow", "Principal": {"Service": "sns.amazonaws.com"}, "Action": "sqs:SendMessage", "Resource": "*",
     "Condition": {"ArnEquals": {"aws:SourceArn": topic}}}]})))
aws.sns.TopicSubscription(
    "alerts-to-inbox", topic=alerts.arn, protocol="sqs", endpoint=alerts_inbox.arn, raw_message_delivery=True
)
bus = aws.cloudwatch.EventBus("jobs-bus", kms_key_identifier=target_key.arn)
bus_inbox = aws.sqs.Queue("bus-inbox")
rule = aws.cloudwatch.EventRule(
    "due-on-bus", event_bus_name=bus.name, event_pattern=json.dumps({"source": ["scheduled-table"]})
)
aws.cloudwatch.EventTarget("due-on-bus-inbox", rule=rule.name, event_bus_name=bus.name, arn=bus_inbox.arn)
# The user's own poison queue and Scheduler dead-letter queue, encrypted (with the tables' key: the Scheduler test
# takes the target key from Scheduler's role, not this one)
parked = aws.sqs.Queue("parked", kms_master_key_id=table_key.arn)
dead = aws.sqs.Queue("dead", kms_master_key_id=table_key.arn)
common = dict(kms_key_arn=table_key.arn, deletion_protection=False, alarms=False, dashboard=False)
made = {
    "orders": ScheduledTable("orders", ScheduledTableArgs(
        mode="eventbridge", time_attribute="shipAt", target=QueueTarget(inbox.arn, kms_key_arn=target_key.arn),
        existing_target_dlq=ExistingQueue(dead.arn, kms_key_arn=table_key.arn), **common)),
    "tickets": ScheduledTable("tickets", ScheduledTableArgs(
        mode="eventbridge", time_attribute="openAt", target=EventBusTarget(bus.arn),
        existing_poison_queue=ExistingQueue(parked.arn, kms_key_arn=table_key.arn), **common)),
    "offers": ScheduledTable("offers", ScheduledTableArgs(
        mode="ttl", precise=True, time_attribute="endsAt", target=TopicTarget(alerts.arn, kms_key_arn=target_key.arn),
        **common)),
    "sessions": ScheduledTable("sessions", ScheduledTableArgs(
        mode="ttl", time_attribute="expiresAt", target=QueueTarget(inbox.arn, kms_key_arn=target_key.arn), **common)),
    "jobs": ScheduledTable("jobs", ScheduledTableArgs(
        mode="polling", time_attribute="runAt", target=EventBusTarget(bus.arn), **common)),
    "scores": ScheduledTable("scores", ScheduledTableArgs(mode="aggregate", **common)),
}
for name, component in made.items():
    pulumi.export(f"{name}_table", component.table_name)
    pulumi.export(f"{name}_poison", component.poison_queue_url)
pulumi.export("orders_target_dlq", dead.url)
pulumi.export("parked_url", parked.url)
pulumi.export("jobs_tick", made["jobs"].tick_rule_name)
pulumi.export("inbox_url", inbox.url)
pulumi.export("alerts_inbox_url", alerts_inbox.url)
pulumi.export("bus_inbox_url", bus_inbox.url)
pulumi.export("alerts_arn", alerts.arn)
pulumi.export("bus_name", bus.name)
pulumi.export("table_key", table_key.arn)
pulumi.export("target_key", target_key.arn)
"""
REGION = "eu-west-1"
WAIT_SECONDS = 60.0
# Scheduler runs an at() anywhere in its minute (the local cloud's too): a due event may come two minutes after it
# is written, plus the stream's and the sweep's seconds on a loaded machine.
SCHEDULER_WAIT_SECONDS = 150.0
FIRE_EVERY_SECONDS = 5.0
PRECISE_TTL_DELAY = 200.0
MODES = ("orders", "tickets", "offers", "sessions", "jobs", "scores")


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory, fresh_cloud: Ministack) -> Iterator[dict[str, Any]]:
    folder: Path = tmp_path_factory.mktemp("vault")
    (folder / "Pulumi.yaml").write_text(PROJECT)
    (folder / "__main__.py").write_text(PROGRAM)
    deployment = up(fresh_cloud.endpoint, project_dir=folder)
    policies = {r.name: (r.outputs["role"], r.name, r.inputs["policy"]) for r in deployment.of_type(":RolePolicy")}
    roles = {r.name: r.outputs["arn"] for r in deployment.of_type("iam/role:Role")}
    # The precise table's items outlive their due time by far, so Scheduler's deletion (as its role, on the
    # encrypted table: the table key's grant) is what removes them, not TTL
    with Emulators(deployment.endpoint, deployment.region, ttl_delays={"offers-table": PRECISE_TTL_DELAY}):
        yield {**deployment.outputs, "policies": policies, "roles": roles}


def _client(cloud: Ministack) -> Callable[[str], Any]:
    return clients(cloud.endpoint, REGION)


def _bodies(client: Callable[[str], Any], url: str, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every message the queue holds now, added to `found` (bodies as JSON, attributes under `attributes`)."""
    messages = (
        client("sqs")
        .receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, MessageAttributeNames=["All"])
        .get("Messages", [])
    )
    for message in messages:
        body = json.loads(message["Body"])
        attributes = {k: v.get("StringValue") for k, v in (message.get("MessageAttributes") or {}).items()}
        found.append({**body, "attributes": attributes} if isinstance(body, dict) else {"body": body})
        client("sqs").delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return found


def _keys_of(message: dict[str, Any]) -> dict[str, Any]:
    """The item keys of a due event, as it arrives in a queue or on the bus (its detail)."""
    detail = message.get("detail")
    return dict((detail if isinstance(detail, dict) else message).get("keys") or {})


def _arrives(client: Callable[[str], Any], url: str, keys: dict[str, str], seconds: float = WAIT_SECONDS) -> bool:
    found: list[dict[str, Any]] = []
    return bool(_wait(lambda: any(_keys_of(m) == keys for m in _bodies(client, url, found)), seconds))


def _put(client: Callable[[str], Any], table: str, item: dict[str, Any]) -> None:
    client("dynamodb").put_item(TableName=table, Item=item)


def _due(pk: str, attribute: str, at: int) -> dict[str, Any]:
    return {"PK": {"S": pk}, "SK": {"S": "DUE"}, attribute: {"N": str(at)}}


def _without_key(text: str, key: str) -> str:
    """The role policy `text` without the statements on the key `key` (every other grant kept)."""
    document = json.loads(text)

    def on_key(statement: dict[str, Any]) -> bool:
        resources = statement.get("Resource")
        return key in (resources if isinstance(resources, list) else [resources])

    document["Statement"] = [s for s in document["Statement"] if not on_key(s)]
    return json.dumps(document)


def test_every_resource_is_encrypted_with_the_users_keys(deployed: dict[str, Any], fresh_cloud: Ministack) -> None:
    client = _client(fresh_cloud)
    for mode in MODES:
        described = client("dynamodb").describe_table(TableName=deployed[f"{mode}_table"])["Table"]
        assert described["SSEDescription"]["KMSMasterKeyArn"] == deployed["table_key"], (mode, described)
    attributes = client("sqs").get_queue_attributes(QueueUrl=deployed["inbox_url"], AttributeNames=["All"])
    assert attributes["Attributes"]["KmsMasterKeyId"] == deployed["target_key"]
    topic = client("sns").get_topic_attributes(TopicArn=deployed["alerts_arn"])["Attributes"]
    assert topic["KmsMasterKeyId"] == deployed["target_key"]
    bus = client("events").describe_event_bus(Name=deployed["bus_name"])
    assert bus["KmsKeyIdentifier"] == deployed["target_key"]


def test_every_mode_delivers_through_the_encrypted_tables_and_targets(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    client = _client(fresh_cloud)
    now = int(time.time())
    # WHEN one item is written into each mode's encrypted table
    _put(client, deployed["orders_table"], _due("ORDER#1", "shipAt", now + 5))
    _put(client, deployed["tickets_table"], _due("TICKET#1", "openAt", now + 5))
    _put(client, deployed["jobs_table"], _due("JOB#1", "runAt", now))
    _put(client, deployed["offers_table"], _due("OFFER#1", "endsAt", now + 5))
    _put(client, deployed["sessions_table"], _due("SESSION#1", "expiresAt", now + 2))
    _put(client, deployed["scores_table"], {"PK": {"S": "SCORE#1"}, "SK": {"S": "USER#ada"}, "Score": {"N": "5"}})
    _put(client, deployed["tickets_table"], {"PK": {"S": "TICKET#0"}, "SK": {"S": "DUE"}, "openAt": {"S": "someday"}})
    # THEN each due event arrives in its encrypted target: Scheduler's own send to the queue and put on the bus, the
    # ttl executors' sends to the queue and the topic, polling's processor's put on the bus; the totals in the table
    inbox: list[dict[str, Any]] = []
    bus: list[dict[str, Any]] = []
    alerts: list[dict[str, Any]] = []
    wanted = {
        "orders": (deployed["inbox_url"], inbox, {"PK": "ORDER#1", "SK": "DUE"}),
        "sessions": (deployed["inbox_url"], inbox, {"PK": "SESSION#1", "SK": "DUE"}),
        "tickets": (deployed["bus_inbox_url"], bus, {"PK": "TICKET#1", "SK": "DUE"}),
        "jobs": (deployed["bus_inbox_url"], bus, {"PK": "JOB#1", "SK": "DUE"}),
        "offers": (deployed["alerts_inbox_url"], alerts, {"PK": "OFFER#1", "SK": "DUE"}),
    }
    fired = [0.0]

    def missing() -> list[str]:
        for url, found in {(u, id(f)): (u, f) for u, f, _ in wanted.values()}.values():
            _bodies(client, url, found)
        late = [mode for mode, (_, found, keys) in wanted.items() if not any(_keys_of(m) == keys for m in found)]
        if "jobs" in late and time.time() - fired[0] > FIRE_EVERY_SECONDS:  # the tick now, not at its minute
            fire_rule(client, deployed["jobs_tick"], REGION)
            fired[0] = time.time()
        return late

    assert _wait(lambda: not missing(), SCHEDULER_WAIT_SECONDS), f"no due event within the wait for {missing()}"
    total = client("dynamodb").get_item(
        TableName=deployed["scores_table"], Key={"PK": {"S": "USER#ada"}, "SK": {"S": "TOTAL"}}
    )
    assert total["Item"]["totalScore"] == {"N": "5"}
    # AND the bad ticket was parked in the user's encrypted poison queue, with its reason; nothing else was parked
    parked: list[dict[str, Any]] = []
    assert _wait(lambda: _bodies(client, deployed["parked_url"], parked)), "the bad ticket was not parked"
    assert "TICKET#0" in json.dumps(parked) and "openAt" in json.dumps(parked), parked
    for mode in MODES:  # (another test's refused record may be parked there, once the IAM-propagation retries end)
        elsewhere = json.dumps(_bodies(client, deployed[f"{mode}_poison"], []))
        assert not [pk for pk in ("ORDER#1", "TICKET#1", "JOB#1", "OFFER#1", "SESSION#1") if pk in elsewhere], mode


def test_without_the_executors_grant_on_the_target_key_its_send_is_refused(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    """The record the refused send belonged to is handed back to Lambda as a batch item failure, which AWS retries;
    ministack ignores partial batch responses (docs/local-cloud.md), so that retry is the handler tests' to show."""
    # GIVEN the ttl executor's role without its grant on the target queue's key (the table key's kept)
    client = _client(fresh_cloud)
    role, name, text = deployed["policies"]["sessions-executor-policy"]
    client("iam").put_role_policy(
        RoleName=role, PolicyName=name, PolicyDocument=_without_key(text, deployed["target_key"])
    )
    try:
        # WHEN a session expires
        _put(client, deployed["sessions_table"], _due("SESSION#2", "expiresAt", int(time.time())))
        # THEN its send to the encrypted queue is refused (SQS's KMS.AccessDeniedException): nothing arrives
        assert not _arrives(client, deployed["inbox_url"], {"PK": "SESSION#2", "SK": "DUE"}, seconds=12)
    finally:
        client("iam").put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=text)
    # AND with the grant back, the next session's due event arrives
    _put(client, deployed["sessions_table"], _due("SESSION#3", "expiresAt", int(time.time())))
    assert _arrives(client, deployed["inbox_url"], {"PK": "SESSION#3", "SK": "DUE"})


def _key_policy(deployed: dict[str, Any], without: str) -> str:
    """The target key's policy naming each role the component made (and EventBridge) for the key's use, except
    `without`'s; the account root may only administer the key, so no role is allowed its use through IAM alone."""
    account = deployed["target_key"].split(":")[4]
    admin = ["kms:Create*", "kms:Describe*", "kms:Enable*", "kms:List*", "kms:Put*", "kms:Update*", "kms:Get*"]
    roles = sorted(arn for name, arn in deployed["roles"].items() if name != without)
    uses = ["kms:GenerateDataKey", "kms:Decrypt"]
    statements = [
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{account}:root"}, "Action": admin, "Resource": "*"},
        {"Effect": "Allow", "Principal": {"AWS": roles}, "Action": uses, "Resource": "*"},
        {"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, "Action": uses, "Resource": "*"},
    ]
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


@contextlib.contextmanager
def _target_key_policy(client: Callable[[str], Any], key: str, policy: str) -> Iterator[None]:
    """The key's policy replaced by `policy` for the block, then put back as it was."""
    original = client("kms").get_key_policy(KeyId=key, PolicyName="default")["Policy"]
    client("kms").put_key_policy(KeyId=key, PolicyName="default", Policy=policy)
    try:
        yield
    finally:
        client("kms").put_key_policy(KeyId=key, PolicyName="default", Policy=original)


def test_without_the_key_policy_statement_for_schedulers_role_its_send_is_dead_lettered(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    # GIVEN the target key's policy naming every role the component made except the orders' Scheduler role
    client = _client(fresh_cloud)
    key = deployed["target_key"]
    with _target_key_policy(client, key, _key_policy(deployed, without="orders-scheduler-exec-role")):
        # WHEN an order and a session fall due (the session's executor is named in the key policy)
        now = int(time.time())
        _put(client, deployed["orders_table"], _due("ORDER#3", "shipAt", now + 5))
        _put(client, deployed["sessions_table"], _due("SESSION#4", "expiresAt", now))
        # THEN Scheduler's send of the order is refused its key and dead-lettered (into the user's dead-letter queue,
        # encrypted with the other key, which the role may use), naming the key use
        dead: list[dict[str, Any]] = []
        sent = _wait(lambda: _bodies(client, deployed["orders_target_dlq"], dead), SCHEDULER_WAIT_SECONDS)
        assert sent, "no dead letter within the wait"
        message = dead[0]["attributes"].get("ERROR_MESSAGE") or ""
        assert "kms:GenerateDataKey" in message and key in message, dead[0]
        # AND the session, sent by a role the key policy names, arrived in the same queue: only that call failed
        assert _arrives(client, deployed["inbox_url"], {"PK": "SESSION#4", "SK": "DUE"})


def _probe(client: Callable[[str], Any], bus: str, pk: str) -> dict[str, Any]:
    """An event put on the bus directly, as a due event's shape (the rule routes it to the bus's inbox)."""
    detail = json.dumps({"keys": {"PK": pk, "SK": "DUE"}})
    entry = {"EventBusName": bus, "Source": "scheduled-table", "DetailType": "probe", "Detail": detail}
    answer: dict[str, Any] = client("events").put_events(Entries=[entry])
    return answer


def test_without_the_key_policy_statement_for_eventbridge_no_event_reaches_the_encrypted_bus_rules(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    # GIVEN the target key's policy without its statement for events.amazonaws.com (every role still named)
    client = _client(fresh_cloud)
    document = json.loads(_key_policy(deployed, without=""))
    document["Statement"] = [s for s in document["Statement"] if "Service" not in s["Principal"]]
    with _target_key_policy(client, deployed["target_key"], json.dumps(document)):
        # WHEN an event is put on the bus (as polling's processor, the releaser and Scheduler put theirs)
        put = _probe(client, deployed["bus_name"], "PROBE#1")
        # THEN PutEvents answers (the sender needs no key), but EventBridge cannot use the key: no rule sees it
        assert put["FailedEntryCount"] == 0
        assert not _arrives(client, deployed["bus_inbox_url"], {"PK": "PROBE#1", "SK": "DUE"}, seconds=8)
    # AND with the statement back, the bus delivers again
    _probe(client, deployed["bus_name"], "PROBE#2")
    assert _arrives(client, deployed["bus_inbox_url"], {"PK": "PROBE#2", "SK": "DUE"})


def test_without_the_aggregators_kms_decrypt_its_stream_read_is_refused_until_it_is_back(
    deployed: dict[str, Any], fresh_cloud: Ministack
) -> None:
    # GIVEN the aggregating function's role without kms:Decrypt on the table's key (everything else as deployed)
    client = _client(fresh_cloud)
    role, name, text = deployed["policies"]["scores-aggregator-policy"]
    document = json.loads(text)
    for statement in document["Statement"]:
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        statement["Action"] = [a for a in actions if a != "kms:Decrypt"] or ["kms:DescribeKey"]
    client("iam").put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(document))
    key = {"PK": {"S": "USER#bob"}, "SK": {"S": "TOTAL"}}
    try:
        # WHEN another score is written
        _put(client, deployed["scores_table"], {"PK": {"S": "SCORE#2"}, "SK": {"S": "USER#bob"}, "Score": {"N": "7"}})
        # THEN its total never appears: the mapping cannot read the stream, nor the function write, without the key
        time.sleep(10)
        assert "Item" not in client("dynamodb").get_item(TableName=deployed["scores_table"], Key=key)
    finally:
        client("iam").put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=text)
    # AND with the grant back, the batch Lambda kept retrying goes through: nothing was lost
    found = _wait(lambda: client("dynamodb").get_item(TableName=deployed["scores_table"], Key=key).get("Item"), 60)
    assert found is not None and found["totalScore"] == {"N": "7"}


def test_the_components_own_queues_are_under_the_tables_key(deployed: dict[str, Any], fresh_cloud: Ministack) -> None:
    """Parked messages carry whole items: the poison queues the component made use the table's key, not SQS's."""
    client = _client(fresh_cloud)
    for mode in ("orders", "offers", "sessions", "jobs", "scores"):  # (the tickets' poison queue is the user's)
        attributes = client("sqs").get_queue_attributes(QueueUrl=deployed[f"{mode}_poison"], AttributeNames=["All"])
        assert attributes["Attributes"].get("KmsMasterKeyId") == deployed["table_key"], (mode, attributes)


def _orders_group(client: Callable[[str], Any]) -> str:
    groups = client("scheduler").list_schedule_groups(NamePrefix="orders-schedules")["ScheduleGroups"]
    (group,) = [g["Name"] for g in groups]
    return str(group)


def test_a_schedules_payload_is_under_the_tables_key(deployed: dict[str, Any], fresh_cloud: Ministack) -> None:
    # GIVEN an order due in two days (its schedule made by the scheduling function, under the table's key: the
    # local cloud checks the function may use the key through Scheduler for this schedule, as Scheduler does)
    client = _client(fresh_cloud)
    group = _orders_group(client)
    _put(client, deployed["orders_table"], _due("ORDER#9", "shipAt", int(time.time()) + 2 * 86400))
    try:
        names = _wait(
            lambda: [s["Name"] for s in client("scheduler").list_schedules(GroupName=group)["Schedules"]],
            WAIT_SECONDS,
        )
        assert names, "no schedule made for the order"
        # THEN the schedule names the table's key
        schedule = client("scheduler").get_schedule(GroupName=group, Name=names[0])
        assert schedule.get("KmsKeyArn") == deployed["table_key"], schedule
    finally:
        client("dynamodb").delete_item(
            TableName=deployed["orders_table"], Key={"PK": {"S": "ORDER#9"}, "SK": {"S": "DUE"}}
        )


def test_a_functions_role_may_not_use_the_tables_key_directly(deployed: dict[str, Any], fresh_cloud: Ministack) -> None:
    """The table key's grants hold through DynamoDB (kms:ViaService): the function's role reads the table, and
    its own call to KMS with the key is refused."""
    from botocore.exceptions import ClientError

    from localcloud.emulators import RoleSessions

    client = _client(fresh_cloud)
    sessions = RoleSessions(fresh_cloud.endpoint, REGION)
    role = deployed["roles"]["orders-scheduler-role"]  # the scheduling function's: it reads the table's items
    table = sessions.client(role, "dynamodb", "lambda.amazonaws.com")
    table.get_item(TableName=deployed["orders_table"], Key={"PK": {"S": "ORDER#none"}, "SK": {"S": "DUE"}})
    kms = sessions.client(role, "kms", "lambda.amazonaws.com")
    for call in (
        lambda: kms.generate_data_key(KeyId=deployed["table_key"], KeySpec="AES_256"),
        lambda: kms.encrypt(KeyId=deployed["table_key"], Plaintext=b"an item"),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] == "AccessDeniedException", refused.value.response
    # (the key itself works for whoever may use it directly: the account's own credentials)
    assert client("kms").generate_data_key(KeyId=deployed["table_key"], KeySpec="AES_256")["KeyId"]
