"""SES (v2): a plain-text email to the address in an item attribute, its subject and body `{attribute}` templates
filled from the item. SES has no target ARN: Scheduler sends through its universal target, with the SendEmail
request as its input, and IAM grants the send on the sender's identities (and its configuration set, if any)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .. import constants
from ..errors import PermanentError
from . import GRANT_SES_IDENTITY

if TYPE_CHECKING:
    from ..clients import Clients
    from ..config import EmailConfig, TargetConfig

KIND = "email"
SERVICE = ""
NOUN = "email"
ARN_RESOURCE = ""
ARN_EXAMPLE = ""
FIFO = False
SCHEDULER_FIFO = False
GRANT = GRANT_SES_IDENTITY
SEND_ACTIONS = ("ses:SendEmail",)
SCHEDULER_ACTIONS = ("ses:SendEmail",)
SCHEDULER_ARN = constants.SES_UNIVERSAL_TARGET
KMS_ACTIONS: tuple[str, ...] = ()
# SES v2 takes far larger messages; what bounds an email request is Scheduler's input when it delivers.
PAYLOAD_BYTES = constants.SCHEDULER_INPUT_BYTES
AWS_ACTIONS = SEND_ACTIONS


def request(target: TargetConfig, event: dict[str, Any]) -> dict[str, Any] | None:
    return email_request(target["email"], event["item"])


def email_request(email: EmailConfig, item: dict[str, Any]) -> dict[str, Any]:
    """An SES v2 SendEmail request (PascalCase, as both boto3 and Scheduler's universal target take it)."""
    from ..templates import render  # only email targets compile the template module

    recipient = item.get(email["recipientAttribute"])
    if not isinstance(recipient, str) or "@" not in recipient:
        raise PermanentError(f"recipient attribute {email['recipientAttribute']!r} is missing or not an address")
    request: dict[str, Any] = {
        "FromEmailAddress": email["sender"],
        "Destination": {"ToAddresses": [recipient]},
        "Content": {
            "Simple": {
                "Subject": {"Data": render(email["subject"], item), "Charset": "UTF-8"},
                "Body": {"Text": {"Data": render(email["body"], item), "Charset": "UTF-8"}},
            }
        },
    }
    if email.get("configurationSet"):
        request["ConfigurationSetName"] = email["configurationSet"]
    return request


def send(clients: Clients, target: TargetConfig, payload: str, occurrence: str) -> None:
    clients.get("sesv2").send_email(**json.loads(payload))


def scheduler_parameters(target: TargetConfig, payload: str) -> dict[str, Any]:
    return {}
