"""scheduled_table.testing: realistic answers for every resource type the component creates, and run_with_mocks.

GIVEN the kit's mocks WHEN each mode is built with every optional part THEN every type the component's source
constructs was answered by a shape of its own (not the fallback), with a non-empty id and ARNs, URLs and stream ARNs
in AWS's shapes for the mocks' region and account; and run_with_mocks runs a function or a program file, resolves
what it returned and exported, follows the configured region, answers the usual lookups and leaks nothing between
runs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest

from components import QueueTarget, ScheduledTable, ScheduledTableArgs
from components import testing as kit
from components.testing import MockedStack, run_with_mocks

from .conftest import REPO

# One build per mode, with every optional resource switched on; together they construct every type in components/.
BUILDS: dict[str, dict[str, Any]] = {
    "eventbridge": {"mode": "eventbridge", "create_alarm_topic": True},
    "ttl": {"mode": "ttl", "precise": True},
    "polling": {"mode": "polling", "target": QueueTarget("arn:aws:sqs:eu-west-1:123456789012:jobs")},
    "aggregate": {"mode": "aggregate"},
}
ARN = re.compile(r"^arn:aws:[a-z0-9-]+:(eu-west-1)?:123456789012:\S+$")
CONSTRUCTOR = re.compile(r"\baws\.([a-z0-9_]+)\.([A-Z][A-Za-z0-9]*)\(")


def constructed_types() -> set[tuple[str, str]]:
    """(module, class) of each `aws.<module>.<Class>(` in the component's source, argument classes aside."""
    found: set[tuple[str, str]] = set()
    for path in (REPO / "components").glob("*.py"):
        if path.name != "testing.py":
            found |= {(m.rstrip("_"), c) for m, c in CONSTRUCTOR.findall(path.read_text()) if not c.endswith("Args")}
    return found


def module_and_class(token: str) -> tuple[str, str]:
    """ "aws:lambda/function:Function" -> ("lambda", "Function")."""
    _, module_path, cls = token.split(":")
    return module_path.split("/")[0], cls


def build(name: str, options: dict[str, Any]) -> MockedStack:
    return run_with_mocks(lambda: ScheduledTable(name, ScheduledTableArgs(**options)).outputs, invokes={})


@pytest.fixture(scope="module")
def stacks() -> dict[str, MockedStack]:
    return {mode: build(mode, options) for mode, options in BUILDS.items()}


def test_public_names() -> None:
    assert set(kit.__all__) == {
        "ACCOUNT",
        "REGION",
        "Backend",
        "DuplicateUrnError",
        "FabricatedTable",
        "MockedStack",
        "RecordingMonitor",
        "Registration",
        "ScheduledTableMocks",
        "fabricate",
        "fabricated_table",
        "first_cause",
        "run_with_mocks",
        "set_mocks",
    }


def test_every_type_the_component_constructs_has_a_shape_of_its_own(stacks: dict[str, MockedStack]) -> None:
    registered = {r.type for stack in stacks.values() for r in stack.resources if r.type.startswith("aws:")}
    assert {module_and_class(t) for t in registered} == constructed_types()
    assert registered <= set(kit.SHAPES)


def test_ids_arns_and_urls_are_shaped_like_aws(stacks: dict[str, MockedStack]) -> None:
    for stack in stacks.values():
        for resource in stack.resources:
            if not resource.type.startswith("aws:"):
                continue
            assert resource.id, resource.name
            computed = {k: v for k, v in resource.outputs.items() if k not in resource.inputs}
            for key, value in computed.items():
                if key.lower().endswith("arn") and key != "invokeArn":
                    assert ARN.match(value), (resource.name, key, value)
            if "url" in computed:
                assert computed["url"].startswith("https://sqs.eu-west-1.amazonaws.com/123456789012/")
            if "name" in computed:  # auto-named: the logical name and seven hex characters, as Pulumi does
                assert re.fullmatch(rf"{re.escape(resource.name)}-[0-9a-f]{{7}}", computed["name"]), computed["name"]


def test_resources_refer_to_each_other_by_what_aws_would_return(stacks: dict[str, MockedStack]) -> None:
    stack = stacks["eventbridge"]
    role = stack.one("eventbridge-scheduler-role")
    assert stack.one("eventbridge-scheduler-policy").inputs["role"] == role.id == role.outputs["name"]
    table = stack.one("eventbridge-table").outputs
    assert table["streamArn"] == f"{table['arn']}/stream/{kit.STREAM_LABEL}"
    mapping = stack.one("eventbridge-scheduler-mapping")
    assert mapping.inputs["eventSourceArn"] == table["streamArn"]
    assert mapping.outputs["functionArn"] == stack.one("eventbridge-scheduler").outputs["arn"]


def test_every_component_output_resolves_to_a_value(stacks: dict[str, MockedStack]) -> None:
    for stack in stacks.values():
        assert stack.result and all(isinstance(v, str) and v for v in stack.result.values()), stack.result


def test_region_and_account_follow_the_stack() -> None:
    stack = run_with_mocks(lambda: aws.sqs.Queue("jobs").arn, config={"aws:region": "cn-north-1"}, account="1" * 12)
    assert stack.result == f"arn:aws-cn:sqs:cn-north-1:{'1' * 12}:{stack.one('jobs').outputs['name']}"


def test_a_program_file_runs_as_main_with_its_folder_importable(tmp_path: Path) -> None:
    (tmp_path / "naming.py").write_text("def queue_name(prefix: str) -> str:\n    return prefix + '-jobs'\n")
    (tmp_path / "__main__.py").write_text(
        "import pulumi, pulumi_aws as aws\n"
        "from naming import queue_name\n"
        "assert __name__ == '__main__'\n"
        "queue = aws.sqs.Queue('jobs', name=queue_name(pulumi.Config().require('prefix')))\n"
        "pulumi.export('url', queue.url)\n"
    )
    stack = run_with_mocks(tmp_path / "__main__.py", config={"prefix": "billing"})
    assert stack.exports == {"url": "https://sqs.eu-west-1.amazonaws.com/123456789012/billing-jobs"}
    assert str(tmp_path) not in sys.path
    assert run_with_mocks(lambda: None).exports == {}, "exports of one run must not reach the next"


def test_the_usual_lookups_are_answered_and_others_name_their_token() -> None:
    def lookups() -> None:
        pulumi.export("account", aws.get_caller_identity().account_id)
        pulumi.export("region", aws.get_region().region)
        pulumi.export("partition", aws.get_partition().partition)

    stack = run_with_mocks(lookups, config={"aws:region": "us-east-2"})
    assert stack.exports == {"account": kit.ACCOUNT, "region": "us-east-2", "partition": "aws"}
    with pytest.raises(Exception, match="getCallerIdentity"):
        run_with_mocks(lambda: aws.get_caller_identity(), invokes={})


def test_a_users_test_answers_the_lookup_an_existing_table_given_by_stream_arn_makes() -> None:
    # A table given by stream ARN in the deploying account is looked up (issue 24.3): a user's test answers getTable
    # alone, the kit still answers who deploys; the lookup names the table and the stream's region.
    from components import ExistingTable

    stream = f"arn:aws:dynamodb:eu-west-1:{kit.ACCOUNT}:table/orders/stream/{kit.STREAM_LABEL}"
    asked: list[dict[str, Any]] = []

    def get_table(args: dict[str, Any]) -> dict[str, Any]:
        asked.append(args)
        return {**kit.fabricated_table(args["name"]), "hashKey": "PK", "rangeKey": "SK"}

    def program() -> Any:
        table = ExistingTable("orders", stream_arn=stream)
        return ScheduledTable("totals", ScheduledTableArgs(mode="aggregate", existing_table=table)).outputs

    stack = run_with_mocks(program, invokes={"aws:dynamodb/getTable:getTable": get_table})
    assert asked == [{"name": "orders", "region": "eu-west-1"}]
    assert stack.result["stream_arn"] == stream
    with pytest.raises(Exception, match="getCallerIdentity"):
        run_with_mocks(lambda: aws.get_caller_identity(), invokes={})


# -- an existing table in a user's test (issue 26.4) ----------------------------------------------------------------

GET_TABLE = "aws:dynamodb/getTable:getTable"


def existing(mode: str, **extra: Any) -> Any:
    from components import ExistingTable

    def program() -> Any:
        args = ScheduledTableArgs(mode=mode, existing_table=ExistingTable("orders"), **extra)  # type: ignore[arg-type]
        return ScheduledTable("orders", args).outputs

    return program


@pytest.mark.parametrize(
    ("mode", "table", "extra"),
    [
        ("ttl", {"ttl_attribute": "dueAt"}, {}),
        ("polling", {"due_index": True}, {"target": QueueTarget("arn:aws:sqs:us-east-2:123456789012:jobs")}),
        ("eventbridge", {}, {}),
    ],
)
def test_a_ttl_polling_or_eventbridge_existing_table_test_needs_no_hand_editing(
    mode: str, table: dict[str, Any], extra: dict[str, Any]
) -> None:
    answer = kit.fabricated_table("orders", partition_key="PK", sort_key="SK", **table)
    stack = run_with_mocks(existing(mode, **extra), config={"aws:region": "us-east-2"}, invokes={GET_TABLE: answer})
    # The table's ARNs follow the run's region (and account), not the kit's default.
    assert (
        stack.result["stream_arn"] == f"arn:aws:dynamodb:us-east-2:{kit.ACCOUNT}:table/orders/stream/{kit.STREAM_LABEL}"
    )


@pytest.mark.parametrize(
    ("mode", "table", "problem"),
    [
        ("ttl", {}, "does not expire items by 'dueAt'; enable TTL on 'dueAt'"),
        ("polling", {"ttl_attribute": "dueAt"}, "has no due index"),
        ("eventbridge", {"stream_view_type": "KEYS_ONLY"}, "has StreamViewType KEYS_ONLY"),
        ("eventbridge", {"partition_key": "id"}, "pass partition_key='id'"),
    ],
)
def test_a_fabricated_table_is_checked_as_a_real_one(mode: str, table: dict[str, Any], problem: str) -> None:
    answer = kit.fabricated_table("orders", **{"partition_key": "PK", "sort_key": "SK", **table})
    extra = {"target": QueueTarget("arn:aws:sqs:eu-west-1:123456789012:jobs")} if mode == "polling" else {}
    with pytest.raises(Exception, match=re.escape(problem)):
        run_with_mocks(existing(mode, **extra), invokes={GET_TABLE: answer})


def test_without_an_answer_the_lookup_error_names_fabricated_table() -> None:
    with pytest.raises(Exception, match=r"fabricated_table\('orders', partition_key=") as raised:
        run_with_mocks(existing("eventbridge"), invokes={})
    assert GET_TABLE in str(raised.value)


def test_a_fabricated_table_answers_for_its_own_name_only() -> None:
    with pytest.raises(Exception, match=r"looked up 'orders': pass fabricated_table\('orders'"):
        run_with_mocks(existing("eventbridge"), invokes={GET_TABLE: kit.fabricated_table("users")})


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            {"mode": "polling", "target": QueueTarget(pulumi.Output.from_input("jobs"))},
            "QueueTarget.queue_arn: 'jobs' is not a full ARN (a name?); pass the queue's `.arn`",
        ),
        (
            {"mode": "eventbridge", "alarm_topic_arn": pulumi.Output.from_input("ops")},
            "alarm_topic_arn: 'ops' is not an SNS topic ARN",
        ),
    ],
)
def test_a_bad_arn_inside_an_output_fails_with_the_components_message_first_and_no_noise(
    build: dict[str, Any], message: str, capfd: pytest.CaptureFixture[str]
) -> None:
    import gc

    with pytest.raises(ValueError) as raised:
        run_with_mocks(lambda: ScheduledTable("r", ScheduledTableArgs(**build)))
    text = str(raised.value)
    assert text.splitlines()[0].startswith(message), text
    # What Pulumi's chain said stays, after the message, as a note.
    assert any("While processing" in note for note in getattr(raised.value, "__notes__", [])), raised.value
    del raised
    gc.collect()  # the other resources' futures holding the same error are collected here, and would log it
    run_with_mocks(lambda: None)
    gc.collect()
    assert "never retrieved" not in capfd.readouterr().err
