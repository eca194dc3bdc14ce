"""Baseline for cold start: a stream handler built the usual way, on Powertools for AWS Lambda's batch utility
(partial batch responses), with boto3 imported at module level as most handlers do."""

from __future__ import annotations

from typing import Any

import boto3
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord

processor = BatchProcessor(event_type=EventType.DynamoDBStreams)
scheduler = boto3.client("scheduler", region_name="eu-west-1")


def record_handler(record: DynamoDBRecord) -> None:
    return None


def handler(event: dict[str, Any], context: Any) -> Any:
    # Powertools' PartialItemFailureResponse (a TypedDict) when it is installed, as the dev extra now installs it.
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
