"""`precision="second"` (eventbridge mode): the release consumer, fed by the table's release queue.

Thin entry point: the logic, and why it delivers each occurrence once and never before its second, is in
st_core/release.py.
"""

from __future__ import annotations

from st_core import log
from st_core.config import load_config
from st_core.release import SqsBatchResponse, handle_messages

# The AWS actions this module's own calls need (checked by tests/iam): none; st_core.release does the work.
AWS_ACTIONS: tuple[str, ...] = ()


def handler(event: object, context: object = None) -> SqsBatchResponse:
    """Lambda entry point (`release.handler`): one batch of release queue messages."""
    log.invoked(context)
    return handle_messages(event, load_config())
