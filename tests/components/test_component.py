"""ScheduledTable in eventbridge mode under Pulumi mocks: resources, their key properties, defaults, overrides."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components import EmailTarget, FunctionTarget, QueueTarget, StateMachineTarget, TopicTarget
from components.filters import filter_patterns
from components.modes.eventbridge import eventbridge_filters
from tests.components.conftest import COMPONENT_TYPE, OUTPUT_NAMES, Built

Build = Callable[..., Built]
TARGET_QUEUE = "arn:aws:sqs:eu-west-1:123456789012:my-queue"


def actions(document: dict[str, Any]) -> list[str]:
    return [a for s in document["Statement"] for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]


def statement_for(document: dict[str, Any], action: str) -> dict[str, Any]:
    (found,) = [s for s in document["Statement"] if action in s["Action"]]
    return found


# -- structure --------------------------------------------------------------------------------------------------


def test_creates_exactly_the_eventbridge_resources(build: Build) -> None:
    built = build(alarms=False, dashboard=False)
    names = sorted(n for n, r in built.mocks.by_name.items() if r.type != "pulumi:pulumi:Stack")
    assert names == sorted(
        [
            "rem",
            "rem-table",
            "rem-ledger",
            "rem-stream-dlq",
            "rem-poison",
            "rem-due",
            "rem-target-dlq",
            "rem-schedules",
            "rem-scheduler-exec-role",
            "rem-scheduler-exec-policy",
            "rem-scheduler-logs",
            "rem-scheduler-role",
            "rem-scheduler-policy",
            "rem-scheduler",
            "rem-scheduler-mapping",
        ]
    )
    assert built.one("rem").type == COMPONENT_TYPE


def test_every_child_is_parented_to_the_component(build: Build) -> None:
    built = build()
    component_urn_suffix = f"{COMPONENT_TYPE}::rem"
    children = [r for r in built.mocks.by_name.values() if r.type not in ("pulumi:pulumi:Stack", COMPONENT_TYPE)]
    assert children and all(r.parent.endswith(component_urn_suffix) for r in children), [
        (r.name, r.parent) for r in children
    ]


def test_outputs_are_exposed(build: Build) -> None:
    outputs = build().outputs
    # Every eventbridge output is set in the default configuration (the due queue is owned, the group exists).
    assert set(outputs) == set(OUTPUT_NAMES) - {
        "processor_function_name",
        "tick_rule_name",
        "alarm_topic_arn",
        "backfill_function_name",  # off by default: nothing is created for backfills
    }
    assert outputs["stream_arn"].startswith(outputs["table_arn"] + "/stream/")


@pytest.mark.parametrize("mode", ["eventbridge", "ttl", "polling", "aggregate"])
def test_the_backfill_function_is_made_only_when_asked_for(build: Build, mode: str) -> None:
    assert not [r for r in build(mode=mode).mocks.by_name if "backfill" in r]
    built = build(mode=mode, backfill_function=True)
    function = built.one("rem-backfill")
    assert function.inputs["handler"] == "backfill.handler"
    assert built.outputs["backfill_function_name"] == function.outputs["name"]


@pytest.mark.parametrize("mode", ["eventbridge", "polling", "aggregate"])
def test_reconcile_every_runs_the_backfill_function_on_a_rule_and_alarms_on_drift(build: Build, mode: str) -> None:
    assert not [r for r in build(mode=mode).mocks.by_name if "reconcile" in r]  # off by default
    built = build(mode=mode, reconcile_every="rate(1 day)")
    function = built.one("rem-backfill")  # made for it, without backfill_function
    rule = built.one("rem-reconcile").inputs
    assert rule["scheduleExpression"] == "rate(1 day)"
    target = built.one("rem-reconcile-target").inputs
    assert target["arn"] == function.outputs["arn"]
    assert json.loads(target["input"]) == {"scheduledReconcile": True}  # backfill.handler -> backfill.every
    permission = built.one("rem-reconcile-permission").inputs
    assert (permission["principal"], permission["sourceArn"]) == (
        "events.amazonaws.com",
        built.one("rem-reconcile").outputs["arn"],
    )
    alarm = built.one("rem-reconcile-drift-alarm").inputs
    assert (alarm["namespace"], alarm["metricName"], alarm["statistic"]) == ("ScheduledTable", "ReconcileDrift", "Sum")
    assert alarm["dimensions"] == {"Table": built.one("rem-table").outputs["name"]}
    assert built.outputs["backfill_function_name"] == function.outputs["name"]
    # Its checkpoint in the ledger: polling's and aggregate's consumers only put markers there.
    policy = json.loads(built.one("rem-backfill-policy").inputs["policy"])
    checkpoint = statement_for(policy, "dynamodb:DeleteItem") if mode != "eventbridge" else None
    if checkpoint is not None:
        assert checkpoint["Resource"] == [built.one("rem-ledger").outputs["arn"]]
        assert sorted(checkpoint["Action"]) == ["dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]


@pytest.mark.parametrize("value", ["every day", "rate(0 days)", "rate(1 days)", "cron(0 3 * *)", 3])
def test_reconcile_every_takes_an_eventbridge_expression(value: Any) -> None:
    from components.args import ScheduledTableArgs

    with pytest.raises(ValueError) as caught:
        ScheduledTableArgs(mode="eventbridge", reconcile_every=value)
    assert str(caught.value) == (
        f"reconcile_every: {value!r} is not an EventBridge schedule expression; give one such as 'rate(1 day)', "
        "'rate(6 hours)' or 'cron(0 3 * * ? *)'"
    )


# -- table ------------------------------------------------------------------------------------------------------


def test_table_defaults_are_secure_and_streamed(build: Build) -> None:
    table = build().one("rem-table").inputs
    assert table["hashKey"] == "PK" and table["rangeKey"] == "SK"
    assert table["attributes"] == [{"name": "PK", "type": "S"}, {"name": "SK", "type": "S"}]
    assert table["streamEnabled"] is True and table["streamViewType"] == "NEW_AND_OLD_IMAGES"
    assert table["billingMode"] == "PAY_PER_REQUEST"
    assert table["pointInTimeRecovery"] == {"enabled": True}
    assert table["serverSideEncryption"] == {"enabled": True}
    assert table["deletionProtectionEnabled"] is True
    assert table["tags"] == {"scheduled-table:component": "rem"}


def test_table_overrides(build: Build) -> None:
    table = (
        build(
            partition_key="id",
            partition_key_type="N",
            sort_key=None,
            billing_mode="PROVISIONED",
            read_capacity=5,
            write_capacity=7,
            point_in_time_recovery=False,
            kms_key_arn="arn:aws:kms:eu-west-1:123456789012:key/abc",
            deletion_protection=False,
            tags={"team": "ops"},
        )
        .one("rem-table")
        .inputs
    )
    assert table["hashKey"] == "id" and "rangeKey" not in table
    assert table["attributes"] == [{"name": "id", "type": "N"}]
    assert (table["billingMode"], table["readCapacity"], table["writeCapacity"]) == ("PROVISIONED", 5, 7)
    assert table["pointInTimeRecovery"] == {"enabled": False}
    assert table["serverSideEncryption"] == {"enabled": True, "kmsKeyArn": "arn:aws:kms:eu-west-1:123456789012:key/abc"}
    assert table["deletionProtectionEnabled"] is False
    assert table["tags"] == {"team": "ops", "scheduled-table:component": "rem"}


# -- queues -----------------------------------------------------------------------------------------------------


def test_every_queue_the_component_owns_takes_1_mib_messages(build: Build) -> None:
    queues = build().of_type(":Queue")
    assert sorted(q.name for q in queues) == ["rem-due", "rem-poison", "rem-stream-dlq", "rem-target-dlq"]
    assert all(q.inputs["maxMessageSize"] == 1048576 for q in queues)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (None, {"maxMessageBytes": 1048576}),
        (QueueTarget(TARGET_QUEUE), {"arn": TARGET_QUEUE, "maxMessageBytes": 262144}),
        (QueueTarget(TARGET_QUEUE, max_message_bytes=1048576), {"arn": TARGET_QUEUE, "maxMessageBytes": 1048576}),
        (TopicTarget("arn:aws:sns:eu-west-1:123456789012:t"), {"arn": "arn:aws:sns:eu-west-1:123456789012:t"}),
    ],
    ids=["due-queue", "queue-default", "queue-raised", "topic"],
)
def test_the_handler_knows_the_target_queues_largest_message(
    build: Build, target: Any, expected: dict[str, Any]
) -> None:
    config_target = build(target=target).handler_config()["target"]
    assert {k: v for k, v in config_target.items() if k in expected} == expected
    assert ("maxMessageBytes" in config_target) is ("maxMessageBytes" in expected)


@pytest.mark.parametrize("queue", ["rem-stream-dlq", "rem-target-dlq", "rem-poison"])
def test_dead_letter_queues_are_encrypted_keep_14_days_and_have_no_dlq(build: Build, queue: str) -> None:
    inputs = build().one(queue).inputs
    assert inputs["sqsManagedSseEnabled"] is True
    assert inputs["messageRetentionSeconds"] == 14 * 24 * 3600
    assert "redrivePolicy" not in inputs


def test_due_queue_exists_only_without_a_target(build: Build) -> None:
    assert "rem-due" in build().mocks.by_name
    assert "rem-due" not in build(target=QueueTarget(TARGET_QUEUE)).mocks.by_name
    assert "due_queue_url" not in build(target=QueueTarget(TARGET_QUEUE)).outputs


# -- function and mapping ---------------------------------------------------------------------------------------


def test_function_defaults(build: Build) -> None:
    fn = build().one("rem-scheduler").inputs
    assert fn["handler"] == "eventbridge.handler"
    assert fn["runtime"] == "python3.12"
    assert fn["architectures"] == ["arm64"]
    assert (fn["memorySize"], fn["timeout"]) == (1024, 60)
    assert fn["loggingConfig"]["logGroup"] == build().one("rem-scheduler-logs").outputs["name"]
    assert fn["environment"]["variables"]["LOG_LEVEL"] == "INFO"


def test_function_overrides(build: Build) -> None:
    built = build(
        lambda_memory_mb=512, lambda_timeout_seconds=120, lambda_architecture="x86_64", lambda_runtime="python3.13"
    )
    fn = built.one("rem-scheduler").inputs
    assert (fn["memorySize"], fn["timeout"], fn["architectures"], fn["runtime"]) == (
        512,
        120,
        ["x86_64"],
        "python3.13",
    )


def test_log_group_retention_default_and_override(build: Build) -> None:
    assert build().one("rem-scheduler-logs").inputs["retentionInDays"] == 30
    assert build(log_retention_days=7).one("rem-scheduler-logs").inputs["retentionInDays"] == 7


def test_function_code_is_an_archive_of_the_repo_handlers(build: Build) -> None:
    code = build().one("rem-scheduler").inputs["code"]
    members = code.assets
    assert {"eventbridge/__init__.py", "eventbridge/planning.py", "st_core/dispatch.py"} <= set(members)
    assert all(Path(asset.path).is_file() for asset in members.values())
    assert not any("__pycache__" in name or name.startswith("tests") for name in members)


def test_mapping_defaults(build: Build) -> None:
    built = build()
    mapping = built.one("rem-scheduler-mapping").inputs
    assert mapping["eventSourceArn"] == built.one("rem-table").outputs["streamArn"]
    assert mapping["startingPosition"] == "TRIM_HORIZON"
    assert mapping["batchSize"] == 100
    assert mapping["maximumBatchingWindowInSeconds"] == 1
    assert mapping["maximumRetryAttempts"] == 10
    assert mapping["maximumRecordAgeInSeconds"] == 3600
    assert mapping["bisectBatchOnFunctionError"] is True
    assert mapping["parallelizationFactor"] == 1
    assert mapping["functionResponseTypes"] == ["ReportBatchItemFailures"]
    on_failure = mapping["destinationConfig"]["onFailure"]["destinationArn"]
    assert on_failure == built.one("rem-stream-dlq").outputs["arn"]


def test_mapping_overrides(build: Build) -> None:
    mapping = (
        build(
            batch_size=10,
            maximum_batching_window_seconds=5,
            starting_position="LATEST",
            maximum_retry_attempts=2,
            maximum_record_age_seconds=600,
            bisect_on_error=False,
            parallelization_factor=4,
        )
        .one("rem-scheduler-mapping")
        .inputs
    )
    assert (mapping["batchSize"], mapping["maximumBatchingWindowInSeconds"], mapping["startingPosition"]) == (
        10,
        5,
        "LATEST",
    )
    assert (mapping["maximumRetryAttempts"], mapping["maximumRecordAgeInSeconds"]) == (2, 600)
    assert (mapping["bisectBatchOnFunctionError"], mapping["parallelizationFactor"]) == (False, 4)


def test_mapping_filters_are_the_time_attribute_patterns(build: Build) -> None:
    mapping = build(time_attribute="remindAt").one("rem-scheduler-mapping").inputs
    patterns = [f["pattern"] for f in mapping["filterCriteria"]["filters"]]
    assert patterns == filter_patterns(eventbridge_filters("remindAt"))
    assert all("remindAt" in p for p in patterns)


def test_handler_config_wires_real_resources(build: Build) -> None:
    built = build(
        schedule_retry_attempts=3,
        schedule_max_event_age_seconds=600,
        lambda_timeout_seconds=45,
        idempotency_window_seconds=90000,
    )
    config = built.handler_config()
    assert config["mode"] == "eventbridge"
    assert config["table"] == built.one("rem-table").outputs["name"]
    assert config["target"] == {"kind": "sqs", "arn": built.one("rem-due").outputs["arn"], "maxMessageBytes": 1048576}
    assert config["poisonQueueUrl"] == built.one("rem-poison").outputs["url"]
    assert config["scheduler"] == {
        "group": built.one("rem-schedules").outputs["name"],
        "roleArn": built.one("rem-scheduler-exec-role").outputs["arn"],
        "deadLetterArn": built.one("rem-target-dlq").outputs["arn"],
        "maxEventAgeSeconds": 600,
        "maxRetryAttempts": 3,
    }
    assert config["eventbridge"] == {
        "ledgerTable": built.one("rem-ledger").outputs["name"],
        "leaseSeconds": 75,
        "windowSeconds": 90000,
        "startAttribute": "recurrenceStart",
        "endAttribute": "recurrenceEnd",
    }
    assert built.outputs["ledger_table_name"] == built.one("rem-ledger").outputs["name"]


# -- IAM --------------------------------------------------------------------------------------------------------


def test_scheduler_role_trusts_only_scheduler_for_this_account(build: Build) -> None:
    trust = json.loads(build().one("rem-scheduler-exec-role").inputs["assumeRolePolicy"])
    (statement,) = trust["Statement"]
    assert statement["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert statement["Condition"] == {"StringEquals": {"aws:SourceAccount": "123456789012"}}


def test_no_policy_grants_a_wildcard_action(build: Build) -> None:
    built = build()
    for name in ("rem-scheduler-policy", "rem-scheduler-exec-policy"):
        assert all("*" not in action for action in actions(built.policy(name))), name


def test_lambda_manages_only_its_groups_schedules_and_passes_only_the_scheduler_role(build: Build) -> None:
    built = build()
    policy = built.policy("rem-scheduler-policy")
    group = built.one("rem-schedules").outputs["name"]
    manage = statement_for(policy, "scheduler:CreateSchedule")
    assert manage["Resource"] == [f"arn:aws:scheduler:eu-west-1:123456789012:schedule/{group}/*"]
    pass_role = statement_for(policy, "iam:PassRole")
    assert pass_role["Resource"] == [built.one("rem-scheduler-exec-role").outputs["arn"]]
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}
    stream = statement_for(policy, "dynamodb:GetRecords")
    assert stream["Resource"] == [built.one("rem-table").outputs["arn"] + "/stream/*"]


def test_lambda_may_use_the_ledger_and_read_items_of_its_own_table(build: Build) -> None:
    built = build()
    found = built.statements("rem-scheduler-policy")
    ledger_arn, table_arn = built.one("rem-ledger").outputs["arn"], built.one("rem-table").outputs["arn"]
    # Its batch's schedule markers go in with BatchWriteItem, an action IAM does not fold into PutItem.
    ledger_actions = ["dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem"]
    ledger_actions.append("dynamodb:UpdateItem")
    assert {"Effect": "Allow", "Action": ledger_actions, "Resource": [ledger_arn]} in found
    # The batch's items are read back with BatchGetItem (GetItem for one that read left unsettled); nothing else on
    # the table's items: the consumer never writes them.
    assert [s for s in found if s["Resource"] == [table_arn]] == [
        {"Effect": "Allow", "Action": ["dynamodb:BatchGetItem", "dynamodb:GetItem"], "Resource": [table_arn]}
    ]


def test_the_ledger_has_its_own_ttl_no_stream_and_the_tables_encryption(build: Build) -> None:
    key = "arn:aws:kms:eu-west-1:123456789012:key/abc"
    ledger = build(kms_key_arn=key).one("rem-ledger").inputs
    assert ledger["hashKey"] == "id" and ledger["ttl"] == {"attributeName": "expiresAt", "enabled": True}
    assert not ledger.get("streamEnabled")
    assert ledger["serverSideEncryption"] == {"enabled": True, "kmsKeyArn": key}


def test_lambda_may_send_to_its_dead_letter_and_poison_queues(build: Build) -> None:
    built = build()
    sends = [s for s in built.policy("rem-scheduler-policy")["Statement"] if s["Action"] == ["sqs:SendMessage"]]
    resources = {r for s in sends for r in s["Resource"]}
    assert built.one("rem-stream-dlq").outputs["arn"] in resources
    assert built.one("rem-poison").outputs["arn"] in resources


def via(service: str) -> dict[str, Any]:
    """The condition of a grant used through `service` only (in the tests' region)."""
    return {"Condition": {"StringEquals": {"kms:ViaService": f"{service}.eu-west-1.amazonaws.com"}}}


def test_a_table_key_lets_the_lambda_use_it_through_dynamodb_sqs_and_scheduler_only(build: Build) -> None:
    assert not any(a.startswith("kms:") for a in actions(build().policy("rem-scheduler-policy")))
    built = build(kms_key_arn=KEY)
    found = built.statements("rem-scheduler-policy")
    schedules = built.one("rem-schedules").outputs["arn"].replace(":schedule-group/", ":schedule/") + "/*"
    bound = {"ArnLike": {"kms:EncryptionContext:aws:scheduler:schedule:arn": schedules}}
    scheduler = via("scheduler")["Condition"]
    assert [s for s in found if any(a.startswith("kms:") for a in s["Action"])] == [
        # its queues (the component's own, under the table's key), the table and the ledger
        allow(["kms:Decrypt", "kms:GenerateDataKey"], [KEY], **via("sqs")),
        allow(["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"], [KEY], **via("dynamodb")),
        # the schedules' payloads, encrypted by Scheduler as the function, for this group's schedules only
        allow(["kms:DescribeKey"], [KEY], **via("scheduler")),
        allow(["kms:Decrypt", "kms:GenerateDataKey"], [KEY], Condition={**scheduler, **bound}),
    ]
    # Scheduler's role reads the payloads of this group's schedules itself (no service between: no ViaService)
    assert allow(["kms:Decrypt"], [KEY], Condition=bound) in built.statements("rem-scheduler-exec-policy")
    assert built.handler_config()["scheduler"]["kmsKeyArn"] == KEY


FUNCTION = "arn:aws:lambda:eu-west-1:123456789012:function:f"
STATE_MACHINE = "arn:aws:states:eu-west-1:123456789012:stateMachine:m"
TOPIC = "arn:aws:sns:eu-west-1:123456789012:t"
SES_IDENTITIES = [
    "arn:aws:ses:eu-west-1:123456789012:identity/reminders@example.com",
    "arn:aws:ses:eu-west-1:123456789012:identity/example.com",
]
KEY = "arn:aws:kms:eu-west-1:123456789012:key/abc"
TARGET_KEY = "arn:aws:kms:eu-west-1:123456789012:key/target"


def allow(actions: list[str], resources: list[str], **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions, "Resource": resources, **extra}


@pytest.mark.parametrize(
    ("target", "grant"),
    [
        (QueueTarget(TARGET_QUEUE), allow(["sqs:SendMessage"], [TARGET_QUEUE])),
        (FunctionTarget(FUNCTION), allow(["lambda:InvokeFunction"], [FUNCTION, f"{FUNCTION}:*"])),
        (StateMachineTarget(STATE_MACHINE), allow(["states:StartExecution"], [STATE_MACHINE])),
        (TopicTarget(TOPIC), allow(["sns:Publish"], [TOPIC])),
        (
            EmailTarget("Reminders <reminders@example.com>"),
            allow(
                ["ses:SendEmail"],
                SES_IDENTITIES,
                Condition={"StringEquals": {"ses:FromAddress": "reminders@example.com"}},
            ),
        ),
    ],
    ids=["queue", "function", "state-machine", "topic", "email"],
)
def test_scheduler_role_may_do_exactly_the_targets_action(build: Build, target: Any, grant: dict[str, Any]) -> None:
    built = build(target=target)
    policy = built.policy("rem-scheduler-exec-policy")
    target_dlq = built.one("rem-target-dlq").outputs["arn"]
    assert policy["Statement"] == [grant, allow(["sqs:SendMessage"], [target_dlq])]
    # The scheduling Lambda delivers due-now items itself, so it holds the same target permission.
    assert grant in built.policy("rem-scheduler-policy")["Statement"]


@pytest.mark.parametrize(
    "target",
    [
        QueueTarget(TARGET_QUEUE, kms_key_arn=TARGET_KEY),
        StateMachineTarget(STATE_MACHINE, kms_key_arn=TARGET_KEY),
        TopicTarget(TOPIC, kms_key_arn=TARGET_KEY),
    ],
    ids=["queue", "state-machine", "topic"],
)
def test_a_target_key_is_usable_by_whoever_sends_to_the_target(build: Build, target: Any) -> None:
    built = build(target=target)
    service = target.arn.split(":")[2]  # sqs, sns, states: the service that uses the target's key
    use_key = allow(["kms:Decrypt", "kms:GenerateDataKey"], [TARGET_KEY], **via(service))
    assert use_key in built.statements("rem-scheduler-exec-policy")
    assert use_key in built.statements("rem-scheduler-policy")
    assert "key/target" not in json.dumps(built.handler_config())  # the handlers need not know it


def test_a_function_target_takes_no_key_and_its_senders_get_no_kms_action(build: Build) -> None:
    """Invoking a function uses no key of its (its key encrypts its environment, which only Lambda reads): the
    option that granted kms:GenerateDataKey and kms:Decrypt on one is gone, and no role gets a KMS action for it."""
    with pytest.raises(TypeError, match="FunctionTarget: kms_key_arn: unknown keyword"):
        FunctionTarget(FUNCTION, kms_key_arn=TARGET_KEY)  # type: ignore[call-arg]
    built = build(target=FunctionTarget(FUNCTION))
    for policy in ("rem-scheduler-exec-policy", "rem-scheduler-policy"):
        assert not [s for s in built.statements(policy) if any(a.startswith("kms:") for a in s["Action"])], policy


def test_email_target_config_reaches_the_handler(build: Build) -> None:
    # The sender as written, display name included (SES accepts it); IAM uses the bare address.
    sender = "Reminders <r@example.com>"
    target = EmailTarget(sender, recipient_attribute="mail", subject="Hi {name}", body="At {when}")
    config = build(target=target).handler_config()
    assert config["target"] == {
        "kind": "email",
        "arn": "arn:aws:scheduler:::aws-sdk:sesv2:sendEmail",
        "email": {"sender": sender, "recipientAttribute": "mail", "subject": "Hi {name}", "body": "At {when}"},
    }


def test_an_email_targets_configuration_set_is_sent_with_and_granted(build: Build) -> None:
    """SES authorizes a SendEmail on the configuration set it names as well as on the sender's identity: both the
    function sending itself and Scheduler's role may send with that set, from the sender's address only."""
    target = EmailTarget("r@example.com", configuration_set="reminders")
    built = build(target=target)
    assert built.handler_config()["target"]["email"]["configurationSet"] == "reminders"
    identity = "arn:aws:ses:eu-west-1:123456789012:identity"
    send = allow(
        ["ses:SendEmail"],
        [
            f"{identity}/r@example.com",
            f"{identity}/example.com",
            "arn:aws:ses:eu-west-1:123456789012:configuration-set/reminders",
        ],
    )
    send["Condition"] = {"StringEquals": {"ses:FromAddress": "r@example.com"}}
    for policy in ("rem-scheduler-exec-policy", "rem-scheduler-policy"):
        assert send in built.statements(policy), policy
    with pytest.raises(ValueError, match=r"EmailTarget\.configuration_set: 'arn:aws:ses:x' is not a configuration set"):
        EmailTarget("r@example.com", configuration_set="arn:aws:ses:x")


@pytest.mark.parametrize("mode", ["eventbridge", "ttl", "polling", "aggregate"])
def test_every_function_and_role_has_a_description(build: Build, mode: str) -> None:
    built = build(mode=mode, **({"precise": True} if mode == "ttl" else {}))
    for registration in built.of_type("lambda/function:Function") + built.of_type("iam/role:Role"):
        description = registration.inputs.get("description") or ""
        assert "scheduled-table rem" in description, registration.name
        assert len(description) <= (256 if registration.type.endswith("Function") else 1000)


def test_tracing_passes_through_by_default_and_active_adds_xray_permissions(build: Build) -> None:
    passthrough = build()
    assert passthrough.one("rem-scheduler").inputs["tracingConfig"] == {"mode": "PassThrough"}
    assert not any("xray:PutTraceSegments" in s["Action"] for s in passthrough.statements("rem-scheduler-policy"))
    active = build(tracing="Active")
    assert active.one("rem-scheduler").inputs["tracingConfig"] == {"mode": "Active"}
    assert {
        "Effect": "Allow",
        "Action": ["xray:PutTraceSegments", "xray:PutTelemetryRecords"],
        "Resource": "*",
    } in active.statements("rem-scheduler-policy")


# -- issue 24.2 (audit): a KMS key option takes the key's ARN, plain or an Output, checked when it resolves --------

NOT_A_KEY = (
    "is not a KMS key ARN; pass the key's `.arn` (arn:aws:kms:<region>:<account>:key/<key id>), e.g. "
    "'arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab': IAM grants kms: actions on the "
    "key's ARN, not on an alias or a key id"
)
BAD_KEYS = [
    "alias/reminders",
    "arn:aws:kms:eu-west-1:123456789012:alias/reminders",
    "1234abcd-12ab-34cd-56ef-1234567890ab",
    "arn:aws:sns:eu-west-1:123456789012:key/k",
]


@pytest.mark.parametrize("value", BAD_KEYS)
def test_a_table_key_that_is_not_a_key_arn_fails_plain_or_inside_an_output(build: Build, value: str) -> None:
    import pulumi

    from components import ScheduledTableArgs

    with pytest.raises(ValueError) as plain:
        ScheduledTableArgs(mode="eventbridge", kms_key_arn=value)
    assert str(plain.value) == f"kms_key_arn: {value!r} {NOT_A_KEY}"
    with pytest.raises(ValueError) as resolved:
        build(kms_key_arn=pulumi.Output.from_input(value))
    assert str(resolved.value).splitlines()[-1].endswith(str(plain.value))


@pytest.mark.parametrize("value", BAD_KEYS)
def test_a_target_key_that_is_not_a_key_arn_fails_plain_or_inside_an_output(build: Build, value: str) -> None:
    import pulumi

    with pytest.raises(ValueError) as plain:
        TopicTarget(TOPIC, kms_key_arn=value)
    assert str(plain.value) == f"TopicTarget.kms_key_arn: {value!r} {NOT_A_KEY}"
    with pytest.raises(ValueError) as resolved:
        build(target=TopicTarget(TOPIC, kms_key_arn=pulumi.Output.from_input(value)))
    assert str(resolved.value).splitlines()[-1].endswith(str(plain.value))


def test_keys_given_as_outputs_are_granted_as_plain_ones_are(build: Build) -> None:
    import pulumi

    built = build(
        kms_key_arn=pulumi.Output.from_input(KEY),
        target=TopicTarget(TOPIC, kms_key_arn=pulumi.Output.from_input(TARGET_KEY)),
    )
    found = built.statements("rem-scheduler-policy")
    assert allow(["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"], [KEY], **via("dynamodb")) in found
    assert allow(["kms:Decrypt", "kms:GenerateDataKey"], [TARGET_KEY], **via("sns")) in found
    assert built.one("rem-ledger").inputs["serverSideEncryption"] == {"enabled": True, "kmsKeyArn": KEY}
