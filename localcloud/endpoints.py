"""The local cloud's own endpoints on its ministack (local only, like `/_ministack/reset`): what stands for AWS's own
services, which the emulators outside ministack's process ask for (a role's session, the TTL process, the universal
schedules). A leaf module: the patches in ministack's process serve them, the emulators ask them."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Response = tuple[int, dict[str, str], bytes]
# The schedules with a universal target (`aws_behaviour.serve_universal_schedules`), for the emulator that runs them.
UNIVERSAL_SCHEDULES_PATH = "/_localcloud/universal-schedules"


def first(value: Any) -> str:
    """A query parameter as ministack hands it over (a list of values, or one)."""
    if isinstance(value, list | tuple):
        return str(value[0]) if value else ""
    return "" if value is None else str(value)


def serve(path: str, answer: Callable[[dict[str, Any]], Response]) -> None:
    """Answer `GET path` in ministack's process with `answer(query)`; every other request goes on as before."""
    from ministack import app

    handle: Callable[..., Awaitable[Any]] = app._handle_sqs_messages_request

    async def with_path(method: str, request_path: str, headers: dict, query_params: dict) -> Any:
        if request_path != path or method != "GET":
            return await handle(method, request_path, headers, query_params)
        return answer(query_params)

    app._handle_sqs_messages_request = with_path


def json_answer(document: Any) -> Response:
    return 200, {"Content-Type": "application/json"}, json.dumps(document).encode()


def ask(endpoint: str, path: str, **query: str) -> dict[str, Any]:
    """`GET path` of the local cloud's ministack at `endpoint`: its JSON answer."""
    import urllib.parse
    import urllib.request

    with urllib.request.urlopen(f"{endpoint}{path}?{urllib.parse.urlencode(query)}", timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read() or b"{}")
    return answer
