"""The redrive against moto: the handlers' moto env (a real table, stream and queues), plus a stand-in for the
consumer function that runs the real handler in-process when invoked (moto runs Lambda code only in Docker), and
answers GetFunctionConfiguration and ListEventSourceMappings as Lambda would for a deployed ScheduledTable."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from st_core.config import HandlerConfig

from components.cli.aws import Client
from components.cli.redrive import queues
from tests.conftest import REGION
from tests.handlers.conftest import ACCOUNT, Env
from tests.handlers.conftest import env as env  # the moto env fixture, shared with the handler tests

Handler = Callable[[Any, HandlerConfig], Any]


@dataclass
class Function:
    """A deployed consumer: its config, mapping and code (a handler's `handle_batch`)."""

    env: Env
    handle: Handler
    filters: list[dict[str, Any]]
    stream_dlq_arn: str | None = None
    name: str = "items-consumer"
    invoked: list[list[dict[str, Any]]] = field(default_factory=list)
    # Replace the handler's answer (a transient failure the fix has not cured, say): records -> response or None.
    answer: Callable[[list[dict[str, Any]]], Any] | None = None

    def get_function_configuration(self, FunctionName: str) -> dict[str, Any]:
        if FunctionName != self.name:
            raise self._not_found(FunctionName)
        return {
            "FunctionArn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.name}",
            "Environment": {"Variables": {"SCHEDULED_TABLE_CONFIG": json.dumps(self.env.config)}},
        }

    def list_event_source_mappings(self, FunctionName: str | None = None, EventSourceArn: str | None = None) -> Any:
        if EventSourceArn not in (None, self.env.stream.arn):
            return {"EventSourceMappings": []}
        mapping: dict[str, Any] = {
            "FunctionArn": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.name}",
            "EventSourceArn": self.env.stream.arn,
            "FilterCriteria": {"Filters": [{"Pattern": json.dumps(f)} for f in self.filters]},
        }
        if self.stream_dlq_arn:
            mapping["DestinationConfig"] = {"OnFailure": {"Destination": self.stream_dlq_arn}}
        return {"EventSourceMappings": [mapping]}

    def get_paginator(self, operation: str) -> Any:
        """ListFunctions, as Lambda pages it: this function, with its configuration's environment."""
        assert operation == "list_functions"
        configuration = {"FunctionName": self.name, **self.get_function_configuration(self.name)}
        return type("Pages", (), {"paginate": lambda _: iter([{"Functions": [configuration]}])})()

    def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes = b"") -> dict[str, Any]:
        if InvocationType == "DryRun":  # Lambda checks the caller may invoke, runs nothing: 204
            assert FunctionName == self.name
            return {"StatusCode": 204}
        assert (FunctionName, InvocationType) == (self.name, "RequestResponse")
        event = json.loads(Payload)  # exactly what Lambda would hand the function: JSON, nothing else
        self.invoked.append(event["Records"])
        response = self.answer(event["Records"]) if self.answer else None
        if response is None:
            response = self.handle(event, self.env.config)
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(response).encode())}

    def _not_found(self, name: str) -> Exception:
        from botocore.exceptions import ClientError

        error = {"Error": {"Code": "ResourceNotFoundException", "Message": f"Function not found: {name}"}}
        return ClientError(error, "GetFunctionConfiguration")


def aws(function: Function, **overrides: Any) -> Client:
    """`client(service)`: the stand-in function for Lambda, moto for everything else (one client per service)."""
    made: dict[str, Any] = {"lambda": function, **overrides}

    def client(service: str) -> Any:
        if service not in made:
            made[service] = boto3.client(service, region_name=REGION)
        return made[service]

    return client


def queue(env: Env, name: str) -> tuple[str, str]:
    """A component-owned queue (1 MiB messages): its URL and ARN."""
    url = env.sqs.create_queue(QueueName=name, Attributes={"MaximumMessageSize": str(1024 * 1024)})["QueueUrl"]
    return url, f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"


def bodies(env: Env, url: str) -> list[dict[str, Any]]:
    """Every message visible in a queue (read and left there: made visible again)."""
    found: list[dict[str, Any]] = []
    handles: list[str] = []
    while True:
        batch = env.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30).get("Messages", [])
        if not batch:
            break
        found += [json.loads(m["Body"]) for m in batch]
        handles += [m["ReceiptHandle"] for m in batch]
    for handle in handles:
        env.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    return found


def run(source: str, function: Function, *args: str, client: Client | None = None) -> tuple[int, list[str]]:
    """The command, as the operator runs it; its exit status and output lines."""
    from components.cli.command import main

    lines: list[str] = []
    status = main(
        ["redrive", source, "--function", function.name, *args], client=client or aws(function), emit=lines.append
    )
    return status, lines


@pytest.fixture(autouse=True)
def _short_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto answers an empty queue at once; long polling would only wait here."""
    monkeypatch.setattr(queues, "WAIT_SECONDS", 0)
