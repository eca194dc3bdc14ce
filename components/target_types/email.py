"""EmailTarget: an email through SES v2 (handlers/st_core/target_types/email.py renders and sends it)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..arns import email_address
from ..packaging import runtime_module
from ..suggest import keyword_hints
from ..target_base import TargetBase

# SES: a configuration set's name is 1-64 letters, digits, `_` and `-`.
_CONFIGURATION_SET = re.compile(r"[A-Za-z0-9_-]{1,64}")


@keyword_hints
@dataclass(frozen=True)
class EmailTarget(TargetBase):
    """SES (v2) sends a plain-text email; `subject` and `body` are `{attribute}` templates filled from the item.

    `sender`: a verified SES identity (the address or its domain), bare or with a display name
    (`Reminders <reminders@example.com>`); emails go out with it as written, and IAM allows sending only from that
    address.

    `configuration_set`: the SES configuration set to send with (its name), if any; whoever sends is then allowed
    ses:SendEmail on that configuration set too. Set it when the sender's identity has a default configuration set:
    SES then checks the send against that set as well.
    """

    sender: str
    recipient_attribute: str = "email"
    subject: str = "Reminder"
    body: str = "This is your reminder."
    configuration_set: str | None = None
    kind: ClassVar[str] = "email"
    stack_type: ClassVar[str] = "email"
    arn_field: ClassVar[str | None] = None
    listed: ClassVar[int] = 6
    docs: ClassVar[Mapping[str, str]] = {
        "sender": (
            "a verified SES identity to send from, bare or with a display name (`Reminders <reminders@example.com>`); "
            "IAM allows sending only from that address"
        ),
        "recipient_attribute": "the item attribute holding the recipient's address",
        "subject": "the subject, a template: `{attribute}` inserts an item attribute, `{{` and `}}` are literal braces",
        "body": "the plain-text body, a template like `subject`",
        "configuration_set": (
            "the SES configuration set to send with, by name (the sender's default one, if its identity has one): "
            "whoever sends is also allowed `ses:SendEmail` on it"
        ),
    }

    def __post_init__(self) -> None:
        local, _, domain = email_address(self.sender).partition("@") if isinstance(self.sender, str) else ("", "", "")
        if not local or not domain or "@" in domain:
            raise ValueError(
                f"EmailTarget.sender: {self.sender!r} is not an email address; pass the verified SES identity to "
                "send from, e.g. 'reminders@example.com' or 'Reminders <reminders@example.com>'"
            )
        if not self.recipient_attribute or not isinstance(self.recipient_attribute, str):
            raise ValueError(
                f"EmailTarget.recipient_attribute: {self.recipient_attribute!r} is not an attribute name; name the "
                "item attribute holding the recipient's address, e.g. 'email'"
            )
        for field_name, example in (("subject", "Reminder: {title}"), ("body", "{title} is due at {dueAt}.")):
            template = getattr(self, field_name)
            if not isinstance(template, str):
                # The handler renders it as text: anything else fails every email, or here inside `re`.
                raise ValueError(
                    f"EmailTarget.{field_name}: {template!r} is not a template; pass text, e.g. {example!r}, or leave "
                    f"it out for the default ({getattr(type(self), field_name)!r})"
                )
            try:
                runtime_module("templates").template_fields(template)
            except ValueError as exc:
                raise ValueError(
                    f"EmailTarget.{field_name}: {exc}; write {{attribute}} to insert an item attribute"
                ) from exc
        name = self.configuration_set
        if name is not None and (not isinstance(name, str) or not _CONFIGURATION_SET.fullmatch(name)):
            raise ValueError(
                f"EmailTarget.configuration_set: {name!r} is not a configuration set name; use its name (1-64 "
                "letters, digits, _ or -), e.g. 'reminders', not its ARN"
            )

    def handler_options(self) -> dict[str, Any]:
        email = {
            "sender": self.sender,
            "recipientAttribute": self.recipient_attribute,
            "subject": self.subject,
            "body": self.body,
        }
        if self.configuration_set is not None:
            email["configurationSet"] = self.configuration_set
        return {"email": email}
