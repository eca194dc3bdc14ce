"""IAM enforced on the operator's command: every call it makes through its `client(service)` is checked, as AWS
would, against one policy document (the one `scheduled-table policy` generates), with the evaluator and the
operation -> action/resource table the functions' enforcement uses (tests/iam/enforce.py, requests.py). A call on a
resource encrypted with a customer-managed key (`encryption`) also needs each use of the key it makes allowed, by
the operator's policy and the key's policy together, as KMS decides (enforce.decide_key). A refused call raises
what botocore raises for AWS's answer (for a key: the service's KMS error). Calls the consumer's handler makes while
a replay runs it in-process use the handler's own clients, not these: they are the function's, not the
operator's."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import botocore.session
from botocore import xform_name
from botocore.exceptions import ClientError
from ministack.core.iam_evaluator import parse_policy_document

from tests.iam import enforce, requests
from tests.iam.roles import ACCOUNT, Role

Client = Callable[[str], Any]


def operator_role(policy: str | dict[str, Any]) -> Role:
    document = json.loads(policy) if isinstance(policy, str) else policy
    arn = f"arn:aws:iam::{ACCOUNT}:role/operator"
    return Role("operator", arn, "operator", document, tuple(parse_policy_document(document)))


@dataclass
class Calls:
    """What the command asked: each authorization, and whether IAM allowed it."""

    made: list[tuple[str, str, bool]] = field(default_factory=list)  # (action, resource, allowed)

    @property
    def refused(self) -> list[tuple[str, str]]:
        return [(a, r) for a, r, ok in self.made if not ok]

    @property
    def actions(self) -> set[str]:
        return {a for a, _, _ in self.made}


_OPERATIONS: dict[str, dict[str, str]] = {}


def _operations(service: str) -> dict[str, str]:
    if service not in _OPERATIONS:
        model = botocore.session.get_session().get_service_model(service)
        _OPERATIONS[service] = {xform_name(op): op for op in model.operation_names}
    return _OPERATIONS[service]


class Checked:
    """One service's client, every operation authorized first."""

    def __init__(
        self, service: str, inner: Any, role: Role, calls: Calls, encryption: requests.Encryption = requests.NO_KEYS
    ) -> None:
        self._service, self._inner, self._role, self._calls = service, inner, role, calls
        self._encryption = encryption

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)
        operation = _operations(self._service).get(name)
        if operation is None or not callable(target):
            return target

        def call(*args: Any, **params: Any) -> Any:
            wanted = requests.authorizations(self._service, operation, params, enforce.WHERE)
            for request in wanted:
                allowed = enforce.decide(self._role, request) == "Allow"
                self._calls.made.append((request.action, request.resource, allowed))
                if not allowed:
                    message = requests.denial_message(self._role.principal, request, explicit=False)
                    raise ClientError(requests.denied_response(self._service, message), operation)
            for use in requests.key_uses(wanted, self._encryption):
                if use.service is not None:  # the service uses the key itself (EventBridge): its key policy's say
                    continue
                allowed = enforce.decide_key(self._role, use, self._encryption) == "Allow"
                self._calls.made.append((use.request.action, use.request.resource, allowed))
                if not allowed:
                    by_key_policy = enforce.decide(self._role, use.request) == "Allow"
                    message = requests.kms_denial_message(
                        self._role.principal, use.request, by_key_policy=by_key_policy
                    )
                    raise ClientError(requests.kms_denied_response(self._service, message), operation)
            return target(*args, **params)

        return call


def enforcing(
    client: Client, policy: str | dict[str, Any], encryption: requests.Encryption = requests.NO_KEYS
) -> tuple[Client, Calls]:
    """The command's `client(service)` with the operator holding exactly `policy`, its resources encrypted as
    `encryption` says, and the record of its calls."""
    role = operator_role(policy)
    calls = Calls()
    made: dict[str, Checked] = {}

    def checked(service: str) -> Any:
        if service not in made:
            made[service] = Checked(service, client(service), role, calls, encryption)
        return made[service]

    return checked, calls
