"""Another account's DynamoDB table and stream in the local cloud, as AWS serves them: a table named by its ARN in
a DynamoDB call, and a Lambda event source mapping on another account's stream, both allowed only when the caller's
policy and the table's (or stream's) resource-based policy allow it (AWS's rule across accounts: both sides).

ministack keeps each account's tables apart (the request's access key selects the account), strips a table ARN to
its name and looks that up in the caller's account, refuses a mapping on another account's stream
(`The event source ARN ... is invalid`) and its stream poller skips one. Here:

- `TableScope`: within a DynamoDB request that names another account's table by ARN (`TableName`, `RequestItems`,
  `TransactItems`), that table's name resolves in its owner's account (its items, stream records, TTL); every other
  table of the request stays the caller's (a batch may read or write tables of both accounts). A name the caller's
  account also has is then the other account's for that request only.
- `transaction_scope_problem`: a transaction (TransactWriteItems, TransactGetItems) whose items are in two accounts
  or two Regions is refused with a ValidationException, as AWS refuses it (rule
  "dynamodb-transaction-one-account"); one wholly in another account's tables is served there.
- `table_policy`: the table's resource-based policy (DynamoDB `PutResourcePolicy`, kept by ministack in the owner's
  account) joins the IAM decision on a table ARN (its indexes too): in the owner's account as any resource policy;
  from another account it must allow too, and without one nothing is allowed.
- Another account's KMS key (a customer-managed key on its table): found in its owner's account, and its key
  policy must allow the caller too (`owned_key`).
- Mappings: another account's stream ARN is accepted when the stream exists (its table's latest); the stream's own
  resource-based policy must allow the function's role `dynamodb:DescribeStream`, `dynamodb:GetShardIterator` and
  `dynamodb:GetRecords` (the actions DynamoDB lets a stream's policy grant; `ListStreams` names no stream and is the
  role's policy's alone), at creation and on every batch (localcloud/iam.py `stream_policy_refusal`). The poller
  reads such a mapping's stream in its owner's account, and runs the function, its lookup and its on-failure send in
  the mapping's own account.

Everything except `foreign_tables` and `arn_scope` runs inside ministack's process.
"""

from __future__ import annotations

import contextvars
import json
import threading
from collections.abc import Iterator
from typing import Any

# What a stream's resource-based policy must allow a mapping's role (DynamoDB developer guide, "Attach a
# resource-based policy to a stream": GetRecords, GetShardIterator, DescribeStream).
STREAM_POLICY_READS = ("dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords")
# The operations of a transaction that name a table.
TRANSACT_PARTS = ("Get", "Put", "Update", "Delete", "ConditionCheck")
# DynamoDB's transactions: their items must all be in one account and one Region (rule
# "dynamodb-transaction-one-account", localcloud/rulebook.py, which cites AWS's page; TransactGetItems's page says the
# same). One wholly in another account's tables is served (both list cross-account support: DynamoDB developer
# guide, "DynamoDB API operations supported by resource-based policies"). AWS documents no text for the refusal:
# the code is DynamoDB's for a request it will not take (ValidationException), the message says which rule.
TRANSACTIONS = ("TransactWriteItems", "TransactGetItems")
ONE_ACCOUNT_MESSAGE = "A transaction cannot target items in different AWS accounts or Regions"


def arn_scope(arn: str) -> tuple[str, str, str] | None:
    """(account, region, table name) of a DynamoDB table, index or stream ARN; None for anything else."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or parts[2] != "dynamodb" or not parts[5].startswith("table/"):
        return None
    name = parts[5].split("/")[1]
    return (parts[4], parts[3], name) if name else None


def foreign_tables(request: Any, account: str) -> dict[str, tuple[str, str]]:
    """Each table the DynamoDB request names by the ARN of an account other than `account`: name -> (account,
    region)."""
    if not isinstance(request, dict):
        return {}
    named: list[Any] = [request.get("TableName")]
    items = request.get("RequestItems")
    named += list(items) if isinstance(items, dict) else []
    for entry in request.get("TransactItems") or []:
        for part in TRANSACT_PARTS:
            operation = entry.get(part) if isinstance(entry, dict) else None
            if isinstance(operation, dict):
                named.append(operation.get("TableName"))
    found: dict[str, tuple[str, str]] = {}
    for table in named:
        scope = arn_scope(table) if isinstance(table, str) else None
        if scope is not None and scope[0] != account:
            found[scope[2]] = (scope[0], scope[1])
    return found


def transaction_scope_problem(request: Any, account: str, region: str) -> str | None:
    """Why a transaction's items cannot be served together (None when they can): they are in two accounts or two
    Regions. A table named by name is the caller's (`account`, `region`); one named by ARN, the ARN's."""
    entries = request.get("TransactItems") if isinstance(request, dict) else None
    scopes: set[tuple[str, str]] = set()
    for entry in entries if isinstance(entries, list) else []:
        for part in TRANSACT_PARTS:
            operation = entry.get(part) if isinstance(entry, dict) else None
            table = operation.get("TableName") if isinstance(operation, dict) else None
            if isinstance(table, str):
                scope = arn_scope(table)
                scopes.add((scope[0], scope[1]) if scope is not None else (account, region))
    if len(scopes) < 2:
        return None
    named = ", ".join(f"account {a} in {r}" for a, r in sorted(scopes))
    return f"{ONE_ACCOUNT_MESSAGE} (this one targets {named})"


def owner_scope(key: Any, foreign: dict[str, tuple[str, str]]) -> tuple[str, str, str] | None:
    """(account, region, name) a DynamoDB store keys the table `key` by (its name, or its ARN: ministack keeps
    another account's ARN as the name) when it is one of the request's `foreign` tables; None otherwise."""
    if not foreign or not isinstance(key, str):
        return None
    scope = arn_scope(key)
    if scope is not None:
        whole = key.endswith(f":table/{scope[2]}")
        return (scope[0], scope[1], scope[2]) if whole and foreign.get(scope[2]) == scope[:2] else None
    owner = foreign.get(key)
    return (owner[0], owner[1], key) if owner else None


# -- inside ministack ------------------------------------------------------------------------------------------------

_foreign: contextvars.ContextVar[dict[str, tuple[str, str]] | None] = contextvars.ContextVar(
    "foreign_tables", default=None
)


def scope_tables_by_owner() -> None:
    """Each of DynamoDB's per-account stores resolves another account's table, named in the request by ARN, in its
    owner's account."""
    from ministack.core.responses import AccountRegionScopedDict, get_account_id, get_region
    from ministack.services import dynamodb

    class TableScope(AccountRegionScopedDict):
        __slots__ = ()

        def _scoped(self, key: Any) -> tuple[Any, ...]:
            """As AccountRegionScopedDict's (the request's account and region), but for the request's foreign
            tables."""
            owned = owner_scope(key, _foreign.get() or {})
            return owned if owned is not None else (get_account_id(), get_region(), key)

    for value in list(vars(dynamodb).values()):
        if type(value) is AccountRegionScopedDict:
            value.__class__ = TableScope

    handle = dynamodb.handle_request

    def handle_request(method: str, path: str, headers: dict, body: bytes, query_params: dict) -> Any:
        from ministack.core.responses import error_response_json, get_account_id, get_region

        try:
            request = json.loads(body) if body else {}
        except (ValueError, UnicodeDecodeError):
            request = {}
        if str(headers.get("x-amz-target", "")).rpartition(".")[2] in TRANSACTIONS:
            problem = transaction_scope_problem(request, get_account_id(), get_region())
            if problem is not None:  # rule("dynamodb-transaction-one-account")

                async def refused() -> Any:
                    return error_response_json("ValidationException", problem, 400)

                return refused()
        foreign = foreign_tables(request, get_account_id())

        async def run() -> Any:
            token = _foreign.set(foreign)
            try:
                return await handle(method, path, headers, body, query_params)
            finally:
                _foreign.reset(token)

        return run() if foreign else handle(method, path, headers, body, query_params)

    dynamodb.handle_request = handle_request


def table_policy(resource_arn: str) -> tuple[Any, str] | None:
    """(the table's resource-based policy, its account) for a table or index ARN, as ministack's evaluator takes a
    resource's policy; None when the table is the caller's and has none (the identity policy decides alone).
    Another account's table always answers, with no policy if it has none: across accounts, that refuses."""
    from ministack.core.responses import get_account_id
    from ministack.services import dynamodb

    scope = arn_scope(resource_arn)
    if scope is None or "/stream/" in resource_arn:
        return None
    account, region, name = scope
    table_arn = f"{resource_arn.split(':table/', 1)[0]}:table/{name}"
    entry = dynamodb._resource_policies.get_scoped(account, region, table_arn) or {}
    policy = entry.get("Policy")
    if policy is None and account == get_account_id():
        return None
    return policy, account


def owned_key(key_arn: str) -> dict[str, Any] | None:
    """The record of another account's KMS key, found in its owner's account and region (ministack looks a key ARN
    up in the caller's only); None for the caller's own key, or no such key."""
    from ministack.core.responses import _request_account_id, _request_region, get_account_id
    from ministack.services import kms

    parts = key_arn.split(":")
    if len(parts) < 6 or parts[2] != "kms" or parts[4] == get_account_id():
        return None
    account, region = _request_account_id.set(parts[4]), _request_region.set(parts[3])
    try:
        record: dict[str, Any] | None = kms._resolve_key(key_arn)
    finally:
        _request_account_id.reset(account)
        _request_region.reset(region)
    return record


def join_table_policies() -> None:
    """ministack's evaluator, with each DynamoDB table's resource-based policy (it knows none), and another account's
    KMS key's policy (it looks a key up in the caller's account only, and so let the caller's policy decide)."""
    from ministack.core import iam_evaluator

    lookup = iam_evaluator._resource_policy

    def resource_policy(service: str, resource_arn: str) -> tuple | None:
        if service == "dynamodb":
            return table_policy(resource_arn)
        record = owned_key(resource_arn) if service == "kms" else None
        if record is not None:
            return record.get("Policy") or "", resource_arn.split(":")[4]
        found: tuple | None = lookup(service, resource_arn)
        return found

    iam_evaluator._resource_policy = resource_policy


def stream_policy(stream_arn: str) -> Any:
    """The stream's resource-based policy, kept in its owner's account (None if it has none)."""
    from ministack.services import dynamodb

    scope = arn_scope(stream_arn)
    if scope is None:
        return None
    return (dynamodb._resource_policies.get_scoped(scope[0], scope[1], stream_arn) or {}).get("Policy")


def stream_exists(stream_arn: str) -> bool:
    """Whether the ARN is the latest stream of a table in its account."""
    from ministack.services import dynamodb

    scope = arn_scope(stream_arn)
    table = (dynamodb._tables.get_scoped(*scope) if scope else None) or {}
    return bool(table.get("LatestStreamArn")) and table.get("LatestStreamArn") == stream_arn


def is_other_accounts_stream(arn: str) -> bool:
    from ministack.core.responses import get_account_id

    scope = arn_scope(arn)
    return scope is not None and "/stream/" in arn and scope[0] != get_account_id()


_mapping = threading.local()


def home_account() -> str | None:
    """Within a stream poller's pass over another account's stream: the mapping's own account."""
    return getattr(_mapping, "home", None)


def accept_other_accounts_streams() -> None:
    """A mapping on another account's DynamoDB stream is accepted when the stream exists (its read permissions are
    checked by the IAM layer); ministack's own check stands for everything else."""
    from ministack.services import lambda_svc

    validate = lambda_svc._validate_event_source_arn

    def validate_event_source_arn(event_source_arn: str) -> Any:
        if is_other_accounts_stream(event_source_arn):
            spec, err = lambda_svc._parse_required_arn(event_source_arn, "eventSourceArn")
            if err:
                return None, err
            if spec.region != lambda_svc.get_region():
                return None, lambda_svc._invalid_parameter_value(
                    f"The event source ARN {event_source_arn} must be in the same region as the Lambda function."
                )
            if not stream_exists(event_source_arn):
                return None, lambda_svc._invalid_parameter_value(
                    f"Stream not found: {event_source_arn}. Please ensure the stream exists and is enabled."
                )
            return spec, None
        return validate(event_source_arn)

    lambda_svc._validate_event_source_arn = validate_event_source_arn


def poll_other_accounts_streams() -> None:
    """ministack's stream poller reads a mapping's stream in the poll's account, and skips another account's: each
    mapping on another account's DynamoDB stream is handed to it in the stream's account, while the function's
    lookup, its run and its on-failure send stay in the mapping's account."""
    from ministack.core.responses import _request_account_id
    from ministack.services import lambda_svc

    every_mapping = lambda_svc._iter_all_esms

    def mappings() -> Iterator[tuple[str, str, dict]]:
        try:
            for account, region, mapping in every_mapping():
                scope = arn_scope(str(mapping.get("EventSourceArn", "")))
                if scope is not None and scope[0] != account:
                    _mapping.home = account
                    yield scope[0], region, mapping
                    _mapping.home = None
                else:
                    yield account, region, mapping
        finally:
            _mapping.home = None

    def at_home(function: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            home = home_account()
            if home is None:
                return function(*args, **kwargs)
            token = _request_account_id.set(home)
            try:
                return function(*args, **kwargs)
            finally:
                _request_account_id.reset(token)

        return run

    lambda_svc._iter_all_esms = mappings
    lambda_svc._get_func_record_for_qualifier = at_home(lambda_svc._get_func_record_for_qualifier)
    lambda_svc._execute_function = at_home(lambda_svc._execute_function)
    lambda_svc._send_ddb_stream_failure_record = at_home(lambda_svc._send_ddb_stream_failure_record)


def install() -> None:
    scope_tables_by_owner()
    join_table_policies()
    accept_other_accounts_streams()
    poll_other_accounts_streams()
