"""ScheduledTableArgs validation: every rule fails at construction with a message that names the field and the fix."""

from __future__ import annotations

import dataclasses
import pydoc
from pathlib import Path
from typing import Any

import pytest

from components import EmailTarget, FunctionTarget, QueueTarget, ScheduledTableArgs, StateMachineTarget, TopicTarget
from components.args import Mode, describe_defaults


def test_defaults_are_valid_and_secure() -> None:
    args = ScheduledTableArgs(mode="eventbridge")
    assert args.mode is Mode.EVENTBRIDGE
    assert (args.point_in_time_recovery, args.server_side_encryption, args.deletion_protection) == (True, True, True)
    assert args.maximum_retry_attempts >= 0 and args.maximum_record_age_seconds > 0  # finite: no blocked shards
    assert args.bisect_on_error is True and args.lambda_architecture == "arm64"


def test_args_are_frozen_and_keyword_only() -> None:
    args = ScheduledTableArgs(mode="eventbridge")
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.batch_size = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        ScheduledTableArgs("eventbridge")  # type: ignore[call-arg]


def test_unknown_mode_lists_the_modes() -> None:
    with pytest.raises(ValueError) as caught:
        ScheduledTableArgs(mode="cron")  # type: ignore[arg-type]
    assert str(caught.value) == "mode: 'cron' is not a mode; use one of 'eventbridge', 'ttl', 'polling', 'aggregate'"


POLLING_RULES: list[tuple[dict[str, Any], str]] = [
    ({"shards": 0}, "shards: 0 is out of range; use a whole number from 1 to 100"),
    (
        {"shards": 8, "shard_groups": 9},
        "shard_groups: 9 is out of range; use a whole number from 1 to 8 (one processor invocation per group of "
        "shards; raise shards for more)",
    ),
    ({"shard_groups": 0}, "shard_groups: 0 is out of range; use a whole number from 1 to 8"),
    ({"poll_interval_minutes": 0}, "poll_interval_minutes: 0 is out of range; use a whole number from 1 to 1440"),
    ({"on_done": "archive"}, "on_done: 'archive' is not valid; use 'mark' (keep the item, marked done) or 'delete'"),
    ({"delay_attribute": "dueAt"}, "delay_attribute: 'dueAt' cannot be used; name an attribute of its own"),
    ({"default_delay_seconds": -1}, "default_delay_seconds: -1 is out of range"),
    ({"max_attempts": 0}, "max_attempts: 0 is out of range; use a whole number from 1 to 100"),
    ({"retry_backoff_seconds": 0}, "retry_backoff_seconds: 0 is out of range"),
    ({"time_attribute": "stDue"}, "time_attribute: 'stDue' is reserved for the due index"),
]


@pytest.mark.parametrize(("kwargs", "message"), POLLING_RULES, ids=[next(iter(k)) for k, _ in POLLING_RULES])
def test_each_polling_rule_names_the_field_and_the_fix(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ScheduledTableArgs(mode="polling", **kwargs)
    assert str(caught.value).startswith(message), str(caught.value)


def test_ttl_mode_accepts_precise_and_its_attributes() -> None:
    args = ScheduledTableArgs(mode="ttl", precise=True, repeat_attribute="every")
    assert args.mode is Mode.TTL and args.precise and args.repeat_attribute == "every"


@pytest.mark.parametrize("mode", list(Mode))
def test_every_mode_is_available_with_its_defaults(mode: Mode) -> None:
    assert ScheduledTableArgs(mode=mode.value).mode is mode


RULES: list[tuple[dict[str, Any], str]] = [
    ({"partition_key": ""}, "partition_key: must not be empty; name the table's partition key attribute, e.g. 'PK'"),
    ({"sort_key": ""}, "sort_key: must not be empty; name the sort key attribute, or pass None"),
    ({"sort_key": "PK"}, "sort_key: is the same attribute as partition_key ('PK'); use another name"),
    ({"partition_key_type": "X"}, "partition_key_type: 'X' is not a key type; use 'S' (string), 'N' (number)"),
    ({"sort_key_type": "BOOL"}, "sort_key_type: 'BOOL' is not a key type"),
    ({"time_attribute": ""}, "time_attribute: must not be empty; name the attribute that holds the due time"),
    ({"time_attribute": "SK"}, "time_attribute: 'SK' is a key attribute; keep the due time in its own attribute"),
    ({"billing_mode": "FREE"}, "billing_mode: 'FREE' is not a billing mode; use 'PAY_PER_REQUEST' or 'PROVISIONED'"),
    ({"billing_mode": "PROVISIONED"}, "read_capacity: PROVISIONED billing needs read_capacity and write_capacity"),
    ({"read_capacity": 5}, "read_capacity: capacities only apply to PROVISIONED billing; remove them"),
    (
        {"server_side_encryption": False, "kms_key_arn": "arn:aws:kms:eu-west-1:1:key/k"},
        "kms_key_arn: a KMS key needs server_side_encryption=True; remove kms_key_arn or enable encryption",
    ),
    ({"target": "arn:aws:sqs:eu-west-1:123456789012:q"}, "target: str is not a target; pass one of QueueTarget"),
    (
        {"target": QueueTarget("arn:aws:sqs:eu-west-1:123456789012:q.fifo")},
        "QueueTarget.content_based_deduplication: eventbridge mode delivers through EventBridge Scheduler",
    ),
    ({"lambda_memory_mb": 64}, "lambda_memory_mb: 64 is out of range; use a whole number from 128 to 10240"),
    ({"lambda_timeout_seconds": 901}, "lambda_timeout_seconds: 901 is out of range; use a whole number from 1 to 900"),
    ({"lambda_architecture": "arm"}, "lambda_architecture: 'arm' is not supported; use 'arm64' or 'x86_64'"),
    ({"lambda_runtime": "python3.9"}, "lambda_runtime: 'python3.9' is not supported; use one of"),
    ({"log_retention_days": 10}, "log_retention_days: 10 is not a CloudWatch period; use e.g. 7, 30 or 90"),
    # Another type where a number belongs: the field and the fix, not "unhashable type: 'list'"
    ({"log_retention_days": ["x"]}, "log_retention_days: ['x'] is not a CloudWatch period; use e.g. 7, 30 or 90"),
    ({"log_retention_days": True}, "log_retention_days: True is not a CloudWatch period; use e.g. 7, 30 or 90"),
    ({"log_level": "LOUD"}, "log_level: 'LOUD' is not a level"),
    ({"max_workers": 0}, "max_workers: 0 is out of range; use a whole number from 1 to 64"),
    ({"batch_size": 0}, "batch_size: 0 is out of range; use a whole number from 1 to 10000"),
    ({"maximum_batching_window_seconds": 301}, "maximum_batching_window_seconds: 301 is out of range"),
    ({"starting_position": "AT_TIMESTAMP"}, "starting_position: 'AT_TIMESTAMP' is not valid; use 'TRIM_HORIZON'"),
    (
        {"maximum_retry_attempts": -1},
        "maximum_retry_attempts: -1 is out of range; use a whole number from 0 to 10000 "
        "(-1, retry forever, would let one record block its shard)",
    ),
    (
        {"maximum_record_age_seconds": -1},
        "maximum_record_age_seconds: -1 is out of range; use a whole number from 60 to 604800 "
        "(-1, never expire, would block the shard)",
    ),
    ({"parallelization_factor": 11}, "parallelization_factor: 11 is out of range; use a whole number from 1 to 10"),
    (
        {"schedule_retry_attempts": 186},
        "schedule_retry_attempts: 186 is out of range; use a whole number from 0 to 185",
    ),
    ({"schedule_max_event_age_seconds": 30}, "schedule_max_event_age_seconds: 30 is out of range"),
    ({"batch_size": True}, "batch_size: expected a whole number, got True; use a whole number from 1 to 10000"),
    ({"batch_size": "10"}, "batch_size: expected a whole number, got '10'; use a whole number from 1 to 10000"),
    ({"bisect_on_error": "yes"}, "bisect_on_error: expected true or false, got 'yes'; pass bisect_on_error=True"),
    ({"time_attribute": 5}, "time_attribute: expected text, got 5; pass time_attribute as a string, e.g. 'dueAt'"),
    ({"tags": {"aws:owner": "x"}}, "tags: 'aws:owner': 'x' is not a valid tag; use non-empty string keys"),
    # None where a dict belongs: not "'NoneType' object has no attribute 'items'"
    ({"tags": None}, "tags: None is not a mapping of tag names to values; pass a dict, e.g. {'team': 'ops'}"),
    (
        {"precise": True},
        "precise: only applies to mode='ttl' (mode is 'eventbridge'); remove precise or set mode='ttl'",
    ),
    (
        {"idempotency_window_seconds": 60},
        "idempotency_window_seconds: 60 is out of range; use a whole number from 86400",
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "message"), RULES, ids=[next(iter(k)) + "-" + str(i) for i, (k, _) in enumerate(RULES)]
)
def test_each_rule_names_the_field_and_the_fix(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ScheduledTableArgs(mode="eventbridge", **kwargs)
    assert str(caught.value).startswith(message), str(caught.value)


TTL_RULES: list[tuple[dict[str, Any], str]] = [
    ({"repeat_attribute": ""}, "repeat_attribute: must not be empty; name an attribute"),
    ({"occurrence_attribute": "dueAt"}, "occurrence_attribute: 'dueAt' is already used by another option"),
    ({"repeat_until_attribute": "repeatEvery"}, "repeat_until_attribute: 'repeatEvery' is already used by another"),
]


@pytest.mark.parametrize(("kwargs", "message"), TTL_RULES, ids=[next(iter(k)) for k, _ in TTL_RULES])
def test_each_ttl_rule_names_the_field_and_the_fix(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ScheduledTableArgs(mode="ttl", **kwargs)
    assert str(caught.value).startswith(message), str(caught.value)


# Every mode-specific option set on a mode it does not apply to: refused with the exact message, never ignored.
MISPLACED: list[tuple[str, dict[str, Any], str]] = [
    (
        "eventbridge",
        {"repeat_attribute": "every"},
        "repeat_attribute: only applies to mode='ttl' (mode is 'eventbridge'); remove repeat_attribute",
    ),
    (
        "polling",
        {"occurrence_attribute": "n"},
        "occurrence_attribute: only applies to mode='ttl' (mode is 'polling'); remove occurrence_attribute",
    ),
    (
        "polling",
        {"schedule_retry_attempts": 3},
        "schedule_retry_attempts: only applies to mode='eventbridge' or mode='ttl' (mode is 'polling'); "
        "remove schedule_retry_attempts",
    ),
    (
        "aggregate",
        {"schedule_max_event_age_seconds": 600},
        "schedule_max_event_age_seconds: only applies to mode='eventbridge' or mode='ttl' (mode is 'aggregate'); "
        "remove schedule_max_event_age_seconds",
    ),
    (
        "ttl",
        {"schedule_retry_attempts": 3},
        "schedule_retry_attempts: only applies to schedules: mode='eventbridge', or mode='ttl' with precise=True; "
        "remove schedule_retry_attempts or set precise=True",
    ),
    ("eventbridge", {"shards": 4}, "shards: only applies to mode='polling' (mode is 'eventbridge'); remove shards"),
    ("ttl", {"on_change": "adjust"}, "on_change: only applies to mode='aggregate' (mode is 'ttl'); remove on_change"),
]


@pytest.mark.parametrize(
    ("mode", "kwargs", "message"), MISPLACED, ids=[f"{m}-{next(iter(k))}" for m, k, _ in MISPLACED]
)
def test_an_option_of_another_mode_is_refused(mode: str, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ScheduledTableArgs(mode=mode, **kwargs)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_scheduler_options_apply_to_precise_ttl_and_the_ledger_window_to_every_mode() -> None:
    assert ScheduledTableArgs(mode="ttl", precise=True, schedule_retry_attempts=3).schedule_retry_attempts == 3
    for mode in Mode:
        assert ScheduledTableArgs(mode=mode, idempotency_window_seconds=86400).idempotency_window_seconds == 86400


def test_aggregate_refuses_grouping_by_the_partition_key() -> None:
    with pytest.raises(ValueError) as caught:
        ScheduledTableArgs(mode="aggregate", group_from="PK")
    assert str(caught.value) == (
        "group_from: 'PK' is the partition key, whose values all start with source_prefix 'SCORE': each total would "
        "look like a score and every score would be parked; group by the sort key (the default, 'SK') or another "
        "attribute"
    )


def test_aggregate_total_sort_key_may_share_the_source_prefix_the_filter_never_compares_it() -> None:
    assert ScheduledTableArgs(mode="aggregate", total_sort_key="SCORE_TOTAL").total_sort_key == "SCORE_TOTAL"


def test_tracing_is_passthrough_unless_active_is_asked_for() -> None:
    assert ScheduledTableArgs(mode="eventbridge").tracing == "PassThrough"
    assert ScheduledTableArgs(mode="eventbridge", tracing="Active").tracing == "Active"
    with pytest.raises(ValueError) as caught:
        ScheduledTableArgs(mode="eventbridge", tracing="active")  # type: ignore[arg-type]
    assert str(caught.value) == "tracing: 'active' is not an X-Ray mode; use 'PassThrough' (the default) or 'Active'"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"sender": "not-an-address"},
            "EmailTarget.sender: 'not-an-address' is not an email address; pass the verified SES identity to send "
            "from, e.g. 'reminders@example.com' or 'Reminders <reminders@example.com>'",
        ),
        ({"sender": "Reminders <>"}, "EmailTarget.sender: 'Reminders <>' is not an email address"),
        ({"sender": "r@"}, "EmailTarget.sender: 'r@' is not an email address"),
        ({"sender": "@example.com"}, "EmailTarget.sender: '@example.com' is not an email address"),
        (
            {"sender": "a@b.c", "recipient_attribute": ""},
            "EmailTarget.recipient_attribute: '' is not an attribute name; name the item attribute holding the "
            "recipient's address, e.g. 'email'",
        ),
        # None or another type where text belongs: the field and the fix, not a TypeError from inside `re` or `len`
        ({"sender": None}, "EmailTarget.sender: None is not an email address; pass the verified SES identity"),
        ({"sender": 5}, "EmailTarget.sender: 5 is not an email address"),
        ({"sender": "a@b.c", "recipient_attribute": 5}, "EmailTarget.recipient_attribute: 5 is not an attribute name"),
        (
            {"sender": "a@b.c", "subject": None},
            "EmailTarget.subject: None is not a template; pass text, e.g. 'Reminder: {title}', or leave it out for "
            "the default ('Reminder')",
        ),
        ({"sender": "a@b.c", "body": 3}, "EmailTarget.body: 3 is not a template; pass text"),
        ({"sender": "a@b.c", "body": ["x"]}, "EmailTarget.body: ['x'] is not a template; pass text"),
        ({"sender": "a@b.c", "subject": "Hi {name"}, "EmailTarget.subject: stray or empty brace at position 3"),
        ({"sender": "a@b.c", "body": "Hi {}"}, "EmailTarget.body: stray or empty brace at position 3"),
    ],
)
def test_email_target_validation(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        EmailTarget(**kwargs)
    assert str(caught.value).startswith(message), str(caught.value)


def test_an_email_body_that_would_overflow_lambdas_4_kb_environment_is_refused() -> None:
    target = EmailTarget("r@example.com", subject="Your appointment", body="x" * 4000)
    with pytest.raises(ValueError) as caught:
        ScheduledTableArgs(mode="eventbridge", target=target)
    assert str(caught.value) == (
        "target.body: the function environment would be about 6,127 bytes, over Lambda's 4 KB limit (4,096 bytes); "
        "shorten EmailTarget.body (4,000 bytes; next largest: EmailTarget.subject, 16 bytes)"
    )


@pytest.mark.parametrize("size", [1023, 1048577, "262144", True])
def test_queue_target_max_message_bytes_is_a_queues_max_message_size(size: Any) -> None:
    with pytest.raises(ValueError) as caught:
        QueueTarget("arn:aws:sqs:eu-west-1:123456789012:q", max_message_bytes=size)
    assert str(caught.value) == (
        f"QueueTarget.max_message_bytes: {size!r} is out of range; use a whole number from 1024 to 1048576, "
        "the queue's max_message_size"
    )


def test_queue_target_takes_256_kib_unless_told_otherwise() -> None:
    assert QueueTarget("arn:aws:sqs:eu-west-1:123456789012:q").max_message_bytes == 262144
    assert QueueTarget("arn:aws:sqs:eu-west-1:123456789012:q", max_message_bytes=1048576).max_message_bytes == 1048576


def test_email_sender_may_carry_a_display_name() -> None:
    assert EmailTarget("Reminders <r@example.com>").sender == "Reminders <r@example.com>"


def test_email_templates_with_literal_braces_are_fine() -> None:
    assert EmailTarget("a@b.c", body="{{literal}} and {name}").body == "{{literal}} and {name}"


def test_describe_defaults_covers_every_option_but_mode() -> None:
    defaults = describe_defaults()
    assert set(defaults) == {f.name for f in dataclasses.fields(ScheduledTableArgs)} - {"mode"}
    assert defaults["batch_size"] == 100 and defaults["target"] is None and defaults["tags"] == {}


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (
            lambda: QueueTarget("https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"),
            "QueueTarget.queue_arn: 'https://sqs.eu-west-1.amazonaws.com/123456789012/jobs' is a URL, not an ARN; "
            "this is a queue URL; pass the queue's `.arn`",
        ),
        (
            lambda: QueueTarget("jobs"),
            "QueueTarget.queue_arn: 'jobs' is not a full ARN (a name?); pass the queue's `.arn`, e.g. "
            "'arn:aws:sqs:eu-west-1:123456789012:jobs'",
        ),
        (
            lambda: QueueTarget("arn:aws:sns:eu-west-1:123456789012:news"),
            "QueueTarget.queue_arn: 'arn:aws:sns:eu-west-1:123456789012:news' is an ARN of 'sns', not of a queue "
            "('sqs'); pass the queue's `.arn`",
        ),
        (
            lambda: FunctionTarget("arn:aws:lambda:eu-west-1:123456789012:layer:x:1"),
            "FunctionTarget.function_arn: 'arn:aws:lambda:eu-west-1:123456789012:layer:x:1' is not a function ARN; "
            "pass the function's `.arn`, e.g. 'arn:aws:lambda:eu-west-1:123456789012:function:notify'",
        ),
        (
            lambda: StateMachineTarget("arn:aws:states:eu-west-1:123456789012:execution:flow:1"),
            "StateMachineTarget.state_machine_arn: 'arn:aws:states:eu-west-1:123456789012:execution:flow:1' is not a "
            "state machine ARN",
        ),
        (
            lambda: TopicTarget("arn:aws:sns:eu-west-1:1:news"),
            "TopicTarget.topic_arn: 'arn:aws:sns:eu-west-1:1:news' is not a full ARN (a name?)",
        ),
    ],
)
def test_a_plain_target_arn_is_checked_at_construction(target: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        target()
    assert str(caught.value).startswith(message), str(caught.value)


def test_good_target_arns_pass() -> None:
    QueueTarget("arn:aws:sqs:eu-west-1:123456789012:jobs")
    FunctionTarget("arn:aws:lambda:eu-west-1:123456789012:function:notify:live")
    StateMachineTarget("arn:aws-cn:states:cn-north-1:123456789012:stateMachine:flow")
    TopicTarget("arn:aws:sns:eu-west-1:123456789012:news")


def test_every_option_is_documented_with_its_default_in_help() -> None:
    from components.args import OPTION_DOCS

    names = [f.name for f in dataclasses.fields(ScheduledTableArgs)]
    assert sorted(OPTION_DOCS) == sorted(names) and all(OPTION_DOCS[n].strip() for n in names)
    text = pydoc.render_doc(ScheduledTableArgs, renderer=pydoc.plaintext)  # type: ignore[attr-defined]
    for name in names:
        assert f"{name} (" in text, name
    assert "batch_size (default 100)" in text and "mode (required)" in text


def test_help_on_the_component_shows_its_constructor() -> None:
    from components import ScheduledTable

    text = pydoc.render_doc(ScheduledTable, renderer=pydoc.plaintext)  # type: ignore[attr-defined]
    assert "help(ScheduledTableArgs)" in text and "poison_queue_url" in text


def test_the_configuration_page_has_a_row_for_every_option() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    table = readme[readme.index("| option | default | notes |") :].split("\n\n", 1)[0]
    for f in dataclasses.fields(ScheduledTableArgs):
        assert f"`{f.name}`" in table, f.name
