"""AWS limits the handlers must respect, in one place (the component checks its own at construction)."""

from __future__ import annotations

KIB = 1024
# SQS: 256 KiB unless the queue's MaximumMessageSize allows up to 1 MiB. Queues the component owns allow 1 MiB.
SQS_DEFAULT_MESSAGE_BYTES = 256 * KIB
SQS_MAX_MESSAGE_BYTES = 1024 * KIB
OWNED_QUEUE_MESSAGE_BYTES = SQS_MAX_MESSAGE_BYTES
SNS_MESSAGE_BYTES = 256 * KIB
STEP_FUNCTIONS_INPUT_BYTES = 256 * KIB
LAMBDA_ASYNC_PAYLOAD_BYTES = 256 * KIB
SCHEDULER_INPUT_BYTES = 256 * KIB
# EventBridge PutEvents: an entry's Source, DetailType and Detail (UTF-8 bytes) plus 14 for a Time together stay
# within 256 KiB; ENVELOPE_BYTES covers the longest Source (256) and DetailType (128) an EventBusTarget allows.
EVENTBRIDGE_ENTRY_BYTES = 256 * KIB
# SQS FIFO: MessageGroupId and MessageDeduplicationId are 1-128 alphanumeric or punctuation characters.
SQS_FIFO_ID_CHARS = 128
# Room left for SQS message attributes and the envelope of our own documents.
ENVELOPE_BYTES = 2 * KIB
TRANSACTION_ITEMS = 100
NAME_CHARS = 64
