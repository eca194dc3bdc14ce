"""The backfill function's role (`backfill_function=True`, `reconcile_every`) is granted what the backfill modules'
code calls (handlers/backfill/*.py, found in the code as tests/iam/test_granted.py finds them) and nothing beyond the
consumer's kept statements: its own grants derive from each module's declaration per resource (`AWS_ACTIONS_ON`),
so a declaration that loses an action loses the grant, and this test names it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from components.backfill_function import STREAM_ACTIONS
from tests.iam import requests
from tests.iam.roles import Options, args_of
from tests.iam.test_granted import allowed_actions, allows, client_operations, module_files

RECONCILE_EVERY = "rate(1 day)"
CONSUMER = {"eventbridge": "scheduler", "ttl": "executor", "polling": "assigner", "aggregate": "aggregator"}
TABLE = "arn:aws:dynamodb:eu-west-1:123456789012:table/"
# (module, action) -> (when the backfill function never takes the path that calls it, why).
NOT_TAKEN: dict[tuple[str, str], tuple[Callable[[Options], bool], str]] = {
    **{
        ("backfill.timed", a): (lambda o: True, "the backfilled marker is the operator's (cli/backfill.py)")
        for a in ("dynamodb:GetItem", "dynamodb:PutItem")
    },
    **{
        ("backfill.totals", a): (lambda o: o.mode != "aggregate", "only aggregate's totals are settled")
        for a in ("dynamodb:GetItem", "dynamodb:UpdateItem")
    },
    ("backfill.timed", "scheduler:GetSchedule"): (lambda o: not timed(o), "only the modes that make schedules"),
    ("backfill.sweep", "scheduler:ListSchedules"): (lambda o: not timed(o), "only the modes that make schedules"),
}
OPTIONS = (
    Options(mode="eventbridge", kind="sqs"),
    Options(mode="ttl", kind="sqs", precise=True),
    Options(mode="ttl", kind="sqs"),
    Options(mode="polling", kind="sqs"),
    Options(mode="aggregate", kind="none"),
)


def timed(options: Options) -> bool:
    return options.mode == "eventbridge" or options.precise


def rendered_documents(options: Options) -> dict[str, dict[str, object]]:
    """The consumer's and the backfill function's policy documents, as the component renders them with the backfill
    function and `reconcile_every` on."""
    from components import ScheduledTable, ScheduledTableArgs
    from components.testing import run_with_mocks

    args = {**args_of(options), "backfill_function": True, "reconcile_every": RECONCILE_EVERY}
    stack = run_with_mocks(lambda: ScheduledTable("st", ScheduledTableArgs(**args)), region="eu-west-1")
    documents: dict[str, dict[str, object]] = {}
    for r in stack.resources:
        if r.type.endswith(":RolePolicy"):  # a role's further policies (`{role}-policy-{what}`) join its main one
            role = r.name.removeprefix("st-").partition("-policy")[0]
            statements = json.loads(str(r.inputs["policy"]))["Statement"]
            documents.setdefault(role, {"Statement": []})["Statement"] += statements
    return {"backfill": documents["backfill"], "consumer": documents[CONSUMER[options.mode]]}


def backfill_modules() -> dict[str, Path]:
    """The backfill package's modules (`backfill`, `backfill.<part>`) -> file, found in the handlers folder as
    tests/iam/test_granted.py finds every handler module (not by the component's own list, which is under test)."""
    return {name: path for name, path in module_files().items() if name.partition(".")[0] == "backfill"}


def called(options: Options) -> set[str]:
    """What the backfill modules' code calls (their boto3 calls, found in the code) on the function's paths."""
    found = set()
    for name, path in backfill_modules().items():
        for service, operation in client_operations(path):
            action = requests.action_of(service, operation)
            skip = NOT_TAKEN.get((name, action))
            if not (skip and skip[0](options)):
                found.add(action)
    return found


def problems(options: Options) -> list[str]:
    """What is wrong with the backfill role for `options`: a call of the modules not granted, a grant beyond them and
    the consumer's kept statements."""
    documents = rendered_documents(options)
    granted = allowed_actions(documents["backfill"])
    consumer = {a for a in allowed_actions(documents["consumer"]) if a not in STREAM_ACTIONS}
    expected = called(options)
    found = [f"the backfill role is not granted {a}, which its code calls" for a in sorted(expected - set(granted))]
    excess = {a for a in granted if not allows(sorted(expected | consumer | {"logs:*"}), a)}
    found += [f"the backfill role is granted {a}, which no code of it calls" for a in sorted(excess)]
    return found


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: f"{o.mode}{'-precise' if o.precise else ''}")
def test_the_backfill_role_is_granted_what_its_modules_call_and_nothing_more(options: Options) -> None:
    assert problems(options) == []


@pytest.fixture
def scan_declares_nothing() -> Iterator[None]:
    """handlers/backfill/scan.py with its declaration emptied (its code still scans)."""
    import backfill.scan

    declared = backfill.scan.AWS_ACTIONS_ON
    backfill.scan.AWS_ACTIONS_ON = {}
    yield
    backfill.scan.AWS_ACTIONS_ON = declared


def test_a_module_that_stops_declaring_an_action_fails_the_check(scan_declares_nothing: None) -> None:
    # GIVEN backfill.scan no longer declaring its Scan on the table, WHEN the role is rendered and checked
    found = problems(OPTIONS[0])
    # THEN the scan is not granted, and the check says so
    assert found == ["the backfill role is not granted dynamodb:Scan, which its code calls"]


def test_each_declared_action_is_granted_on_its_own_resource() -> None:
    """The scan and the reads on the table, the checkpoint in the ledger, the schedules' lookup on the group's."""
    statements = rendered_documents(OPTIONS[0])["backfill"]["Statement"]
    assert isinstance(statements, list)

    def resources(action: str) -> list[str]:
        return sorted({r for s in statements if action in s["Action"] for r in s["Resource"]})

    (table,) = resources("dynamodb:Scan")
    assert table.startswith(TABLE) and "/" not in table.removeprefix(TABLE)
    assert resources("dynamodb:BatchGetItem") == [table]
    assert [r.rsplit("/", 1)[0] for r in resources("scheduler:GetSchedule")] == [
        r.rsplit("/", 1)[0] for r in resources("scheduler:CreateSchedule")
    ]
    assert resources("scheduler:ListSchedules") == ["*"]
    checkpoint = [r for r in resources("dynamodb:PutItem") if r != table]
    assert len(checkpoint) == 1 and "ledger" in checkpoint[0], checkpoint


def test_every_resource_a_module_names_is_one_the_policies_map() -> None:
    """A module naming a resource the backfill function's and the operator's policies do not know fails here, not
    silently in a policy without it."""
    import backfill.resources

    from components.backfill_function import declared
    from components.cli.permissions import ENGINE_ON

    assert set(declared()) <= set(backfill.resources.RESOURCES)
    assert set(ENGINE_ON) <= set(backfill.resources.RESOURCES)
    assert set(backfill.resources.RESOURCES) - set(ENGINE_ON) == {backfill.resources.CHECKPOINT}
