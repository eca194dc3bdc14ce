"""Which tables of a DynamoDB request are another account's, and where the local cloud's stores find them
(localcloud/accounts.py): pure, no ministack."""

from __future__ import annotations

from localcloud.accounts import arn_scope, foreign_tables, owner_scope, transaction_scope_problem

HOME = "000000000000"
OTHER = "222222222222"
SCORES = f"arn:aws:dynamodb:eu-west-1:{OTHER}:table/scores"


def test_a_table_index_or_stream_arn_names_its_account_region_and_table() -> None:
    assert arn_scope(SCORES) == (OTHER, "eu-west-1", "scores")
    assert arn_scope(f"{SCORES}/index/byUser") == (OTHER, "eu-west-1", "scores")
    assert arn_scope(f"{SCORES}/stream/2026-11-27T00:00:00.000") == (OTHER, "eu-west-1", "scores")
    assert arn_scope("scores") is None
    assert arn_scope(f"arn:aws:sqs:eu-west-1:{OTHER}:scores") is None


def test_every_place_a_request_names_a_table_is_read_and_only_other_accounts_arns_count() -> None:
    own = f"arn:aws:dynamodb:eu-west-1:{HOME}:table/ledger"
    assert foreign_tables({"TableName": SCORES}, HOME) == {"scores": (OTHER, "eu-west-1")}
    assert foreign_tables({"TableName": own}, HOME) == {}
    assert foreign_tables({"TableName": "scores"}, HOME) == {}
    assert foreign_tables({"RequestItems": {SCORES: {}, "ledger": {}}}, HOME) == {"scores": (OTHER, "eu-west-1")}
    transaction = {"TransactItems": [{"Update": {"TableName": SCORES}}, {"Put": {"TableName": "ledger"}}]}
    assert foreign_tables(transaction, HOME) == {"scores": (OTHER, "eu-west-1")}
    assert foreign_tables({"TransactItems": [{"ConditionCheck": {"TableName": SCORES}}]}, OTHER) == {}
    assert foreign_tables(["not", "a", "request"], HOME) == {}


def test_the_stores_find_another_accounts_table_by_name_or_arn_in_its_owners_account_and_nothing_else() -> None:
    foreign = {"scores": (OTHER, "eu-west-1")}
    assert owner_scope("scores", foreign) == (OTHER, "eu-west-1", "scores")
    assert owner_scope(SCORES, foreign) == (OTHER, "eu-west-1", "scores")
    # the caller's own tables, another account's table of the same name elsewhere, and indexes stay as they are
    assert owner_scope("ledger", foreign) is None
    assert owner_scope(f"arn:aws:dynamodb:eu-west-1:{HOME}:table/scores", foreign) is None
    assert owner_scope(f"{SCORES}/index/byUser", foreign) is None
    assert owner_scope("scores", {}) is None


def test_a_transaction_across_two_accounts_or_two_regions_is_refused_and_one_within_one_account_is_not() -> None:
    ledger = {"Put": {"TableName": "ledger"}}
    mine = f"arn:aws:dynamodb:eu-west-1:{HOME}:table/ledger"
    # the polling assigner's old transaction: the other account's item and the caller's own ledger marker
    problem = transaction_scope_problem(
        {"TransactItems": [{"Update": {"TableName": SCORES}}, ledger]}, HOME, "eu-west-1"
    )
    assert problem is not None and problem.startswith("A transaction cannot target items in different AWS accounts")
    assert OTHER in problem and HOME in problem
    # a ConditionCheck or a Get counts as much as a write; another Region of the caller's own account too
    assert transaction_scope_problem(
        {"TransactItems": [{"ConditionCheck": {"TableName": SCORES}}, ledger]}, HOME, "eu-west-1"
    )
    assert transaction_scope_problem(
        {"TransactItems": [{"Get": {"TableName": SCORES}}, {"Get": {"TableName": "ledger"}}]}, HOME, "eu-west-1"
    )
    elsewhere = f"arn:aws:dynamodb:us-east-1:{HOME}:table/ledger"
    assert transaction_scope_problem({"TransactItems": [{"Put": {"TableName": elsewhere}}, ledger]}, HOME, "eu-west-1")
    # within one account and Region: by name, by the caller's own ARN, or wholly in the other account's tables
    assert (
        transaction_scope_problem({"TransactItems": [{"Put": {"TableName": mine}}, ledger]}, HOME, "eu-west-1") is None
    )
    both = {"TransactItems": [{"Update": {"TableName": SCORES}}, {"Put": {"TableName": SCORES}}]}
    assert transaction_scope_problem(both, HOME, "eu-west-1") is None
    assert transaction_scope_problem({"TableName": SCORES}, HOME, "eu-west-1") is None
