"""The stack of one ScheduledTable, found from its consumer function alone: its configuration document names the
poison queue, the target and the target DLQ; its event source mapping names the stream DLQ (the on-failure
destination) and the filter the records passed."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from ...backfill_function import HANDLER as BACKFILL_HANDLER
from ...packaging import constants, error_code
from ..aws import Client


class RedriveError(Exception):
    """What the operator must fix before a redrive can start (a wrong function name, a queue not found)."""


@dataclass(frozen=True)
class Stack:
    function: str
    config: dict[str, Any]
    poison_url: str
    stream_dlq_url: str | None
    target_dlq_url: str | None
    filters: list[dict[str, Any]]


def queue_url(client: Client, arn: str) -> str:
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise RedriveError(f"{arn!r} is not an SQS queue ARN")
    answer = client("sqs").get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])
    return str(answer["QueueUrl"])


def discover(client: Client, function: str) -> Stack:
    """The stack's queues and the mapping's filters, from the consumer function (the `function_name` output)."""
    lam = client("lambda")
    try:
        configuration = lam.get_function_configuration(FunctionName=function)
    except Exception as error:
        raise RedriveError(f"function {function!r}: {error_code(error)}: {error}") from error
    if configuration.get("Handler") == BACKFILL_HANDLER:
        raise RedriveError(
            f"function {function!r} is the stack's backfill function, not its consumer: pass the consumer as "
            f"--function (the stack output function_name), and {function!r} as --in-lambda"
        )
    raw = (configuration.get("Environment") or {}).get("Variables", {}).get(constants.CONFIG_VARIABLE)
    if not raw:
        raise RedriveError(
            f"function {function!r} has no {constants.CONFIG_VARIABLE}: name a ScheduledTable's function_name"
        )
    config: dict[str, Any] = json.loads(raw)
    mappings = lam.list_event_source_mappings(FunctionName=function).get("EventSourceMappings", [])
    stream_dlq_url = None
    filters: list[dict[str, Any]] = []
    for mapping in mappings:
        destination = ((mapping.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if destination:
            stream_dlq_url = queue_url(client, destination)
        for item in (mapping.get("FilterCriteria") or {}).get("Filters") or []:
            filters.append(json.loads(item["Pattern"]))
    target_dlq_url = None
    if config.get("polling", {}).get("deadLetterUrl"):
        target_dlq_url = str(config["polling"]["deadLetterUrl"])
    elif config.get("scheduler", {}).get("deadLetterArn"):
        target_dlq_url = queue_url(client, config["scheduler"]["deadLetterArn"])
    return Stack(function, config, str(config["poisonQueueUrl"]), stream_dlq_url, target_dlq_url, filters)


def replace_queue(stack: Stack, source: str, url: str) -> Stack:
    """The stack with the queue of one redrive source (poison, stream, target) named by the operator instead."""
    if source == "poison":
        return dataclasses.replace(stack, poison_url=url)
    if source == "stream":
        return dataclasses.replace(stack, stream_dlq_url=url)
    return dataclasses.replace(stack, target_dlq_url=url)


def check_backfill_function(client: Client, function: str) -> None:
    """`--in-lambda`: the function exists and runs the backfill entry point (else RedriveError naming the fix)."""
    try:
        configuration = client("lambda").get_function_configuration(FunctionName=function)
    except Exception as error:
        raise RedriveError(
            f"--in-lambda {function!r}: {error_code(error)}: {error}. Pass the stack's backfill function (the stack "
            "output backfill_function_name; deployed with backfill_function=True)"
        ) from error
    handler = configuration.get("Handler")
    if handler and handler != BACKFILL_HANDLER:
        raise RedriveError(
            f"--in-lambda {function!r} runs {handler}, not {BACKFILL_HANDLER}: pass the stack's backfill function (the "
            "stack output backfill_function_name), not its consumer"
        )
