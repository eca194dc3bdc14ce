"""A consumer of scheduled-table's due events: an SQS-triggered Lambda function that acts once per occurrence.

Every target is delivered at least once (a redelivered stream batch, Scheduler's rare second invocation, SQS's own
redelivery), so the consumer dedupes on the due event's `table` and `occurrenceId`: the id is the same for every
delivery of one occurrence and unique within its table (two tables with the same keys and due time share it; see
docs/consumers.md). Powertools for AWS Lambda does the work:

- the batch processor reports only the failed messages (the event source mapping needs
  `function_response_types=["ReportBatchItemFailures"]`), so one bad message does not redeliver the batch;
- idempotency, keyed on `[table, occurrenceId]`, stores each occurrence's outcome in a DynamoDB table (partition
  key `id`, string; TTL on `expiration`): a second delivery gets the stored result instead of acting again;
- the parser reads each message body as scheduled-table's `DueEventModel` (pydantic), so a malformed body fails
  that message alone, and the action gets typed fields (`event.occurrence_id`, `event.due_at` as a datetime).

Needs `aws-lambda-powertools` (a layer or its package; the layer includes pydantic) and `scheduled-table` in the
function without its dependencies (`pip install --no-deps scheduled-table --target package/`: the model needs
pydantic only, not Pulumi). Environment: IDEMPOTENCY_TABLE. The function's role needs dynamodb:GetItem, PutItem,
UpdateItem and DeleteItem on that table.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.parser.models import SqsRecordModel
from aws_lambda_powertools.utilities.parser.types import Json
from scheduled_table.consumer import DueEventModel

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext


class DueEventRecord(SqsRecordModel):
    """An SQS message whose body is a due event. (From an SNS topic or an event bus rule it arrives wrapped: use
    Parser's SnsSqsEnvelope, or EventBridgeModel's `detail`.)"""

    body: Json[DueEventModel]  # type: ignore[assignment]


processor = BatchProcessor(event_type=EventType.SQS, model=DueEventRecord)
persistence = DynamoDBPersistenceLayer(table_name=os.environ["IDEMPOTENCY_TABLE"])
# Remember an occurrence longer than any redelivery can come: Scheduler retries for up to a day, a stream batch for
# its retention (24 h), and `scheduled-table redrive` may resend later still (then the target dedupes as here).
# The key is read from the model as Powertools stores it (`model_dump()`: its Python names).
config = IdempotencyConfig(event_key_jmespath="[table, occurrence_id]", expires_after_seconds=7 * 24 * 3600)


def remind(event: DueEventModel) -> dict[str, Any]:
    """The action: replace with yours (send the reminder, start the job...). Runs once per occurrence."""
    item = event.item  # when event.item_trimmed, read the item from the table by event.keys
    print(json.dumps({"remind": event.keys, "dueAt": event.due_at.isoformat(), "name": item.get("name")}))
    return {"reminded": event.occurrence_id}


@idempotent_function(data_keyword_argument="event", persistence_store=persistence, config=config)
def act(event: DueEventModel) -> dict[str, Any]:
    return remind(event)


def record_handler(record: DueEventRecord) -> dict[str, Any]:
    return act(event=record.body)


def handler(event: dict[str, Any], context: LambdaContext) -> Any:
    config.register_lambda_context(context)  # a record still in progress when the function times out is retried
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
