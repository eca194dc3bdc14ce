"""The target types: one module per kind of target (`sqs.py`, `lambda_.py`, `stepfunctions.py`, `sns.py`,
`events.py`, `email.py`), each the one declaration of what that kind is to whoever touches it: the shape of its
ARN, the AWS actions each caller needs (the function sending directly, which the releaser also is; Scheduler's
execution role; the key that encrypts it), the request the function sends and Scheduler's target for it.

The handlers ship these modules (the Lambda archive holds only handlers/); the component (its policies, checks,
configuration reference and provider schema), the local cloud and the tests read these same files through
`scheduled_table.packaging.runtime_module("target_types")`, never a copy. A function imports only its own target's
module (`of(kind)`, on first use), so a kind added here costs no other function's cold start. Adding a kind is one
module here, named by the kind (a Python keyword gets a trailing underscore: `lambda_`), plus its component class
(components/target_types/); `register` takes a kind declared elsewhere (the tests' throwaway kind)."""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence
    from typing import Protocol

    from ..clients import Clients
    from ..config import TargetConfig

# How a kind's send grant names its resource: the target's ARN; the ARN and its qualifiers (a function's versions
# and aliases, `ARN:*`); or the sender's SES identities (a target with no ARN of its own).
GRANT_ARN = "arn"
GRANT_QUALIFIED = "arn-and-qualifiers"
GRANT_SES_IDENTITY = "ses-identity"


if TYPE_CHECKING:  # a Protocol class costs every cold start ~0.1 ms to build: the type checker's only

    class TargetType(Protocol):
        """What a target module declares (each module is one; the type checker holds them to this)."""

        KIND: str  # the handlers' configuration's `target.kind`
        SERVICE: str  # the service in the target's ARN ("" for a target without one)
        NOUN: str  # what the resource is called, for messages and docs ("queue")
        ARN_RESOURCE: str  # a regular expression of the ARN's resource part
        ARN_EXAMPLE: str
        FIFO: bool  # an ARN ending in `.fifo` names a FIFO resource, which needs a message group
        SCHEDULER_FIFO: bool  # Scheduler's target for the kind can deliver to a FIFO one
        GRANT: str  # GRANT_ARN, GRANT_QUALIFIED or GRANT_SES_IDENTITY
        SEND_ACTIONS: tuple[str, ...]  # what the function sending directly (and the releaser) calls
        SCHEDULER_ACTIONS: tuple[str, ...]  # what Scheduler's execution role calls to deliver
        SCHEDULER_ARN: str  # "": Scheduler's templated target on the target's ARN; else the universal target's ARN
        KMS_ACTIONS: tuple[str, ...]  # what a sender needs of the customer key encrypting it; (): no such key option
        PAYLOAD_BYTES: int  # the largest request the target takes (a queue's `maxMessageBytes` overrides it)

        def request(self, target: TargetConfig, event: dict[str, Any]) -> dict[str, Any] | None:
            """The request the function sends, if it is not the due event itself (SES: the email)."""

        def send(self, clients: Clients, target: TargetConfig, payload: str, occurrence: str) -> None:
            """Deliver `payload` now; `occurrence` names the firing where the target deduplicates."""

        def scheduler_parameters(self, target: TargetConfig, payload: str) -> dict[str, Any]:
            """What a schedule's `Target` carries besides its ARN, role, input, retries and DLQ."""


_KNOWN: dict[str, TargetType] = {}


def module_name(kind: str) -> str:
    """The module declaring `kind`: the kind itself, with a trailing underscore for the one that is a keyword."""
    return f"{kind}_" if kind == "lambda" else kind


def of(kind: str) -> TargetType:
    """The declaration of `kind`, imported on first use. Raises LookupError for a kind nothing declares."""
    found = _KNOWN.get(kind)
    if found is None:
        try:
            found = importlib.import_module(f"{__name__}.{module_name(kind)}")
        except ModuleNotFoundError as missing:
            raise LookupError(f"no target type declares the kind {kind!r}") from missing
        assert found is not None and kind == found.KIND, f"{module_name(kind)} declares {found.KIND!r}, not {kind!r}"
        _KNOWN[kind] = found
    return found


def register(declaration: TargetType) -> None:
    """Add a kind declared outside this package (a module satisfying TargetType)."""
    _KNOWN[declaration.KIND] = declaration


def unregister(kind: str) -> None:
    _KNOWN.pop(kind, None)


def every() -> Iterator[TargetType]:
    """Every declared kind (this package's modules, and any registered), each once, by kind."""
    for kind in sorted(_packaged() | set(_KNOWN)):
        yield of(kind)


@lru_cache(maxsize=1)
def _packaged() -> frozenset[str]:
    import pkgutil

    return frozenset(info.name.rstrip("_") for info in pkgutil.iter_modules(__path__))


def listed_results(count: int, response: Mapping[str, Any], operation: str) -> list[Exception | None]:
    """Per entry of a batch call that named its `count` entries "0", "1", ... and answers 200 listing them in
    `Successful` and `Failed` (SendMessageBatch, PublishBatch): None for an entry the service took, else the error
    of its refusal (`errors.refused_entry`). An entry listed in neither, or in both, was not taken."""
    from ..errors import refused_entry

    taken = {str(entry.get("Id")) for entry in response.get("Successful") or []}
    failed = {str(entry.get("Id")): entry for entry in response.get("Failed") or []}
    return [
        None
        if str(n) in taken and str(n) not in failed
        else refused_entry(failed.get(str(n), {}).get("Code"), failed.get(str(n), {}).get("Message"), operation)
        for n in range(count)
    ]


def each_alone(
    send: Callable[[Clients, TargetConfig, str, str], None],
    clients: Clients,
    target: TargetConfig,
    batch: Sequence[tuple[str, str]],
) -> list[Exception | None]:
    """Every (payload, occurrence) of a batch the service refused whole for its total size (nothing of it taken)
    sent by the kind's single call: per entry, None when sent, else its own refusal, retried or parked by itself, so
    an entry that fits the target alone is never parked for its neighbours' size."""
    results: list[Exception | None] = []
    for payload, occurrence in batch:
        try:
            send(clients, target, payload, occurrence)
        except Exception as exc:
            results.append(exc)
        else:
            results.append(None)
    return results


def templated_actions() -> dict[str, str]:
    """The action Scheduler's role performs on a templated target, by the service in the target's ARN."""
    return {t.SERVICE: t.SCHEDULER_ACTIONS[0] for t in every() if not t.SCHEDULER_ARN and t.SCHEDULER_ACTIONS}
