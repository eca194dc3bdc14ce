"""st_core/idempotency.py on its own, against moto: the ledger's claim, lease, completion, schedule markers and the
record-level marker, each transition and the ones it must refuse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from st_core.clients import Clients
from st_core.errors import TransientError
from st_core.idempotency import DONE, PENDING, SCHEDULED, Ledger, marker_put, record_digest

from components import ScheduledTableArgs
from components.runtime_config import Value
from components.targets import QueueTarget
from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT
from tests.iam.enforce import acting
from tests.support.handler_config import handler_config

NOW = 1_800_000_000.0
# The ledger as the eventbridge scheduling function uses it (the one role that also writes schedule markers in
# batches): every call below is made as that role, against the policy the component renders for it.
CONFIG = handler_config(
    ScheduledTableArgs(mode="eventbridge", target=QueueTarget(f"arn:aws:sqs:{REGION}:{ACCOUNT}:due")),
    {
        Value.TABLE: "items",
        Value.POISON_QUEUE_URL: f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/poison",
        Value.SCHEDULE_GROUP: "group",
        Value.SCHEDULER_ROLE_ARN: f"arn:aws:iam::{ACCOUNT}:role/scheduler",
        Value.TARGET_DLQ_ARN: f"arn:aws:sqs:{REGION}:{ACCOUNT}:tdlq",
        Value.LEDGER_TABLE: "ledger",
    },
)


@pytest.fixture
def ledger() -> Iterator[Ledger]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        ddb.create_table(
            TableName="ledger",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        clients = Clients()
        clients.override("dynamodb", ddb)
        with acting("scheduler", CONFIG):
            yield Ledger("ledger", clients=clients, lease_seconds=90, window_seconds=3600)


def item(ledger: Ledger, occurrence: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = (
        ledger.clients.get("dynamodb").get_item(TableName="ledger", Key={"id": {"S": occurrence}}).get("Item")
    )
    return found


def test_the_first_claim_wins_with_a_lease_and_an_expiry(ledger: Ledger) -> None:
    assert ledger.claim("o1", NOW) is True
    stored = item(ledger, "o1") or {}
    assert stored["status"] == {"S": PENDING}
    assert stored["leaseUntil"] == {"N": str(int(NOW) + 90)} and stored["expiresAt"] == {"N": str(int(NOW) + 3600)}


def test_a_claim_under_a_live_lease_is_retried_later_not_taken(ledger: Ledger) -> None:
    ledger.claim("o1", NOW)
    with pytest.raises(TransientError):
        ledger.claim("o1", NOW + 89)


def test_a_claim_whose_lease_ran_out_is_taken_over(ledger: Ledger) -> None:
    """A crash between the action and `complete`: after the lease, the retry runs the action again."""
    ledger.claim("o1", NOW)
    assert ledger.claim("o1", NOW + 91) is True


def test_a_completed_occurrence_is_never_claimed_again(ledger: Ledger) -> None:
    ledger.claim("o1", NOW)
    ledger.complete("o1")
    assert (item(ledger, "o1") or {})["status"] == {"S": DONE}
    assert ledger.claim("o1", NOW + 10_000) is False
    assert ledger.taken("o1")


def test_release_lets_the_retry_claim_at_once(ledger: Ledger) -> None:
    ledger.claim("o1", NOW)
    ledger.release("o1")
    assert ledger.claim("o1", NOW + 1) is True


def test_a_scheduled_occurrence_belongs_to_its_schedule_unless_taken_over(ledger: Ledger) -> None:
    ledger.scheduled_many([("o1", NOW + 60)])
    assert (item(ledger, "o1") or {})["status"] == {"S": SCHEDULED}
    assert ledger.taken("o1")
    assert ledger.claim("o1", NOW) is False  # a direct delivery leaves it to the schedule
    assert ledger.claim("o1", NOW, take_over_scheduled=True) is True  # the schedule's own delivery


def test_markers_go_25_to_a_request_and_expire_after_their_firing(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ddb = ledger.clients.get("dynamodb")
    sizes: list[int] = []
    real = ddb.batch_write_item

    def counted(**kwargs: Any) -> Any:
        sizes.append(len(kwargs["RequestItems"]["ledger"]))
        return real(**kwargs)

    monkeypatch.setattr(ddb, "batch_write_item", counted)
    # 60 markers, one named twice: the later firing wins (a batch may not name an item twice).
    markers = [(f"o{i}", NOW + i) for i in range(59)] + [("o0", NOW + 500)]
    ledger.scheduled_many(markers)
    assert sizes == [25, 25, 9]
    assert (item(ledger, "o0") or {})["expiresAt"] == {"N": str(int(NOW) + 500 + 3600)}


def test_unprocessed_markers_are_sent_again_and_reported_if_they_never_go(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    ddb = ledger.clients.get("dynamodb")
    monkeypatch.setattr("st_core.idempotency.time.sleep", lambda _: None)
    calls: list[int] = []

    def never(**kwargs: Any) -> Any:
        calls.append(1)
        return {"UnprocessedItems": kwargs["RequestItems"]}

    monkeypatch.setattr(ddb, "batch_write_item", never)
    with pytest.raises(TransientError, match="1 schedule marker"):
        ledger.scheduled_many([("o1", NOW)])
    assert len(calls) == 5


def test_unschedule_removes_a_marker_but_never_a_done_occurrence(ledger: Ledger) -> None:
    ledger.scheduled_many([("o1", NOW)])
    ledger.unschedule("o1")
    assert item(ledger, "o1") is None
    ledger.claim("o2", NOW)
    ledger.complete("o2")
    ledger.unschedule("o2")  # a cancel after delivery: the record of that delivery stays
    assert (item(ledger, "o2") or {})["status"] == {"S": DONE}
    ledger.unschedule("never-there")  # nothing to do, no error


def test_a_record_marker_is_written_once(ledger: Ledger) -> None:
    ddb = ledger.clients.get("dynamodb")
    put = marker_put("ledger", "rec#1", int(NOW))
    ddb.transact_write_items(TransactItems=[put])
    with pytest.raises(ddb.exceptions.TransactionCanceledException):
        ddb.transact_write_items(TransactItems=[put])


def test_a_records_digest_is_stable_short_and_scoped() -> None:
    assert record_digest("e1", "total#a") == record_digest("e1", "total#a")
    assert len(record_digest("e1", "total#a")) == 6
    assert record_digest("e1", "total#a") != record_digest("e1", "total#b")


def calls_made(ledger: Ledger) -> list[str]:
    """The DynamoDB operations the ledger's client makes from now on, in order (botocore's own event, so every
    call counts, whatever method made it)."""
    made: list[str] = []
    ddb = ledger.clients.get("dynamodb")
    ddb.meta.events.register("before-call.dynamodb.*", lambda model, **_: made.append(model.name))
    return made


@pytest.mark.parametrize("holder", ["done", "scheduled", "live-lease"])
def test_a_refused_claim_reads_the_winner_in_the_same_call(ledger: Ledger, holder: str) -> None:
    """The refused PutItem returns the item that refused it (`ReturnValuesOnConditionCheckFailure=ALL_OLD`, no
    extra cost), so the failure path is one call, not a PutItem and a GetItem."""
    if holder == "scheduled":
        ledger.scheduled_many([("o1", NOW + 60)])
    else:
        ledger.claim("o1", NOW)
        if holder == "done":
            ledger.complete("o1")
    made = calls_made(ledger)
    if holder == "live-lease":
        with pytest.raises(TransientError):
            ledger.claim("o1", NOW + 1)
    else:
        assert ledger.claim("o1", NOW + 1) is False
    assert made == ["PutItem"]
