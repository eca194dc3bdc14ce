"""The provider's `construct`, called in-process under the mocks with camelCase inputs as a TypeScript program sends
them, builds the same resources as the Python API for the same settings, for every mode and every target kind; and
a missing or wrong input fails naming the input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pulumi.errors import InputPropertyError
from pulumi.provider.server import ComponentInitError

from components import (
    EmailTarget,
    EventBusTarget,
    ExistingQueue,
    ExistingTable,
    FunctionTarget,
    QueueTarget,
    ScheduledTable,
    ScheduledTableArgs,
    StateMachineTarget,
    TopicTarget,
    target_types,
)
from components.provider_inputs import Mode, ScheduledTableInputs
from components.targets import TARGET_TYPES
from components.testing import run_with_mocks

from .support import EXAMPLES, REFERENCES, TYPE, build, construct, lookups, provider, resources, wire_inputs

STREAM = "arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2026-01-01T00:00:00.000"
KEY = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
REFERENCES.setdefault("orders.streamArn", STREAM)
REFERENCES.setdefault("key.arn", KEY)

# Every case: the provider's inputs (camelCase, as TypeScript writes them) and the same settings through the Python
# API, written out by hand (not derived), so a mapping mistake shows as a difference.
CASES: dict[str, tuple[dict[str, Any], Callable[[], ScheduledTableArgs]]] = {
    # The README's tables (tests/provider/examples.json).
    "reminders": (
        EXAMPLES["tables"]["reminders"],
        lambda: ScheduledTableArgs(
            mode="eventbridge",
            time_attribute="remindAt",
            offsets=[-3600, 0],
            target=EmailTarget(
                "Reminders <reminders@example.com>",
                subject="Your appointment at {remindAt}",
                body="Hello {name}, see you at {remindAt}.",
            ),
        ),
    ),
    "sessions": (
        EXAMPLES["tables"]["sessions"],
        lambda: ScheduledTableArgs(
            mode="ttl", time_attribute="expiresAt", precise=True, target=TopicTarget(REFERENCES["expired.arn"])
        ),
    ),
    "jobs": (
        EXAMPLES["tables"]["jobs"],
        lambda: ScheduledTableArgs(
            mode="polling",
            shards=16,
            default_delay_seconds=0,
            lambda_memory_mb=512,
            target=QueueTarget(REFERENCES["jobsQueue.arn"], max_message_bytes=1048576),
        ),
    ),
    "scores": (EXAMPLES["tables"]["scores"], lambda: ScheduledTableArgs(mode="aggregate")),
    # The other target kinds, and the inputs the README does not show.
    "alerts": (
        {
            "mode": "eventbridge",
            "target": {"kind": "function", "arn": "arn:aws:lambda:eu-west-1:123456789012:function:notify"},
            "kmsKeyArn": "${key.arn}",
            "createAlarmTopic": True,
            "tags": {"team": "ops"},
            "scheduleRetryAttempts": 3,
            "timeZoneAttribute": "zone",
        },
        lambda: ScheduledTableArgs(
            mode="eventbridge",
            target=FunctionTarget("arn:aws:lambda:eu-west-1:123456789012:function:notify"),
            kms_key_arn=KEY,
            create_alarm_topic=True,
            tags={"team": "ops"},
            schedule_retry_attempts=3,
            time_zone_attribute="zone",
        ),
    ),
    "flows": (
        {
            "mode": "ttl",
            "target": {"kind": "stateMachine", "arn": "arn:aws:states:eu-west-1:123456789012:stateMachine:flow"},
            "repeatAttribute": "every",
            "sortKey": "none",
            "partitionKeyType": "N",
            "billingMode": "PROVISIONED",
            "readCapacity": 5,
            "writeCapacity": 5,
        },
        lambda: ScheduledTableArgs(
            mode="ttl",
            target=StateMachineTarget("arn:aws:states:eu-west-1:123456789012:stateMachine:flow"),
            repeat_attribute="every",
            sort_key=None,
            partition_key_type="N",
            billing_mode="PROVISIONED",
            read_capacity=5,
            write_capacity=5,
        ),
    ),
    "orders": (
        {
            "mode": "eventbridge",
            "target": {
                "kind": "eventBus",
                "arn": "arn:aws:events:eu-west-1:123456789012:event-bus/orders",
                "detailType": "order.due",
                "source": "com.example.orders",
            },
            "lambdaArchitecture": "x86_64",
            "lambdaRuntime": "python3.13",
            "logLevel": "DEBUG",
            "tracing": "Active",
            "startingPosition": "LATEST",
        },
        lambda: ScheduledTableArgs(
            mode="eventbridge",
            target=EventBusTarget(
                "arn:aws:events:eu-west-1:123456789012:event-bus/orders",
                detail_type="order.due",
                source="com.example.orders",
            ),
            lambda_architecture="x86_64",
            lambda_runtime="python3.13",
            log_level="DEBUG",
            tracing="Active",
            starting_position="LATEST",
        ),
    ),
    "fifo": (
        {
            "mode": "polling",
            "target": {
                "kind": "queue",
                "arn": "arn:aws:sqs:eu-west-1:123456789012:work.fifo",
                "messageGroupAttribute": "customerId",
            },
            "onDone": "delete",
            "alarms": False,
            "dashboard": False,
        },
        lambda: ScheduledTableArgs(
            mode="polling",
            target=QueueTarget("arn:aws:sqs:eu-west-1:123456789012:work.fifo", message_group_attribute="customerId"),
            on_done="delete",
            alarms=False,
            dashboard=False,
        ),
    ),
    "tasks": (
        {"mode": "eventbridge", "timeAttribute": "runAt", "offsets": [-86400, -3600, 0], "batchSize": 10},
        lambda: ScheduledTableArgs(
            mode="eventbridge", time_attribute="runAt", offsets=[-86400, -3600, 0], batch_size=10
        ),
    ),
    "totals": (
        {
            "mode": "aggregate",
            "existingTable": {"name": "orders", "streamArn": "${orders.streamArn}"},
            "onChange": "adjust",
            "aggregation": "count",
            "totalAttribute": "orderCount",
        },
        lambda: ScheduledTableArgs(
            mode="aggregate",
            existing_table=ExistingTable(name="orders", stream_arn=STREAM),
            on_change="adjust",
            aggregation="count",
            total_attribute="orderCount",
        ),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_construct_builds_what_the_python_api_builds(name: str) -> None:
    inputs, python_args = CASES[name]
    from_provider = construct(name, inputs)
    from_python = build(name, python_args())
    assert resources(from_provider) == resources(from_python)
    assert from_provider.one(name).type == TYPE
    assert len(from_provider.resources) > 10


def test_every_mode_and_every_target_kind_is_constructed() -> None:
    modes = {inputs["mode"] for inputs, _ in CASES.values()}
    kinds = {inputs["target"]["kind"] for inputs, _ in CASES.values() if "target" in inputs}
    assert modes == {"eventbridge", "ttl", "polling", "aggregate"}
    assert kinds == set(target_types.by_stack_type())
    assert {target_types.by_stack_type()[kind] for kind in kinds} == set(TARGET_TYPES)
    # and no target: the due queue the component creates
    assert any("target" not in inputs and inputs["mode"] != "aggregate" for inputs, _ in CASES.values())


def test_construct_returns_the_outputs_in_camel_case() -> None:
    state = construct("jobs", EXAMPLES["tables"]["jobs"]).result
    assert state["tableName"].startswith("jobs-table-")
    assert state["processorFunctionName"].startswith("jobs-processor-")
    assert state["poisonQueueUrl"].startswith("https://sqs.eu-west-1.amazonaws.com/123456789012/jobs-poison-")
    assert "dueQueueUrl" not in state  # the queue is the user's


def test_integers_arrive_as_doubles_and_references_as_outputs() -> None:
    # What the tests above feed construct is what the engine sends, not a friendlier stand-in.
    props = _wired({"mode": "polling", "shards": 16, "target": {"kind": "queue", "arn": "${jobsQueue.arn}"}})
    assert props["shards"] == 16.0 and isinstance(props["shards"], float)
    assert type(props["target"]["arn"]).__name__ == "Output"


def _wired(inputs: dict[str, Any]) -> dict[str, Any]:
    holder: dict[str, Any] = {}
    run_with_mocks(lambda: holder.update(wire_inputs(inputs)), invokes={})
    return holder


# -- missing or wrong inputs -------------------------------------------------------------------------------------


def _input_error(inputs: dict[str, Any]) -> InputPropertyError:
    with pytest.raises(InputPropertyError) as raised:
        provider().construct("bad", TYPE, inputs, None)
    return raised.value


def _component_error(inputs: dict[str, Any]) -> str:
    with pytest.raises(ComponentInitError) as raised:
        provider().construct("bad", TYPE, inputs, None)
    return str(raised.value)


def test_a_missing_mode_is_the_providers_input_error() -> None:
    error = _input_error({"lambdaMemoryMb": 512.0})
    assert error.property_path == "mode"
    assert "Missing required input 'mode'" in error.reason


def test_a_target_without_kind_is_the_providers_input_error() -> None:
    error = _input_error({"mode": "eventbridge", "target": {"arn": REFERENCES["jobsQueue.arn"]}})
    assert error.property_path == "target.kind"


def test_an_unknown_mode_is_the_providers_input_error() -> None:
    error = _input_error({"mode": "cron"})
    assert error.property_path == "mode"
    assert "cron" in error.reason


def test_an_unknown_target_kind_is_the_providers_input_error() -> None:
    error = _input_error({"mode": "eventbridge", "target": {"kind": "webhook"}})
    assert error.property_path == "target.kind"


def test_text_for_a_number_is_the_providers_input_error() -> None:
    error = _input_error({"mode": "eventbridge", "lambdaMemoryMb": "lots"})
    assert "lambdaMemoryMb" in error.reason  # (the SDK leaves property_path empty for top-level numbers)


def test_a_value_out_of_range_names_the_camel_case_input_and_the_fix() -> None:
    message = _component_error({"mode": "eventbridge", "lambdaMemoryMb": 5.0})
    assert message == "lambdaMemoryMb: 5 is out of range; use a whole number from 128 to 10240"


def test_conflicting_inputs_name_the_camel_case_inputs() -> None:
    message = _component_error({"mode": "ttl", "shards": 4.0})
    assert message.startswith("shards: only applies to mode='polling'")
    message = _component_error({"mode": "eventbridge", "billingMode": "PROVISIONED"})
    assert message.startswith("readCapacity: PROVISIONED billing needs readCapacity and writeCapacity")


def test_a_wrong_target_arn_names_target_arn() -> None:
    url = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"
    message = _component_error({"mode": "polling", "target": {"kind": "queue", "arn": url}})
    assert message.startswith(f"target.arn: {url!r} is a URL, not an ARN")


def test_a_target_field_of_another_kind_is_refused_naming_it() -> None:
    topic = REFERENCES["expired.arn"]
    message = _component_error({"mode": "ttl", "target": {"kind": "topic", "arn": topic, "maxMessageBytes": 2048.0}})
    assert message == "target.maxMessageBytes: does not apply to a 'topic' target (only to 'queue'); remove it"


def test_a_target_without_its_arn_is_refused_naming_it() -> None:
    message = _component_error({"mode": "ttl", "target": {"kind": "function"}})
    assert message == "target.arn: a 'function' target needs it; set it"


def test_the_python_dict_form_is_accepted_by_scheduled_table_itself() -> None:
    inputs = ScheduledTableInputs(mode=Mode.Ttl, sort_key="none")
    stack = run_with_mocks(lambda: ScheduledTable("audit", inputs).outputs, invokes={})
    table = stack.one("audit-table")
    assert table.inputs["hashKey"] == "PK" and "rangeKey" not in table.inputs
    with pytest.raises(ValueError, match=r"^batchSize: 0 is out of range"):
        ScheduledTable("audit", ScheduledTableInputs(mode=Mode.Ttl, batch_size=0))


# -- issue 24.2: every ARN input takes another resource's output (alarmTopicArn was plain)

REFERENCES.setdefault("ops.arn", "arn:aws:sns:eu-west-1:123456789012:ops-9a8b7c6")
REFERENCES.setdefault("opsQueue.arn", "arn:aws:sqs:eu-west-1:123456789012:ops")


def test_an_alarm_topic_from_another_resource_builds_what_the_python_api_builds() -> None:
    inputs = {"mode": "eventbridge", "alarmTopicArn": "${ops.arn}"}
    from_provider = construct("alarmed", inputs)
    from_python = build("alarmed", ScheduledTableArgs(mode="eventbridge", alarm_topic_arn=REFERENCES["ops.arn"]))
    assert resources(from_provider) == resources(from_python)
    alarm = from_provider.one("alarmed-poison-not-empty-alarm").inputs
    assert alarm["alarmActions"] == [REFERENCES["ops.arn"]]


def test_a_wrong_alarm_topic_from_another_resource_fails_naming_the_input() -> None:
    queue = REFERENCES["opsQueue.arn"]
    with pytest.raises(Exception) as caught:
        construct("alarmed", {"mode": "eventbridge", "alarmTopicArn": "${opsQueue.arn}"})
    assert (
        str(caught.value)
        .splitlines()[-1]
        .endswith(
            f"alarmTopicArn: {queue!r} is not an SNS topic ARN; pass the topic's `.arn` "
            "(arn:aws:sns:<region>:<account>:<topic>), e.g. 'arn:aws:sns:eu-west-1:123456789012:ops'"
        )
    )


# -- issues 24.3 and 24.4: an existing table given by stream ARN, through the provider -----------------------------


def test_an_existing_tables_stream_without_both_images_fails_naming_the_input() -> None:
    inputs = {"mode": "aggregate", "existingTable": {"name": "orders", "streamArn": "${orders.streamArn}"}}
    with pytest.raises(Exception) as caught:
        construct("totals", inputs, invokes=lookups(streamViewType="KEYS_ONLY"))
    assert (
        str(caught.value)
        .splitlines()[-1]
        .endswith(
            "existingTable: table 'orders' has StreamViewType KEYS_ONLY; ScheduledTable needs NEW_AND_OLD_IMAGES (a "
            "stream's view type cannot change: disable the stream, then enable it with NEW_AND_OLD_IMAGES)"
        )
    )


def test_a_name_and_a_stream_arn_of_two_tables_fail_naming_the_input() -> None:
    inputs = {"mode": "aggregate", "existingTable": {"name": "invoices", "streamArn": "${orders.streamArn}"}}
    with pytest.raises(Exception) as caught:
        construct("totals", inputs)
    assert (
        str(caught.value)
        .splitlines()[-1]
        .endswith(
            "existingTable: the stream ARN belongs to table 'orders', not 'invoices'; pass that table's name and "
            "stream ARN; the name and the stream ARN must be the same table's"
        )
    )


# -- the user's own queues, through the provider ------------------------------------------------------------------

REFERENCES.setdefault("parked.arn", "arn:aws:sqs:eu-west-1:123456789012:parked-1a2b3c4")


def test_the_users_queues_build_what_the_python_api_builds() -> None:
    key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    inputs = {"mode": "ttl", "existingPoisonQueue": {"queueArn": "${parked.arn}", "kmsKeyArn": key}}
    from_provider = construct("parking", inputs)
    given = ExistingQueue(REFERENCES["parked.arn"], kms_key_arn=key)
    from_python = build("parking", ScheduledTableArgs(mode="ttl", existing_poison_queue=given))
    assert resources(from_provider) == resources(from_python)
    assert "parking-poison" not in {r.name for r in from_provider.resources}
