"""One JSON line per action, so CloudWatch Logs Insights can filter on fields. Items never go above DEBUG."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

from .constants import LOG_LEVEL_VARIABLE

_logger = logging.getLogger("scheduled_table")
if not _logger.handlers:
    _handler = logging.StreamHandler(sys.stdout)
    _handler.setFormatter(logging.Formatter("%(message)s"))
    _logger.addHandler(_handler)
    _logger.propagate = False
_logger.setLevel(os.environ.get(LOG_LEVEL_VARIABLE, "INFO").upper())


def log(level: int, action: str, **fields: Any) -> None:
    """Write one structured line: {"level": ..., "action": ..., **fields}."""
    if _logger.isEnabledFor(level):
        line = {"level": logging.getLevelName(level), "action": action, **fields}
        _logger.log(level, json.dumps(line, default=str, sort_keys=True))


def info(action: str, **fields: Any) -> None:
    log(logging.INFO, action, **fields)


def warning(action: str, **fields: Any) -> None:
    log(logging.WARNING, action, **fields)


def error(action: str, **fields: Any) -> None:
    log(logging.ERROR, action, **fields)


def debug(action: str, **fields: Any) -> None:
    log(logging.DEBUG, action, **fields)


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
