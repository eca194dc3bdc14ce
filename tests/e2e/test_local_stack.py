"""The local stack, deployed by `localcloud` into ministack and driven by the demo's scenarios, observed only
through the emulator's APIs. Tests run in file order: scenarios, redeploy, then `down`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from localcloud.backlog import Backlog, Prefilled, prefill
from localcloud.deploy import Deployment, down, up
from localcloud.drift import self_repair
from localcloud.emulators import Emulators
from localcloud.provision import clients
from localcloud.scenarios import (
    MINUTE_SCHEDULE,
    TTL_DELAYS,
    Outcome,
    count_redeliveries,
    percentile,
    run,
    scenarios,
    verify_sender,
)
from localcloud.server import Ministack

from .conftest import snapshot

# A quarter of stream batches are delivered again later, whole or from a record on (as Lambda may): every
# scenario must still show its guarantee.
REDELIVER = 0.3


@pytest.fixture(scope="module")
def redelivering_cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ministack]:
    with Ministack(log_dir=tmp_path_factory.mktemp("ministack-redeliver"), redeliver=REDELIVER) as server:
        yield server


@pytest.fixture(scope="module")
def prefilled(redelivering_cloud: Ministack) -> Prefilled:
    """The table `backlog` filled, then its stream enabled, before the stack deploys (as `make demo` does)."""
    return prefill(redelivering_cloud.endpoint, "eu-west-1")


@pytest.fixture(scope="module")
def deployment(redelivering_cloud: Ministack, prefilled: Prefilled) -> Deployment:
    deployed = up(redelivering_cloud.endpoint)
    verify_sender(deployed)
    return deployed


@pytest.fixture(scope="module")
def emulated(
    deployment: Deployment, redelivering_cloud: Ministack, prefilled: Prefilled
) -> Iterator[tuple[dict[str, Outcome], Emulators]]:
    with Emulators(deployment.endpoint, deployment.region, ttl_delays=TTL_DELAYS) as emulators:
        results = run([*scenarios(deployment), Backlog(deployment, prefilled), self_repair(deployment)])
    count_redeliveries(results, redelivering_cloud.redelivered())
    yield {o.scenario.split()[0]: o for o in results}, emulators


def test_batches_were_redelivered_and_every_guarantee_held(outcomes: dict[str, Outcome]) -> None:
    assert sum(o.redelivered for o in outcomes.values()) > 0
    for outcome in outcomes.values():
        assert outcome.duplicates == 0 and outcome.missing == [] and outcome.early == [], outcome


@pytest.fixture(scope="module")
def outcomes(emulated: tuple[dict[str, Outcome], Emulators]) -> dict[str, Outcome]:
    return emulated[0]


def assert_exactly_once(outcome: Outcome) -> None:
    assert outcome.missing == [] and outcome.unexpected == [] and outcome.early == []
    assert outcome.duplicates == 0
    assert outcome.delivered == outcome.expected
    assert outcome.unexpected_dead_letters() == {}, outcome.dead_letters


def test_every_email_reminder_arrives_once_and_the_cancelled_one_never(outcomes: dict[str, Outcome]) -> None:
    reminders = outcomes["reminders"]
    assert (reminders.written, reminders.expected) == (12, 11)
    assert_exactly_once(reminders)


def test_every_queued_task_arrives_once_within_the_scheduler_tick(outcomes: dict[str, Outcome]) -> None:
    tasks = outcomes["tasks"]
    assert tasks.expected == 10
    assert_exactly_once(tasks)
    # The documented bound: the minute at or after the due time, anywhere in that minute: 120 s; 180 s when the
    # record is processed less than 10 s before that minute (on a loaded machine the stream lags, so that happens),
    # plus 20 s allowed for the stream and the local cloud's 1 s Scheduler sweep.
    assert max(tasks.lateness) < 200


def test_expired_sessions_fire_once_each_repeat_once_and_never_for_a_cancelled_or_bad_ttl(
    outcomes: dict[str, Outcome],
) -> None:
    sessions = outcomes["sessions"]
    # 8 sessions + 2 occurrences of the repeating one; 1 when the first arrived after the second was due (TTL and
    # stream lag on a loaded machine): the write-back skips occurrences already past, by design
    # (SessionsScenario._skip_a_repeat_already_past; a second that is lost otherwise stays expected: `missing`).
    assert sessions.written == 11 and sessions.expected in (9, 10)
    assert_exactly_once(sessions)
    assert sessions.dead_letters == {"stream_dlq": 0, "poison_queue": 0}


def test_precise_offers_are_deleted_by_their_schedules_and_park_the_bad_ttl_with_its_reason(
    emulated: tuple[dict[str, Outcome], Emulators], deployment: Deployment
) -> None:
    outcomes, emulators = emulated
    offers = outcomes["offers"]
    assert_exactly_once(offers)
    assert 1 <= offers.dead_letters["poison_queue"] <= 1 + offers.redelivered  # parked again if redelivered
    assert offers.dead_letters["target_dlq"] == 0  # no delete schedule ran after its item was gone
    # The local TTL service deletes this table's items 200 s after expiry; precise schedules delete within 180 s of
    # the due time, so (unless this machine stalls for 20 s) they, not TTL, remove the offers. Plain ttl
    # sessions all go through TTL.
    assert emulators.ttl.deleted["offers-table"] < offers.expected / 2
    assert emulators.ttl.deleted["sessions-table"] == outcomes["sessions"].expected
    sqs = clients(deployment.endpoint, deployment.region)("sqs")
    [message] = sqs.receive_message(QueueUrl=deployment.outputs["offers"]["poison_queue_url"])["Messages"]
    poison = json.loads(message["Body"])
    assert poison["record"]["dynamodb"]["Keys"]["PK"] == {"S": "BADTTL#1"} and "never expires" in poison["reason"]


def test_polling_jobs_run_once_each_whatever_their_time_format_and_the_timeless_one_is_parked(
    outcomes: dict[str, Outcome], deployment: Deployment
) -> None:
    jobs = outcomes["jobs"]
    assert (jobs.written, jobs.expected) == (12, 11)
    assert_exactly_once(jobs)
    sqs = clients(deployment.endpoint, deployment.region)("sqs")
    [message] = sqs.receive_message(QueueUrl=deployment.outputs["jobs"]["poison_queue_url"])["Messages"]
    assert "neither 'dueAt'" in json.loads(message["Body"])["reason"]
    table = clients(deployment.endpoint, deployment.region)("dynamodb").scan(TableName="jobs-table")["Items"]
    done = [i for i in table if i.get("stStatus", {}).get("S") == "DONE"]
    assert len(done) == 11 and not any("stShard" in i for i in done)


def test_score_totals_equal_the_sum_of_each_players_scores_and_the_bad_score_is_parked(
    outcomes: dict[str, Outcome], deployment: Deployment
) -> None:
    scores = outcomes["scores"]
    assert (scores.written, scores.expected, scores.delivered) == (201, 10, 10)
    assert_exactly_once(scores)
    sqs = clients(deployment.endpoint, deployment.region)("sqs")
    [message] = sqs.receive_message(QueueUrl=deployment.outputs["scores"]["poison_queue_url"])["Messages"]
    assert "not a number" in json.loads(message["Body"])["reason"]


def test_a_shared_existing_table_gets_zoned_reminders_two_offsets_a_weekly_cron_and_totals(
    outcomes: dict[str, Outcome],
) -> None:
    clinic = outcomes["clinic"]
    # The weekly cron (Asia/Kolkata), the appointment's two reminders (-60 s and at the time), two patients' totals;
    # each once, none early, every dueAt the UTC time Scheduler scheduled (checked as they arrive).
    assert (clinic.written, clinic.expected) == (7, 5)
    assert_exactly_once(clinic)


def test_flash_sales_arrive_once_each_at_their_second_and_never_before_it(outcomes: dict[str, Outcome]) -> None:
    flash = outcomes["flash"]
    # Twelve sales at odd seconds over two minutes: the first few straight into the release queue, the others
    # released by a schedule in the minute before (run anywhere in that minute); none before its second (no
    # tolerance: `early` counts a send even a millisecond before it).
    assert (flash.written, flash.expected) == (12, 12)
    assert_exactly_once(flash)
    assert min(flash.lateness) >= 0
    # Measured by `make demo` (docs/second-precision.md): SQS's whole-second delays, rounded to the nearest second,
    # and the local Lambda's invocation on a shared machine. The guarantee under test is the release path's: each sale
    # released at its second, not at a schedule's minute (which would be up to 60 s late). A loaded 2-core machine
    # adds one local Lambda cold start (seen: 11-14 s) to a single sale now and then, which is the emulator's speed,
    # not the design's: the median must be within 5 s and the worst under a minute (timings are measured by `make
    # demo` and `make bench`).
    p50 = percentile(flash.lateness, 0.5)
    assert p50 is not None and p50 < 5, flash.lateness
    assert max(flash.lateness) < 60, flash.lateness


def test_items_that_predate_the_stream_act_once_at_their_time_after_backfill_and_reconcile_repairs_drift(
    outcomes: dict[str, Outcome],
) -> None:
    # The `backlog` table was filled before its stream was on, so no record describes its items. The scenario
    # (localcloud/backlog.py) runs the operator's commands in the stack's backfill functions and checks each step's
    # counts as it goes: nothing acted before backfill; backfill fed the 3 past-due and 5 future items and set every
    # total; 3 schedules deleted by hand, found by a dry run that changed nothing, re-made by reconcile; 2 totals
    # corrupted, found and replaced; backfill again found all 8 already scheduled and acted on none. A wrong count, a
    # past-due item not sent within 30 s of backfill's end, or a total unequal to its orders: `unexpected`/`missing`.
    backlog = outcomes["backlog"]
    assert (backlog.written, backlog.expected) == (20, 8)
    assert_exactly_once(backlog)
    # The documented bound (180 s) plus 20 s for a loaded machine's stream and the local cloud's 1 s Scheduler sweep.
    assert max(backlog.lateness) < MINUTE_SCHEDULE.seconds + 20.0


def test_reconcile_run_by_its_rule_repairs_drift_made_by_hand_and_publishes_it(outcomes: dict[str, Outcome]) -> None:
    # The `drift` table sets reconcileEvery: the scenario (localcloud/drift.py) deletes a pending schedule, changes
    # the weekly schedule's rule and makes a stray schedule, then only fires the component's rule (as EventBridge
    # would). A pass must publish the drift it found and repaired (ReconcileMissing, ReconcileStray,
    # ReconcileRepaired, ReconcileDrift, from the function's log), a later pass none; the deleted schedule is back
    # under its own name, the rule is the item's again, the stray is gone and nothing was delivered.
    drift = outcomes["drift"]
    assert drift.written == 2
    assert drift.missing == [] and drift.unexpected == [] and drift.delivered == drift.duplicates == 0


def without_action(policy: dict[str, Any], action: str) -> dict[str, Any]:
    statements = []
    for statement in policy["Statement"]:
        actions = [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
        if action in actions:
            statement = {**statement, "Action": [a for a in actions if a != action]}
        if statement["Action"]:
            statements.append(statement)
    return {**policy, "Statement": statements}


def test_a_function_whose_role_loses_an_action_is_denied_and_parks_the_record_with_the_denial(
    emulated: tuple[dict[str, Outcome], Emulators], deployment: Deployment
) -> None:
    """IAM is enforced: the deployed scheduling function runs as its role. Without `scheduler:CreateSchedule` (the
    policy edited as a user might), its CreateSchedule is refused as on AWS, the item is parked with the denial as
    its reason, and no schedule is made. (The function retries a denial while its container is younger than 120 s,
    IAM's propagation window on AWS; after the scenarios it is older, so the denial parks at once.)"""
    aws = clients(deployment.endpoint, deployment.region)
    iam, outputs = aws("iam"), deployment.outputs["tasks"]
    role = aws("lambda").get_function_configuration(FunctionName="tasks-scheduler")["Role"].rsplit("/", 1)[-1]
    [(name, policy)] = [
        (n, p)
        for n in iam.list_role_policies(RoleName=role)["PolicyNames"]
        if "scheduler:CreateSchedule"
        in json.dumps(p := iam.get_role_policy(RoleName=role, PolicyName=n)["PolicyDocument"])
    ]
    before = aws("scheduler").list_schedules(GroupName="tasks-schedules")["Schedules"]
    iam.put_role_policy(
        RoleName=role, PolicyName=name, PolicyDocument=json.dumps(without_action(policy, "scheduler:CreateSchedule"))
    )
    try:
        due = datetime.fromtimestamp(time.time() + 900, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        aws("dynamodb").put_item(
            TableName=outputs["table_name"], Item={"PK": {"S": "DENIED#1"}, "SK": {"S": "TASK"}, "dueAt": {"S": due}}
        )
        parked: list[dict[str, Any]] = []
        deadline = time.monotonic() + 180
        while not parked and time.monotonic() < deadline:
            for message in aws("sqs").receive_message(QueueUrl=outputs["poison_queue_url"]).get("Messages", []):
                parked.append(json.loads(message["Body"]))
            time.sleep(0.5)
    finally:
        iam.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(policy))
    assert parked, "the denied record was not parked"
    assert parked[0]["record"]["dynamodb"]["Keys"]["PK"] == {"S": "DENIED#1"}
    assert parked[0]["error"] == "AccessDeniedException" and "scheduler:CreateSchedule" in parked[0]["reason"]
    assert aws("scheduler").list_schedules(GroupName="tasks-schedules")["Schedules"] == before


def test_deploy_creates_the_programs_resources_with_real_identifiers(deployment: Deployment) -> None:
    state = snapshot(deployment.endpoint)
    assert state["tables"] == [
        "backlog",  # not the stack's either (made first, like clinic)
        "backlog-ledger",
        "backlog-totals-ledger",
        "clinic",  # not the stack's: the local cloud made it first, as your own table would exist on AWS
        "clinic-ledger",
        "drift-ledger",
        "drift-table",
        "flash-ledger",
        "flash-table",
        "jobs-ledger",
        "jobs-table",
        "offers-ledger",
        "offers-table",
        "reminders-ledger",
        "reminders-table",
        "scores-ledger",
        "scores-table",
        "sessions-ledger",
        "sessions-table",
        "tasks-ledger",
        "tasks-table",
        "visits-ledger",
    ]
    assert state["ttl"]["sessions-table"] == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expiresAt"}
    assert state["functions"] == [
        "backlog-backfill",  # backfillFunction: true
        "backlog-scheduler",
        "backlog-totals-aggregator",
        "backlog-totals-backfill",
        "clinic-scheduler",
        "drift-backfill",  # reconcileEvery: the backfill function runs it
        "drift-scheduler",
        "flash-releaser",
        "flash-scheduler",
        "jobs-assigner",
        "jobs-processor",
        "offers-executor",
        "reminders-scheduler",
        "scores-aggregator",
        "sessions-executor",
        "tasks-scheduler",
        "visits-aggregator",
    ]
    assert len(state["mappings"]) == 13  # flash has two: its stream, and its release queue; backfill functions none
    release_queue = next(q for q in state["queues"] if q.endswith("/flash-release"))
    assert sum(m[0].endswith(":flash-releaser") and m[1].endswith(":flash-release") for m in state["mappings"]) == 1
    assert release_queue.startswith(deployment.endpoint)
    # The two components on `clinic` read its one stream, each through its own filter.
    assert sum(m[1] == deployment.outputs["clinic"]["stream_arn"] for m in state["mappings"]) == 2
    assert state["rules"] == ["drift-reconcile", "jobs-tick"]
    assert state["schedule_groups"] == [
        "backlog-schedules",
        "clinic-schedules",
        "drift-schedules",
        "flash-schedules",
        "offers-schedules",
        "reminders-schedules",
        "tasks-schedules",
    ]
    assert deployment.outputs["tasks"]["due_queue_url"].startswith(deployment.endpoint)


def test_deploying_twice_leaves_the_same_state(deployment: Deployment) -> None:
    before = snapshot(deployment.endpoint)
    again = up(deployment.endpoint)
    assert snapshot(deployment.endpoint) == before
    assert again.outputs == deployment.outputs


def test_down_removes_everything_the_stack_created(deployment: Deployment) -> None:
    removed = down(deployment.endpoint)
    assert len(removed) == len(deployment.resources)
    state = snapshot(deployment.endpoint)
    # What is left is the tables the stack acts on but does not own.
    assert {k: v for k, v in state.items() if v} == {
        "tables": ["backlog", "clinic"],
        "ttl": {"backlog": {"TimeToLiveStatus": "DISABLED"}, "clinic": {"TimeToLiveStatus": "DISABLED"}},
    }
