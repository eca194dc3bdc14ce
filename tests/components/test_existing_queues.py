"""`existing_poison_queue`, `existing_stream_dlq`, `existing_target_dlq`: the user's own queue (by ARN) replaces the
one the component would make; every writer is granted exactly sqs:SendMessage on it (and its key's use); the
handlers, the mapping, Scheduler and the outputs name it; alarms watch it; and each mistake is refused with the
field and the fix, at construction or (an ARN known only then, the account and Region) when the stack deploys."""

from __future__ import annotations

import json
from typing import Any

import pulumi_aws as aws
import pytest

from components import ExistingQueue, ScheduledTable, ScheduledTableArgs
from components.inputs import args_from_inputs
from components.stack_config import DictConfig, args_from_config
from components.testing import run_with_mocks
from tests.components.conftest import NoConfig

ACCOUNT = "123456789012"
PARKED = f"arn:aws:sqs:eu-west-1:{ACCOUNT}:parked"
DLQ = f"arn:aws:sqs:eu-west-1:{ACCOUNT}:dead-letters"
STREAM_DLQ = f"arn:aws:sqs:eu-west-1:{ACCOUNT}:failed-batches"
KEY = f"arn:aws:kms:eu-west-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
ALL_THREE: dict[str, Any] = {
    "existing_poison_queue": ExistingQueue(PARKED, kms_key_arn=KEY),
    "existing_stream_dlq": ExistingQueue(STREAM_DLQ, kms_key_arn=KEY),
    "existing_target_dlq": ExistingQueue(DLQ, kms_key_arn=KEY, max_message_bytes=1048576),
}


def _built(**args: Any) -> Any:
    args.setdefault("mode", "eventbridge")
    return run_with_mocks(lambda: ScheduledTable("r", ScheduledTableArgs(**args)))


def _statements(stack: Any, role: str) -> list[dict[str, Any]]:
    return list(json.loads(stack.one(f"r-{role}-policy").inputs["policy"])["Statement"])


def _granted(stack: Any, role: str, action: str) -> set[str]:
    """The resources role `role` may call `action` on."""
    found: set[str] = set()
    for statement in _statements(stack, role):
        if action in statement["Action"]:
            found.update(statement["Resource"])
    return found


def _config(stack: Any, function: str) -> dict[str, Any]:
    variables = stack.one(f"r-{function}").inputs["environment"]["variables"]
    config: dict[str, Any] = json.loads(variables["SCHEDULED_TABLE_CONFIG"])
    return config


# -- what is made, and who may send where -----------------------------------------------------------------------


def test_the_component_makes_no_queue_it_was_given_and_the_handlers_mapping_and_scheduler_use_the_users() -> None:
    stack = _built(precision="second", **ALL_THREE)
    made = {q.name for q in stack.of_type(":Queue")}
    assert made == {"r-due", "r-release"}  # the target and the release machinery stay the component's
    config = _config(stack, "scheduler")
    assert config["poisonQueueUrl"] == f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/parked"
    assert config["poisonMaxMessageBytes"] == 262144
    assert config["scheduler"]["deadLetterArn"] == DLQ
    assert (
        config["eventbridge"]["release"]["deadLetterUrl"]
        == f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/dead-letters"
    )
    mapping = stack.one("r-scheduler-mapping").inputs
    assert mapping["destinationConfig"]["onFailure"]["destinationArn"] == STREAM_DLQ
    release = json.loads(stack.one("r-release").inputs["redrivePolicy"])
    assert release["deadLetterTargetArn"] == DLQ


def test_every_writer_may_send_to_the_users_queues_and_use_their_key_and_nothing_more() -> None:
    stack = _built(precision="second", **ALL_THREE)
    # The scheduling function parks in the poison queue, and its mapping sends failed batches to the stream DLQ.
    assert {PARKED, STREAM_DLQ} <= _granted(stack, "scheduler", "sqs:SendMessage")
    assert {PARKED, DLQ} <= _granted(stack, "releaser", "sqs:SendMessage")
    assert _granted(stack, "scheduler-exec", "sqs:SendMessage") >= {DLQ}
    for role in ("scheduler", "releaser", "scheduler-exec"):
        keyed = [s for s in _statements(stack, role) if s["Resource"] == [KEY]]
        through_sqs = {"StringEquals": {"kms:ViaService": "sqs.eu-west-1.amazonaws.com"}}
        use_key = {"Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": [KEY]}
        assert keyed == [{**use_key, "Condition": through_sqs}], role
    # Given nothing but the queues, no role may do anything else with them.
    for role in ("scheduler", "releaser", "scheduler-exec"):
        for statement in _statements(stack, role):
            if {PARKED, STREAM_DLQ, DLQ} & set(statement["Resource"]):
                assert statement["Action"] == ["sqs:SendMessage"], (role, statement)


def test_without_a_key_no_role_is_granted_kms() -> None:
    stack = _built(
        mode="polling",
        existing_poison_queue=ExistingQueue(PARKED),
        existing_target_dlq=ExistingQueue(DLQ, None, 1048576),
    )
    for role in ("assigner", "processor"):
        assert not any(a.startswith("kms:") for s in _statements(stack, role) for a in s["Action"]), role
    # its target, its DLQ, and the poison queue (where it parks an item whose index attributes it cannot read)
    due = stack.one("r-due").outputs["arn"]
    assert _granted(stack, "processor", "sqs:SendMessage") == {DLQ, due, PARKED}
    invoke = stack.one("r-processor-invoke-config").inputs
    assert invoke["destinationConfig"]["onFailure"]["destination"] == DLQ


def test_the_backfill_function_may_use_the_poison_queues_key_and_not_the_stream_dlqs_own() -> None:
    other = KEY.replace("1234abcd", "5678efab")
    stack = _built(
        mode="ttl",
        backfill_function=True,
        existing_poison_queue=ExistingQueue(PARKED, kms_key_arn=KEY),
        existing_stream_dlq=ExistingQueue(STREAM_DLQ, kms_key_arn=other),
    )
    assert _granted(stack, "executor", "kms:GenerateDataKey") == {KEY, other}
    assert _granted(stack, "backfill", "kms:GenerateDataKey") == {KEY}  # it parks; the mapping is the executor's
    sends = _granted(stack, "backfill", "sqs:SendMessage")
    assert PARKED in sends and STREAM_DLQ not in sends
    shared = _built(
        mode="ttl",
        backfill_function=True,
        existing_poison_queue=ExistingQueue(PARKED, kms_key_arn=KEY),
        existing_stream_dlq=ExistingQueue(STREAM_DLQ, kms_key_arn=KEY),
    )
    assert _granted(shared, "backfill", "kms:GenerateDataKey") == {KEY}


def test_a_stream_dlq_sharing_the_tables_key_leaves_the_backfill_its_use_of_the_table() -> None:
    """One company key for the table and the stream DLQ (the poison queue the component's own): the backfill
    scans and reads the encrypted table, so it keeps the key's use though it never writes to the stream DLQ."""
    stack = _built(
        mode="ttl",
        backfill_function=True,
        kms_key_arn=KEY,
        existing_stream_dlq=ExistingQueue(STREAM_DLQ, kms_key_arn=KEY),
    )
    assert _granted(stack, "backfill", "kms:Decrypt") == {KEY}
    assert STREAM_DLQ not in _granted(stack, "backfill", "sqs:SendMessage")


def test_precise_ttls_scheduler_parks_in_the_users_dlq() -> None:
    stack = _built(mode="ttl", precise=True, existing_target_dlq=ExistingQueue(DLQ, kms_key_arn=KEY))
    assert _granted(stack, "scheduler-exec", "sqs:SendMessage") == {DLQ}
    assert _granted(stack, "scheduler-exec", "kms:GenerateDataKey") == {KEY}
    assert {q.name for q in stack.of_type(":Queue")} == {"r-due", "r-poison", "r-stream-dlq"}


def test_the_users_queues_are_alarmed_by_name_as_the_components_own_are() -> None:
    stack = _built(**ALL_THREE)
    dimensions = {a.name: a.inputs["dimensions"] for a in stack.of_type(":MetricAlarm") if "not-empty" in a.name}
    assert dimensions == {
        "r-poison-not-empty-alarm": {"QueueName": "parked"},
        "r-stream-dlq-not-empty-alarm": {"QueueName": "failed-batches"},
        "r-target-dlq-not-empty-alarm": {"QueueName": "dead-letters"},
    }
    body = json.loads(stack.one("r-dashboard").inputs["dashboardBody"])
    assert all(name in json.dumps(body) for name in ("parked", "failed-batches", "dead-letters"))


def test_the_outputs_name_the_users_queues() -> None:
    holder: dict[str, ScheduledTable] = {}

    def program() -> Any:
        component = holder["c"] = ScheduledTable("r", ScheduledTableArgs(mode="eventbridge", **ALL_THREE))
        return {
            "poison": component.poison_queue_url,
            "stream": component.stream_dlq_url,
            "dlq": component.target_dlq_url,
        }

    stack = run_with_mocks(program)
    url = f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/"
    assert stack.result == {"poison": url + "parked", "stream": url + "failed-batches", "dlq": url + "dead-letters"}
    assert holder["c"].poison_queue is None and holder["c"].stream_dlq is None and "poison" not in holder["c"].queues


def test_an_owned_poison_queue_needs_no_lookup() -> None:
    """Without a queue of the user's the component still deploys with every lookup refused (invokes={})."""
    stack = run_with_mocks(lambda: ScheduledTable("r", ScheduledTableArgs(mode="ttl")), invokes={})
    assert "poisonMaxMessageBytes" not in _config(stack, "executor")


def test_the_provider_form_takes_camel_case_objects() -> None:
    args = args_from_inputs(
        {"mode": "ttl", "existingPoisonQueue": {"queueArn": PARKED, "kmsKeyArn": KEY, "maxMessageBytes": 65536}}
    )
    assert args.existing_poison_queue == ExistingQueue(PARKED, KEY, 65536)


def test_a_stack_files_queues_are_read() -> None:
    """`existingPoisonQueue:` in Pulumi.<stack>.yaml (or a `tables` entry), as YAML gives it."""
    entry = {"mode": "ttl", "existingPoisonQueue": {"queueArn": PARKED, "maxMessageBytes": 65536}}
    args = args_from_config(DictConfig(entry, NoConfig()))
    assert args.existing_poison_queue == ExistingQueue(PARKED, None, 65536)


# -- mistakes, named with the field and the fix -----------------------------------------------------------------


def _refused(**args: Any) -> str:
    args.setdefault("mode", "eventbridge")
    with pytest.raises(ValueError) as raised:
        ScheduledTableArgs(**args)
    return str(raised.value)


def test_a_queue_object_instead_of_its_arn_names_the_field_and_the_fix() -> None:
    def program() -> None:
        parked = aws.sqs.Queue("parked")
        ScheduledTable("r", ScheduledTableArgs(mode="ttl", existing_poison_queue=ExistingQueue(parked)))  # type: ignore[arg-type]

    with pytest.raises(ValueError) as raised:
        run_with_mocks(program)
    assert str(raised.value) == (
        "existing_poison_queue.queue_arn: got the Queue resource itself, not its arn; pass its `.arn` output: "
        "existing_poison_queue=ExistingQueue(queue_arn=queue.arn, ...)"
    )


def test_a_queue_object_as_the_option_names_the_fix() -> None:
    def program() -> None:
        parked = aws.sqs.Queue("parked")
        ScheduledTable("r", ScheduledTableArgs(mode="ttl", existing_stream_dlq=parked))  # type: ignore[arg-type]

    with pytest.raises(ValueError) as raised:
        run_with_mocks(program)
    assert (
        str(raised.value)
        == "existing_stream_dlq: got the Queue resource itself; pass ExistingQueue(queue_arn=queue.arn)"
    )


def test_an_arn_alone_names_the_wrapper() -> None:
    assert _refused(existing_poison_queue=PARKED) == (
        "existing_poison_queue: pass ExistingQueue(queue_arn=...), not the ARN alone"
    )


def test_a_fifo_queue_is_refused() -> None:
    assert _refused(existing_target_dlq=ExistingQueue(DLQ + ".fifo")) == (
        f"existing_target_dlq.queue_arn: '{DLQ}.fifo' is a FIFO queue; the handlers send to it without a message "
        "group, and neither Lambda's on-failure destination nor Scheduler's DLQ may be FIFO; pass a standard "
        "queue's ARN"
    )


def test_a_queue_url_is_refused() -> None:
    url = f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/parked"
    assert _refused(existing_poison_queue=ExistingQueue(url)) == (
        f"existing_poison_queue.queue_arn: '{url}' is a URL, not an ARN; this is a queue URL; pass the queue's `.arn`"
    )


def test_another_services_arn_is_refused() -> None:
    topic = f"arn:aws:sns:eu-west-1:{ACCOUNT}:ops"
    assert _refused(existing_stream_dlq=ExistingQueue(topic)) == (
        f"existing_stream_dlq.queue_arn: '{topic}' is not an SQS queue ARN; pass the queue's `.arn`, e.g. "
        "'arn:aws:sqs:eu-west-1:123456789012:parked'"
    )


@pytest.mark.parametrize(("mode", "extra"), [("aggregate", {}), ("ttl", {})])
def test_a_target_dlq_where_the_mode_has_none_is_refused(mode: str, extra: dict[str, Any]) -> None:
    assert _refused(mode=mode, existing_target_dlq=ExistingQueue(DLQ), **extra) == (
        f"existing_target_dlq: this ScheduledTable (mode {mode!r}) has no target DLQ (only `eventbridge`, `ttl` with "
        "`precise`, and `polling` have one); remove it"
    )


def test_a_key_alias_is_refused() -> None:
    message = _refused(existing_poison_queue=ExistingQueue(PARKED, kms_key_arn="alias/parked"))
    assert message.startswith("existing_poison_queue.kms_key_arn: 'alias/parked' is not a KMS key ARN; pass the key's")


@pytest.mark.parametrize("size", [0, 1023, 1048577, True, "262144"])
def test_a_size_sqs_does_not_have_is_refused(size: Any) -> None:
    assert _refused(existing_poison_queue=ExistingQueue(PARKED, max_message_bytes=size)) == (
        f"existing_poison_queue.max_message_bytes: {size!r} is out of range; use a whole number from 1024 to "
        "1048576, the queue's maxMessageSize"
    )


def test_polling_refuses_a_target_dlq_smaller_than_its_dead_letters() -> None:
    assert _refused(mode="polling", existing_target_dlq=ExistingQueue(DLQ)) == (
        "existing_target_dlq.max_message_bytes: 262144 is less than 1 MiB, and the polling processor parks whole "
        "items there (up to DynamoDB's 400 KB each, larger as JSON); raise the queue's maxMessageSize to 1048576 "
        "(max_message_size on aws.sqs.Queue) and set max_message_bytes=1048576"
    )


def test_one_queue_for_two_options_is_refused() -> None:
    assert _refused(existing_poison_queue=ExistingQueue(PARKED), existing_stream_dlq=ExistingQueue(PARKED)) == (
        f"existing_stream_dlq.queue_arn: {PARKED!r} is also existing_poison_queue; the redrive commands read each "
        "queue as one kind of message (parked records, failed stream batches, undelivered due events): give each its "
        "own queue"
    )


def test_second_precision_refuses_a_target_dlq_smaller_than_its_release_messages() -> None:
    assert _refused(precision="second", existing_target_dlq=ExistingQueue(DLQ)) == (
        "existing_target_dlq.max_message_bytes: 262144 is less than 1 MiB, and release messages of up to 1 MiB are "
        "parked or redriven there at precision 'second'; raise the queue's maxMessageSize to 1048576 "
        "(max_message_size on aws.sqs.Queue) and set max_message_bytes=1048576"
    )
    ScheduledTableArgs(mode="eventbridge", existing_target_dlq=ExistingQueue(DLQ))  # minute precision: Scheduler's


def test_an_unknown_key_in_a_dict_is_named() -> None:
    assert _refused(existing_poison_queue={"queueArn": PARKED, "size": 1}) == (
        "existing_poison_queue.size: unknown key; use one of queue_arn, kms_key_arn, max_message_bytes"
    )


def test_a_queue_in_another_region_is_refused_when_the_stack_deploys() -> None:
    elsewhere = PARKED.replace("eu-west-1", "us-east-1")
    with pytest.raises(ValueError) as raised:
        _built(mode="ttl", precise=True, existing_target_dlq=ExistingQueue(elsewhere))
    assert str(raised.value) == (
        f"existing_target_dlq.queue_arn: '{elsewhere}' is in us-east-1, and this stack deploys to eu-west-1: the "
        "functions send from the stack's Region, where a queue of another Region is not found; use a queue in eu-west-1"
    )


@pytest.mark.parametrize("option", ["existing_poison_queue", "existing_stream_dlq"])
def test_a_queue_in_another_account_is_refused_when_the_stack_deploys(option: str) -> None:
    theirs = PARKED.replace(ACCOUNT, "210987654321")
    with pytest.raises(ValueError) as raised:
        _built(mode="ttl", **{option: ExistingQueue(theirs)})
    assert str(raised.value) == (
        f"{option}.queue_arn: '{theirs}' is in account 210987654321, and this stack deploys to account {ACCOUNT}: "
        "the component can grant its writers only in its own account (another account's queue would need a queue "
        f"policy of its own); use a queue in account {ACCOUNT}"
    )


def test_a_fifo_queue_made_in_the_program_is_refused_when_its_arn_resolves() -> None:
    def program() -> None:
        fifo = aws.sqs.Queue("parked.fifo", name="parked.fifo", fifo_queue=True)
        ScheduledTable("r", ScheduledTableArgs(mode="ttl", existing_poison_queue=ExistingQueue(fifo.arn)))

    with pytest.raises(ValueError, match=r"^existing_poison_queue.queue_arn: '.*parked.fifo' is a FIFO queue;"):
        run_with_mocks(program)


def test_the_provider_form_names_the_camel_case_input() -> None:
    elsewhere = PARKED.replace("eu-west-1", "us-east-1")
    inputs: Any = {"mode": "ttl", "existingPoisonQueue": {"queueArn": elsewhere}}
    with pytest.raises(ValueError, match=r"^existingPoisonQueue.queueArn: 'arn:aws:sqs:us-east-1:.* use a queue in"):
        run_with_mocks(lambda: ScheduledTable("r", inputs))


def test_a_key_known_only_when_deploying_is_checked_then() -> None:
    def program() -> None:
        alias = aws.kms.Alias("parked", name="alias/parked", target_key_id="k")
        given = ExistingQueue(PARKED, kms_key_arn=alias.name)
        ScheduledTable("r", ScheduledTableArgs(mode="ttl", existing_poison_queue=given))

    with pytest.raises(ValueError, match=r"^existing_poison_queue.kms_key_arn: 'alias/parked' is not a KMS key ARN;"):
        run_with_mocks(program)


@pytest.mark.parametrize("option", ["existing_poison_queue", "existing_target_dlq"])
def test_a_queue_too_small_for_a_parked_messages_keys_and_reason_is_refused(option: str) -> None:
    assert _refused(**{option: ExistingQueue(PARKED, max_message_bytes=4096)}) == (
        f"{option}.max_message_bytes: 4096 is too small for a parked message (its reason, its item's keys of up to "
        "3 KB and its envelope always go whole); give a queue whose maxMessageSize is at least 8192"
    )


def test_a_small_stream_dlq_is_accepted_lambdas_failure_records_are_small() -> None:
    _built(existing_stream_dlq=ExistingQueue(STREAM_DLQ, max_message_bytes=1024))
