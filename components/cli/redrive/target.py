"""Redrive from the target DLQ: dead-lettered due events sent to the target again (precision second: back into
the release queue)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Any

from ...packaging import constants, error_code, runtime_module
from ..aws import Client, Clients
from .discovery import RedriveError, Stack
from .queues import Message, Queue
from .records import record_keys
from .report import EVERYTHING, Report, Selection, short


def _dispatch() -> Any:
    return runtime_module("dispatch")


def universal_call(client: Client, arn: str, payload: str) -> str:
    """A Scheduler universal target (`arn:aws:scheduler:::aws-sdk:<service>:<action>`) called as Scheduler would:
    the schedule's Input is the request. A conditional delete whose condition fails found the item changed or gone
    (a later write took over); nothing is left to do."""
    from botocore import xform_name

    service, action = arn.removeprefix(constants.UNIVERSAL_TARGET_PREFIX).split(":", 1)
    request = json.loads(payload)
    try:
        getattr(client(service), xform_name(action[:1].upper() + action[1:]))(**request)
    except Exception as error:
        if error_code(error) == "ConditionalCheckFailedException":
            return "the item changed since: the condition failed, nothing to do"
        raise
    return f"{service}.{action}"


def target_dlq(
    client: Client,
    stack: Stack,
    report: Report,
    choice: Selection = EVERYTHING,
) -> Report:
    """Send each dead-lettered due event to the target again; the message is deleted once the target took it.
    Scheduler's messages (eventbridge, precise ttl) hold the schedule's Input as their body; polling's hold the keys,
    the item and the due time, from which the same due event is built again."""
    reason, limit, dry_run, wait_seconds = choice.reason, choice.limit, choice.dry_run, choice.wait_seconds
    if stack.target_dlq_url is None:
        raise RedriveError(f"{stack.function}'s table has no target DLQ (mode {stack.config.get('mode')})")
    queue = Queue(client, stack.target_dlq_url, wait_seconds=wait_seconds)
    polling = stack.config.get("mode") == "polling"
    taken = 0
    try:
        for message in queue.messages():
            if limit is not None and taken >= limit:
                break
            try:
                send, what, why = (_polling_event if polling else _scheduler_event)(client, stack, message)
            except (ValueError, KeyError, TypeError) as problem:
                report.line("cannot resend", f"message {message.id}", f"{type(problem).__name__}: {problem}")
                continue
            if reason is not None and not reason.search(why):
                continue
            taken += 1
            if dry_run:
                report.line("would resend", what, f"reason={short(why, 160)!r}")
                continue
            try:
                detail = send()
            except Exception as error:
                report.line("failed", what, f"{error_code(error)}: {short(str(error), 200)}")
                continue
            queue.delete(message)
            report.line("resent", what, detail)
        return report
    finally:
        queue.release()


Prepared = tuple[Callable[[], str], str, str]


def _scheduler_event(client: Client, stack: Stack, message: Message) -> Prepared:
    """A Scheduler dead-letter event: the body is the target's Input; ERROR_CODE, ERROR_MESSAGE, SCHEDULE_ARN and
    TARGET_ARN come as message attributes."""
    attributes = message.attributes
    code, text = str(attributes.get("ERROR_CODE", "")), str(attributes.get("ERROR_MESSAGE", ""))
    why = runtime_module("errors").key_refusal(code, text) or f"{code}: {text}"
    target_arn = attributes.get("TARGET_ARN") or stack.config["target"]["arn"]
    payload = message.body
    document = json.loads(payload, parse_float=Decimal)  # shown only: the payload is sent as it came
    schedule = attributes.get("SCHEDULE_ARN", "").rsplit("/", 1)[-1]
    if isinstance(document, dict) and _release().ENVELOPE in document:
        return _release_event(client, stack, message, why)
    if isinstance(document, dict) and "dueAt" in document:
        what = f"{short(document.get('keys'), 120)} dueAt={document['dueAt']} schedule={schedule or '?'}"
    else:
        what = f"schedule={schedule or '?'} {short(document, 120)}"
    if target_arn.startswith(constants.UNIVERSAL_TARGET_PREFIX):
        return (lambda: universal_call(client, target_arn, payload)), what, why
    # The due event's own occurrenceId; before it had one, a one-time schedule's name was already that id.
    occurrence = message.id
    if isinstance(document, dict) and "dueAt" in document:
        occurrence = str(document.get("occurrenceId") or schedule or message.id)

    return _sender(client, stack, payload, occurrence), what, why


def _sender(client: Client, stack: Stack, payload: str, occurrence: str) -> Callable[[], str]:
    """Send `payload` to the stack's target through the handlers' dispatch, under the occurrence's name."""
    dispatch = _dispatch()

    def send() -> str:
        dispatch.send_now(stack.config["target"], payload, occurrence=occurrence, clients=Clients(client))
        return f"to {stack.config['target']['kind']} {stack.config['target']['arn']}"

    return send


def _release() -> Any:
    return runtime_module("release")


def _release_event(client: Client, stack: Stack, message: Message, why: str) -> Prepared:
    """A dead letter of `precision="second"` (Scheduler's, for a release schedule that could not reach the release
    queue, or the releaser's, for a target that refused): the release envelope goes back into the release queue,
    held until its due second, never to the target. The releaser then does what it does for every release: sends it
    on only at its second, only if the item still holds that due time (a cancelled occurrence is dropped), and only
    through the occurrence's ledger claim (one delivered since is not delivered again)."""
    release = _release().parse(message.body)
    if not _release().enabled(stack.config):
        raise ValueError("a release envelope, but the function's table has no release queue (precision is not second)")
    queue = _release().queue_url(stack.config)
    what = f"{record_keys({'dynamodb': {'Keys': release.keys}})} dueAt={release.due:%Y-%m-%dT%H:%M:%SZ} (second)"

    def send() -> str:
        from datetime import UTC

        delay = _release().delay_seconds(release.due, datetime.now(UTC))
        _release().enqueue(Clients(client), stack.config, message.body, delay)
        held = "if the item still holds it" if release.item_due is not None else "(a recurring firing: not checked)"
        return f"to the release queue {queue} (held {delay} s): released at its second {held}, once through its claim"

    return send, what, why


def _polling_event(client: Client, stack: Stack, message: Message) -> Prepared:
    """A polling dead letter: the same due event as the processor's, under the same occurrence name."""
    # Exact numbers: the event is written anew from these, and a float keeps 15-17 of DynamoDB's 38 digits.
    body = json.loads(message.body, parse_float=Decimal)
    dispatch = _dispatch()
    due = runtime_module("timeparse").parse_due(body["dueAt"])
    item = body.get("item") or {}
    occurrence = str(body["occurrence"])  # the occurrence's id: the target dedupes a redrive with the first send
    event = dispatch.due_event(
        mode="polling", table=body["table"], keys=body["keys"], due=due, item=item, occurrence=occurrence
    )
    if "trimmed" in str(body.get("note") or "") or not item:
        event["item"], event["itemTrimmed"] = {}, True
    what = f"{short(body['keys'], 120)} dueAt={body['dueAt']} attempts={body.get('attempts')}"
    target = stack.config["target"]

    def send() -> str:
        payload = dispatch.target_input(target, event)
        dispatch.send_now(target, payload, occurrence=occurrence, clients=Clients(client))
        return f"to {target['kind']} {target['arn']}"

    return send, what, str(body.get("reason") or "")
