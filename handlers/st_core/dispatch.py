"""The due event and how it reaches each kind of target: now (a direct SDK call) or later (a Scheduler target).

Every mode sends the same document, so a consumer written for one mode works with all of them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from . import constants
from .clients import CLIENTS, Clients
from .errors import PermanentError
from .jsontext import dumps, size
from .timeparse import format_due

if TYPE_CHECKING:  # the configuration's shapes, for the type checker only (see st_core/shapes.py)
    from .config import EmailConfig, SchedulerConfig, TargetConfig

# The AWS actions delivering to each target kind needs (checked by tests/iam): a function that delivers calls only
# its target kind's.
TARGET_ACTIONS: dict[str, tuple[str, ...]] = {
    "sqs": ("sqs:GetQueueUrl", "sqs:SendMessage"),
    "lambda": ("lambda:InvokeFunction",),
    "stepfunctions": ("states:StartExecution",),
    "sns": ("sns:Publish",),
    "email": ("ses:SendEmail",),
    "events": ("events:PutEvents",),
}
AWS_ACTIONS = tuple(sorted({action for actions in TARGET_ACTIONS.values() for action in actions}))

SOURCE = "scheduled-table"


class TargetKind(StrEnum):
    SQS = "sqs"
    LAMBDA = "lambda"
    STEP_FUNCTIONS = "stepfunctions"
    SNS = "sns"
    EMAIL = "email"
    EVENTS = "events"


# The due event's shape, for the type checker only: at run time it is a plain dict (building a TypedDict at import
# costs about 0.3 ms of every cold start). The public contract is scheduled_table.DueEvent and the JSON Schema
# (components/due_event.py, schemas/due_event.schema.json); tests check all three name the same fields.
if TYPE_CHECKING:

    class DueEvent(TypedDict):
        source: str
        occurrenceId: str
        mode: str
        table: str
        keys: dict[str, Any]
        dueAt: str
        item: dict[str, Any]
        itemTrimmed: NotRequired[bool]
        offsetSeconds: NotRequired[int]
        recurrence: NotRequired[str]  # a recurring item's expression; its dueAt is the firing's scheduled time
        timeZone: NotRequired[str]

else:
    DueEvent = dict


def due_event(
    *,
    mode: str,
    table: str,
    keys: dict[str, Any],
    due: datetime,
    item: dict[str, Any],
    occurrence: str,
    offset: int | None = None,
) -> DueEvent:
    """`occurrence`: the occurrence's id (`naming.occurrence_id`), the one the ledger and the target's deduplication
    use. `offset`: which of the item's `offsets` this is (seconds from `dueAt`), on tables configured with several."""
    event: DueEvent = {
        "source": SOURCE,
        "occurrenceId": occurrence,
        "mode": mode,
        "table": table,
        "keys": keys,
        "dueAt": format_due(due),
        "item": item,
    }
    if offset is not None:
        event["offsetSeconds"] = offset
    return event


def payload_limit(target: TargetConfig, *, via_scheduler: bool) -> int:
    """The largest payload (bytes) the target takes, and Scheduler's input limit when a schedule delivers it."""
    kind = TargetKind(target["kind"])
    if kind is TargetKind.SQS:
        limit = int(target.get("maxMessageBytes") or constants.SQS_DEFAULT_MESSAGE_BYTES)
    else:
        limit = _LIMITS[kind]
    if via_scheduler:
        limit = min(limit, constants.SCHEDULER_INPUT_BYTES)
    return limit - constants.ENVELOPE_BYTES


def email_request(email: EmailConfig, item: dict[str, Any]) -> dict[str, Any]:
    """An SES v2 SendEmail request (PascalCase, as both boto3 and Scheduler's universal target take it)."""
    from .templates import render  # only email targets compile the template module

    recipient = item.get(email["recipientAttribute"])
    if not isinstance(recipient, str) or "@" not in recipient:
        raise PermanentError(f"recipient attribute {email['recipientAttribute']!r} is missing or not an address")
    return {
        "FromEmailAddress": email["sender"],
        "Destination": {"ToAddresses": [recipient]},
        "Content": {
            "Simple": {
                "Subject": {"Data": render(email["subject"], item), "Charset": "UTF-8"},
                "Body": {"Text": {"Data": render(email["body"], item), "Charset": "UTF-8"}},
            }
        },
    }


def target_input(target: TargetConfig, event: DueEvent, *, via_scheduler: bool = False) -> str:
    """What the target receives, as the JSON text both Scheduler's `Input` and the direct calls take. A due event
    too big for the target is sent without its item (`item` empty, `itemTrimmed` true): the keys and due time
    always fit, so the action is never lost; the consumer reads the item by its keys."""
    limit = payload_limit(target, via_scheduler=via_scheduler)
    if TargetKind(target["kind"]) is TargetKind.EMAIL:
        text = dumps(email_request(target["email"], event["item"]))
        if size(text) > limit:
            raise PermanentError(f"the email rendered from this item is {size(text)} bytes, over the {limit} allowed")
        return text
    text = dumps(event)
    if size(text) <= limit:
        return text
    # A FIFO queue's group attribute stays, so the trimmed event goes to the same message group as a whole one.
    kept = _group_attribute(target, event["item"])
    trimmed = dumps({**event, "item": kept, "itemTrimmed": True})
    if kept and size(trimmed) > limit:
        trimmed = dumps({**event, "item": {}, "itemTrimmed": True})
    return trimmed


def scheduler_target(target: TargetConfig, scheduler: SchedulerConfig, payload: str) -> dict[str, Any]:
    """`payload` must come from `target_input(..., via_scheduler=True)`."""
    # The `Target` of a schedule: the target's ARN (or SES's universal target), role, input, retries, DLQ.
    kind = TargetKind(target["kind"])
    arn = constants.SES_UNIVERSAL_TARGET if kind is TargetKind.EMAIL else target["arn"]
    request = schedule_target(arn, scheduler, payload)
    if kind is TargetKind.EVENTS:
        # Scheduler's templated EventBridge target: PutEvents with `Input` as the event's detail.
        request["EventBridgeParameters"] = {"DetailType": target["detailType"], "Source": target["source"]}
    elif kind is TargetKind.SQS and is_fifo(target["arn"]):
        # Scheduler can set no deduplication id: the queue's content-based deduplication (which the component
        # requires in eventbridge mode) takes the SHA-256 of the body, the same for every retry of one firing.
        request["SqsParameters"] = {"MessageGroupId": message_group(target, payload)}
    return request


def schedule_target(arn: str, scheduler: SchedulerConfig, payload: str) -> dict[str, Any]:
    """A schedule `Target` for any ARN, universal targets included, with the component's retries and DLQ."""
    return {
        "Arn": arn,
        "RoleArn": scheduler["roleArn"],
        "Input": payload,
        "DeadLetterConfig": {"Arn": scheduler["deadLetterArn"]},
        "RetryPolicy": {
            "MaximumEventAgeInSeconds": scheduler["maxEventAgeSeconds"],
            "MaximumRetryAttempts": scheduler["maxRetryAttempts"],
        },
    }


def send_now(target: TargetConfig, payload: str, *, occurrence: str, clients: Clients = CLIENTS) -> None:
    """Deliver a payload to the target immediately. `occurrence` names this firing where the target dedupes."""
    kind = TargetKind(target["kind"])
    if kind is TargetKind.EVENTS:
        _put_event(clients, target, payload)
    elif kind is TargetKind.SQS and is_fifo(target["arn"]):
        sqs = clients.get("sqs")
        sqs.send_message(
            QueueUrl=_queue_url(sqs, target["arn"]),
            MessageBody=payload,
            MessageGroupId=message_group(target, payload),
            MessageDeduplicationId=deduplication_id(occurrence),
        )
    else:
        _SENDERS[kind](clients, target["arn"], payload, occurrence)


def _send_sqs(clients: Clients, arn: str, payload: str, occurrence: str) -> None:
    sqs = clients.get("sqs")
    sqs.send_message(QueueUrl=_queue_url(sqs, arn), MessageBody=payload)


def _send_lambda(clients: Clients, arn: str, payload: str, occurrence: str) -> None:
    clients.get("lambda").invoke(FunctionName=arn, InvocationType="Event", Payload=payload.encode("utf-8"))


def _send_step_functions(clients: Clients, arn: str, payload: str, occurrence: str) -> None:
    sfn = clients.get("stepfunctions")
    # A standard workflow refuses a second execution of the same name: a duplicate delivery starts nothing.
    with contextlib.suppress(sfn.exceptions.ExecutionAlreadyExists):
        sfn.start_execution(stateMachineArn=arn, name=execution_name(occurrence), input=payload)


# What Step Functions refuses in an execution name, besides whitespace and control characters.
_EXECUTION_NAME_REFUSES = frozenset('<>{}[]?*"#%\\^|~`$&,;:/')


def execution_name(occurrence: str) -> str:
    """The occurrence as a Step Functions execution name: itself when Step Functions takes it (1-80 characters,
    none of its refused ones: `naming.occurrence_id` always fits), otherwise its SHA-256 in hex. A recurring
    firing's id (`name@2026-03-30T08:00:00Z`) holds colons and can be 85 characters."""
    if 0 < len(occurrence) <= constants.STEP_FUNCTIONS_NAME_CHARS and all(
        "!" <= c <= "~" and c not in _EXECUTION_NAME_REFUSES for c in occurrence
    ):
        return occurrence
    return hashlib.sha256(occurrence.encode("utf-8")).hexdigest()


def _send_sns(clients: Clients, arn: str, payload: str, occurrence: str) -> None:
    clients.get("sns").publish(TopicArn=arn, Message=payload)


def _send_email(clients: Clients, arn: str, payload: str, occurrence: str) -> None:
    clients.get("sesv2").send_email(**json.loads(payload))


_SENDERS = {
    TargetKind.SQS: _send_sqs,
    TargetKind.LAMBDA: _send_lambda,
    TargetKind.STEP_FUNCTIONS: _send_step_functions,
    TargetKind.SNS: _send_sns,
    TargetKind.EMAIL: _send_email,
}


_LIMITS = {
    TargetKind.LAMBDA: constants.LAMBDA_ASYNC_PAYLOAD_BYTES,
    TargetKind.STEP_FUNCTIONS: constants.STEP_FUNCTIONS_INPUT_BYTES,
    TargetKind.SNS: constants.SNS_MESSAGE_BYTES,
    TargetKind.EVENTS: constants.EVENTBRIDGE_ENTRY_BYTES,
    # SES v2 takes far larger messages; what bounds an email request is Scheduler's input when it delivers.
    TargetKind.EMAIL: constants.SCHEDULER_INPUT_BYTES,
}


@lru_cache(maxsize=64)
def _queue_url(sqs: Any, arn: str) -> str:
    """Looked up once per client and queue (clients hash by identity, so a new client looks up again)."""
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise PermanentError(f"target {arn!r} is not an SQS queue ARN")
    return str(sqs.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"])


# -- SQS FIFO queues and EventBridge buses -----------------------------------------------------------------------


def is_fifo(arn: str) -> bool:
    """SQS names every FIFO queue, and only those, with the `.fifo` suffix."""
    return arn.endswith(".fifo")


def sqs_token(text: str) -> str:
    """`text` as a FIFO message group or deduplication id: itself when SQS takes it (1-128 characters, each
    alphanumeric or punctuation, i.e. printable ASCII but space), otherwise its SHA-256 in hex."""
    if 0 < len(text) <= constants.SQS_FIFO_ID_CHARS and all("!" <= c <= "~" for c in text):
        return text
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def deduplication_id(occurrence: str) -> str:
    """One id per occurrence, whoever sends it and however often: SQS keeps only the first within its 5-minute
    deduplication interval. The occurrence's id itself (`naming.occurrence_id` always fits), so the message's
    deduplication id is the due event's `occurrenceId`; hashed only for a name SQS would refuse."""
    return sqs_token(occurrence)


def message_group(target: TargetConfig, payload: str) -> str:
    """The FIFO message group of a due event (`payload`, the text `target_input` made): the configured fixed group;
    else the item's group attribute; else, by default and for an item without that attribute, the item's keys, so
    each item's occurrences stay in order and different items never wait for each other."""
    fixed = target.get("messageGroupId")
    if fixed:
        return fixed
    # Decimals, so a number's text (and so the group) is the same however it was written.
    event = json.loads(payload, parse_float=Decimal, parse_int=Decimal)
    for value in _group_attribute(target, event.get("item") or {}).values():
        return sqs_token(value if isinstance(value, str) else dumps(value))
    return sqs_token(dumps(event.get("keys") or {}))


def _group_attribute(target: TargetConfig, item: dict[str, Any]) -> dict[str, Any]:
    """The item's message group attribute, if the target groups by one and the item has it (an empty string or
    null counts as missing: SQS takes no empty group)."""
    attribute = target.get("messageGroupAttribute")
    if not attribute or item.get(attribute) in (None, ""):
        return {}
    return {attribute: item[attribute]}


def _put_event(clients: Clients, target: TargetConfig, payload: str) -> None:
    """PutEvents answers 200 even when it refused the entry: a refused entry raises, as the call's error would, so
    the record is retried (ThrottlingException, InternalFailure) or parked with AWS's reason, never dropped."""
    entry = {"EventBusName": target["arn"], "Source": target["source"], "DetailType": target["detailType"]}
    response = clients.get("events").put_events(Entries=[{**entry, "Detail": payload}])
    results = response.get("Entries") or [{}]
    refused = [r for r in results if r.get("ErrorCode") or not r.get("EventId")]
    if not response.get("FailedEntryCount") and not refused:
        return
    from botocore.exceptions import ClientError

    # No code at all: AWS's own failure, which retrying clears.
    code = next((str(r["ErrorCode"]) for r in refused if r.get("ErrorCode")), "InternalFailure")
    message = next((str(r["ErrorMessage"]) for r in refused if r.get("ErrorMessage")), "the entry was not accepted")
    raise ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}}, "PutEvents"
    )
