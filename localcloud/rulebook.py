"""AWS's rules that the test harness and the local cloud reproduce, written down once, each with the AWS page it
comes from; and the places where an emulator here deliberately allows more than AWS does.

Why one book: the harness has three layers that stand in for AWS (the moto hooks in tests/aws_rules.py, the IAM and
KMS evaluator in tests/iam, the local cloud's patches of ministack), and each encoded some of AWS's rules, relaxed
others and cited neither; one of them let through a transaction AWS refuses. Every check in those layers now names
its rule here (`rule("...")`), limits are read from the rule (whose value is the handlers' own constant, so the
handlers, the component and the harness share one number), and tests/house/test_rulebook.py fails on a rule without
an AWS source, on a check naming a rule that is not here, and on a rule no layer applies.

Standard library only, and the handlers' constants: the local cloud ships it (`scheduled_table.localcloud`).
"""

from __future__ import annotations

from typing import NamedTuple

from .component import constants

DOCS = "https://docs.aws.amazon.com/"


class Rule(NamedTuple):
    """One thing AWS does that code built on it must survive, and where the harness reproduces it."""

    id: str
    says: str  # what AWS does, in one sentence
    source: str  # the AWS page that says so
    applied_in: tuple[str, ...]  # repository files whose checks name this rule
    limit: int | None = None  # the number, where the rule is one (read from the handlers' constants)


class Relaxation(NamedTuple):
    """A place where an emulator here allows more than AWS, on purpose, and what covers the difference."""

    id: str
    where: str
    allows: str
    aws: str
    covered_by: str
    source: str


_HOOKS = "tests/aws_rules.py"
_IAM = "tests/iam/enforce.py"
_BEHAVIOUR = "localcloud/aws_behaviour.py"
_ACCOUNTS = "localcloud/accounts.py"
_LOCAL_IAM = "localcloud/iam.py"

RULES: tuple[Rule, ...] = (
    # -- EventBridge Scheduler -------------------------------------------------------------------------------------
    Rule(
        "scheduler-minute",
        "Every schedule invokes its target with 60-second precision: at(12:00:45) runs anywhere in 12:00:00-12:00:59.",
        DOCS + "scheduler/latest/UserGuide/schedule-types.html",
        (_BEHAVIOUR,),
    ),
    Rule(
        "scheduler-retries",
        "A target that fails is retried with back-off for up to 24 hours (MaximumEventAgeInSeconds 60-86400, "
        "185 attempts), then the event goes to the schedule's dead-letter queue or is dropped.",
        DOCS + "scheduler/latest/UserGuide/managing-schedule-retry-policy.html",
        ("tests/lifetime/world.py",),
        86400,
    ),
    Rule(
        "scheduler-name",
        "A schedule's name is 1-64 characters of [0-9A-Za-z-_.].",
        DOCS + "scheduler/latest/APIReference/API_CreateSchedule.html",
        (_HOOKS, _BEHAVIOUR),
        constants.NAME_CHARS,
    ),
    Rule(
        "scheduler-client-token",
        "CreateSchedule's ClientToken is 1-64 characters; a request repeating a token that succeeded is answered "
        "without creating anything.",
        DOCS + "scheduler/latest/APIReference/API_CreateSchedule.html",
        (_HOOKS, _BEHAVIOUR),
        constants.NAME_CHARS,
    ),
    Rule(
        "scheduler-input-size",
        "A schedule's target input is at most 256 KB.",
        DOCS + "scheduler/latest/UserGuide/scheduler-quotas.html",
        (_HOOKS, _BEHAVIOUR),
        constants.SCHEDULER_INPUT_BYTES,
    ),
    Rule(
        "scheduler-start-date",
        "A StartDate more than 5 minutes in the past is refused.",
        DOCS + "scheduler/latest/APIReference/API_CreateSchedule.html",
        (_HOOKS,),
        300,
    ),
    Rule(
        "scheduler-time-zone",
        "ScheduleExpressionTimezone names a zone of the IANA time zone database; any other is refused.",
        DOCS + "scheduler/latest/UserGuide/schedule-types.html",
        (_HOOKS,),
    ),
    Rule(
        "scheduler-list-page",
        "ListSchedules answers at most 100 schedules a page, with a NextToken for the rest.",
        DOCS + "scheduler/latest/APIReference/API_ListSchedules.html",
        (_BEHAVIOUR,),
        100,
    ),
    Rule(
        "scheduler-throttle",
        "Scheduler invokes targets at up to 1,000 a second per account and Region by default; more are delayed.",
        DOCS + "scheduler/latest/UserGuide/scheduler-quotas.html",
        ("localcloud/throttle.py",),
        1000,
    ),
    # -- Lambda ----------------------------------------------------------------------------------------------------
    Rule(
        "lambda-stream-redelivery",
        "On an error or timeout Lambda retries the whole stream batch (or from the failed record with everything "
        "after it, when the function reports batch item failures) until the record expires from the stream.",
        DOCS + "lambda/latest/dg/services-ddb-batchfailurereporting.html",
        (_BEHAVIOUR, "tests/lifetime/world.py"),
    ),
    Rule(
        "lambda-environment-size",
        "A function's environment variables (names and values) total at most 4 KB.",
        DOCS + "lambda/latest/dg/gettingstarted-limits.html",
        (_BEHAVIOUR,),
        constants.LAMBDA_ENVIRONMENT_BYTES,
    ),
    Rule(
        "lambda-async-payload",
        "An asynchronous invocation's payload is at most 256 KB.",
        DOCS + "lambda/latest/dg/gettingstarted-limits.html",
        (_HOOKS,),
        constants.LAMBDA_ASYNC_PAYLOAD_BYTES,
    ),
    Rule(
        "lambda-event-age",
        "An event invoke configuration's MaximumEventAgeInSeconds is 60-21600.",
        DOCS + "lambda/latest/api/API_PutFunctionEventInvokeConfig.html",
        (_BEHAVIOUR,),
        21600,
    ),
    # -- DynamoDB --------------------------------------------------------------------------------------------------
    Rule(
        "dynamodb-stream-retention",
        "A stream keeps its records for 24 hours.",
        DOCS + "amazondynamodb/latest/developerguide/Streams.html",
        ("tests/lifetime/world.py",),
        86400,
    ),
    Rule(
        "dynamodb-ttl-lag",
        "TTL deletes an expired item typically within a few days of its expiry, not at it, with a REMOVE record "
        "whose userIdentity is the DynamoDB service.",
        DOCS + "amazondynamodb/latest/developerguide/howitworks-ttl.html",
        ("localcloud/ttl.py", "tests/lifetime/world.py"),
    ),
    Rule(
        "dynamodb-transaction-actions",
        "TransactWriteItems takes at most 100 actions and 4 MB.",
        DOCS + "amazondynamodb/latest/APIReference/API_TransactWriteItems.html",
        (_HOOKS,),
        constants.TRANSACTION_ITEMS,
    ),
    Rule(
        "dynamodb-transaction-one-account",
        "A transaction's actions may target different tables, but not tables in different AWS accounts or Regions "
        "(one wholly in another account's tables, named by their ARNs, is served under their resource policy).",
        DOCS + "amazondynamodb/latest/APIReference/API_TransactWriteItems.html",
        (_HOOKS, _ACCOUNTS),
    ),
    Rule(
        "dynamodb-number-range",
        "A number has up to 38 digits of precision and a magnitude from 1E-130 to below 1E+126; an update beyond "
        "it is refused.",
        DOCS + "amazondynamodb/latest/developerguide/HowItWorks.NamingRulesDataTypes.html",
        (_HOOKS,),
        38,
    ),
    Rule(
        "dynamodb-stream-encoding",
        "A stream record's attributes come as AttributeValue maps in no set order: B as base64 text, N as a "
        "decimal string of up to 38 digits; ApproximateCreationDateTime in epoch seconds.",
        DOCS + "amazondynamodb/latest/APIReference/API_streams_StreamRecord.html",
        ("tests/handlers/test_aws_semantics.py",),
    ),
    # -- SQS, SNS, Step Functions ----------------------------------------------------------------------------------
    Rule(
        "sqs-message-size",
        "A message is at most the queue's MaximumMessageSize: 256 KiB unless the queue allows up to 1 MiB.",
        DOCS + "AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html",
        (_HOOKS,),
        constants.SQS_DEFAULT_MESSAGE_BYTES,
    ),
    Rule(
        "sns-message-size",
        "A published message is at most 256 KB.",
        DOCS + "general/latest/gr/sns.html",
        (_HOOKS,),
        constants.SNS_MESSAGE_BYTES,
    ),
    Rule(
        "sfn-input-size",
        "An execution's input is at most 256 KB.",
        DOCS + "step-functions/latest/dg/service-quotas.html",
        (_HOOKS,),
        constants.STEP_FUNCTIONS_INPUT_BYTES,
    ),
    Rule(
        "sfn-execution-name",
        "An execution's name is 1-80 characters.",
        DOCS + "step-functions/latest/apireference/API_StartExecution.html",
        (_HOOKS,),
        constants.STEP_FUNCTIONS_NAME_CHARS,
    ),
    # -- IAM and KMS -----------------------------------------------------------------------------------------------
    Rule(
        "iam-evaluation",
        "A request is allowed only when a policy allows it and none denies it (explicit deny, then allow, else "
        "implicit deny).",
        DOCS + "IAM/latest/UserGuide/reference_policies_evaluation-logic.html",
        (_IAM, _LOCAL_IAM),
    ),
    Rule(
        "iam-actions-per-operation",
        "Each operation needs its own action on its own resource: BatchWriteItem is not PutItem; a transaction "
        "needs the item action of each of its actions, on each table.",
        DOCS + "service-authorization/latest/reference/list_amazondynamodb.html",
        (_IAM,),
    ),
    Rule(
        "iam-pass-role",
        "Creating or updating a schedule with an execution role needs iam:PassRole on that role.",
        DOCS + "scheduler/latest/UserGuide/setting-up.html",
        ("tests/iam/requests.py", _LOCAL_IAM),
    ),
    Rule(
        "kms-key-policy",
        "A customer-managed key is used only when its key policy allows it (directly, or by delegating to IAM "
        "policies of its account); a service that encrypts for a caller uses the caller's permissions on the key.",
        DOCS + "kms/latest/developerguide/key-policies.html",
        (_IAM, _LOCAL_IAM),
    ),
    Rule(
        "kms-via-service",
        "A service that uses a key on a caller's behalf (DynamoDB, SQS, SNS, Step Functions, Scheduler) asks KMS "
        "with its endpoint in the key's Region as kms:ViaService (dynamodb.eu-west-1.amazonaws.com); a caller's own "
        "call to KMS carries none, so a grant conditioned on a service does not cover it.",
        DOCS + "kms/latest/developerguide/conditions-kms.html#conditions-kms-via-service",
        ("tests/iam/requests.py", _LOCAL_IAM),
    ),
    Rule(
        "scheduler-payload-key",
        "A schedule with KmsKeyArn keeps its payload under that key: Scheduler encrypts it with the caller's "
        "permissions (kms:DescribeKey, kms:GenerateDataKey, kms:Decrypt, through Scheduler) and decrypts it when it "
        "fires as the execution role, calling KMS itself; the encryption context is the schedule's ARN "
        "(aws:scheduler:schedule:arn).",
        DOCS + "scheduler/latest/UserGuide/encryption-rest.html",
        ("tests/iam/requests.py", _LOCAL_IAM),
    ),
)

RELAXATIONS: tuple[Relaxation, ...] = (
    Relaxation(
        "moto-no-iam",
        "moto (the handlers' tests)",
        "every call, whatever the caller's policies",
        "refuses what no policy allows",
        "tests/iam/enforce.py evaluates every handler call against the role the component renders",
        DOCS + "IAM/latest/UserGuide/reference_policies_evaluation-logic.html",
    ),
    Relaxation(
        "moto-no-firing",
        "moto (the handlers' tests)",
        "schedules that never fire and TTL that never deletes",
        "fires each schedule in its minute and deletes expired items within days",
        "the tests fire schedules themselves, early in the minute included; tests/lifetime drives TTL's lag",
        DOCS + "scheduler/latest/UserGuide/schedule-types.html",
    ),
    Relaxation(
        "local-ttl-delay",
        "the local cloud's TTL process (localcloud/ttl.py)",
        "an expired item deleted a stated few seconds after its expiry",
        "deletes it typically within a few days",
        "a demo cannot wait days; tests/lifetime draws the lag from expiry to days later",
        DOCS + "amazondynamodb/latest/developerguide/howitworks-ttl.html",
    ),
    Relaxation(
        "local-scheduler-retries",
        "the local cloud's Scheduler (ministack)",
        "a failed firing retried within minutes, not over 24 hours",
        "retries for up to 24 hours before the dead-letter queue",
        "tests/lifetime retries a firing over the whole 24 hours",
        DOCS + "scheduler/latest/UserGuide/managing-schedule-retry-policy.html",
    ),
    Relaxation(
        "local-denial-status",
        "the local cloud's IAM (ministack with AUTH=true)",
        "a refusal answered with HTTP 403",
        "answers DynamoDB's AccessDeniedException with HTTP 400",
        "the handlers classify the error code, never the status (tests/iam/enforce.py raises AWS's shape)",
        DOCS + "amazondynamodb/latest/developerguide/Programming.Errors.html",
    ),
)

_BY_ID = {r.id: r for r in RULES}


def rule(rule_id: str) -> Rule:
    """The rule a check applies (a KeyError names a rule the book does not hold)."""
    return _BY_ID[rule_id]


def limit(rule_id: str) -> int:
    """The number a rule sets (its value is the handlers' constant, where they have one)."""
    value = _BY_ID[rule_id].limit
    if value is None:
        raise KeyError(f"rule {rule_id!r} sets no number")
    return value
