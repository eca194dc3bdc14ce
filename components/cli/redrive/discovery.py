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
from ..aws import Client, RedriveError


@dataclass(frozen=True)
class Stack:
    function: str
    config: dict[str, Any]
    poison_url: str
    stream_dlq_url: str | None
    target_dlq_url: str | None
    filters: list[dict[str, Any]]
    # ARNs, for the operator's policy (cli/permissions.py): the function's, its mapping's stream and on-failure queue.
    function_arn: str = ""
    stream_arn: str | None = None
    stream_dlq_arn: str | None = None


def queue_url(client: Client, arn: str) -> str:
    parts = arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise RedriveError(f"{arn!r} is not an SQS queue ARN")
    answer = client("sqs").get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])
    return str(answer["QueueUrl"])


def discover(client: Client, function: str) -> Stack:
    """The stack's queues and the mapping's filters, from the consumer function (the `function_name` output), or
    from the table's name: its stream's ScheduledTable consumer, when it has exactly one. A name that is neither
    is refused with the ScheduledTable functions the region has, so the right one need not be guessed."""
    lam = client("lambda")
    try:
        configuration = lam.get_function_configuration(FunctionName=function)
    except Exception as error:
        code = error_code(error)
        consumers = table_consumers(client, function) if code == "ResourceNotFoundException" else []
        if len(consumers) == 1:
            return discover(client, consumers[0])
        hint = f"; {functions_hint(client, consumers)}" if code == "ResourceNotFoundException" else ""
        raise RedriveError(f"function {function!r}: {code}: {error}{hint}") from error
    if configuration.get("Handler") == BACKFILL_HANDLER:
        raise RedriveError(
            f"function {function!r} is the stack's backfill function, not its consumer: pass the consumer as "
            f"--function (the stack output function_name), and {function!r} as --in-lambda"
        )
    config = config_of(configuration)
    if config is None:
        raise RedriveError(
            f"function {function!r} has no {constants.CONFIG_VARIABLE}: name a ScheduledTable's function_name"
        )
    mappings = lam.list_event_source_mappings(FunctionName=function).get("EventSourceMappings", [])
    stream_dlq_url = stream_arn = stream_dlq_arn = None
    filters: list[dict[str, Any]] = []
    for mapping in mappings:
        stream_arn = mapping.get("EventSourceArn") or stream_arn
        destination = ((mapping.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if destination:
            stream_dlq_url, stream_dlq_arn = queue_url(client, destination), str(destination)
        for item in (mapping.get("FilterCriteria") or {}).get("Filters") or []:
            filters.append(json.loads(item["Pattern"]))
    target_dlq_url = None
    if config.get("polling", {}).get("deadLetterUrl"):
        target_dlq_url = str(config["polling"]["deadLetterUrl"])
    elif config.get("scheduler", {}).get("deadLetterArn"):
        target_dlq_url = queue_url(client, config["scheduler"]["deadLetterArn"])
    arn = str(configuration.get("FunctionArn") or "")
    poison = str(config["poisonQueueUrl"])
    return Stack(function, config, poison, stream_dlq_url, target_dlq_url, filters, arn, stream_arn, stream_dlq_arn)


def config_of(configuration: dict[str, Any]) -> dict[str, Any] | None:
    """A function's ScheduledTable configuration document (None: not one of a ScheduledTable's functions)."""
    raw = (configuration.get("Environment") or {}).get("Variables", {}).get(constants.CONFIG_VARIABLE)
    return json.loads(raw) if raw else None


def table_consumers(client: Client, table: str) -> list[str]:
    """The ScheduledTable consumer functions of table `table`'s stream (its event source mappings), by name; none if
    there is no such table, it has no stream, or it cannot be read."""
    lam = client("lambda")
    try:
        stream = client("dynamodb").describe_table(TableName=table)["Table"].get("LatestStreamArn")
        mappings = lam.list_event_source_mappings(EventSourceArn=stream)["EventSourceMappings"] if stream else []
        found = set()
        for mapping in mappings:
            name = str(mapping["FunctionArn"]).split(":")[6]
            if config_of(lam.get_function_configuration(FunctionName=name)) is not None:
                found.add(name)
    except Exception as error:
        if not isinstance(getattr(error, "response", None), dict):
            raise
        return []
    return sorted(found)


def functions_hint(client: Client, consumers: list[str]) -> str:
    """What to pass instead: the table's consumers if it has several, else the region's ScheduledTable functions
    with their tables (read with ListFunctions; left out if that is not allowed)."""
    if consumers:
        return f"table's consumer functions: {', '.join(consumers)}; pass one to --function"
    found: list[str] = []
    try:
        for page in client("lambda").get_paginator("list_functions").paginate():
            for function in page.get("Functions", []):
                config = config_of(function)
                if config is not None:
                    found.append(f"{function['FunctionName']} (table {config.get('table')}, mode {config.get('mode')})")
    except Exception as error:
        if not isinstance(getattr(error, "response", None), dict):
            raise
    listed = "; ".join(sorted(found)[:20]) if found else "none found"
    return (
        f"the ScheduledTable functions here: {listed}; pass the consumer (the stack's function_name output: "
        "`pulumi stack output function_name`) to --function, or the table's name to --table"
    )


def consumer_of(client: Client, table: str) -> str:
    """`--table`: the ScheduledTable consumer of the table's stream, when exactly one reads it; else a RedriveError
    naming the consumers to choose from, or the region's ScheduledTable functions when none reads it."""
    consumers = table_consumers(client, table)
    if len(consumers) == 1:
        return consumers[0]
    if consumers:
        raise RedriveError(
            f"table {table!r} has several ScheduledTable consumers: {', '.join(consumers)}; pass one to --function"
        )
    raise RedriveError(
        f"table {table!r}: no ScheduledTable consumer reads its stream here (no such table, or no stream); "
        + functions_hint(client, consumers)
    )


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
