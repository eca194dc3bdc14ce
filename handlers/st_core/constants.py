"""The names and AWS limits that the handlers, the component, the operator's command and the local cloud share.

One place for each: the handlers ship this module (the Lambda archive holds only handlers/), and the others read
this same file (`scheduled_table.packaging.constants`), never a copy. Every handler imports it on a cold start, so
it stays a leaf: plain values and one function, importing nothing at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

# -- names ----------------------------------------------------------------------------------------------------------

# The function variable holding the handler configuration (one JSON document written by the component): the
# handlers read it, the operator's command and the local cloud find a stack's queues and target from it.
CONFIG_VARIABLE = "SCHEDULED_TABLE_CONFIG"
LOG_LEVEL_VARIABLE = "LOG_LEVEL"
# Scheduler's universal targets call an AWS API with the schedule's Input as the request:
# `arn:aws:scheduler:::aws-sdk:<service>:<action>`.
UNIVERSAL_TARGET_PREFIX = "arn:aws:scheduler:::aws-sdk:"
# SES has no target ARN of its own: Scheduler (and the component's EmailTarget) send mail through this one.
SES_UNIVERSAL_TARGET = UNIVERSAL_TARGET_PREFIX + "sesv2:sendEmail"
# The key of a release queue message (`precision="second"`), naming its envelope: the releaser, backfill and
# redrive recognise release messages by it, the local cloud a release schedule's input.
RELEASE_ENVELOPE = "scheduledTableRelease"

# -- limits ---------------------------------------------------------------------------------------------------------

KIB = 1024
# SQS: MaximumMessageSize is 1 KiB to 1 MiB; a queue made without it takes 256 KiB. Queues the component owns
# allow 1 MiB.
SQS_MIN_MESSAGE_BYTES = 1 * KIB
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
# SendMessageBatch, PutEvents and PublishBatch take at most 10 entries a call.
BATCH_ENTRIES = 10
# SQS FIFO: MessageGroupId and MessageDeduplicationId are 1-128 alphanumeric or punctuation characters.
SQS_FIFO_ID_CHARS = 128
# Step Functions: an execution name is 1-80 characters.
STEP_FUNCTIONS_NAME_CHARS = 80
# Room left for SQS message attributes and the envelope of our own documents.
ENVELOPE_BYTES = 2 * KIB
TRANSACTION_ITEMS = 100
NAME_CHARS = 64
# Lambda: "the total size of all environment variables doesn't exceed 4 KB" (names and values).
LAMBDA_ENVIRONMENT_BYTES = 4 * KIB


def environment_bytes(variables: Mapping[str, str]) -> int:
    """What Lambda counts against LAMBDA_ENVIRONMENT_BYTES: every variable's name and value, in UTF-8 bytes."""
    return sum(len(str(name).encode()) + len(str(value).encode()) for name, value in variables.items())
