"""SES in the sandbox also checks each recipient's identity: AWS refuses the send with `MessageRejected` and "Email
address is not verified. The following identities failed the check in region ...", the same words it uses for an
unverified sender. A due email refused so is parked with a reason that names the sandbox and the fix, not only AWS's
words (which never mention it)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import ttl
from botocore.exceptions import ClientError
from st_core.clients import CLIENTS
from st_core.errors import advice

from components.runtime_config import Value
from components.targets import EmailTarget
from tests.handlers.conftest import ACCOUNT, Env
from tests.handlers.test_ttl import expire

REFUSAL = (
    "Email address is not verified. The following identities failed the check in region EU-WEST-1: ada@example.com"
)


def sandboxed_ses() -> None:
    """SES v2 answering SendEmail as it does for an account in the sandbox whose recipient is not verified."""

    def refuse(params: dict[str, Any], **_: Any) -> tuple[Any, dict[str, Any]]:
        error = {"Error": {"Code": "MessageRejected", "Message": REFUSAL}, "ResponseMetadata": {"HTTPStatusCode": 400}}
        return SimpleNamespace(status_code=400, headers={}), error

    CLIENTS.get("sesv2").meta.events.register("before-call.sesv2.SendEmail", refuse)


def test_a_recipient_refused_by_the_sandbox_is_parked_naming_the_sandbox(env: Env) -> None:
    env.names[Value.TARGET_ARN] = f"arn:aws:ses:eu-west-1:{ACCOUNT}:identity/example.com"  # the sender's identity
    env.configure(mode="ttl", target=EmailTarget(sender="offers@example.com", subject="s", body="b"))
    sandboxed_ses()
    env.put({"PK": "offer#1", "SK": "S", "dueAt": int(datetime.now(UTC).timestamp()), "email": "ada@example.com"})
    env.event()

    assert ttl.handle_batch(expire(env, "offer#1"), env.config) == {"batchItemFailures": []}

    (parked,) = env.messages(env.poison_url)
    assert parked["reason"].startswith("MessageRejected: ") and f"{REFUSAL} (SES refused an address" in parked["reason"]
    assert "SES sandbox, every recipient must be a verified identity too" in parked["reason"]


def test_other_refusals_get_no_sandbox_advice() -> None:
    other = ClientError({"Error": {"Code": "MessageRejected", "Message": "Illegal address"}}, "SendEmail")
    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": REFUSAL}}, "SendEmail")
    assert advice(other) == advice(denied) == ""
    assert "sandbox" in advice(ClientError({"Error": {"Code": "MessageRejected", "Message": REFUSAL}}, "SendEmail"))
