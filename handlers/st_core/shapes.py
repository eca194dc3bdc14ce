"""The shapes of the handler configuration (written by the component, read by `st_core.config.load_config`) and of
the stream events and batch responses Lambda passes (see st_core/stream.py).

For the type checker: at run time they are plain dicts. Building a TypedDict class costs about 0.3 ms (every
annotation becomes a ForwardRef), and compiling its body more, so no handler imports this module on its cold path;
`st_core.config` builds them only when something asks for one by name at run time (a test reading a shape's keys).
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

AttributeValue = dict[str, Any]  # one DynamoDB JSON value: {"S": "..."}, {"N": "12"}, {"M": {...}}
Image = dict[str, AttributeValue]  # an item as a stream record carries it


class EmailConfig(TypedDict):
    sender: str
    recipientAttribute: str
    subject: str
    body: str
    configurationSet: NotRequired[str]  # the SES configuration set to send with


class TargetConfig(TypedDict):
    kind: str
    arn: str
    email: NotRequired[EmailConfig]
    maxMessageBytes: NotRequired[int]  # SQS targets: the queue's MaximumMessageSize (256 KiB when absent)
    # FIFO queues (ARN ending .fifo): the item attribute naming each message's group, or one fixed group; neither:
    # a group per item, from its keys
    messageGroupAttribute: NotRequired[str]
    messageGroupId: NotRequired[str]
    detailType: NotRequired[str]  # event bus targets: the events' detail-type and source
    source: NotRequired[str]


class SchedulerConfig(TypedDict):
    group: str
    roleArn: str
    deadLetterArn: str
    maxEventAgeSeconds: int
    maxRetryAttempts: int
    kmsKeyArn: NotRequired[str]  # the customer-managed key each schedule's payload is kept under (its KmsKeyArn)


class ReleaseConfig(TypedDict):
    """`precision="second"`: the release queue that holds due events until their second (st_core/release.py)."""

    queueArn: str  # release schedules' target
    queueUrl: str
    deadLetterUrl: str  # the target DLQ, where a due event the target refuses for good is parked


class EventBridgeConfig(TypedDict):
    release: NotRequired[ReleaseConfig]  # only with precision="second"
    ledgerTable: str
    leaseSeconds: int
    windowSeconds: int
    offsets: NotRequired[list[int]]  # seconds from the due time, one occurrence each ([0] when absent)
    timeZoneAttribute: NotRequired[str]  # the item's IANA zone: recurrences, and due times without an offset
    startAttribute: NotRequired[str]  # a recurring item's StartDate
    endAttribute: NotRequired[str]  # and EndDate
    existingTable: NotRequired[bool]  # the table predates the stack: backfill's first run delivers old past-due items


class TtlConfig(TypedDict):
    ledgerTable: str
    leaseSeconds: int
    windowSeconds: int
    repeatAttribute: str
    repeatUntilAttribute: str
    occurrenceAttribute: str
    precise: bool


class PollingConfig(TypedDict):
    shards: int
    shardGroups: int
    leaseSeconds: int
    maxAttempts: int
    backoffSeconds: int
    onDone: str
    deadLetterUrl: str
    delayAttribute: str
    defaultDelaySeconds: int | None
    budgetMarginSeconds: int
    ledgerTable: str
    windowSeconds: int


class AggregateConfig(TypedDict):
    sourcePrefix: str
    valueAttribute: str
    groupFrom: str
    totalSortKey: str
    totalAttribute: str
    aggregation: str
    onChange: str
    ledgerTable: str
    windowSeconds: int
    horizonSeconds: int  # the latest a record can come back: maximum record age + function timeout + a margin


class HandlerConfig(TypedDict):
    mode: str
    table: str
    partitionKey: str
    sortKey: str | None
    timeAttribute: str
    target: TargetConfig
    poisonQueueUrl: str
    poisonMaxMessageBytes: NotRequired[int]  # a user's poison queue's MaximumMessageSize (1 MiB when absent)
    maxWorkers: int
    scheduler: NotRequired[SchedulerConfig]
    eventbridge: NotRequired[EventBridgeConfig]
    ttl: NotRequired[TtlConfig]
    polling: NotRequired[PollingConfig]
    aggregate: NotRequired[AggregateConfig]


# -- stream events (st_core/stream.py) --------------------------------------------------------------------------------


class StreamRecordData(TypedDict):
    Keys: Image
    SequenceNumber: str
    NewImage: NotRequired[Image]
    OldImage: NotRequired[Image]
    ApproximateCreationDateTime: NotRequired[float]
    StreamViewType: NotRequired[str]


class UserIdentity(TypedDict):
    type: str
    principalId: str


class DynamoDBStreamRecord(TypedDict):
    eventID: str
    eventName: Literal["INSERT", "MODIFY", "REMOVE"]
    dynamodb: StreamRecordData
    eventSource: NotRequired[str]
    eventSourceARN: NotRequired[str]
    awsRegion: NotRequired[str]
    userIdentity: NotRequired[UserIdentity]


class DynamoDBStreamEvent(TypedDict):
    Records: list[DynamoDBStreamRecord]


class BatchItemFailure(TypedDict):
    itemIdentifier: str


class BatchResponse(TypedDict):
    batchItemFailures: list[BatchItemFailure]
