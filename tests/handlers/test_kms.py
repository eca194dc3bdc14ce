"""KMS as AWS enforces it, in the handler tests: the table (and the ledger) and the target encrypted with
customer-managed keys, each with a key policy the test supplies; every call, every schedule Scheduler fires and
every batch a mapping reads is checked against the role the component renders for those keys and against the key
policy (tests/iam/enforce.py), each use of a key through the service that makes it (`kms:ViaService`). The
component's own queues (poison, target DLQ, release) are under the table's key too, and so is each schedule's
payload (`KmsKeyArn`). Every mode delivers; removing one KMS grant from a role, or the key policy's statement, makes
the affected call fail as AWS fails it; and a target whose key the component was not told about is parked with a
reason naming `kms_key_arn` and the key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import aggregate
import eventbridge
import polling
import pytest
import ttl
from botocore.exceptions import ClientError
from st_core.clients import CLIENTS
from st_core.idempotency import Ledger

from components import policies
from components.runtime_config import Value
from components.targets import EventBusTarget, TopicTarget
from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT, Env, SchedulerClock, with_due_index
from tests.handlers.test_targets_bus_fifo import as_ttl, ttl_item
from tests.iam import enforce, requests, roles
from tests.iam.roles import Keys

NOW = datetime.now(UTC).replace(microsecond=0)
TABLE_KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1111aaaa-11aa-11aa-11aa-111111aaaaaa"
TARGET_KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/2222bbbb-22bb-22bb-22bb-222222bbbbbb"
KEYS = Keys(table=TABLE_KEY, target=TARGET_KEY)
DEFAULT = requests.default_key_policy(ACCOUNT)
POLICIES = {TABLE_KEY: DEFAULT, TARGET_KEY: DEFAULT}
NO_STATEMENT = json.dumps({"Version": "2012-10-17", "Statement": []})


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def keyed(_iam: enforce.Enforcement) -> Iterator[enforce.Enforcement]:
    """The table, the ledger and the target encrypted with customer-managed keys under AWS's default key policy
    (the account's IAM policies decide), and the component told both keys."""
    with _iam.encrypted(KEYS, POLICIES):
        yield _iam


@pytest.fixture
def long_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """A container past IAM's propagation window: a refusal is permanent (parked), not retried."""
    import st_core.errors

    monkeypatch.setattr(st_core.errors, "container_age", lambda: 600.0)


def delivered(env: Env) -> list[dict[str, Any]]:
    return env.messages(env.due_queue_url)


# -- every mode delivers with keys on everything ---------------------------------------------------------------------


def test_eventbridge_delivers_now_and_through_schedules_with_keys(env: Env, keyed: enforce.Enforcement) -> None:
    # GIVEN one item already due (the function sends it) and one due in two days (a schedule Scheduler fires)
    env.put({"PK": "user#1", "SK": "now", "dueAt": iso(NOW - timedelta(minutes=5))})
    env.put({"PK": "user#1", "SK": "later", "dueAt": iso(NOW + timedelta(days=2))})
    # WHEN the batch is handled (the mapping reads the stream with the role, decrypting with the table's key)
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    # AND Scheduler fires the schedule with its execution role (the target's key, by the role and the key policy)
    (schedule,) = env.schedules()
    SchedulerClock(env).run(schedule)
    # THEN both arrived
    assert sorted(m["keys"]["SK"] for m in delivered(env)) == ["later", "now"]


def test_ttl_delivers_with_keys(env: Env, keyed: enforce.Enforcement) -> None:
    as_ttl(env)
    assert ttl.handle_batch(ttl_item(env, "offer#1"), env.config) == {"batchItemFailures": []}
    assert [m["keys"]["PK"] for m in delivered(env)] == ["offer#1"]


def test_precise_ttl_makes_schedules_scheduler_may_fire_with_the_tables_key(
    env: Env, keyed: enforce.Enforcement
) -> None:
    # GIVEN precise ttl (Scheduler fires each item with UpdateItem on the table: the table's key, by its role)
    env.configure(mode="ttl", precise=True)
    env.put({"PK": "offer#2", "SK": "S", "dueAt": int((NOW + timedelta(days=2)).timestamp())})
    # WHEN the insert is handled, THEN its schedule is made (checked at creation against Scheduler's role and keys)
    assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    enforce.check_firing(roles.role_for(env.config, "scheduler-exec", KEYS), schedule, keyed.encryption(env.config))


def test_polling_delivers_with_keys(env: Env, keyed: enforce.Enforcement) -> None:
    with_due_index(env)
    env.put({"PK": "job#1", "SK": "T", "stShard": 0, "stDue": int(NOW.timestamp()) - 1, "stStatus": "PENDING"})
    assert polling.process(env.config, now=lambda: NOW.timestamp()).dispatched == 1
    assert [m["keys"]["PK"] for m in delivered(env)] == ["job#1"]


def test_aggregate_totals_with_the_tables_key(env: Env, keyed: enforce.Enforcement) -> None:
    env.configure(mode="aggregate")
    env.put({"PK": "SCORE#1", "SK": "USER#ada", "Score": 5})
    assert aggregate.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    total = env.ddb.get_item(TableName=env.table, Key={"PK": {"S": "USER#ada"}, "SK": {"S": "TOTAL"}})["Item"]
    assert total["totalScore"] == {"N": "5"}


def test_a_topic_target_with_its_key_is_published_to(env: Env, keyed: enforce.Enforcement) -> None:
    import boto3

    arn = boto3.client("sns", region_name=REGION).create_topic(Name=f"due-{env.table}")["TopicArn"]
    env.configure(target=TopicTarget(topic_arn=arn))
    env.put({"PK": "user#2", "SK": "now", "dueAt": iso(NOW - timedelta(minutes=1))})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert keyed.calls and not keyed.violations


# -- removing one grant, or the key policy's statement, fails the call as AWS does ------------------------------------


@pytest.fixture
def without(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Render the roles with one KMS action fewer on the table's key (`TABLE_KEY_ACTIONS`) or the target's (its
    kind's KMS_ACTIONS, st_core/target_types/)."""

    def remove(constant: str, action: str) -> None:
        if constant == "TABLE_KEY_ACTIONS":
            monkeypatch.setattr(policies, constant, [a for a in policies.TABLE_KEY_ACTIONS if a != action])
        else:
            declared = policies.target_type

            def fewer(kind: str) -> Any:
                found = declared(kind)
                kept = tuple(a for a in found.KMS_ACTIONS if a != action)
                return SimpleNamespace(**{**vars(found), "KMS_ACTIONS": kept})

            monkeypatch.setattr(policies, "target_type", fewer)
        roles.rerender()

    yield remove
    monkeypatch.undo()
    roles.rerender()


def _ledger_read(env: Env) -> ClientError:
    ledger = Ledger(env.config["eventbridge"]["ledgerTable"], clients=CLIENTS, lease_seconds=90, window_seconds=60)
    with enforce.acting("scheduler", dict(env.config)), pytest.raises(ClientError) as raised:
        ledger._status("occurrence-1")
    return raised.value


def test_without_the_tables_decrypt_a_ledger_read_is_refused_naming_the_key(
    env: Env, keyed: enforce.Enforcement, without: Any
) -> None:
    without("TABLE_KEY_ACTIONS", "kms:Decrypt")
    error = _ledger_read(env).response
    assert error["Error"]["Code"] == "AccessDeniedException"
    role = roles.role_for(env.config, "scheduler", KEYS)
    assert error["Error"]["Message"] == (
        f"User: {role.principal} is not authorized to perform: kms:Decrypt on resource: {TABLE_KEY} because no "
        "identity-based policy allows the kms:Decrypt action"
    )


def test_without_the_tables_decrypt_the_mapping_cannot_read_the_stream(
    env: Env, keyed: enforce.Enforcement, without: Any
) -> None:
    without("TABLE_KEY_ACTIONS", "kms:Decrypt")
    env.put({"PK": "user#1", "SK": "later", "dueAt": iso(NOW + timedelta(days=2))})
    event = env.event()
    enforce.check_mapping("scheduler", env.config, event, "stream")
    assert any("kms:Decrypt" in v and "event source mapping" in v for v in keyed.violations)
    keyed.violations.clear()


@pytest.mark.parametrize("action", ["kms:Encrypt", "kms:GenerateDataKey"])
def test_without_a_write_action_on_the_tables_key_a_ledger_write_is_refused(
    env: Env, keyed: enforce.Enforcement, without: Any, action: str
) -> None:
    without("TABLE_KEY_ACTIONS", action)
    ledger = Ledger(env.config["eventbridge"]["ledgerTable"], clients=CLIENTS, lease_seconds=90, window_seconds=60)
    with enforce.acting("scheduler", dict(env.config)), pytest.raises(ClientError) as raised:
        ledger.claim("occurrence-1")
    assert action in raised.value.response["Error"]["Message"]


def test_without_the_key_policys_statement_every_use_of_the_key_is_refused(
    env: Env, keyed: enforce.Enforcement
) -> None:
    # GIVEN the roles granted the key, but a key policy that allows nobody (no account-root statement)
    with keyed.encrypted(KEYS, {TABLE_KEY: NO_STATEMENT, TARGET_KEY: DEFAULT}):
        error = _ledger_read(env).response
    assert error["Error"]["Message"].endswith("because no resource-based policy allows the kms:Decrypt action")


@pytest.mark.parametrize("action", ["kms:GenerateDataKey", "kms:Decrypt"])
def test_without_a_target_key_action_the_send_is_refused_and_parked_naming_kms_key_arn(
    env: Env, keyed: enforce.Enforcement, without: Any, long_running: None, action: str
) -> None:
    # GIVEN the function's role without one of the target key's actions
    without("TARGET_KEY_ACTIONS", action)
    env.put({"PK": "user#1", "SK": "now", "dueAt": iso(NOW - timedelta(minutes=5))})
    # WHEN the function sends the due item to the queue, SQS answers KMS.AccessDeniedException
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    # THEN nothing arrived, and the record is parked with a reason naming the option and the key
    assert delivered(env) == []
    (parked,) = env.messages(env.poison_url)
    assert parked["error"] == "KMS.AccessDeniedException"
    assert parked["reason"].startswith(f"set the target's kms_key_arn to '{TARGET_KEY}': KMS refused this role")
    assert f"{action} on resource: {TARGET_KEY}" in parked["reason"]


def test_a_target_key_the_component_was_not_told_is_parked_naming_kms_key_arn(
    env: Env, keyed: enforce.Enforcement, long_running: None
) -> None:
    # GIVEN a target encrypted with a key the component was not told of (no kms_key_arn): no role is granted it
    with keyed.encrypted(KEYS, POLICIES, told=Keys(table=TABLE_KEY)):
        env.put({"PK": "user#1", "SK": "now", "dueAt": iso(NOW - timedelta(minutes=5))})
        # WHEN the function sends the due item, SQS refuses (KMS.AccessDeniedException)
        assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    # THEN the record is parked with a reason that names the option to set and the key from AWS's message
    (parked,) = env.messages(env.poison_url)
    assert f"set the target's kms_key_arn to '{TARGET_KEY}'" in parked["reason"]
    assert "kms:GenerateDataKey" in parked["reason"]


def test_without_the_target_key_scheduler_cannot_fire(env: Env, keyed: enforce.Enforcement, without: Any) -> None:
    # GIVEN Scheduler's role without kms:GenerateDataKey on the target's key
    without("TARGET_KEY_ACTIONS", "kms:GenerateDataKey")
    env.put({"PK": "user#1", "SK": "later", "dueAt": iso(NOW + timedelta(days=2))})
    # WHEN the schedule is made, THEN AWS would refuse its firing: a violation, as the test's end would report
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert any(
        "Scheduler's execution role would be refused" in v and "kms:GenerateDataKey" in v for v in keyed.violations
    )
    keyed.violations.clear()


def test_an_event_bus_key_policy_must_allow_eventbridge_itself(env: Env, keyed: enforce.Enforcement) -> None:
    # GIVEN a bus encrypted with a key whose policy allows only the account (IAM), not events.amazonaws.com
    import boto3

    arn = boto3.client("events", region_name=REGION).create_event_bus(Name=f"bus-{env.table}")["EventBusArn"]
    env.configure(target=EventBusTarget(bus_arn=arn))
    env.put({"PK": "user#1", "SK": "now", "dueAt": iso(NOW - timedelta(minutes=5))})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    # THEN PutEvents succeeds for the caller, but EventBridge cannot encrypt the event: AWS drops it
    assert any("events.amazonaws.com could not use the key" in v for v in keyed.violations)
    keyed.violations.clear()
    # AND with the key policy's statement for EventBridge, the event goes through
    allowed = json.loads(DEFAULT)
    allowed["Statement"].append(
        {
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:SourceAccount": ACCOUNT}},
        }
    )
    with keyed.encrypted(KEYS, {TABLE_KEY: DEFAULT, TARGET_KEY: json.dumps(allowed)}):
        env.put({"PK": "user#1", "SK": "now2", "dueAt": iso(NOW - timedelta(minutes=5))})
        assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert not keyed.violations


def test_polling_publishes_batches_to_a_topic_with_its_key_and_not_without(
    env: Env, keyed: enforce.Enforcement, without: Any, long_running: None
) -> None:
    # GIVEN polling to a topic encrypted with the target's key: PublishBatch uses it as Publish does
    from tests.handlers.test_polling_batch import published, topic_target

    with_due_index(env)
    topic_target(env)
    counted = published()
    due = int(NOW.timestamp()) - 1
    for pk in ("job#1", "job#2"):
        env.put({"PK": pk, "SK": "T", "stShard": 0, "stDue": due, "stStatus": "PENDING"})
    assert polling.process(env.config, now=lambda: NOW.timestamp()).dispatched == 2
    assert sorted(m["keys"]["PK"] for m in delivered(env)) == ["job#1", "job#2"]
    assert counted["PublishBatch"] >= 1 and counted["Publish"] == 0 and not keyed.violations
    # WHEN the role lacks kms:GenerateDataKey on it, THEN SNS refuses the batch (KMSAccessDenied): both parked
    without("TARGET_KEY_ACTIONS", "kms:GenerateDataKey")
    for pk in ("job#3", "job#4"):
        env.put({"PK": pk, "SK": "T", "stShard": 0, "stDue": due, "stStatus": "PENDING"})
    assert polling.process(env.config, now=lambda: NOW.timestamp()).failed == 2
    assert delivered(env) == []


# -- each schedule's payload (the whole item) under the table's key --------------------------------------------------


def _payload_keyed(env: Env) -> None:
    """The configuration the component renders with `kms_key_arn`: schedules under the table's key."""
    env.names[Value.SCHEDULE_KEY_ARN] = TABLE_KEY
    env.configure(kms_key_arn=TABLE_KEY)


def test_a_schedules_payload_is_kept_under_the_tables_key_and_fires(env: Env, keyed: enforce.Enforcement) -> None:
    # GIVEN the table's key for schedules' payloads, and an item due in two days
    _payload_keyed(env)
    env.put({"PK": "user#1", "SK": "later", "dueAt": iso(NOW + timedelta(days=2))})
    # WHEN the batch is handled, THEN its schedule names the key (Scheduler encrypts it as the function, through
    # Scheduler: checked when it is made)
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert schedule["KmsKeyArn"] == TABLE_KEY
    # AND Scheduler's role reads it back when it fires (checked as it fires), and it arrives
    SchedulerClock(env).run(schedule)
    assert [m["keys"]["SK"] for m in delivered(env)] == ["later"]
    assert not keyed.violations


def test_a_precise_ttl_schedules_payload_is_kept_under_the_tables_key(env: Env, keyed: enforce.Enforcement) -> None:
    env.configure(mode="ttl", precise=True)
    _payload_keyed(env)
    env.put({"PK": "offer#2", "SK": "S", "dueAt": int((NOW + timedelta(days=2)).timestamp())})
    assert ttl.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    (schedule,) = env.schedules()
    assert schedule["KmsKeyArn"] == TABLE_KEY
    enforce.check_firing(roles.role_for(env.config, "scheduler-exec", KEYS), schedule, keyed.encryption(env.config))


def test_without_the_payload_grant_scheduler_refuses_the_schedule_and_the_record_is_parked(
    env: Env, keyed: enforce.Enforcement, monkeypatch: pytest.MonkeyPatch, long_running: None
) -> None:
    # GIVEN the scheduling function's role without its use of the table's key through Scheduler
    monkeypatch.setattr(policies, "schedule_writer_key_statements", lambda key, group: [])
    roles.rerender()
    try:
        _payload_keyed(env)
        env.put({"PK": "user#1", "SK": "later", "dueAt": iso(NOW + timedelta(days=2))})
        # WHEN the batch is handled, THEN CreateSchedule is refused the key: no schedule, the record is parked
        assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    finally:
        monkeypatch.undo()
        roles.rerender()
    assert env.schedules() == []
    (parked,) = env.messages(env.poison_url)
    assert parked["error"] == "AccessDeniedException" and f"on resource: {TABLE_KEY}" in parked["reason"], parked
