"""AWS's limits and idempotency, enforced on every boto3 call a test makes against moto (which is silent on them);
each check names its rule in localcloud/rulebook.py, which cites AWS's page for it.

A botocore `before-call` hook on the default session, so the handlers' own clients get it too. It rejects what AWS
rejects, with AWS's error code, and answers a repeated idempotency token as AWS does:
- SQS SendMessage: body over the queue's MaximumMessageSize (256 KiB unless the queue allows up to 1 MiB).
- SNS Publish, Step Functions StartExecution, Lambda async Invoke, Scheduler Target.Input: 256 KiB.
- Scheduler names (1-64 of [0-9A-Za-z-_.]) and client tokens (1-64); a CreateSchedule whose ClientToken was used
  before succeeds without creating anything (AWS's idempotency).
- Scheduler StartDate more than 5 minutes in the past (moto checks it for cron expressions only, AWS for any), and
  a ScheduleExpressionTimezone the zone database does not know.
- DynamoDB TransactWriteItems: at most 100 actions, 4 MB, every table in one account and Region (TransactGetItems
  too: localcloud/accounts.py `transaction_scope_problem`, the local cloud's check); an `ADD` that takes a number
  beyond DynamoDB's range (38 digits, magnitude below 1E+126) cancels the transaction with a ValidationError reason.
- Another account's table (`other_accounts_table`): a test's moto table a handler names by the ARN of another
  account, as it names such a table on AWS. Moto has one account here; each call naming that ARN is served by the
  test's table (after the rules above have seen the ARN), as DynamoDB serves another account's table by its ARN.
"""

from __future__ import annotations

import copy
import os
import re
import threading
import time
from decimal import Context, Decimal, Inexact, InvalidOperation, Overflow
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import boto3
import botocore.hooks
import botocore.loaders
import botocore.session
from botocore.exceptions import ClientError

from localcloud.accounts import TRANSACT_PARTS, transaction_scope_problem
from localcloud.rulebook import limit
from tests.conftest import REGION

DEFAULT_ACCOUNT = "123456789012"  # moto's account when MOTO_ACCOUNT_ID is not set
_NAME = re.compile(rf"^[0-9A-Za-z_.-]{{1,{limit('scheduler-name')}}}$")
_NUMBERS = Context(
    prec=limit("dynamodb-number-range"), Emax=125, Emin=-130, traps=[Inexact, Overflow, InvalidOperation]
)


def _error(operation: str, code: str, message: str, status: int = 400, **extra: Any) -> ClientError:
    response: dict[str, Any] = {
        "Error": {"Code": code, "Message": message},
        "ResponseMetadata": {"HTTPStatusCode": status},
        **extra,
    }
    return ClientError(response, operation)


# One loader for every session the tests make: a session's loader parses each service's model (JSON files of
# megabytes) the first time a client of that service is made, and the tests make a fresh default session per test
# (so that one test's hooks never reach the next). Sharing it makes a client cost about a millisecond, not tens.
_LOADER = botocore.loaders.create_loader()


def _builtin_hooks() -> botocore.hooks.HierarchicalEmitter:
    """botocore's built-in event handlers, registered once. A new session registers its 130 of them one by one,
    inspecting each handler's signature (20 ms of CPU a session here, 2026-11-26); a copy of the registered hooks
    costs 3 ms, and is what botocore itself gives each client it creates."""
    hooks = botocore.hooks.HierarchicalEmitter()
    botocore.session.Session(event_hooks=hooks)  # registers the built-in handlers into `hooks`
    return hooks


_HOOKS = _builtin_hooks()


def fresh_session() -> botocore.session.Session:
    """A new botocore session (its own event hooks, its own clients) over the shared, already warm model loader."""
    session = botocore.session.Session(event_hooks=copy.copy(_HOOKS), include_builtin_handlers=False)
    session.register_component("data_loader", _LOADER)
    return session


class AwsRules:
    def __init__(self) -> None:
        self.tokens: dict[str, str] = {}
        self.queue_limits: dict[str, int] = {}
        self.lock = threading.Lock()
        self.rejections: list[str] = []
        self.other_accounts: dict[str, str] = {}  # another account's table ARN -> the moto table standing for it

    def other_accounts_table(self, name: str, account: str, region: str = REGION) -> str:
        """The ARN a handler names the moto table `name` by, as the table of `account`; calls naming it reach it."""
        arn = f"arn:aws:dynamodb:{region}:{account}:table/{name}"
        self.other_accounts[arn] = name
        return arn

    def install(self) -> None:
        boto3.setup_default_session(botocore_session=fresh_session())
        events = boto3.DEFAULT_SESSION.events
        events.register("before-parameter-build", self._check)
        events.register("before-call", self._answer)
        events.register("after-call.scheduler.CreateSchedule", self._remember_token)

    def _check(self, model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        """Sees the call's parameters as the caller gave them; a rejection raises here, before moto is reached."""
        service = model.service_model.service_name
        handler = getattr(self, f"_{service}_{model.name}".replace("-", "_"), None)
        if handler is None:
            if service == "dynamodb":
                self._to_moto_tables(params)
            return
        context["aws_rules_params"] = params
        try:
            context["aws_rules_response"] = handler(params, context.get("client_region") or "")
        except ClientError as exc:
            self.rejections.append(f"{service}.{model.name}: {exc.response['Error']['Code']}")
            raise
        if service == "dynamodb":
            self._to_moto_tables(params)

    def _to_moto_tables(self, params: dict[str, Any]) -> None:
        """Each other account's table the call names by ARN, renamed to the moto table standing for it."""
        if not self.other_accounts:
            return
        if params.get("TableName") in self.other_accounts:
            params["TableName"] = self.other_accounts[params["TableName"]]
        named = params.get("RequestItems")
        if isinstance(named, dict):
            params["RequestItems"] = {self.other_accounts.get(t, t): v for t, v in named.items()}
        for entry in params.get("TransactItems") or []:
            for part in TRANSACT_PARTS:
                operation = entry.get(part)
                if isinstance(operation, dict) and operation.get("TableName") in self.other_accounts:
                    operation["TableName"] = self.other_accounts[operation["TableName"]]

    def _answer(self, context: dict[str, Any], **_: Any) -> Any:
        return context.get("aws_rules_response")

    # -- SQS, SNS, Step Functions, Lambda --------------------------------------------------------------------------

    def _sqs_SendMessage(self, params: dict[str, Any], region: str) -> None:
        url = params["QueueUrl"]
        if url not in self.queue_limits:
            sqs = boto3.client("sqs", endpoint_url=None)
            attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])
            self.queue_limits[url] = int(attributes["Attributes"].get("MaximumMessageSize", limit("sqs-message-size")))
        size = len(params["MessageBody"].encode("utf-8"))
        if size > self.queue_limits[url]:
            raise _error("SendMessage", "InvalidParameterValue", f"message of {size} bytes is over the queue's limit")

    def _sns_Publish(self, params: dict[str, Any], region: str) -> None:
        if len(params["Message"].encode("utf-8")) > limit("sns-message-size"):
            raise _error("Publish", "InvalidParameter", "Message too long")

    def _stepfunctions_StartExecution(self, params: dict[str, Any], region: str) -> None:
        if len(params.get("input", "").encode("utf-8")) > limit("sfn-input-size"):
            raise _error("StartExecution", "InvalidExecutionInput", "input over 256 KiB")
        if len(params.get("name", "")) > limit("sfn-execution-name"):
            raise _error("StartExecution", "InvalidName", "name over 80 characters")

    def _lambda_Invoke(self, params: dict[str, Any], region: str) -> None:
        payload = params.get("Payload") or b""
        if params.get("InvocationType") == "Event" and len(payload) > limit("lambda-async-payload"):
            raise _error("Invoke", "RequestEntityTooLargeException", "payload over 256 KiB", 413)

    # -- Scheduler -------------------------------------------------------------------------------------------------

    def _scheduler_CreateSchedule(self, params: dict[str, Any], region: str) -> Any:
        self._schedule_limits("CreateSchedule", params)
        token = params.get("ClientToken")
        if token is not None:
            if not 1 <= len(token) <= limit("scheduler-client-token"):
                raise _error("CreateSchedule", "ValidationException", "ClientToken must be 1-64 characters")
            with self.lock:
                if token in self.tokens:
                    # AWS: the same token again is the same request, answered without creating anything.
                    http = SimpleNamespace(status_code=200, headers={}, content=b"")
                    return (http, {"ScheduleArn": self.tokens[token], "ResponseMetadata": {"HTTPStatusCode": 200}})
        return None

    def _remember_token(self, model: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        """A token counts once a request carrying it succeeded (one lost on the way never reached AWS)."""
        params = context.get("aws_rules_params") or {}
        if params.get("ClientToken") and "ScheduleArn" in parsed:
            with self.lock:
                self.tokens[params["ClientToken"]] = parsed["ScheduleArn"]

    def _scheduler_UpdateSchedule(self, params: dict[str, Any], region: str) -> None:
        self._schedule_limits("UpdateSchedule", params)

    def _schedule_limits(self, operation: str, params: dict[str, Any]) -> None:
        if not _NAME.match(params["Name"]):
            raise _error(
                operation, "ValidationException", f"schedule name {params['Name']!r} is not 1-64 [0-9A-Za-z-_.]"
            )
        if len(params["Target"].get("Input", "").encode("utf-8")) > limit("scheduler-input-size"):
            raise _error(operation, "ValidationException", "Target.Input is over 256 KiB")
        start = params.get("StartDate")
        if start is not None and start.timestamp() < time.time() - limit("scheduler-start-date"):
            raise _error(
                operation, "ValidationException", "The StartDate you specify cannot be earlier than 5 minutes ago."
            )
        zone = params.get("ScheduleExpressionTimezone", "UTC")  # rule("scheduler-time-zone")
        if zone != "UTC":
            try:
                ZoneInfo(zone)
            except (ZoneInfoNotFoundError, ValueError):
                raise _error(operation, "ValidationException", f"Invalid time zone: {zone}") from None

    # -- DynamoDB --------------------------------------------------------------------------------------------------

    def _one_account(self, operation: str, params: dict[str, Any], region: str) -> None:
        account = os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT)  # a table named by name is moto's account's
        problem = transaction_scope_problem(params, account, region)  # rule("dynamodb-transaction-one-account")
        if problem is not None:
            raise _error(operation, "ValidationException", problem)

    def _dynamodb_TransactGetItems(self, params: dict[str, Any], region: str) -> None:
        self._one_account("TransactGetItems", params, region)

    def _dynamodb_TransactWriteItems(self, params: dict[str, Any], region: str) -> None:
        self._one_account("TransactWriteItems", params, region)
        items = params["TransactItems"]
        if len(items) > limit("dynamodb-transaction-actions"):
            raise _error("TransactWriteItems", "ValidationException", "at most 100 actions in a transaction")
        reasons: list[dict[str, str]] = []
        for item in items:
            reasons.append(self._add_out_of_range(item.get("Update")))
        if any(r["Code"] != "None" for r in reasons):
            raise _error(
                "TransactWriteItems",
                "TransactionCanceledException",
                "Transaction cancelled",
                CancellationReasons=reasons,
            )

    def _add_out_of_range(self, update: dict[str, Any] | None) -> dict[str, str]:
        ok = {"Code": "None"}
        if not update:
            return ok
        match = re.fullmatch(r"ADD (#\w+) (:\w+)", update.get("UpdateExpression", "").strip())
        if not match:
            return ok
        name = update["ExpressionAttributeNames"][match.group(1)]
        delta = update["ExpressionAttributeValues"][match.group(2)].get("N")
        if delta is None:
            return ok
        current = boto3.client("dynamodb").get_item(TableName=update["TableName"], Key=update["Key"]).get("Item", {})
        value = current.get(name, {}).get("N", "0")
        try:
            result = _NUMBERS.add(Decimal(value), Decimal(delta))
            if result != 0 and abs(result) >= Decimal("1E+126"):
                raise Overflow
        except ArithmeticError:
            return {
                "Code": "ValidationError",
                "Message": "Number overflow. Attempting to store a number with magnitude larger than supported range",
            }
        return ok


RULES = AwsRules()
