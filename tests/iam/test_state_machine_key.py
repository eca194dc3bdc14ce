"""A Step Functions state machine encrypted with a customer managed key (`StateMachineTarget(kms_key_arn=...)`):
starting an execution encrypts its input with a data key of that key (Step Functions API reference,
EncryptionConfiguration: it calls GenerateDataKey, and reuses the data key for `kmsDataKeyReusePeriodSeconds`), so
whoever calls StartExecution, the function sending now or Scheduler's role firing a schedule, needs the key's use
(st_core/target_types/stepfunctions.py KMS_ACTIONS) from its own policy and the key policy. Checked under the
handler tests' enforcement (tests/iam/enforce.py), which models the key use (tests/iam/requests.py KEY_ACTIONS).

Before: the model had no key use for StartExecution, so a role without the grant started executions here and
would be refused on AWS; the option sets with keys did not include the state machine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import boto3
import eventbridge
import pytest

from components import policies
from components.targets import StateMachineTarget
from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT, Env
from tests.handlers.conftest import _iam as _iam  # every handler call enforced, as in the handler tests
from tests.handlers.conftest import env as env  # the moto env
from tests.iam import enforce, requests, roles
from tests.iam.roles import Keys

KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/3333cccc-33cc-33cc-33cc-333333cccccc"
NOW = datetime.now(UTC).replace(microsecond=0)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_starting_an_execution_of_an_encrypted_state_machine_uses_its_key() -> None:
    machine = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:flow"
    encryption = requests.Encryption(((machine, KEY),), ((KEY, requests.default_key_policy(ACCOUNT)),))

    uses = requests.key_uses([requests.Request("states:StartExecution", machine)], encryption)

    assert {u.request.action for u in uses} == {"kms:GenerateDataKey", "kms:Decrypt"}
    assert {u.request.resource for u in uses} == {KEY} and all(u.service is None for u in uses)


@pytest.fixture
def machine(env: Env, _iam: enforce.Enforcement) -> Iterator[str]:
    """The target: a state machine (moto), encrypted with KEY under AWS's default key policy; the component told."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    definition = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
    arn = str(
        sfn.create_state_machine(
            name=f"flow-{env.table}", definition=definition, roleArn=f"arn:aws:iam::{ACCOUNT}:role/r"
        )["stateMachineArn"]
    )
    env.configure(target=StateMachineTarget(state_machine_arn=arn))
    with _iam.encrypted(Keys(target=KEY), {KEY: requests.default_key_policy(ACCOUNT)}):
        yield arn


def executions(arn: str) -> list[str]:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    return [e["name"] for e in sfn.list_executions(stateMachineArn=arn)["executions"]]


def test_a_state_machine_with_its_key_is_started_now_and_scheduler_may_start_it(
    env: Env, machine: str, _iam: enforce.Enforcement
) -> None:
    # GIVEN one item due now (the function starts the execution) and one in two days (a schedule)
    env.put({"PK": "user#1", "SK": "now", "dueAt": iso(NOW - timedelta(minutes=5))})
    env.put({"PK": "user#1", "SK": "later", "dueAt": iso(NOW + timedelta(days=2))})
    # WHEN the batch is handled with the roles the component renders for the state machine's key
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    # THEN the execution started, the schedule was made, and Scheduler's role may start it (checked when made)
    assert len(executions(machine)) == 1 and len(env.schedules()) == 1
    role = roles.role_for(env.config, "scheduler-exec", Keys(target=KEY))
    granted = [s for s in role.document["Statement"] if s["Resource"] in (KEY, [KEY])]
    assert [sorted(s["Action"]) for s in granted] == [["kms:Decrypt", "kms:GenerateDataKey"]]
    assert _iam.calls and not _iam.violations


@pytest.fixture
def without_generate(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The roles rendered with the state machine kind's KMS_ACTIONS less kms:GenerateDataKey; a container past
    IAM's propagation window (a refusal is parked, not retried)."""
    import st_core.errors

    declared = policies.target_type

    def fewer(kind: str) -> Any:
        found = declared(kind)
        kept = tuple(a for a in found.KMS_ACTIONS if a != "kms:GenerateDataKey")
        return SimpleNamespace(**{**vars(found), "KMS_ACTIONS": kept})

    monkeypatch.setattr(policies, "target_type", fewer)
    monkeypatch.setattr(st_core.errors, "container_age", lambda: 600.0)
    roles.rerender()
    yield
    monkeypatch.undo()
    roles.rerender()


def test_without_the_keys_generate_data_key_the_start_is_refused_and_parked_and_scheduler_could_not(
    env: Env, machine: str, without_generate: None, _iam: enforce.Enforcement
) -> None:
    env.put({"PK": "user#1", "SK": "now", "dueAt": iso(NOW - timedelta(minutes=5))})
    env.put({"PK": "user#1", "SK": "later", "dueAt": iso(NOW + timedelta(days=2))})

    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}

    assert executions(machine) == []
    (parked,) = env.messages(env.poison_url)
    assert parked["error"] == "KmsAccessDeniedException"
    assert parked["reason"].startswith(f"set the target's kms_key_arn to '{KEY}'")
    assert f"kms:GenerateDataKey on resource: {KEY}" in parked["reason"]
    assert any(
        "Scheduler's execution role would be refused" in v and "kms:GenerateDataKey" in v for v in _iam.violations
    )
    _iam.violations.clear()
