"""A poison queue of the user's (`existing_poison_queue`) takes what its MaximumMessageSize allows, often SQS's
default 256 KiB, not the 1 MiB of the component's own: a parked record larger than that still reaches it, with its
reason, its keys and as much of itself as fits, never lost. SQS's size limit is enforced by tests/aws_rules.py."""

from __future__ import annotations

import json

import eventbridge
from st_core import constants

from tests.handlers.conftest import Env

KIB = 1024
USERS_QUEUE_BYTES = 256 * KIB


def _users_queue(env: Env) -> str:
    """A queue of the user's taking 256 KiB messages (tests/aws_rules.py refuses a larger one as SQS does)."""
    size = {"MaximumMessageSize": str(USERS_QUEUE_BYTES)}
    url: str = env.sqs.create_queue(QueueName=f"parked-{env.table}", Attributes=size)["QueueUrl"]
    attributes = env.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])["Attributes"]
    assert int(attributes["MaximumMessageSize"]) == USERS_QUEUE_BYTES
    return url


def test_a_parked_record_over_256_kib_reaches_a_256_kib_queue_of_the_users_with_its_reason(env: Env) -> None:
    url = _users_queue(env)
    config = {**env.config, "poisonQueueUrl": url, "poisonMaxMessageBytes": USERS_QUEUE_BYTES}
    env.put({"PK": "big", "SK": "s", "dueAt": "garbage", "blob": "x" * (300 * KIB)})
    batch = env.event()
    assert len(json.dumps(batch["Records"][0])) > USERS_QUEUE_BYTES

    response = eventbridge.handle_batch(batch, config)  # type: ignore[arg-type]

    assert response["batchItemFailures"] == []
    (parked,) = env.messages(url)
    assert "not ISO-8601 or epoch seconds" in parked["reason"]
    assert parked["record"]["dynamodb"] == {"Keys": {"PK": {"S": "big"}, "SK": {"S": "s"}}}
    assert parked["note"] == "record trimmed: larger than the queue's 262,144-byte messages"
    # As much of the whole record as fits: its start, readable.
    assert json.dumps(batch["Records"][0], sort_keys=True, separators=(",", ":")).startswith(
        parked["recordExcerpt"][:100]
    )
    assert len(parked["recordExcerpt"]) > 100 * KIB
    assert env.rules.rejections == []


def test_an_item_the_polling_processor_parks_keeps_its_keys_in_a_256_kib_queue_of_the_users(env: Env) -> None:
    import polling

    from tests.handlers.conftest import with_due_index

    # GIVEN a 300 KiB item whose index entry the processor cannot read, and a poison queue of the user's (256 KiB)
    env = with_due_index(env)
    url = _users_queue(env)
    config = {**env.config, "poisonQueueUrl": url, "poisonMaxMessageBytes": USERS_QUEUE_BYTES}
    env.put({"PK": "big", "SK": "s", "stShard": 0, "stDue": 1, "stStatus": "PENDING", "stAttempts": "x"})
    env.ddb.update_item(
        TableName=env.table,
        Key={"PK": {"S": "big"}, "SK": {"S": "s"}},
        UpdateExpression="SET payload = :b",
        ExpressionAttributeValues={":b": {"S": "x" * (300 * KIB)}},
    )
    # WHEN the processor parks it
    assert polling.process(config, now=lambda: 1_900_000_000).poisoned == 1  # type: ignore[arg-type]
    # THEN its message keeps the keys, plain and in DynamoDB JSON (what `redrive poison` reads the item back with),
    # without the item
    (parked,) = env.messages(url)
    assert parked["record"] == {"keys": {"PK": "big", "SK": "s"}, "Keys": {"PK": {"S": "big"}, "SK": {"S": "s"}}}
    assert "'stAttempts'" in parked["reason"] and parked["note"].startswith("record trimmed")


def test_the_component_queues_default_stays_1_mib() -> None:
    from st_core.poison import message_limit

    assert message_limit({"poisonQueueUrl": "q"}) == constants.OWNED_QUEUE_MESSAGE_BYTES
    assert message_limit({"poisonMaxMessageBytes": USERS_QUEUE_BYTES}) == USERS_QUEUE_BYTES


def test_a_message_fitting_the_queue_is_sent_whole() -> None:
    from st_core.poison import poison_message

    record = {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "k"}}, "NewImage": {"a": {"S": "x" * 1000}}}}
    body = json.loads(poison_message(record=record, reason="r", error="E", mode="m", table="t", limit=4 * KIB))
    assert body["record"] == record and "note" not in body and "recordExcerpt" not in body


def test_every_size_from_sqs_minimum_up_keeps_the_message_within_the_limit() -> None:
    from st_core.poison import poison_message

    record = {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "k"}}, "NewImage": {"a": {"S": '"\\' * 5000}}}}
    for limit in (constants.SQS_MIN_MESSAGE_BYTES + constants.ENVELOPE_BYTES, 4 * KIB, 8 * KIB, 16 * KIB):
        body = poison_message(record=record, reason="r", error="E", mode="m", table="t", limit=limit)
        assert len(body.encode()) <= limit - constants.ENVELOPE_BYTES, limit
        assert json.loads(body)["reason"] == "r"
