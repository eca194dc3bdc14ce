"""Descriptions of the functions and roles the component creates: policy packs ask for one on every function and
role, and an operator reading the console should learn from it what the resource does and which component owns it.
Lambda accepts 256 characters, IAM 1000 (printable ASCII and Latin-1), so both are built here and cut to fit."""

from __future__ import annotations

from . import modes

LAMBDA_DESCRIPTION_MAX = 256
ROLE_DESCRIPTION_MAX = 1000


def _work(role: str, mode: str) -> str:
    """What the function of `role` does, as its mode says (components/modes/)."""
    return modes.by_name(mode).roles.get(role, role)


def function(component: str, role: str, mode: str) -> str:
    work = _work(role, mode)
    return f"scheduled-table {component} ({mode} mode): {work}"[:LAMBDA_DESCRIPTION_MAX]


def role(component: str, role: str, mode: str) -> str:
    work = _work(role, mode)
    text = f"Lets the {role} function of scheduled-table {component} ({mode} mode) do its work and no more: {work}"
    return _printable(text)[:ROLE_DESCRIPTION_MAX]


def scheduler_role(component: str) -> str:
    return _printable(
        f"Assumed by EventBridge Scheduler for scheduled-table {component}: deliver its schedules to the target and "
        "dead-letter what cannot be delivered"
    )[:ROLE_DESCRIPTION_MAX]


def _printable(text: str) -> str:
    return "".join(c if 0x20 <= ord(c) <= 0x7E or 0xA1 <= ord(c) <= 0xFF else " " for c in text)
