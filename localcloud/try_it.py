"""What `python -m localcloud up --stay` tells its user: commands to try the stack it deployed, one group per table,
built from that table's settings and exports (so they name only its tables, queues, schedule groups and rules).

The commands are meant to be pasted as printed, into bash or zsh, from the repository root:

- AWS CLI v1 and v2 alike: `--endpoint-url` on every command (an older CLI ignores `AWS_ENDPOINT_URL` and would
  reach the real AWS), no v2-only option, no blob parameter (v1 reads those raw, v2 as base64), and `AWS_PAGER=` so
  v2 does not page its output.
- a receive deletes what it read: a message received and left in the queue comes back after its visibility
  timeout, which looks like a duplicate delivery.
- due times are computed by the shell as epoch seconds (`date +%s` is the same on Linux and macOS; every mode
  accepts epoch seconds), and `.venv/bin/python` is used only for what the AWS CLI cannot do: tick a polling rule
  now, read the local SES outbox, remove the stack.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import shutil
from collections.abc import Mapping
from typing import Any

from .component import EmailTarget, Mode, ScheduledTableArgs, email_address, runtime_module
from .deploy import Deployment
from .program import REPO
from .provision import clients

PYTHON = ".venv/bin/python"
# How far ahead the written item is due: Scheduler-driven modes act in the minute at or after the due time and
# anywhere in it; the local TTL deletes an expired item 5 s late, so a ttl item's event comes within the 20 s that
# the printed receive waits.
LEAD_SECONDS = {Mode.EVENTBRIDGE: 30, Mode.TTL: 5, Mode.POLLING: 0}
# `not_null`: a receive that finds nothing prints nothing (plain `Messages[]` prints "None" in text output).
RECEIVED = "'not_null(Messages, `[]`)[].[ReceiptHandle,Body]'"


def aws(endpoint: str, service: str, operation: str, *options: str) -> str:
    """One AWS CLI command against the local cloud; `options` are already quoted for the shell."""
    return " ".join(["aws", service, operation, "--endpoint-url", endpoint, *options])


def receive_and_delete(endpoint: str, queue_url: str) -> str:
    """Wait up to 20 s for messages, print each body and delete it (by its receipt handle, which has no spaces)."""
    queue = shlex.quote(queue_url)
    receive = aws(
        endpoint,
        "sqs",
        "receive-message",
        f"--queue-url {queue} --max-number-of-messages 10 --wait-time-seconds 20 --query {RECEIVED} --output text",
    )
    delete = aws(endpoint, "sqs", "delete-message", f'--queue-url {queue} --receipt-handle "$handle"')
    return f'{receive} | while read -r handle body; do echo "$body"; {delete}; done'


def _value(kind: str, text: str) -> dict[str, str]:
    if kind == "N":
        return {"N": "1"}
    if kind == "B":
        return {"B": base64.b64encode(text.encode()).decode()}
    return {"S": text}


def _key(args: ScheduledTableArgs, partition: str, sort: str) -> dict[str, Any]:
    key = {args.partition_key: _value(args.partition_key_type, partition)}
    if args.sort_key is not None:
        key[args.sort_key] = _value(args.sort_key_type, sort)
    return key


DUE = "@DUE@"


def json_argument(value: dict[str, Any], lead: int = 0) -> str:
    """`value` as one single-quoted JSON argument; a `DUE` string in it becomes the shell's epoch seconds `lead`
    from now (spliced in unquoted: it is a number)."""
    text = json.dumps(value, separators=(",", ":")).replace("'", "'\\''")
    now = "$(date +%s)" if lead == 0 else f"$(($(date +%s) + {lead}))"
    return "'" + text.replace(f'"{DUE}"', f"\"'{now}'\"") + "'"


def write_item(endpoint: str, table: str, item: dict[str, Any], lead: int = 0) -> str:
    return aws(
        endpoint, "dynamodb", "put-item", f"--table-name {shlex.quote(table)} --item {json_argument(item, lead)}"
    )


def email_fields(email: Mapping[str, Any]) -> dict[str, Any]:
    """What an item needs to be emailed, from the email target's options as the handlers read them (`sender`,
    `recipientAttribute`, `subject`, `body`): the recipient, at the sender's domain (which `up --stay` verifies), and
    every attribute the templates name. An item without one is parked, not sent."""
    domain = sender_domain(str(email.get("sender", "")))
    fields = {str(email.get("recipientAttribute") or "email"): {"S": f"you@{domain}"}}
    for template in (email.get("subject"), email.get("body")):
        for name in runtime_module("templates").template_fields(str(template or "")):
            fields.setdefault(name, {"S": f"your {name}"})
    return fields


def sender_domain(sender: str) -> str:
    """`Team <team@example.org>` or `team@example.org` -> `example.org`: the identity `up --stay` verifies."""
    return email_address(sender).rsplit("@", 1)[-1]


def table_commands(endpoint: str, region: str, name: str, args: ScheduledTableArgs, out: dict[str, Any]) -> list[str]:
    """A heading and the commands to try one table: write an item, then watch what it causes."""
    table, mode = out.get("table_name", f"{name}-table"), Mode(args.mode)
    target = args.target
    lines: list[str] = []
    if mode is Mode.AGGREGATE:
        group = "USER#you"
        item = {args.partition_key: {"S": f"{args.source_prefix}#try-1"}, args.group_from: {"S": group}}
        if args.sort_key is not None and args.sort_key != args.group_from:
            item[args.sort_key] = {"S": "try-1"}
        item[args.value_attribute] = {"N": "5"}
        total = {args.partition_key: {"S": group}, str(args.sort_key): {"S": args.total_sort_key}}
        lines.append(f"{name} (aggregate): write a source item; its group's total ({args.total_attribute}) follows")
        lines.append(write_item(endpoint, table, item))
        get = aws(endpoint, "dynamodb", "get-item", "--table-name", shlex.quote(table), "--key", json_argument(total))
        lines.append(get)
        return lines
    lead = LEAD_SECONDS[mode]
    item = {**_key(args, f"TRY#{name}", "try"), args.time_attribute: {"N": DUE}}
    if isinstance(target, EmailTarget):
        item.update(email_fields(target.handler_options()["email"]))
    due = "due now" if lead == 0 else f"due in {lead} s"
    how = {
        Mode.EVENTBRIDGE: "it is released at its second, from the release queue (a schedule in the minute before "
        "puts it there, or the stream handler when that minute is too close)"
        if args.precision == "second"
        else "a Scheduler schedule acts in the minute at or after the due time, anywhere in it",
        Mode.TTL: "the local TTL deletes it a few seconds after it expires"
        + ("; its delete schedule may act first" if args.precise else ""),
        Mode.POLLING: f"the rule {out.get('tick_rule_name', '')} ticks every {args.poll_interval_minutes} min; "
        "tick it now with the second command",
    }[mode]
    elsewhere = ""
    if target is not None and not isinstance(target, EmailTarget) and not out.get("due_queue_url"):
        elsewhere = f"; it goes to the {target.kind} the stack names"
    lines.append(f"{name} ({mode.value}{', precise' if args.precise else ''}): write an item {due} ({how}){elsewhere}")
    lines.append(write_item(endpoint, table, item, lead))
    if out.get("schedule_group_name"):
        group = shlex.quote(out["schedule_group_name"])
        lines.append(aws(endpoint, "scheduler", "list-schedules", f"--group-name {group}"))
    if out.get("tick_rule_name"):
        rule = shlex.quote(out["tick_rule_name"])
        lines.append(f"{PYTHON} -m localcloud fire --rule {rule} --endpoint-url {endpoint} --region {region}")
    if out.get("due_queue_url"):
        lines.append(receive_and_delete(endpoint, out["due_queue_url"]))
    elif isinstance(target, EmailTarget):
        lines.append(f"{PYTHON} -m localcloud emails --endpoint-url {endpoint}")
    return lines


def try_it_header(endpoint: str, region: str, where: str = "") -> list[str]:
    """The lines before the try-it commands, for the repo's stack and a user's program alike: what they need (the
    AWS CLI, which a newcomer may not have), and how long what an item causes takes to show (a first empty receive
    is not a failure)."""
    text = [
        f"Ready: the local cloud answers at {endpoint} (region {region}; any credentials work).",
        "What an item causes shows within a minute or two of its due time: a receive that prints nothing (it waits "
        "20 s) or 'no email sent yet' means run it again; `scheduled-table inspect --table TABLE --endpoint-url "
        f"{endpoint}` shows what is pending and what was parked, and why.",
    ]
    if shutil.which("aws") is None:
        text.append(
            "note: the `aws` lines below need the AWS CLI, which is not on PATH: install it (`pip install awscli` "
            "in this venv, or AWS's installer), then run them as printed."
        )
    return [*text, f"Try it{where} in bash or zsh (AWS CLI v1 or v2); first, in that shell:"]


def instructions(deployment: Deployment, stack_options: list[str]) -> str:
    """The text `up --stay` prints once the stack is deployed. `stack_options`: how the command named the stack
    (`--stack dev`, `--config-file f.yaml`), repeated in the `down` command."""
    endpoint, region = deployment.endpoint, deployment.region
    text = [
        *try_it_header(endpoint, region, f" from {REPO}"),
        "",
        f"  export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION={region} AWS_PAGER=",
    ]
    for name, args in deployment.tables:
        heading, *commands = table_commands(endpoint, region, name, args, deployment.outputs.get(name, {}))
        text += ["", heading, *(f"  {command}" for command in commands)]
    down = " ".join([PYTHON, "-m", "localcloud", "down", "--endpoint-url", endpoint, *map(shlex.quote, stack_options)])
    text += [
        "",
        "Remove the stack (the cloud keeps running):",
        f"  {down}",
        f"Stop the cloud: Ctrl-C here, or kill {os.getpid()}.",
    ]
    return "\n".join(text)


def verify_senders(deployment: Deployment) -> None:
    """SES sends only from verified identities and, in its sandbox, to them: verify each email target's domain (the
    printed recipient is at that domain)."""
    ses = clients(deployment.endpoint, deployment.region)("sesv2")
    for _, args in deployment.tables:
        if isinstance(args.target, EmailTarget):
            ses.create_email_identity(EmailIdentity=sender_domain(args.target.sender))
