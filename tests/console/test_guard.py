"""The console's guard, request by request: the token (query once, then the cookie; a form field for an action), the
Host header (DNS rebinding), the Origin or Referer of an action (cross-site requests), over a real server on
127.0.0.1 so the headers are those http.client sends, as a browser's would be."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from html import unescape
from urllib.parse import urlencode

import pytest

from components import ScheduledTableArgs
from components.cli.console.guard import Guard
from components.cli.console.server import Console, Server, bind, start
from components.cli.redrive.discovery import Stack
from components.runtime_config import Value
from tests.support.handler_config import handler_config

CONFIG = handler_config(ScheduledTableArgs(mode="eventbridge"), {Value.TABLE: "tasks"}, unnamed="")
STACK = Stack("tasks-consumer", dict(CONFIG), "http://q/poison", None, None, [])


def no_aws(service: str) -> None:
    raise AssertionError(f"the guard let a request reach AWS ({service})")


@pytest.fixture
def served() -> Iterator[tuple[Server, Guard]]:
    server = bind(0)
    guard = Guard.new(server.server_address[1])
    start(server, Console(no_aws, {STACK.function: STACK}, guard, {STACK.function: "started with --read-only"}))
    yield server, guard
    server.shutdown()
    server.server_close()


def request(
    guard: Guard, method: str, path: str, headers: dict[str, str] | None = None, body: str = ""
) -> tuple[int, str, dict[str, str]]:
    """One request as a browser sends it: Host is the console's unless the test names another."""
    connection = http.client.HTTPConnection("127.0.0.1", guard.port, timeout=10)
    sent = {"Host": f"127.0.0.1:{guard.port}", **(headers or {})}
    if body:
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    connection.request(method, path, body=body or None, headers=sent)
    response = connection.getresponse()
    answer = response.status, unescape(response.read().decode()), {k.lower(): v for k, v in response.getheaders()}
    connection.close()
    return answer


def cookie(guard: Guard) -> dict[str, str]:
    return {"Cookie": f"{guard.cookie}={guard.token}"}


def test_a_request_without_the_token_is_refused_and_says_where_the_token_is(served: tuple[Server, Guard]) -> None:
    _, guard = served
    status, body, _ = request(guard, "GET", "/")
    assert status == 403
    assert "refused: no token. Open the address the console printed" in body
    status, body, _ = request(guard, "GET", "/?token=guessed")
    assert status == 403 and "refused: a wrong token" in body
    status, body, _ = request(guard, "GET", "/", {"Cookie": f"{guard.cookie}=guessed"})
    assert status == 403 and "refused: a wrong token" in body


def test_the_printed_address_sets_the_cookie_and_drops_the_token_from_the_url(served: tuple[Server, Guard]) -> None:
    _, guard = served
    path = guard.address().split(str(guard.port), 1)[1]
    status, _, headers = request(guard, "GET", path)
    assert status == 303 and headers["location"] == "/"
    assert headers["set-cookie"] == f"{guard.cookie}={guard.token}; Path=/; HttpOnly; SameSite=Strict"
    status, body, headers = request(guard, "GET", "/", cookie(guard))
    assert status == 200 and "tasks-consumer" in body
    assert headers["x-frame-options"] == "DENY" and "default-src 'none'" in headers["content-security-policy"]


@pytest.mark.parametrize("host", ["evil.example:{port}", "127.0.0.1:1", "attacker.localhost:{port}", ""])
def test_a_request_to_another_host_name_is_refused_even_with_the_token(served: tuple[Server, Guard], host: str) -> None:
    """DNS rebinding: a site's own name resolved to 127.0.0.1 sends its name as Host, and the cookie is not its."""
    _, guard = served
    status, body, _ = request(guard, "GET", f"/?token={guard.token}", {"Host": host.format(port=guard.port)})
    assert status == 403
    assert f"refused: this console answers only to 127.0.0.1:{guard.port} or localhost:{guard.port}" in body
    assert "DNS rebinding" in body


def test_localhost_is_this_console_too(served: tuple[Server, Guard]) -> None:
    _, guard = served
    status, _, _ = request(guard, "GET", "/", {"Host": f"localhost:{guard.port}", **cookie(guard)})
    assert status == 200


def form(guard: Guard, **fields: str) -> str:
    return urlencode({"stack": STACK.function, "source": "poison", "step": "dry-run", **fields})


def test_an_action_from_another_origin_is_refused(served: tuple[Server, Guard]) -> None:
    """A cross-site form post: the browser sends the victim's cookie only without SameSite=Strict, and the page
    cannot know the token; even with both, another Origin is refused."""
    _, guard = served
    headers = {**cookie(guard), "Origin": "http://evil.example"}
    status, body, _ = request(guard, "POST", "/redrive", headers, form(guard, token=guard.token))
    assert status == 403 and "refused: an action from another site (http://evil.example) is not taken" in body
    status, body, _ = request(
        guard, "POST", "/redrive", {**cookie(guard), "Origin": "null"}, form(guard, token=guard.token)
    )
    assert status == 403 and "another site (null)" in body


def test_an_action_without_the_form_token_or_an_origin_is_refused(served: tuple[Server, Guard]) -> None:
    _, guard = served
    origin = {"Origin": f"http://127.0.0.1:{guard.port}"}
    status, body, _ = request(guard, "POST", "/redrive", {**cookie(guard), **origin}, form(guard))
    assert status == 403 and "an action must carry the page's token in its form" in body
    status, body, _ = request(guard, "POST", "/redrive", cookie(guard), form(guard, token=guard.token))
    assert status == 403 and "must come from a page of this console (the browser sent no Origin or Referer)" in body
    referer = {"Referer": "http://evil.example/page"}
    status, body, _ = request(guard, "POST", "/redrive", {**cookie(guard), **referer}, form(guard, token=guard.token))
    assert status == 403 and "must come from a page of this console" in body


def test_other_methods_are_refused_and_a_get_never_acts(served: tuple[Server, Guard]) -> None:
    _, guard = served
    status, body, _ = request(guard, "PUT", "/redrive", cookie(guard))
    assert status == 405 and "the console reads with GET and acts with POST" in body
    status, body, _ = request(guard, "GET", f"/redrive?{form(guard)}", cookie(guard))
    assert status == 404 and "no page /redrive" in body  # no GET acts


def test_a_read_only_console_refuses_an_action_from_its_own_page(served: tuple[Server, Guard]) -> None:
    """Everything else right (cookie, form token, Origin): read-only still refuses, saying why; AWS is never
    called (no_aws)."""
    _, guard = served
    headers = {**cookie(guard), "Referer": f"http://localhost:{guard.port}/parked"}
    status, body, _ = request(guard, "POST", "/redrive", headers, form(guard, token=guard.token))
    assert status == 403
    assert "read-only: started with --read-only; nothing was changed" in body
