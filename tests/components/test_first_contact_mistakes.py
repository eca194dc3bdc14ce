"""Mistakes a new user makes at first contact, each answered with the field and the fix (issue 39).

GIVEN a program with one of these mistakes WHEN it runs under the testing kit's mocks (as `pulumi up` would run it)
THEN it fails with one message naming the field and the fix, instead of being accepted silently (a target in another
region, two components with one name) or failing inside Pulumi (`'Queue' object has no attribute 'startswith'`); and a
dict of camelCase options is read as the same options in snake_case.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi_aws as aws
import pytest

from components import ExistingTable, FunctionTarget, QueueTarget, ScheduledTable, ScheduledTableArgs, TopicTarget
from components.testing import DuplicateUrnError, MockedStack, run_with_mocks
from components.types import ModeName

ELSEWHERE = "arn:aws:sqs:us-east-1:123456789012:jobs"


def given(inputs: dict[str, Any]) -> Any:
    """A dict of options as a Python user writes it (not typed as the provider's snake_case inputs)."""
    return inputs


def run(program: Callable[[], Any], region: str = "eu-west-1") -> MockedStack:
    return run_with_mocks(program, config={"aws:region": region}, invokes={})


# -- a target in another region than the stack: refused (Scheduler and the handlers deliver within the stack's region)


def test_a_queue_in_another_region_is_refused_naming_the_field_the_regions_and_the_fix() -> None:
    with pytest.raises(ValueError) as raised:
        run(lambda: ScheduledTable("rem", ScheduledTableArgs(mode="eventbridge", target=QueueTarget(ELSEWHERE))))
    assert str(raised.value) == (
        f"QueueTarget.queue_arn: {ELSEWHERE!r} is in us-east-1, and this stack deploys to eu-west-1: Scheduler and "
        "the handlers deliver only within the stack's region, so every due event would fail; use a queue in "
        "eu-west-1, or deploy the ScheduledTable in us-east-1 (to reach us-east-1 from eu-west-1: an EventBusTarget "
        "on a bus in eu-west-1 whose rule targets a bus in us-east-1)"
    )


@pytest.mark.parametrize("mode", ["ttl", "polling"])
def test_every_mode_refuses_it_and_the_same_region_is_accepted(mode: ModeName) -> None:
    function = "arn:aws:lambda:{}:123456789012:function:notify"
    with pytest.raises(ValueError, match=r"^FunctionTarget.function_arn: .* is in us-west-2, and this stack deploys"):
        run(
            lambda: ScheduledTable(
                "rem", ScheduledTableArgs(mode=mode, target=FunctionTarget(function.format("us-west-2")))
            )
        )
    stack = run(
        lambda: ScheduledTable(
            "rem", ScheduledTableArgs(mode=mode, target=FunctionTarget(function.format("us-west-2")))
        ),
        region="us-west-2",
    )
    assert stack.of_type(":Function")


def test_a_target_made_in_the_program_with_another_regions_provider_is_refused_when_its_arn_resolves() -> None:
    def program() -> None:
        # A topic whose ARN is only known once it exists: the check runs then, with the same message.
        topic = aws.sns.Topic("news", opts=None)
        ScheduledTable("rem", ScheduledTableArgs(mode="ttl", target=TopicTarget(topic.arn)))

    run(program)  # the mocks make the topic in the stack's region: accepted
    with pytest.raises(ValueError, match=r"^TopicTarget.topic_arn: 'arn:aws:sns:ap-south-1:.*use a topic in eu-west-1"):
        run(
            lambda: ScheduledTable(
                "rem",
                ScheduledTableArgs(
                    mode="ttl",
                    target=TopicTarget(
                        aws.sns.Topic("news").arn.apply(lambda arn: arn.replace("eu-west-1", "ap-south-1"))
                    ),
                ),
            )
        )


def test_the_provider_form_names_the_camel_case_input() -> None:
    with pytest.raises(ValueError, match=r"^target\.arn: 'arn:aws:sqs:us-east-1:.* use a queue in eu-west-1"):
        run(lambda: ScheduledTable("rem", given({"mode": "ttl", "target": {"kind": "queue", "arn": ELSEWHERE}})))


# -- a resource where its ARN belongs


def test_a_queue_object_instead_of_its_arn_names_the_field_and_the_fix() -> None:
    def program() -> None:
        jobs = aws.sqs.Queue("jobs")
        ScheduledTable("rem", ScheduledTableArgs(mode="polling", target=QueueTarget(jobs)))  # type: ignore[arg-type]

    with pytest.raises(ValueError) as raised:
        run(program)
    assert str(raised.value) == (
        "QueueTarget.queue_arn: got the Queue resource itself, not its arn; pass its `.arn` output: "
        "QueueTarget(queue_arn=queue.arn, ...)"
    )


def test_other_resources_where_their_outputs_belong_are_named_too() -> None:
    def table_object() -> None:
        table = aws.dynamodb.Table("orders", hash_key="PK", attributes=[{"name": "PK", "type": "S"}])
        ScheduledTable("rem", ScheduledTableArgs(mode="ttl", existing_table=ExistingTable(table)))  # type: ignore[arg-type]

    with pytest.raises(
        ValueError, match=r"^existing_table.name: got the Table resource itself, not its name; pass its"
    ):
        run(table_object)

    def key_object() -> None:
        key = aws.kms.Key("key")
        ScheduledTable("rem", ScheduledTableArgs(mode="ttl", kms_key_arn=key))  # type: ignore[arg-type]

    with pytest.raises(
        ValueError, match=r"^kms_key_arn: got the Key resource itself, not its arn; .*kms_key_arn=key.arn"
    ):
        run(key_object)
    with pytest.raises(ValueError, match=r"^QueueTarget.kms_key_arn: 42 is not text"):
        QueueTarget("arn:aws:sqs:eu-west-1:123456789012:jobs", kms_key_arn=42)  # type: ignore[arg-type]


# -- two components with one name: the kit refuses the duplicate URN, as Pulumi's engine does


def test_two_scheduled_tables_with_one_name_are_refused_as_the_engine_refuses_them() -> None:
    def program() -> None:
        ScheduledTable("reminders", ScheduledTableArgs(mode="eventbridge"))
        ScheduledTable("reminders", ScheduledTableArgs(mode="ttl"))

    with pytest.raises(DuplicateUrnError) as raised:
        run(program)
    assert str(raised.value) == (
        "Duplicate resource URN 'urn:pulumi:stack::project::scheduled-table:index:ScheduledTable::reminders'; try "
        "giving it a unique name (the name 'reminders' is given to two scheduled-table:index:ScheduledTable resources)"
    )


def test_one_name_for_resources_of_different_types_is_allowed_as_on_the_engine() -> None:
    def program() -> None:
        aws.sqs.Queue("reminders")
        ScheduledTable("reminders", ScheduledTableArgs(mode="eventbridge"))
        ScheduledTable("other", ScheduledTableArgs(mode="eventbridge"))  # its children: other-table, ...

    assert {r.name for r in run(program).of_type(":Table")} >= {"reminders-table", "other-table"}


# -- the dict form with camelCase keys, as the docs, a stack file and every message spell them


def test_camel_case_keys_in_the_dict_form_are_read_as_the_options() -> None:
    stack = run(
        lambda: ScheduledTable(
            "rem",
            given(
                {
                    "mode": "ttl",
                    "batchSize": 10,
                    "target": {
                        "kind": "queue",
                        "arn": "arn:aws:sqs:eu-west-1:123456789012:jobs",
                        "maxMessageBytes": 2048,
                    },
                }
            ),
        )
    )
    [mapping] = stack.of_type(":EventSourceMapping")
    assert mapping.inputs["batchSize"] == 10


def test_a_misspelt_camel_case_key_names_the_closest_option_and_a_key_given_twice_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^batchSise: unknown key; did you mean batchSize\?$"):
        ScheduledTable("rem", given({"mode": "ttl", "batchSise": 10}))
    with pytest.raises(ValueError, match=r"^batchSize: given twice, in snake_case and in camelCase; keep one$"):
        ScheduledTable("rem", given({"mode": "ttl", "batchSize": 10, "batch_size": 10}))
