"""The operator commands find the user's own queues (`existing_poison_queue`, `existing_stream_dlq`,
`existing_target_dlq`) where they find the component's: in the consumer's configuration document and its mapping's
on-failure destination, as the component renders them (built under mocks), against moto."""

from __future__ import annotations

import json
from typing import Any

import eventbridge

from components import ExistingQueue, ScheduledTable, ScheduledTableArgs
from components.cli.command import main
from components.cli.redrive.discovery import discover
from components.modes.eventbridge import eventbridge_filters
from components.testing import run_with_mocks
from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT, Env
from tests.redrive.conftest import Function, aws, bodies, run

NAMES = {"existing_poison_queue": "parked", "existing_stream_dlq": "failed-batches", "existing_target_dlq": "undone"}


def rendered(table: str) -> tuple[dict[str, Any], str]:
    """The scheduling function's configuration document and its mapping's on-failure destination, as the component
    renders them with the user's three queues."""
    queues: dict[str, Any] = {
        option: ExistingQueue(f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}-{table}") for option, name in NAMES.items()
    }
    stack = run_with_mocks(
        lambda: ScheduledTable("r", ScheduledTableArgs(mode="eventbridge", **queues)), region=REGION, account=ACCOUNT
    )
    variables = stack.one("r-scheduler").inputs["environment"]["variables"]
    destination = stack.one("r-scheduler-mapping").inputs["destinationConfig"]["onFailure"]["destinationArn"]
    return json.loads(variables["SCHEDULED_TABLE_CONFIG"]), str(destination)


def test_inspect_and_redrive_read_the_users_queues(env: Env) -> None:
    # GIVEN the user's queues (the poison queue at SQS's 256 KiB) and a consumer deployed as the component renders it
    urls = {
        option: env.sqs.create_queue(
            QueueName=f"{name}-{env.table}", Attributes={"MaximumMessageSize": str(256 * 1024)}
        )["QueueUrl"]
        for option, name in NAMES.items()
    }
    config, destination = rendered(env.table)
    env.config["poisonQueueUrl"] = config["poisonQueueUrl"]
    env.config["poisonMaxMessageBytes"] = config["poisonMaxMessageBytes"]
    env.config["scheduler"]["deadLetterArn"] = config["scheduler"]["deadLetterArn"]
    function = Function(env, lambda event, c: eventbridge.handle_batch(event, c), eventbridge_filters("dueAt"))
    function.stream_dlq_arn = destination
    # WHEN a record is parked, and the operator looks
    env.put({"PK": "a", "SK": "A", "dueAt": "garbage"})
    eventbridge.handle_batch(env.event(), env.config)
    stack = discover(aws(function), function.name)
    # THEN each command's queue is the user's
    assert (stack.poison_url, stack.stream_dlq_url, stack.target_dlq_url) == (
        urls["existing_poison_queue"],
        urls["existing_stream_dlq"],
        urls["existing_target_dlq"],
    )
    lines: list[str] = []
    assert main(["inspect", "--function", function.name], client=aws(function), emit=lines.append) == 0, lines
    assert "  poison queue: 1 visible, 0 in flight" in lines, lines
    (parked,) = bodies(env, urls["existing_poison_queue"])
    assert "not ISO-8601" in parked["reason"]
    # AND `redrive poison --dry-run` lists it from there
    status, listed = run("poison", function, "--dry-run")
    assert status == 0 and any("not ISO-8601" in line for line in listed), listed
