"""Stack config (camelCase keys, as in Pulumi.<stack>.yaml) -> ScheduledTableArgs."""

from __future__ import annotations

from typing import Any

import pytest

from components import EmailTarget, FunctionTarget, QueueTarget, TopicTarget
from components.args import Mode
from components.stack_config import DictConfig, args_from_config, camel, tables_from_config, target_from_config
from localcloud.program import stack_config


class FakeConfig:
    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def get(self, key: str) -> str | None:
        value = self.values.get(key)
        return None if value is None else str(value)

    def get_bool(self, key: str) -> bool | None:
        return self.values.get(key)

    def get_int(self, key: str) -> int | None:
        return self.values.get(key)

    def get_object(self, key: str) -> Any:
        return self.values.get(key)


def test_camel_case_keys() -> None:
    assert camel("maximum_record_age_seconds") == "maximumRecordAgeSeconds" and camel("mode") == "mode"


def test_a_config_with_only_a_mode_gives_the_defaults() -> None:
    args = args_from_config(FakeConfig({"mode": "ttl"}))
    assert args.mode is Mode.TTL and args.batch_size == 100 and args.target is None


def test_a_missing_mode_is_an_error_not_eventbridge() -> None:
    with pytest.raises(ValueError) as caught:
        args_from_config(FakeConfig({"batchSize": 7}))
    assert str(caught.value) == (
        "mode: missing; set it in the stack configuration (`pulumi config set mode eventbridge`, or `mode:` in a "
        "tables entry) to one of 'eventbridge', 'ttl', 'polling', 'aggregate'"
    )


class ListingConfig(FakeConfig):
    """A config that can list its keys, as `StackConfig` does for a real stack."""

    def names(self) -> list[str]:
        return list(self.values)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"mode": "ttl", "batchsize": 7}, "batchsize: unknown key; did you mean batchSize?"),
        ({"mode": "ttl", "presice": True}, "presice: unknown key; did you mean precise?"),
        (
            {"mode": "ttl", "tables": [{"name": "a"}, {"name": "b", "timeAtribute": "x"}]},
            "tables[1].timeAtribute: unknown key; did you mean timeAttribute?",
        ),
        (
            {
                "mode": "eventbridge",
                "target": {"type": "queue", "arn": "arn:aws:sqs:r:123456789012:q", "maxMessageByte": 2048},
            },
            "target.maxMessageByte: unknown key; did you mean maxMessageBytes?",
        ),
        ({"mode": "ttl", "zzz": 1}, "zzz: unknown key; valid keys: "),
    ],
)
def test_an_unknown_key_anywhere_is_refused_with_the_closest_valid_one(values: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        tables_from_config(ListingConfig(values))
    assert str(caught.value).startswith(message), str(caught.value)


def test_the_stack_config_lists_the_projects_keys_only() -> None:
    import pulumi

    from components.stack_config import StackConfig

    pulumi.runtime.set_all_config(
        {"scheduled-table:mode": "ttl", "scheduled-table:batchsize": "7", "aws:region": "eu-west-1"}
    )
    try:
        config = StackConfig(pulumi.Config("scheduled-table"))
        assert sorted(config.names()) == ["batchsize", "mode"]
        with pytest.raises(ValueError, match="batchsize: unknown key; did you mean batchSize"):
            tables_from_config(config)
    finally:
        pulumi.runtime.set_all_config({})


def test_every_kind_of_value_is_read() -> None:
    args = args_from_config(
        FakeConfig(
            {
                "mode": "eventbridge",
                "batchSize": 7,
                "deletionProtection": False,
                "tags": {"a": "b"},
                "timeAttribute": "remindAt",
                "sortKey": "none",
                "target": {"type": "function", "arn": "arn:aws:lambda:eu-west-1:123456789012:function:f"},
            }
        )
    )
    assert (args.batch_size, args.deletion_protection, args.tags, args.time_attribute) == (
        7,
        False,
        {"a": "b"},
        "remindAt",
    )
    assert args.sort_key is None
    assert args.target == FunctionTarget("arn:aws:lambda:eu-west-1:123456789012:function:f")


def test_targets_from_config() -> None:
    assert target_from_config(None) is None
    assert target_from_config({"type": "dueQueue"}) is None
    assert target_from_config({"type": "queue", "arn": "arn:aws:sqs:r:123456789012:q"}) == QueueTarget(
        "arn:aws:sqs:r:123456789012:q"
    )
    raised = target_from_config({"type": "queue", "arn": "arn:aws:sqs:r:123456789012:q", "maxMessageBytes": 1048576})
    assert raised == QueueTarget("arn:aws:sqs:r:123456789012:q", max_message_bytes=1048576)
    keyed = target_from_config(
        {"type": "topic", "arn": "arn:aws:sns:r:123456789012:t", "kmsKeyArn": "arn:aws:kms:r:1:key/k"}
    )
    assert keyed == TopicTarget("arn:aws:sns:r:123456789012:t", kms_key_arn="arn:aws:kms:r:1:key/k")
    email = target_from_config({"type": "email", "sender": "a@b.c", "recipientAttribute": "to", "subject": "S"})
    assert email == EmailTarget("a@b.c", recipient_attribute="to", subject="S")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"type": "pigeon"}, "target.type: 'pigeon' is not a target type"),
        ({"type": "queue"}, "target.arn: a queue target needs the ARN of the queue"),
        ({"type": "email", "sender": "a@b.c", "colour": "red"}, "target.colour: unknown key; valid keys: body"),
        (
            {"type": "topic", "arn": "arn:aws:sns:r:123456789012:t", "maxMessageBytes": 1024},
            "target.maxMessageBytes: unknown key; valid keys: arn, kmsKeyArn, type",
        ),
        ("arn:aws:sqs:r:123456789012:q", "target: must be an object with a 'type'"),
    ],
)
def test_bad_target_config_is_explained(value: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        target_from_config(value)
    assert str(caught.value).startswith(message)


def test_the_dev_stack_file_is_a_valid_configuration() -> None:
    config = stack_config("dev")
    assert config["scheduled-table:mode"] == "eventbridge" and config["aws:region"]
    values = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("scheduled-table:")}
    typed = {
        "deletionProtection": values["deletionProtection"] == "true",
        "logRetentionDays": int(values["logRetentionDays"]),
        "tags": {"project": "scheduled-table"},
    }
    fake = FakeConfig({**values, **typed})
    args = args_from_config(fake)
    assert args.deletion_protection is False and args.log_retention_days == 7


def test_a_removed_option_fails_with_the_reason() -> None:
    with pytest.raises(ValueError) as caught:
        args_from_config(FakeConfig({"dispatchNowWithinSeconds": 60}))
    assert str(caught.value) == (
        "dispatchNowWithinSeconds: was removed: it delivered items up to that many seconds before their due time, "
        "and delivery is now never early (an item is delivered at its due time or, if that has passed, at once); "
        "delete the key from the stack configuration"
    )
    # In a `tables` entry too, and inherited from the top level.
    for config in (
        FakeConfig({"tables": [{"name": "a", "dispatchNowWithinSeconds": "1"}]}),
        FakeConfig({"dispatchNowWithinSeconds": "1", "tables": [{"name": "a"}]}),
    ):
        with pytest.raises(ValueError, match=r"^dispatchNowWithinSeconds: was removed"):
            tables_from_config(config)


def test_a_stack_without_tables_has_one_table_named_by_name() -> None:
    assert [name for name, _ in tables_from_config(FakeConfig({"mode": "ttl", "name": "offers"}))] == ["offers"]


def test_tables_inherit_top_level_keys_and_override_them() -> None:
    config = FakeConfig(
        {
            "mode": "ttl",
            "batchSize": 7,
            "tables": [{"name": "a", "timeAttribute": "remindAt"}, {"name": "b", "batchSize": "9"}],
        }
    )
    (a_name, a), (b_name, b) = tables_from_config(config)
    assert (a_name, a.batch_size, a.time_attribute) == ("a", 7, "remindAt")
    assert (b_name, b.batch_size, b.time_attribute) == ("b", 9, "dueAt")


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ([{"mode": "eventbridge"}], r"tables\[\].name: every entry needs a name"),
        ([{"name": "a"}, {"name": "a"}], r"tables\[\].name: names must be unique"),
        ({"name": "a"}, r"tables: must be a list of objects"),
    ],
)
def test_bad_tables_are_refused_with_the_field_and_fix(tables: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tables_from_config(FakeConfig({"tables": tables}))


def test_the_local_stack_config_builds_its_tables() -> None:
    # GIVEN Pulumi.local.yaml as the CLI hands it over (every value a string), read with pulumi.Config's rules
    raw = {k.split(":", 1)[1]: v for k, v in stack_config("local").items() if k.startswith("scheduled-table:")}
    built = tables_from_config(DictConfig(raw, FakeConfig({})))
    assert [(name, str(args.mode), args.time_attribute) for name, args in built] == [
        ("reminders", "eventbridge", "remindAt"),
        ("tasks", "eventbridge", "dueAt"),
        ("sessions", "ttl", "expiresAt"),
        ("offers", "ttl", "expiresAt"),
        ("jobs", "polling", "dueAt"),
        ("scores", "aggregate", "dueAt"),
        ("clinic", "eventbridge", "remindAt"),
        ("visits", "aggregate", "dueAt"),
        ("backlog", "eventbridge", "dueAt"),
        ("backlog-totals", "aggregate", "dueAt"),
        ("drift", "eventbridge", "dueAt"),
        ("flash", "eventbridge", "dueAt"),
    ]
    # Every entry inherits the top level's deletionProtection: the tables the stack creates, and the ledgers of the
    # two on `clinic` and the two on `backlog` (tables the stack does not own), so the local stack destroys cleanly.
    assert [name for name, args in built if args.reconcile_every is not None] == ["drift"]
    owned = [args for _, args in built if args.existing_table is None]
    assert len(owned) == 8 and all(args.deletion_protection is False for _, args in built)


# -- issue 24.1: a target without a `type`, or with keys nobody reads, is refused (it was dropped for the due queue)

QUEUE = "arn:aws:sqs:eu-west-1:123456789012:jobs"
TYPES = "['queue', 'function', 'stateMachine', 'topic', 'eventBus', 'email', 'dueQueue']"


@pytest.mark.parametrize(
    ("target", "message"),
    [
        # The provider's spelling: the target was silently dropped and every due event went to a new due queue.
        (
            {"kind": "queue", "arn": QUEUE},
            "target.kind: unknown key; a stack file names the target's kind with `type` (`kind` is the provider "
            "input's name): write `type: queue`",
        ),
        ({"arn": QUEUE}, f"target.type: missing; set it to one of {TYPES}"),
        ({"arn": QUEUE, "maxMessageBytes": 2048}, f"target.type: missing; set it to one of {TYPES}"),
        ({"type": None, "arn": QUEUE}, f"target.type: missing; set it to one of {TYPES}"),
        ({}, f"target.type: missing; set it to one of {TYPES}"),
        (
            {"type": "dueQueue", "arn": QUEUE},
            "target.arn: unknown key; a dueQueue target (the queue the component creates) takes no other keys; "
            "remove arn, or set type to the kind of resource the ARN names",
        ),
        (
            {"type": "queu", "arn": QUEUE},
            f"target.type: 'queu' is not a target type; did you mean queue? (one of {TYPES})",
        ),
        (
            {"type": "Topic", "arn": QUEUE},
            f"target.type: 'Topic' is not a target type; did you mean topic? (one of {TYPES})",
        ),
        ({"type": "sqs", "arn": QUEUE}, f"target.type: 'sqs' is not a target type; use one of {TYPES}"),
        (
            {"type": "queue", "arn": QUEUE, "colour": "red"},
            "target.colour: unknown key; valid keys: arn, contentBasedDeduplication, kmsKeyArn, maxMessageBytes, "
            "messageGroupAttribute, messageGroupId, type",
        ),
    ],
)
def test_a_target_without_a_known_type_or_with_an_unknown_key_is_refused(target: Any, message: str) -> None:
    # At the top level of the stack file, and in a `tables` entry, the same message.
    for config in (
        ListingConfig({"mode": "eventbridge", "target": target}),
        ListingConfig({"mode": "eventbridge", "tables": [{"name": "jobs", "target": target}]}),
    ):
        with pytest.raises(ValueError) as caught:
            tables_from_config(config)
        assert str(caught.value) == message


def test_a_target_in_the_stack_file_as_the_cli_hands_it_over_is_checked_too() -> None:
    # GIVEN `Pulumi.<stack>.yaml` entries as strings (what the CLI passes a program), read with pulumi.Config's rules
    raw = {"tables": '[{"name": "jobs", "mode": "polling", "target": {"kind": "queue", "arn": "' + QUEUE + '"}}]'}
    with pytest.raises(ValueError, match=r"^target\.kind: unknown key; .*write `type: queue`$"):
        tables_from_config(DictConfig(raw, FakeConfig({})))


@pytest.mark.parametrize(
    ("existing", "message"),
    [
        ({"name": "orders", "stream_arn": "x"}, "existingTable.stream_arn: unknown key; did you mean streamArn?"),
        ({"table": "orders"}, "existingTable.table: unknown key; valid keys: name, streamArn"),
        ({"streamArn": "arn:aws:dynamodb:eu-west-1:123456789012:table/o/stream/l"}, "existingTable.name: missing"),
        ("orders", "existingTable: must be an object with 'name'"),
    ],
)
def test_every_other_mapping_of_the_stack_file_refuses_unknown_and_missing_keys(existing: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        tables_from_config(ListingConfig({"mode": "eventbridge", "existingTable": existing}))
    assert str(caught.value).startswith(message), str(caught.value)
