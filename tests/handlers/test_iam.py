"""IAM enforcement in the handler tests can fail, and fails as AWS fails: a role the component renders without an
action the handler calls makes the call raise AccessDeniedException (HTTP 400 from DynamoDB, AWS's message), and
the batch does not go through."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import eventbridge
import pytest
from botocore.exceptions import ClientError
from st_core.clients import CLIENTS
from st_core.idempotency import Ledger

from components import policies
from tests.handlers.conftest import ACCOUNT, Env
from tests.iam import enforce, roles

FUTURE = datetime.now(UTC) + timedelta(days=2)


def _ledger_without_batch_writes(ledger_arn: str, *, batch_markers: bool = False) -> list[policies.Statement]:
    """components/policies.py `ledger_statements` as it was before ce344d7: the four item actions, whatever the
    function does with the ledger."""
    return policies.table_item_statements(ledger_arn, ["DeleteItem", "GetItem", "PutItem", "UpdateItem"])


@pytest.fixture
def before_ce344d7(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The component as it was: the scheduling role without dynamodb:BatchWriteItem on the ledger."""
    monkeypatch.setattr(policies, "ledger_statements", _ledger_without_batch_writes)
    roles.rerender()
    yield
    monkeypatch.undo()
    roles.rerender()


def test_the_scheduling_role_is_granted_batch_writes_and_the_batch_goes_through(env: Env) -> None:
    env.put({"PK": "user#1", "SK": "appt#1", "dueAt": FUTURE.isoformat()})
    assert eventbridge.handle_batch(env.event(), env.config) == {"batchItemFailures": []}
    assert len(env.schedules()) == 1


def test_without_batch_writes_the_marker_write_is_refused_as_aws_refuses_it(env: Env, before_ce344d7: None) -> None:
    # GIVEN the scheduling role as rendered before ce344d7 (PutItem on the ledger, no BatchWriteItem)
    config: dict[str, Any] = dict(env.config)
    role = roles.role_for(config, "scheduler")
    ledger = Ledger(env.config["eventbridge"]["ledgerTable"], clients=CLIENTS, lease_seconds=90, window_seconds=60)
    # WHEN the scheduling function writes its batch's schedule markers
    with enforce.acting("scheduler", config), pytest.raises(ClientError) as raised:
        ledger.scheduled_many([("occurrence-1", 1_800_000_000.0)])
    # THEN DynamoDB's answer to an unauthorized call: 400 AccessDeniedException, naming the role's session
    error = raised.value.response
    assert error["Error"]["Code"] == "AccessDeniedException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    ledger_arn = f"arn:aws:dynamodb:eu-west-1:{ACCOUNT}:table/{env.config['eventbridge']['ledgerTable']}"
    assert error["Error"]["Message"] == (
        f"User: arn:aws:sts::{ACCOUNT}:assumed-role/{role.arn.rsplit('/', 1)[-1]}/{role.session} is not authorized "
        f"to perform: dynamodb:BatchWriteItem on resource: {ledger_arn} because no identity-based policy allows the "
        "dynamodb:BatchWriteItem action"
    )


@pytest.mark.parametrize("container_age", [5.0, 600.0], ids=["just-deployed", "long-running"])
def test_without_batch_writes_the_eventbridge_batch_fails(
    env: Env, before_ce344d7: None, monkeypatch: pytest.MonkeyPatch, container_age: float
) -> None:
    # GIVEN the scheduling role as rendered before ce344d7, and an item due in two days
    import st_core.errors

    monkeypatch.setattr(st_core.errors, "container_age", lambda: container_age)
    env.put({"PK": "user#1", "SK": "appt#1", "dueAt": FUTURE.isoformat()})
    if container_age < st_core.errors.IAM_PROPAGATION_SECONDS:
        # WHEN a just-deployed container handles the batch: the denial may be IAM still propagating
        response = eventbridge.handle_batch(env.event(), env.config)
        # THEN the record is retried from (Lambda sends it again), nothing parked
        assert response["batchItemFailures"] and env.messages(env.poison_url) == []
    else:
        # WHEN a container past IAM's propagation handles it: the schedule is made, its marker refused for good
        with pytest.raises(ClientError) as raised:
            eventbridge.handle_batch(env.event(), env.config)
        # THEN the invocation fails with AWS's denial: Lambda retries the whole batch, then sends it to the stream
        # DLQ (`redrive stream`); a schedule is never remembered without its marker, and no record is lost
        assert raised.value.response["Error"]["Code"] == "AccessDeniedException"


def test_a_handler_call_with_no_function_acting_fails_the_test(env: Env, _iam: enforce.Enforcement) -> None:
    ledger = Ledger(env.config["eventbridge"]["ledgerTable"], clients=CLIENTS, lease_seconds=90, window_seconds=60)
    with pytest.raises(AssertionError, match=r"dynamodb.GetItem with no function acting"):
        ledger._status("occurrence-1")
    assert _iam.violations  # reported at the test's end even where a handler would catch the error
    _iam.violations.clear()


def test_a_call_a_module_does_not_declare_is_a_violation(env: Env, _iam: enforce.Enforcement) -> None:
    # GIVEN the ledger module declaring one action less than it calls
    import st_core.idempotency as idempotency

    declared = idempotency.AWS_ACTIONS
    idempotency.AWS_ACTIONS = tuple(a for a in declared if a != "dynamodb:GetItem")  # type: ignore[assignment]
    try:
        ledger = Ledger(env.config["eventbridge"]["ledgerTable"], clients=CLIENTS, lease_seconds=90, window_seconds=60)
        with enforce.acting("scheduler", dict(env.config)):
            ledger._status("occurrence-1")
    finally:
        idempotency.AWS_ACTIONS = declared
    assert any("does not declare it in its AWS_ACTIONS" in v for v in _iam.violations)
    _iam.violations.clear()


def test_a_schedule_scheduler_could_not_fire_is_a_violation(env: Env, _iam: enforce.Enforcement) -> None:
    # GIVEN a target the Scheduler role is not granted (another queue than the configured target)
    env.config["target"] = {"kind": "sqs", "arn": f"arn:aws:sqs:eu-west-1:{ACCOUNT}:not-the-target"}
    scheduler = roles.role_for(dict(env.config), "scheduler-exec")
    schedule = {"Name": "s", "Target": {"Arn": env.due_queue_arn, "RoleArn": scheduler.arn}}
    enforce.STATE.acting.append(enforce.resolve("scheduler", dict(env.config)))
    try:
        enforce._check_firing(enforce.STATE.acting[-1].scheduler, schedule, enforce.STATE.acting[-1].encryption)
    finally:
        enforce.STATE.acting.pop()
    assert any("Scheduler's execution role would be refused" in v for v in _iam.violations)
    _iam.violations.clear()


# -- issue 37.8: the mapping's reads and its on-failure send are checked as the function's role -----------------------


@pytest.fixture
def rendered_without(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Render the stream consumers' roles without one of the mapping's grants: a stream read action, or the send
    to the stream DLQ (the on-failure destination)."""
    original = policies.stream_consumer_statements

    def remove(grant: str) -> None:
        def without(**kwargs: Any) -> list[policies.Statement]:
            if grant == "stream DLQ send":
                kwargs["send_queue_arns"] = kwargs["send_queue_arns"][1:]  # [stream DLQ, poison queue]
            statements = original(**kwargs)
            for statement in statements:
                statement["Action"] = [a for a in statement["Action"] if a != grant]
            return statements

        monkeypatch.setattr(policies, "stream_consumer_statements", without)
        roles.rerender()

    yield remove
    monkeypatch.undo()
    roles.rerender()


@pytest.mark.parametrize(
    ("grant", "refused"),
    [
        ("dynamodb:DescribeStream", "dynamodb:DescribeStream"),
        ("dynamodb:GetShardIterator", "dynamodb:GetShardIterator"),
        ("dynamodb:GetRecords", "dynamodb:GetRecords"),
        ("dynamodb:ListStreams", "dynamodb:ListStreams"),
        ("stream DLQ send", "sqs:SendMessage"),
    ],
)
def test_without_any_one_of_the_mappings_grants_its_batch_is_refused(
    env: Env, _iam: enforce.Enforcement, rendered_without: Any, grant: str, refused: str
) -> None:
    # GIVEN the consumer's role rendered without one grant its event source mapping uses
    rendered_without(grant)
    env.put({"PK": "user#1", "SK": "appt#1", "dueAt": FUTURE.isoformat()})
    # WHEN Lambda's mapping hands the function a batch
    eventbridge.handle_batch(env.event(), env.config)
    # THEN AWS would have refused the mapping that action with the function's role
    mapping = [v for v in _iam.violations if "event source mapping would be refused" in v]
    assert mapping and f"perform: {refused} on resource:" in mapping[0], _iam.violations
    if grant == "stream DLQ send":
        assert "stream-dlq" in mapping[0]
    _iam.violations.clear()
