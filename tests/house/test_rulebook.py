"""AWS's rules are written down once (localcloud/rulebook.py), each with the AWS page it comes from, and the layers
that stand in for AWS (the moto hooks, the IAM and KMS evaluator, the local cloud) take their rules from it.

Fails on a rule without an AWS source, on a check naming a rule the book does not hold, on a rule that no layer
applies (its listed files never name it), and on a relaxation without a source or what covers it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from localcloud import rulebook

REPO = Path(__file__).resolve().parents[2]
NAMED = re.compile(r"""\b(?:rule|limit)\(["']([a-z0-9-]+)["']\)""")
LAYERS = ("tests", "localcloud")


def named_rules(text: str) -> set[str]:
    return set(NAMED.findall(text))


def test_the_rules_are_listed_with_their_sources() -> None:
    """The list a reader (or a reviewer) reads: every rule, what AWS does, and the page that says so."""
    ids = [r.id for r in rulebook.RULES]
    assert len(ids) == len(set(ids)), "a rule id is written twice"
    for rule in rulebook.RULES:
        assert rule.source.startswith(rulebook.DOCS), f"{rule.id}: no AWS documentation page as its source"
        assert rule.says.strip(), f"{rule.id}: says nothing"
        assert rule.applied_in, f"{rule.id}: no layer applies it"
    for relaxation in rulebook.RELAXATIONS:
        assert relaxation.source.startswith(rulebook.DOCS), f"{relaxation.id}: no AWS source"
        assert relaxation.covered_by.strip(), f"{relaxation.id}: nothing says what covers the difference"


@pytest.mark.parametrize("rule", rulebook.RULES, ids=lambda r: r.id)
def test_each_rule_is_applied_where_the_book_says(rule: rulebook.Rule) -> None:
    for path in rule.applied_in:
        file = REPO / path
        assert file.exists(), f"{rule.id}: {path} does not exist"
        assert rule.id in named_rules(file.read_text()), f"{rule.id}: {path} never names it (rule({rule.id!r}))"


def test_every_rule_a_check_names_is_in_the_book() -> None:
    known = {r.id for r in rulebook.RULES}
    for layer in LAYERS:
        for file in sorted((REPO / layer).rglob("*.py")):
            if file.name == "test_rulebook.py":
                continue
            unknown = named_rules(file.read_text()) - known
            assert not unknown, f"{file.relative_to(REPO)} names rules the book does not hold: {sorted(unknown)}"


def test_a_rule_without_a_source_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail."""
    bad = rulebook.RULES[0]._replace(source="https://example.com/blog")
    monkeypatch.setattr(rulebook, "RULES", (bad, *rulebook.RULES[1:]))
    with pytest.raises(AssertionError, match="no AWS documentation page"):
        test_the_rules_are_listed_with_their_sources()


def test_limits_are_the_handlers_own_numbers() -> None:
    """The harness checks the same number the handlers size their writes by (one value, in st_core.constants)."""
    from localcloud.component import constants

    assert rulebook.limit("scheduler-name") == constants.NAME_CHARS
    assert rulebook.limit("dynamodb-transaction-actions") == constants.TRANSACTION_ITEMS
    assert rulebook.limit("sqs-message-size") == constants.SQS_DEFAULT_MESSAGE_BYTES
    with pytest.raises(KeyError, match="sets no number"):
        rulebook.limit("scheduler-minute")
