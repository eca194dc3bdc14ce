"""Error taxonomy shared by every handler: a record either can never succeed (poison) or may succeed later (retry)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Error codes AWS returns for conditions that clear up by themselves; everything else in the 4xx range is the
# request's fault and retrying the same record would fail the same way. A superset of the codes botocore's own
# standard retry mode treats as throttled or transient (tests/handlers/test_st_core.py compares them), so a batch is
# never parked for what the SDK itself would have retried.
TRANSIENT_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "TransactionInProgressException",
        "BandwidthLimitExceeded",
        "LimitExceededException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "RequestThrottled",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalServerError",
        "InternalServerException",
        "InternalFailure",
        "InternalError",
        "ServiceException",
        "RequestTimeout",
        "RequestTimeoutException",
        "PriorRequestNotComplete",
        "SlowDown",
        "KMSThrottlingException",
        # SNS's codes (a PublishBatch entry refused for them lists the code alone, without the call's 429)
        "Throttled",
        "KMSThrottling",
        "EC2ThrottledException",
    }
)


# Denials that IAM propagation explains right after a deploy (a new role or policy takes seconds to reach every
# endpoint). They are retried while the container is younger than this, then treated as the permanent errors
# they are (a record parked with the denial as its reason), so a real misconfiguration never blocks a shard long.
_ACCESS_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "AuthorizationError",
        "AuthorizationErrorException",
        "KMSAccessDeniedException",
        "KMS.AccessDeniedException",  # SQS (its KmsAccessDenied error, by its query-compatible code)
        "KMSAccessDenied",  # SNS
        "KmsAccessDeniedException",  # Step Functions
        "UnauthorizedOperation",
        "UnrecognizedClientException",
    }
)
IAM_PROPAGATION_SECONDS = 120.0
_STARTED = time.monotonic()


def container_age() -> float:
    """Seconds since this container loaded the handlers (a deploy starts new containers)."""
    return time.monotonic() - _STARTED


class PermanentError(Exception):
    """The record can never succeed as it is: it belongs in the poison queue with this message as the reason."""


class TransientError(Exception):
    """A condition of our own making that a later retry of the same record is expected to clear (a race, say)."""


def is_transient(exc: BaseException) -> bool:
    """True when retrying the same record later may succeed (throttling, 5xx, network trouble)."""
    if isinstance(exc, TransientError):
        return True
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = str(response.get("Error", {}).get("Code", ""))
        status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if code in _ACCESS_DENIED_CODES:
            return container_age() < IAM_PROPAGATION_SECONDS
        return code in TRANSIENT_CODES or status >= 500 or status == 429
    # botocore's connection and timeout errors carry no response; they derive from these two bases.
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"EndpointConnectionError", "ConnectionError", "HTTPClientError", "ReadTimeoutError"}) or (
        isinstance(exc, TimeoutError | ConnectionError)
    )


def refused_entry(code: str | None, message: str | None, operation: str) -> Exception:
    """One entry of a batch call that the service refused while answering 200 (SendMessageBatch's `Failed`,
    PutEvents' `ErrorCode`), as the error the single call would have raised: classified like any other (a throttle
    or internal failure retried, a refusal of the request parked with AWS's reason), never taken as sent. No code at
    all is AWS's own failure, which retrying clears."""
    from botocore.exceptions import ClientError

    error = {"Code": code or "InternalFailure", "Message": message or "the entry was not accepted"}
    return ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, operation)


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError, or the exception's class name."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if code:
            return str(code)
    return type(exc).__name__


# What AWS answers when KMS refused the caller the key of what it called: SQS's query-compatible code, SNS's, Step
# Functions', Lambda's; DynamoDB answers AccessDeniedException naming the kms: action (matched on the message).
KMS_DENIED_CODES = frozenset(
    {
        "KMS.AccessDeniedException",
        "KmsAccessDenied",
        "KMSAccessDenied",
        "KmsAccessDeniedException",
        "KMSAccessDeniedException",
    }
)
# Patterns compiled on first use (`re` caches them), not at import: compiling these two cost every handler's cold
# start 0.7 ms, for the rare call KMS refuses.
_KEY_ARN = r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+"
_DYNAMODB_OPERATIONS = r"(Get|Put|Update|Delete|BatchGet|BatchWrite|TransactWrite|TransactGet)Items?|Query|Scan"


def key_refusal(code: str, message: str, *, table: bool = False) -> str | None:
    """The reason a call failed when KMS refused the caller the key that encrypts what it called (None when the
    failure is something else): names the key's ARN from AWS's message and the option that has the component grant
    its use, `kms_key_arn` (the target's, or with `table` the table's), so the fix is readable where it is parked."""
    key = re.search(_KEY_ARN, message)
    if code not in KMS_DENIED_CODES and not (key is not None and "kms:" in message):
        return None
    named = key.group(0) if key else "the key AWS did not name"
    option = "the component's kms_key_arn (the table's key)" if table else "the target's kms_key_arn"
    # The fix first: operators' listings cut a long reason short.
    return (
        f"set {option} to {named!r}: KMS refused this role that key (the option grants the roles its use; its key "
        f"policy must allow them too); AWS said {code}: {message}"
    )[:1000]


def kms_reason(exc: BaseException) -> str | None:
    """The reason to park a call's failure with when KMS refused the key (`key_refusal`, the option chosen by the
    operation: a DynamoDB call's key is the table's); None for any other failure."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    message = str(response.get("Error", {}).get("Message", ""))
    operation = str(getattr(exc, "operation_name", ""))
    return key_refusal(error_code(exc), message, table=bool(re.fullmatch(_DYNAMODB_OPERATIONS, operation)))


# SES refuses an address that is no verified identity of the account with these words: the sender's, and while the
# account is in the SES sandbox every recipient's too ("... failed the check in region EU-WEST-1: ada@example.com").
SES_NOT_VERIFIED = "Email address is not verified"
SES_SANDBOX = (
    "SES refused an address that is not a verified identity in this Region: while the account is in the SES sandbox, "
    "every recipient must be a verified identity too (verify it, or request SES production access; docs/targets.md), "
    "otherwise the sender is not verified"
)


def advice(exc: BaseException) -> str:
    """What to do about a refusal whose AWS words do not say it, to follow its reason; "" for any other."""
    if error_code(exc) == "MessageRejected" and SES_NOT_VERIFIED in str(exc):
        return f" ({SES_SANDBOX})"
    return ""


def persist(
    call: Callable[[], T],
    *,
    attempts: int = 5,
    delay: float = 0.1,
    may_retry: Callable[[float], bool] | None = None,
) -> T:
    """Run an idempotent bookkeeping write until it succeeds or the error is not transient. For writes that record
    an action already taken (a completion): giving up there would make a retry take the action a second time.
    `may_retry`, given the wait before the next try, says whether there is time for it (a caller with a deadline);
    when it says no, the last error is raised."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:
            wait = delay * 2 ** (attempt - 1)
            if attempt == attempts or not is_transient(exc) or (may_retry is not None and not may_retry(wait)):
                raise
            time.sleep(wait)
    raise AssertionError("unreachable")
