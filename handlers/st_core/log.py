"""One JSON line per action, so CloudWatch Logs Insights can filter on fields. Items never go above DEBUG.

Each line carries the keys Powertools for AWS Lambda's Logger writes (`level`, `location`, `message`, `timestamp`,
`service`, `cold_start`, `function_name`, `function_memory_size`, `function_arn`, `function_request_id`,
`xray_trace_id`), in its formats, so one Logs Insights query or dashboard reads these functions' logs and a
Powertools consumer's alike; without importing Powertools (the cold start stays ours). `message` is the action
(also kept as `action`); `service` is POWERTOOLS_SERVICE_NAME's, else "scheduled-table". The Lambda fields come
from the invocation's context, given to `invoked` by each entry point; `xray_trace_id` from the trace header Lambda
sets per invocation, left out when there is none (as Powertools leaves it).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from datetime import UTC, datetime
from typing import Any

from .constants import LOG_LEVEL_VARIABLE

_logger = logging.getLogger("scheduled_table")
if not _logger.handlers:
    _handler = logging.StreamHandler(sys.stdout)
    _handler.setFormatter(logging.Formatter("%(message)s"))
    _logger.addHandler(_handler)
    _logger.propagate = False
_logger.setLevel(os.environ.get(LOG_LEVEL_VARIABLE, "INFO").upper())


SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "scheduled-table"
# The invocation's Lambda fields (`invoked`); one invocation at a time runs in a Lambda sandbox.
_invocation: dict[str, Any] = {}
_cold = [True]


def invoked(context: Any) -> None:
    """Note the invocation an entry point was called for: Powertools' Lambda context fields, and whether this is
    the sandbox's first invocation (`cold_start`)."""
    _invocation.clear()
    _invocation["cold_start"] = _cold[0]
    _cold[0] = False
    for key, attribute in (
        ("function_name", "function_name"),
        ("function_memory_size", "memory_limit_in_mb"),
        ("function_arn", "invoked_function_arn"),
        ("function_request_id", "aws_request_id"),
    ):
        value = getattr(context, attribute, None)
        if value is not None:
            _invocation[key] = int(value) if key == "function_memory_size" else value


def _caller() -> str:
    """Powertools' `location`: the function and line that logged (the first frame outside this module)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__") == __name__:
        frame = frame.f_back
    return f"{frame.f_code.co_name}:{frame.f_lineno}"


def log(level: int, action: str, **fields: Any) -> None:
    """Write one structured line: Powertools Logger's keys, {"action": ..., **fields}."""
    if _logger.isEnabledFor(level):
        now = datetime.now(UTC)
        line = {
            "level": logging.getLevelName(level),
            "location": _caller(),
            "message": action,
            # Powertools' default: "2026-11-27 10:35:09,123+0000"
            "timestamp": f"{now:%Y-%m-%d %H:%M:%S},{now.microsecond // 1000:03d}+0000",
            "service": SERVICE,
            **_invocation,
            "action": action,
            **fields,
        }
        # Root=1-5759e988-bd862e3fe1be46a994272793;Parent=...;Sampled=1 -> 1-5759e988-bd862e3fe1be46a994272793
        for part in os.environ.get("_X_AMZN_TRACE_ID", "").split(";"):
            if part.startswith("Root="):
                line["xray_trace_id"] = part[5:]
        _logger.log(level, json.dumps(line, default=str, sort_keys=True))


def info(action: str, **fields: Any) -> None:
    log(logging.INFO, action, **fields)


def warning(action: str, **fields: Any) -> None:
    log(logging.WARNING, action, **fields)


def error(action: str, **fields: Any) -> None:
    log(logging.ERROR, action, **fields)


def debug(action: str, **fields: Any) -> None:
    log(logging.DEBUG, action, **fields)


def debugging() -> bool:
    """Whether debug lines are written: a hot path skips working out fields (formatting times) no one reads."""
    return _logger.isEnabledFor(logging.DEBUG)


def metrics(
    namespace: str, dimensions: dict[str, str], *, properties: dict[str, Any] | None = None, **values: int | float
) -> None:
    """CloudWatch metrics as an Embedded Metric Format line: CloudWatch extracts them from the log, no API call.
    `properties` ride along as plain fields (searchable, not metrics: each metric is billed per month)."""
    document = {
        "_aws": {
            "Timestamp": int(time.time() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": namespace,
                    "Dimensions": [sorted(dimensions)],
                    "Metrics": [{"Name": name, "Unit": "Count"} for name in sorted(values)],
                }
            ],
        },
        **(properties or {}),
        **dimensions,
        **values,
    }
    _logger.log(logging.INFO, json.dumps(document, sort_keys=True))
