"""IAM enforced on every AWS call handler code makes in the moto-backed tests, as AWS enforces it.

Who is calling: a call is the handler's when the innermost code of this repository on the calling thread's stack
is under handlers/ (the handlers' clients, whatever registry made them: CLIENTS, a test's fault-injecting or
counting registry); a call the test's own code makes (setup, reading results, emulating Scheduler) is the test's and
is not checked here. The handler's call is made as the role of the function that is running: the entry points
(`eventbridge.handle_batch`, `ttl.handle_batch`, `polling.process`, `polling_assign.handle_assign_batch`,
`aggregate.handle_batch`, `st_core.release.handle_messages`) are wrapped to run "as" that function's role for their
configuration (`acting`), a plain global so the handlers' worker threads act as it too. A handler call with no
function acting fails the test: no handler path escapes enforcement unnoticed.

What is checked: every authorization the call needs (tests/iam/requests.py) against the role policy the component
renders for that configuration (tests/iam/roles.py), with ministack's IAM evaluator (explicit deny, then allow,
else implicit deny; wildcards in actions and resources; conditions). A refused call raises what botocore raises for
AWS's answer: the client's ClientError for AccessDeniedException (HTTP 400 from DynamoDB), with AWS's message.

What AWS does for the component with its roles is checked where it happens: each schedule a handler makes is
checked, when it is made, against the Scheduler execution role (its target's action, its DLQ send); each stream or
queue batch handed to a function, against that function's role (the event source mapping reads with it)."""

from __future__ import annotations

import functools
import inspect
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from botocore.client import BaseClient
from ministack.core.iam_evaluator import EvalContext, combine_resource_policy, evaluate, evaluate_resource_policy

from tests.conftest import REGION
from tests.iam import requests
from tests.iam.roles import ACCOUNT, NO_KEYS, Keys, Role, mapping_destination, role_for
from tests.iam.scheduler_targets import firing_requests

REPO = Path(__file__).resolve().parents[2]
HANDLERS = str(REPO / "handlers") + "/"
TESTS = str(REPO / "tests") + "/"
WHERE = requests.Where(REGION, ACCOUNT)

# Handler entry points: (module, attribute, the component's role for that function, how the event reaches it).
ENTRY_POINTS: tuple[tuple[str, str, str, str], ...] = (
    ("eventbridge", "handle_batch", "scheduler", "stream"),
    ("ttl", "handle_batch", "executor", "stream"),
    ("aggregate", "handle_batch", "aggregator", "stream"),
    ("polling_assign", "handle_assign_batch", "assigner", "stream"),  # what `polling_assign.handler` runs
    ("polling", "process", "processor", "rule"),
    ("polling", "fan_out", "processor", "rule"),  # the rule's invocation with shard_groups > 1
    ("st_core.release", "handle_messages", "releaser", "queue"),
)


class Denied(Exception):
    """Raised by `check` for a refusal (the enforcement turns it into the service's ClientError)."""

    def __init__(self, role: Role, request: requests.Request, explicit: bool) -> None:
        self.role, self.request, self.explicit = role, request, explicit
        self.kms = False
        super().__init__(requests.denial_message(role.principal, request, explicit=explicit))


class KeyDenied(Denied):
    """A use of a customer-managed key refused: by the caller's policies or by the key policy (`by_key_policy`);
    `service`: the service principal that uses the key itself (EventBridge), whom only the key policy can allow."""

    def __init__(self, role: Role, use: requests.KeyUse, *, by_key_policy: bool) -> None:
        Exception.__init__(
            self,
            requests.kms_denial_message(use.service or role.principal, use.request, by_key_policy=by_key_policy),
        )
        self.role, self.request, self.explicit, self.kms = role, use.request, False, True
        self.service, self.by_key_policy = use.service, by_key_policy


def _context(principal: str, request: requests.Request, principal_type: str = "AssumedRole") -> EvalContext:
    return EvalContext(
        principal_arn=principal,
        principal_type=principal_type,
        principal_account=ACCOUNT,
        action=request.action,
        resource_arn=request.resource,
        region=REGION,
        service_context=dict(request.context),
    )


def decide(role: Role, request: requests.Request) -> str:
    """ "Allow", "Deny" (an explicit deny) or "ImplicitDeny", as IAM decides for this role's identity policy:
    rule("iam-evaluation"), each operation by the actions it needs, rule("iam-actions-per-operation")."""
    return evaluate(_context(role.principal, request), [list(role.statements)]).decision


def decide_key(role: Role, use: requests.KeyUse, encryption: requests.Encryption) -> str:
    """A use of a customer-managed key, as KMS decides it: the key policy must allow it (a key without a policy
    allows nothing); by a role, its own policy too, unless the key policy names the role itself (the account root
    in a key policy delegates to IAM policies); by a service principal, the key policy alone, for this account:
    rule("kms-key-policy")."""
    key = use.request.resource
    policy = encryption.policy_of(key)
    if use.service is not None:
        context = _context(use.service, use.request, "Service")
        context.service_context = {"aws:sourceaccount": ACCOUNT}
        return evaluate_resource_policy(policy, context, service=use.service).decision
    context = _context(role.principal, use.request)
    identity = evaluate(context, [list(role.statements)])
    owner = key.split(":")[4]
    return combine_resource_policy(identity, context, policy, owner, required=True).decision


def check(
    role: Role,
    wanted: list[requests.Request],
    encryption: requests.Encryption = requests.NO_KEYS,
    uses: Sequence[requests.KeyUse] = (),
) -> None:
    """Every authorization `wanted` allowed for `role`, and every use of a key they bring, and `uses` besides (a
    schedule's payload key: KeyDenied if not)."""
    for request in wanted:
        decision = decide(role, request)
        if decision != "Allow":
            raise Denied(role, request, decision == "Deny")
    for use in [*requests.key_uses(wanted, encryption), *uses]:
        if decide_key(role, use, encryption) != "Allow":
            by_key_policy = use.service is not None or decide(role, use.request) == "Allow"
            raise KeyDenied(role, use, by_key_policy=by_key_policy)


@dataclass(eq=False)
class Acting:
    """A function acting: its role, and Scheduler's execution role when the configuration has one (resolved when
    the function starts, on the test's thread: the component is built under Pulumi's mocks there, not in a
    handler's worker thread)."""

    role: Role
    scheduler: Role | None
    encryption: requests.Encryption = requests.NO_KEYS


def encryption_for(config: Mapping[str, Any], keys: Keys, policies: Mapping[str, str]) -> requests.Encryption:
    """What the configuration's resources are encrypted with: the table and the ledger with the table's key, and so
    the queues the component makes (they hold its items whole: poison, target DLQ, release), the target with its
    own; and each key's policy."""
    encrypted: dict[str, str] = {}
    if keys.table is not None:
        section = config.get(config["mode"], {})
        for table in (config["table"], section.get("ledgerTable")):
            if table:
                encrypted[requests.table_arn(str(table), WHERE)] = keys.table
        for queue in owned_queues(config):
            encrypted[queue] = keys.table
    target = config.get("target") or {}
    if keys.target is not None and target.get("arn"):
        encrypted[str(target["arn"])] = keys.target
    return requests.Encryption(tuple(sorted(encrypted.items())), tuple(sorted(policies.items())))


def owned_queues(config: Mapping[str, Any]) -> list[str]:
    """The ARNs of the queues of the component's own the configuration names: the poison queue, the target DLQ, the
    release queue."""
    release = (config.get("eventbridge") or {}).get("release") or {}
    urls = [
        config.get("poisonQueueUrl"),
        (config.get("polling") or {}).get("deadLetterUrl"),
        release.get("queueUrl"),
        release.get("deadLetterUrl"),
    ]
    arns = [requests.queue_arn_of_url(str(url)) for url in urls if url]
    return sorted({*arns, *(str(a) for a in ((config.get("scheduler") or {}).get("deadLetterArn"),) if a)})


def resolve(
    role: str, config: Mapping[str, Any], keys: Keys = NO_KEYS, policies: Mapping[str, str] = {}, told: Keys = NO_KEYS
) -> Acting:
    """The function `role` acting: its role as rendered for the keys the component was `told`, its resources
    encrypted with `keys`."""
    try:
        scheduler: Role | None = role_for(config, "scheduler-exec", told)
    except LookupError:
        scheduler = None
    return Acting(role_for(config, role, told), scheduler, encryption_for(config, keys, policies))


class Enforcement:
    """The state of one test: which function is acting, and what AWS would have refused outside a call (a
    schedule Scheduler could not fire, a batch a mapping could not read)."""

    def __init__(self) -> None:
        self.acting: list[Acting] = []
        self.violations: list[str] = []
        self.calls = 0
        self.keys: Keys = NO_KEYS  # what the resources are encrypted with
        self.told: Keys = NO_KEYS  # what the component was told of them (its roles are rendered for these)
        self.key_policies: dict[str, str] = {}
        self.operators = 0  # open `operating()` blocks: the operator's own command running in the test's process
        self._lock = threading.Lock()

    def current(self) -> Acting | None:
        return self.acting[-1] if self.acting else None

    @contextmanager
    def act(self, role: str, config: Mapping[str, Any]) -> Iterator[None]:
        entry = resolve(role, config, self.keys, self.key_policies, self.told)
        with self._lock:
            self.acting.append(entry)
        try:
            yield
        finally:
            with self._lock:
                self.acting.remove(entry)

    def violation(self, text: str) -> None:
        with self._lock:
            self.violations.append(text)

    def encryption(self, config: Mapping[str, Any]) -> requests.Encryption:
        return encryption_for(config, self.keys, self.key_policies)

    @contextmanager
    def encrypted(self, keys: Keys, policies: Mapping[str, str], told: Keys | None = None) -> Iterator[None]:
        """The test's resources encrypted with `keys`, each key with its policy in `policies` (key ARN ->
        document; a key without one allows nothing); the component told of `told` (default: all of them), its
        roles rendered for those."""
        before = self.keys, self.key_policies, self.told
        self.keys, self.key_policies, self.told = keys, dict(policies), keys if told is None else told
        try:
            yield
        finally:
            self.keys, self.key_policies, self.told = before


STATE = Enforcement()


def acting(role: str, config: Mapping[str, Any]) -> Any:
    """Run the block as the function `role` of the component deployed with `config` (for tests that drive a
    handler's internals directly rather than through its entry point)."""
    return STATE.act(role, config)


@contextmanager
def operating() -> Iterator[None]:
    """Run the block as the operator's command (`reconcile`, `backfill`), whose code lives under handlers/ too: its
    own calls are the operator's, checked against the operator's policy by tests/redrive, not here; a handler it
    feeds (through an entry point) acts as its function's role and is checked as ever."""
    STATE.operators += 1
    try:
        yield
    finally:
        STATE.operators -= 1


def acting_for_target(target: Mapping[str, Any]) -> Any:
    """Run the block as the function that delivers due events itself (ttl's executor), for a test of the delivery
    code alone with `target` and no table of its own: its policy grants exactly the target's action. The document
    is plain ttl's as the component writes it, with `target` as its target section."""
    from components import ScheduledTableArgs
    from components.runtime_config import Value
    from tests.support.handler_config import handler_config

    names = {
        Value.TABLE: "table",
        Value.TARGET_ARN: str(target["arn"]),
        Value.POISON_QUEUE_URL: f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/poison",
        Value.LEDGER_TABLE: "ledger",
    }
    config = handler_config(ScheduledTableArgs(mode="ttl"), names)
    return STATE.act("executor", {**config, "target": dict(target)})


def _handler_frame() -> str | None:
    """The handler file the call comes from; None when it comes from a test's own code (or from neither)."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(HANDLERS):
            return name
        if name.startswith(TESTS):
            return None
        frame = frame.f_back
    return None


_MODULES: dict[str, Any] = {}


def declared_actions(filename: str, role: str) -> tuple[str, ...] | None:
    """What the handler module at `filename` declares it calls (its AWS_ACTIONS, or AWS_ACTIONS_BY_ROLE[role])."""
    if filename not in _MODULES:
        _MODULES[filename] = next(
            (m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == filename), None
        )
    module = _MODULES[filename]
    by_role = getattr(module, "AWS_ACTIONS_BY_ROLE", None)
    if by_role is not None:
        return tuple(by_role.get(role, ()))
    return getattr(module, "AWS_ACTIONS", None)


_original_make_api_call = BaseClient._make_api_call


def _make_api_call(client: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
    caller = _handler_frame()
    if caller is not None:
        _authorize(client, operation_name, api_params, caller)
    return _original_make_api_call(client, operation_name, api_params)


def _authorize(client: BaseClient, operation: str, params: dict[str, Any], caller: str) -> None:
    service = client.meta.service_model.service_name
    now = STATE.current()
    if now is None and STATE.operators:
        return  # the operator's own command (`operating`)
    if now is None:
        text = (
            f"handler code called {service}.{operation} with no function acting: call the handler through its "
            "module's entry point (e.g. `eventbridge.handle_batch`), or wrap the call in "
            "`tests.iam.enforce.acting(role, config)`"
        )
        STATE.violation(text)  # the handler may catch the error below; the test fails at its end all the same
        raise AssertionError(text)
    STATE.calls += 1
    wanted = requests.authorizations(service, operation, params, WHERE)
    declared = declared_actions(caller, now.role.name)
    undeclared = sorted({r.action for r in wanted} - set(declared or ()))
    if undeclared:
        STATE.violation(
            f"{caller.removeprefix(str(REPO) + '/')} calls {service}.{operation} ({', '.join(undeclared)}) as the "
            f"{now.role.name} function, but does not declare it in its AWS_ACTIONS"
        )
    schedule = service == "scheduler" and operation in ("CreateSchedule", "UpdateSchedule")
    payload = requests.schedule_payload_uses(params, WHERE, firing=False) if schedule else []
    try:
        check(now.role, wanted, now.encryption, payload)
    except KeyDenied as denied:
        if denied.service is not None:
            # The service, not the caller, is refused the key: the call succeeds, and the event never arrives.
            STATE.violation(f"{service}.{operation}: {denied.service} could not use the key: {denied}")
        else:
            response = requests.kms_denied_response(service, str(denied))
            raise client.exceptions.from_code(response["Error"]["Code"])(response, operation) from None
    except Denied as denied:
        response = requests.denied_response(service, str(denied))
        code = response["Error"]["Code"]
        raise client.exceptions.from_code(code)(response, operation) from None
    if service == "scheduler" and operation in ("CreateSchedule", "UpdateSchedule"):
        _check_firing(now.scheduler, params, now.encryption)


def check_firing(role: Role, schedule: dict[str, Any], encryption: requests.Encryption) -> None:
    """What Scheduler does with the schedule's role when it fires: read its payload (under its KmsKeyArn, if any),
    call the target (using its key, if encrypted), or send to its DLQ; Denied (KeyDenied) as AWS would refuse it."""
    payload = requests.schedule_payload_uses(schedule, WHERE, firing=True)
    check(role, firing_requests(schedule, WHERE), encryption, payload)


def _check_firing(role: Role | None, schedule: dict[str, Any], encryption: requests.Encryption) -> None:
    if role is None:
        STATE.violation(f"schedule {schedule['Name']} made, but the component deploys no Scheduler role here")
        return
    try:
        check_firing(role, schedule, encryption)
    except Denied as denied:
        STATE.violation(f"schedule {schedule['Name']}: Scheduler's execution role would be refused: {denied}")


def mapping_requests(
    role_name: str, config: Mapping[str, Any], source: str, arn: str, keys: Keys = NO_KEYS
) -> list[requests.Request]:
    """What a function's event source mapping does with the function's role: read the batch (a stream's records,
    or a queue's messages) and, for a stream, send what fails for good to its on-failure destination."""
    if source == "stream":
        actions = ("DescribeStream", "GetShardIterator", "GetRecords", "ListStreams")
        reads = [requests.Request(f"dynamodb:{a}", arn) for a in actions]
        destination = mapping_destination(config, role_name, keys)
        return reads + ([requests.Request("sqs:SendMessage", destination)] if destination else [])
    return [requests.Request(f"sqs:{a}", arn) for a in ("ReceiveMessage", "DeleteMessage", "GetQueueAttributes")]


def check_mapping(role_name: str, config: Mapping[str, Any], event: Any, source: str) -> None:
    """The event source mapping reads the batch it delivers with the function's role (decrypting with the table's
    key, if it has one); and sends what fails for good to its on-failure destination (the stream DLQ), which the
    component's policy must allow too."""
    if source == "rule" or not isinstance(event, dict):
        return
    arns = {
        str(r.get("eventSourceARN") or r.get("eventSourceArn"))
        for r in event.get("Records") or []
        if isinstance(r, dict) and (r.get("eventSourceARN") or r.get("eventSourceArn"))
    }
    role = role_for(config, role_name, STATE.told)
    for arn in sorted(arns):
        try:
            check(role, mapping_requests(role_name, config, source, arn, STATE.told), STATE.encryption(config))
        except Denied as denied:
            STATE.violation(f"the {role_name} function's event source mapping would be refused: {denied}")


def wrap(function: Callable[..., Any], role: str, source: str) -> Callable[..., Any]:
    signature = inspect.signature(function)

    @functools.wraps(function)
    def as_role(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(*args, **kwargs)
        config = bound.arguments["config"]
        check_mapping(role, config, bound.arguments.get("event"), source)
        with STATE.act(role, config):
            return function(*args, **kwargs)

    return as_role


@contextmanager
def enforced() -> Iterator[Enforcement]:
    """IAM on for one test: the entry points wrapped, every handler call authorized; at the end, no violation of
    what AWS does with the component's roles (schedules it fires, batches its mappings read)."""
    import importlib

    global STATE
    STATE = Enforcement()
    patched: list[tuple[Any, str, Any]] = []
    for module_name, attribute, role, source in ENTRY_POINTS:
        module = importlib.import_module(module_name)
        original = getattr(module, attribute)
        patched.append((module, attribute, original))
        setattr(module, attribute, wrap(original, role, source))
    BaseClient._make_api_call = _make_api_call
    try:
        yield STATE
    finally:
        BaseClient._make_api_call = _original_make_api_call
        for module, attribute, original in reversed(patched):
            setattr(module, attribute, original)
    assert not STATE.violations, "AWS would refuse what the component asks of its roles:\n" + "\n".join(
        STATE.violations
    )
