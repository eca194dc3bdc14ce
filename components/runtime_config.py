"""The handler configuration document (env SCHEDULED_TABLE_CONFIG), built from plain values; read by
handlers/st_core/config.py, whose TypedDicts describe the same shape."""

from __future__ import annotations

import json
from typing import Any

ENV_VAR = "SCHEDULED_TABLE_CONFIG"


def handler_config(
    *,
    mode: str,
    table: str,
    partition_key: str,
    sort_key: str | None,
    time_attribute: str,
    target_kind: str,
    target_arn: str,
    poison_queue_url: str,
    max_workers: int,
    email: dict[str, str] | None = None,
    **sections: dict[str, Any],
) -> str:
    """`sections`: a mode's own parts of the document (`scheduler`, `ttl`, `polling`), each an object."""
    target: dict[str, Any] = {"kind": target_kind, "arn": target_arn}
    if email is not None:
        target["email"] = email
    config: dict[str, Any] = {
        "mode": mode,
        "table": table,
        "partitionKey": partition_key,
        "sortKey": sort_key,
        "timeAttribute": time_attribute,
        "target": target,
        "poisonQueueUrl": poison_queue_url,
        "maxWorkers": max_workers,
    }
    config.update(sections)
    return json.dumps(config, sort_keys=True, separators=(",", ":"))
