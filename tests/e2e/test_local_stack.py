"""The local stack, deployed by `localcloud` into ministack and driven by the demo's scenarios, observed only
through the emulator's APIs. Tests run in file order: scenarios, redeploy, then `down`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localcloud.deploy import Deployment, down, up
from localcloud.emulators import Emulators
from localcloud.scenarios import Outcome, run, scenarios, verify_sender
from localcloud.server import Ministack

from .conftest import snapshot


@pytest.fixture(scope="module")
def deployment(fresh_cloud: Ministack) -> Deployment:
    deployed = up(fresh_cloud.endpoint)
    verify_sender(deployed)
    return deployed


@pytest.fixture(scope="module")
def outcomes(deployment: Deployment) -> Iterator[dict[str, Outcome]]:
    with Emulators(deployment.endpoint, deployment.region):
        results = run(scenarios(deployment))
    yield {o.scenario.split()[0]: o for o in results}


def assert_exactly_once(outcome: Outcome) -> None:
    assert outcome.missing == [] and outcome.unexpected == [] and outcome.early == []
    assert outcome.duplicates == 0
    assert outcome.delivered == outcome.expected
    assert sum(outcome.dead_letters.values()) == 0, outcome.dead_letters


def test_every_email_reminder_arrives_once_and_the_cancelled_one_never(outcomes: dict[str, Outcome]) -> None:
    reminders = outcomes["reminders"]
    assert (reminders.written, reminders.expected) == (12, 11)
    assert_exactly_once(reminders)


def test_every_queued_task_arrives_once_within_the_scheduler_tick(outcomes: dict[str, Outcome]) -> None:
    tasks = outcomes["tasks"]
    assert tasks.expected == 10
    assert_exactly_once(tasks)
    # ministack's Scheduler sweeps every 10 s; anything later than that plus stream latency is a bug here.
    assert max(tasks.lateness) < 20


def test_deploy_creates_the_programs_resources_with_real_identifiers(deployment: Deployment) -> None:
    state = snapshot(deployment.endpoint)
    assert state["tables"] == ["reminders-table", "tasks-table"]
    assert state["functions"] == ["reminders-scheduler", "tasks-scheduler"]
    assert len(state["mappings"]) == 2
    assert state["schedule_groups"] == ["reminders-schedules", "tasks-schedules"]
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
    assert {k: v for k, v in state.items() if v} == {}
