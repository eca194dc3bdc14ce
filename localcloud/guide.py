"""What `scheduled-table local up --stay` prints for a user's own program: how to write an item into each table a
`ScheduledTable` built and where to read what it caused.

This repo's stack describes its tables in its stack file, so `try_it.py` builds its commands from their settings. A
user's program builds its tables in Python, which the local cloud cannot read back; what it can read is what the
program registered: each component's table (its keys and their types) and its consumer function, whose
configuration document (the `SCHEDULED_TABLE_CONFIG` variable the handlers read) names the mode, the time attribute
and the target. The commands are the AWS CLI's, as in `try_it.py`.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

from .component import TYPE, constants, time_hint
from .deploy import Deployment
from .mocks import Registration
from .provision import clients
from .try_it import DUE, aws, email_fields, receive_and_delete, sender_domain, try_it_header, write_item

# How many items `up` reads of each table to find those without its time attribute (one Scan page at most).
SCANNED_ITEMS = 1000
# As `try_it.LEAD_SECONDS`: far enough ahead that the write is seen before the item falls due.
LEAD_SECONDS = {"eventbridge": 30, "ttl": 5, "polling": 0}


@dataclass(frozen=True)
class FoundTable:
    """One ScheduledTable of the program, as its registrations show it."""

    component: str
    table: str
    key_types: dict[str, str]
    config: dict[str, Any]
    tick_rule: str | None


def _config(function: Registration) -> dict[str, Any] | None:
    variables = ((function.inputs.get("environment") or {}).get("variables")) or {}
    text = variables.get(constants.CONFIG_VARIABLE)
    return json.loads(text) if isinstance(text, str) else None


def found_tables(resources: list[Registration]) -> list[FoundTable]:
    """Each ScheduledTable the program built, in the order it built them. Its table is the one its functions' document
    names: the component's own, or an existing one (then its key types are not registered and read as strings)."""
    tables = {r.outputs.get("name", r.name): r for r in resources if r.type == "aws:dynamodb/table:Table"}
    functions = [(r.name, c) for r in resources if r.type == "aws:lambda/function:Function" if (c := _config(r))]
    rules = [r.name for r in resources if r.type == "aws:cloudwatch/eventRule:EventRule"]
    found = []
    for name in (r.name for r in resources if r.type == TYPE):
        config = next((c for function, c in functions if function.startswith(f"{name}-")), None)
        if config is None:
            continue
        physical = str(config.get("table", ""))
        table = tables.get(physical)
        key_types = {str(a["name"]): str(a["type"]) for a in (table.inputs.get("attributes") or [])} if table else {}
        tick = next((r for r in rules if r == f"{name}-tick"), None)
        found.append(FoundTable(name, physical, key_types, config, tick))
    return found


def _queue_url(resources: list[Registration], arn: str) -> str | None:
    return next((r.outputs.get("url") for r in resources if r.outputs.get("arn") == arn and r.outputs.get("url")), None)


def _sample(kind: str) -> dict[str, str]:
    return {"N": "1"} if kind == "N" else {"B": "dHJ5"} if kind == "B" else {"S": "try-1"}


def table_guide(found: FoundTable, deployment: Deployment, command: str) -> list[str]:
    """A heading and the commands to try one table."""
    endpoint, config = deployment.endpoint, found.config
    mode = str(config.get("mode"))
    item: dict[str, Any] = {}
    for key in (config.get("partitionKey"), config.get("sortKey")):
        if key:
            item[key] = _sample(found.key_types.get(key, "S"))
    target = config.get("target") or {}
    if mode == "aggregate":
        return [
            f"{found.component} (aggregate): write source items as your program's filter expects; totals appear in "
            f"table {found.table}",
            aws(endpoint, "dynamodb", "scan", f"--table-name {shlex.quote(found.table)}"),
        ]
    email = target.get("email")
    if email:
        item.update(email_fields(email))
    item[str(config.get("timeAttribute"))] = {"N": DUE}
    lead = LEAD_SECONDS.get(mode, 0)
    due = "due now" if lead == 0 else f"due in {lead} s"
    lines = [f"{found.component} ({mode}): write an item {due}; its due event goes to its {target.get('kind')} target"]
    lines.append(write_item(endpoint, found.table, item, lead))
    if found.tick_rule:
        rule = shlex.quote(found.tick_rule)
        lines.append(f"{command} fire --rule {rule} --endpoint-url {endpoint} --region {deployment.region}")
    url = _queue_url(deployment.resources, str(target.get("arn", "")))
    if url:
        lines.append(receive_and_delete(endpoint, url))
    elif email:
        lines.append(f"{command} emails --endpoint-url {endpoint}")
    else:
        lines.append(f"(the target is {target.get('arn')}: read it as you would on AWS)")
    return lines


def verify_program_senders(deployment: Deployment) -> None:
    """As `try_it.verify_senders`, for the email targets of a user's program: SES sends only from verified identities
    (and, in its sandbox, to them), so each sender's domain is verified (the printed recipient is at that domain)."""
    ses = clients(deployment.endpoint, deployment.region)("sesv2")
    for found in found_tables(deployment.resources):
        email = (found.config.get("target") or {}).get("email")
        if email:
            ses.create_email_identity(EmailIdentity=sender_domain(str(email.get("sender", ""))))


def time_attribute_notes(deployment: Deployment) -> list[str]:
    """One line per table some of whose items carry none of its time attribute (they are ignored without a trace:
    nothing scheduled, nothing parked), naming what they carry instead; aggregate tables have no time attribute. On
    a table several components share, an item another of them acts on is that one's, not a missing time. A table
    gone (`down` while `up --stay` runs) has nothing to say."""
    dynamodb = clients(deployment.endpoint, deployment.region)("dynamodb")
    found = found_tables(deployment.resources)
    notes = []
    for table in found:
        attribute = table.config.get("timeAttribute")
        if table.config.get("mode") == "aggregate" or not attribute:
            continue
        try:
            items = dynamodb.scan(TableName=table.table, Limit=SCANNED_ITEMS).get("Items", [])
        except dynamodb.exceptions.ResourceNotFoundException:
            continue
        others = [o for o in found if o.table == table.table and o is not table]
        keys = {str(k) for k in (table.config.get("partitionKey"), table.config.get("sortKey")) if k}
        # (a key holding a time, a date as the sort key say, is the item's name, not its due time)
        mine = [
            {name: value for name, value in item.items() if name not in keys}
            for item in items
            if not any(acts_on(other, item) for other in others)
        ]
        hint = time_hint(mine, str(attribute))
        if hint is not None:
            notes.append(f"table {table.table}: {hint.message}")
    return notes


def acts_on(found: FoundTable, item: dict[str, Any]) -> bool:
    """Whether the component acts on this item (as the client returns it): it carries the component's time
    attribute, or, for an aggregate, it is one of its source items (partition key with its prefix) or totals."""
    config = found.config
    aggregate = config.get("aggregate")
    if not aggregate:
        return str(config.get("timeAttribute")) in item
    partition = item.get(str(config.get("partitionKey")), {}).get("S", "")
    total = item.get(str(config.get("sortKey")), {}).get("S") == aggregate.get("totalSortKey")
    return total or partition.startswith(str(aggregate.get("sourcePrefix")))


def program_instructions(deployment: Deployment, command: str, down_options: list[str]) -> str:
    """The text `up --stay` prints for a user's program."""
    endpoint, region = deployment.endpoint, deployment.region
    text = [
        *try_it_header(endpoint, region),
        "",
        f"  export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION={region} AWS_PAGER=",
    ]
    for found in found_tables(deployment.resources):
        heading, *commands = table_guide(found, deployment, command)
        text += ["", heading, *(f"  {c}" for c in commands)]
    down = " ".join([command, "down", "--endpoint-url", endpoint, *map(shlex.quote, down_options)])
    text += ["", "Remove the stack (the cloud keeps running):", f"  {down}", "Stop the cloud: Ctrl-C here."]
    return "\n".join(text)
