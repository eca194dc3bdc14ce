"""Descriptions of the functions and roles the component creates: policy packs ask for one on every function and
role, and an operator reading the console should learn from it what the resource does and which component owns it.
Lambda accepts 256 characters, IAM 1000 (printable ASCII and Latin-1), so both are built here and cut to fit."""

from __future__ import annotations

# What each function does, by its role in the component.
_WORK = {
    "scheduler": "turns the table's stream into one EventBridge Scheduler schedule per due time",
    "executor": "acts on items the table's TTL (or their precise delete schedule) removed as due",
    "processor": "takes due items from the table's due index on each tick and sends them to the target",
    "assigner": "indexes items users write into the table's sharded due index",
    "aggregator": "keeps running totals of the table's score items, each record counted once",
    "releaser": "holds each due event in the release queue until its second, then sends it to the target once",
}
LAMBDA_DESCRIPTION_MAX = 256
ROLE_DESCRIPTION_MAX = 1000


def function(component: str, role: str, mode: str) -> str:
    work = _WORK.get(role, role)
    return f"scheduled-table {component} ({mode} mode): {work}"[:LAMBDA_DESCRIPTION_MAX]


def role(component: str, role: str, mode: str) -> str:
    work = _WORK.get(role, role)
    text = f"Lets the {role} function of scheduled-table {component} ({mode} mode) do its work and no more: {work}"
    return _printable(text)[:ROLE_DESCRIPTION_MAX]


def scheduler_role(component: str) -> str:
    return _printable(
        f"Assumed by EventBridge Scheduler for scheduled-table {component}: deliver its schedules to the target and "
        "dead-letter what cannot be delivered"
    )[:ROLE_DESCRIPTION_MAX]


def _printable(text: str) -> str:
    return "".join(c if 0x20 <= ord(c) <= 0x7E or 0xA1 <= ord(c) <= 0xFF else " " for c in text)
