"""A batch's items read back as they are now: one consistent BatchGetItem per 100 keys, the calls made together.

A stream handler that must know whether a record is still the item's latest (a replayed batch must not act for an
item that has moved on) reads each item once for the whole batch instead of once per action: a batch of 1,000
records costs 10 calls in one round instead of 1,000 calls spread over its rounds. What the read cannot settle (a
call that failed, keys DynamoDB left unprocessed after the retries) is left out of the answer, so the caller reads
those items on their own and their failures are handled per item, as any other call's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import log
from .clients import Clients
from .errors import error_code
from .stream import Image, decode_image, identity_of, to_request

AWS_ACTIONS = ("dynamodb:BatchGetItem",)

BATCH_GET_LIMIT = 100  # keys per BatchGetItem call (DynamoDB's limit)
# UnprocessedKeys (a partition over its throughput, the 16 MB response limit) are asked for again after a short,
# growing pause, as AWS advises; what is still unprocessed after these attempts is read per item by the caller.
UNPROCESSED_ATTEMPTS = 4
UNPROCESSED_PAUSE_SECONDS = 0.05

# What a read found per item (by `identity_of` its keys): the item as plain data, or None when there is no item.
Found = dict[str, dict[str, Any] | None]


def read_items(
    clients: Clients,
    table: str,
    keys: dict[str, Image],
    *,
    workers: int,
    sleep: Callable[[float], None] = time.sleep,
) -> Found:
    """The items with these keys (stream form: Lambda's `Keys`, by their `identity_of`), read consistently;
    `workers` calls at a time. Items the read could not settle are absent from the answer."""
    pairs = list(keys.items())
    chunks = [pairs[at : at + BATCH_GET_LIMIT] for at in range(0, len(pairs), BATCH_GET_LIMIT)]
    found: Found = {}

    def one(chunk: list[tuple[str, Image]]) -> Found:
        try:
            return _read_chunk(clients, table, chunk, sleep)
        except Exception as exc:  # each of these items is read on its own later, where a failure is handled
            log.warning("batch-read-failed", keys=len(chunk), error=error_code(exc), detail=str(exc)[:300])
            return {}

    if len(chunks) <= 1 or workers <= 1:
        results = [one(chunk) for chunk in chunks]
    else:
        with ThreadPoolExecutor(max_workers=min(workers, len(chunks))) as pool:
            results = list(pool.map(one, chunks))
    for result in results:
        found.update(result)
    return found


def _read_chunk(clients: Clients, table: str, chunk: list[tuple[str, Image]], sleep: Callable[[float], None]) -> Found:
    names = list(chunk[0][1])  # the table's key attributes (every key of one table has the same)
    found: Found = {}
    request: dict[str, Any] = {table: {"Keys": [to_request(k) for _, k in chunk], "ConsistentRead": True}}
    for attempt in range(UNPROCESSED_ATTEMPTS):
        if attempt:
            sleep(UNPROCESSED_PAUSE_SECONDS * 2 ** (attempt - 1))
        answer = clients.get("dynamodb").batch_get_item(RequestItems=request)
        for item in answer.get("Responses", {}).get(table, []):
            found[identity_of({name: item[name] for name in names})] = decode_image(item)
        request = answer.get("UnprocessedKeys") or {}
        if not request:
            break
    left = {identity_of(key) for key in request.get(table, {}).get("Keys", [])} if request else set()
    # A key asked for, settled and not returned: no such item.
    for identity, _ in chunk:
        if identity not in found and identity not in left:
            found[identity] = None
    if left:
        log.warning("batch-read-unprocessed", keys=len(left))
    return found
