"""Another account's table (issue 37.3): a stack deploying in one account onto a table of another, given by its
stream ARN. What is the deploying account's comes from it (Scheduler's trust condition, the SES identities); what is
the table's account's (the table, its stream) from the table. Every mode's calls on that table, and Scheduler
assuming its role, are evaluated as AWS would: the roles' policies by ministack's evaluator, the trust policy by the
local cloud's (as `service_session` evaluates it when Scheduler assumes a role)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ministack.core.iam_evaluator import parse_policy_document

from localcloud.iam import SCHEDULER_PRINCIPAL, _trusts
from tests.iam import enforce, requests
from tests.iam.roles import ACCOUNT, Role

OTHER = "210987654321"
TABLE = f"arn:aws:dynamodb:eu-west-1:{OTHER}:table/orders"
STREAM = f"{TABLE}/stream/2026-11-01T00:00:00.000"
# Each mode's stream consumer, what it does on the table, and whether Scheduler has a role.
MODES: dict[str, tuple[dict[str, Any], str, list[str], bool]] = {
    "ttl-precise": ({"mode": "ttl", "precise": True, "time_attribute": "expiresAt"}, "executor", ["DeleteItem"], True),
    "polling": ({"mode": "polling"}, "assigner", ["UpdateItem"], False),
    "aggregate": ({"mode": "aggregate"}, "aggregator", ["UpdateItem"], False),
}


def _built(args: dict[str, Any]) -> Any:
    from components import ExistingTable, ScheduledTable, ScheduledTableArgs
    from components.testing import run_with_mocks

    given = ExistingTable(name="orders", stream_arn=STREAM)
    return run_with_mocks(
        lambda: ScheduledTable("st", ScheduledTableArgs(existing_table=given, alarms=False, **args)),
        project="scheduled-table",
        stack="iam",
        account=ACCOUNT,
    )


def _role(stack: Any, name: str) -> Role:
    (policy,) = [r for r in stack.resources if r.name == f"st-{name}-policy"]
    document = json.loads(str(policy.inputs["policy"]))
    arn = f"arn:aws:iam::{ACCOUNT}:role/st-{name}-role"
    return Role(name, arn, f"st-{name}", document, tuple(parse_policy_document(document)))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_modes_calls_on_another_accounts_table_are_allowed_and_scheduler_may_assume_its_role(mode: str) -> None:
    args, consumer, writes, scheduled = MODES[mode]
    stack = _built(args)
    role = _role(stack, consumer)
    # The mapping reads the other account's stream with the consumer's role, and the consumer writes its table
    actions = ("DescribeStream", "GetShardIterator", "GetRecords", "ListStreams")
    reads = [requests.Request(f"dynamodb:{a}", STREAM) for a in actions]
    enforce.check(role, reads + [requests.Request(f"dynamodb:{a}", TABLE) for a in writes])
    if scheduled:
        # Scheduler assumes its role on behalf of the deploying account (its schedules are that account's): allowed;
        # on behalf of the table's account, as the role trusted before, it would not be
        (trust_role,) = [r for r in stack.resources if r.name == "st-scheduler-exec-role"]
        trust = trust_role.inputs["assumeRolePolicy"]
        assert _trusts(trust, SCHEDULER_PRINCIPAL, {"aws:SourceAccount": ACCOUNT})
        assert not _trusts(trust, SCHEDULER_PRINCIPAL, {"aws:SourceAccount": OTHER})
        # and, so assumed, fires the item on the other account's table
        enforce.check(_role(stack, "scheduler-exec"), [requests.Request("dynamodb:UpdateItem", TABLE)])


# What each stream consumer does with the ledger (in the deploying account) when the table is another account's: no
# transaction may hold items of both, so the polling assigner reads its marker before writing it, and aggregate's
# ledger path reads and puts its markers in batches.
LEDGER_CALLS = {
    "polling": ("assigner", ["GetItem", "PutItem"]),
    "aggregate": ("aggregator", ["BatchGetItem", "BatchWriteItem", "PutItem"]),
}


@pytest.mark.parametrize("mode", sorted(LEDGER_CALLS))
def test_on_another_accounts_table_the_consumer_reads_and_writes_its_markers_in_the_ledger(mode: str) -> None:
    stack = _built({"mode": mode})
    role, actions = LEDGER_CALLS[mode]
    (ledger,) = [r for r in stack.resources if r.name == "st-ledger"]
    enforce.check(_role(stack, role), [requests.Request(f"dynamodb:{a}", str(ledger.outputs["arn"])) for a in actions])
