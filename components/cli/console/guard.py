"""Who may use the console: only the operator's own browser, on this machine.

A page on localhost is reachable by every other page the browser opens: a site can send it requests (cross-site
requests) and, by DNS rebinding, make its own name resolve to 127.0.0.1 and read the answers. So, as Jupyter does:
a secret token in the address the console prints, required on every request (from the query once, then from a
cookie the first answer sets); the Host header must name this console (127.0.0.1:PORT or localhost:PORT), which a
rebound name never does; and a request that acts (a POST) must also carry the token in its form and come from a
page of this console (its Origin, or its Referer when a browser sends no Origin). A GET never changes anything.
Pure functions of the request, so the tests check each refusal without a server.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlsplit

LOOPBACK = "127.0.0.1"
TOKEN = "token"  # the query parameter and the form field


@dataclass(frozen=True)
class Refusal:
    """A request refused: the HTTP status and the one line the page says why."""

    status: int
    message: str


@dataclass(frozen=True)
class Guard:
    """The console's secret and address; `check` judges a request by them."""

    port: int
    token: str

    @classmethod
    def new(cls, port: int) -> Guard:
        return cls(port, secrets.token_urlsafe(32))

    @property
    def cookie(self) -> str:
        """The cookie's name: one per port, so two consoles on one machine do not overwrite each other's."""
        return f"scheduled_table_console_{self.port}"

    @property
    def hosts(self) -> tuple[str, str]:
        return f"{LOOPBACK}:{self.port}", f"localhost:{self.port}"

    def address(self, path: str = "/") -> str:
        """The address to print and open: the token in it, as Jupyter's."""
        return f"http://{LOOPBACK}:{self.port}{path}?{TOKEN}={self.token}"

    def set_cookie(self) -> str:
        """The Set-Cookie value once the token came in the query: sent by the browser to this console only
        (SameSite=Strict: not with a request another site starts), unreadable to scripts."""
        return f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"

    def given(self, query: str, cookies: str | None) -> tuple[str | None, str | None]:
        """The token in the query and the one in the cookie (None where absent)."""
        values = parse_qs(query).get(TOKEN)
        in_query = values[0] if values else None
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(cookies or "")
        except Exception:  # a malformed Cookie header: as if none
            jar = SimpleCookie()
        morsel = jar.get(self.cookie)
        return in_query, morsel.value if morsel is not None else None

    def matches(self, token: str | None) -> bool:
        return token is not None and secrets.compare_digest(token.encode(), self.token.encode())

    def check(self, method: str, query: str, headers: dict[str, str], form_token: str | None = None) -> Refusal | None:
        """None when the request may be answered; else why not. `headers` by lower-case name; `form_token` the
        POST body's token field."""
        host = headers.get("host", "")
        if host not in self.hosts:
            return Refusal(
                403,
                f"refused: this console answers only to {self.hosts[0]} or {self.hosts[1]}, not to Host {host!r} "
                "(another name pointing here is how a site reaches a local server: DNS rebinding)",
            )
        in_query, in_cookie = self.given(query, headers.get("cookie"))
        if not (self.matches(in_query) or self.matches(in_cookie)):
            said = "a wrong token" if (in_query or in_cookie) else "no token"
            return Refusal(
                403,
                f"refused: {said}. Open the address the console printed when it started (it carries ?token=...); "
                "the page keeps it in a cookie from then on",
            )
        if method == "GET":
            return None
        if method != "POST":
            return Refusal(405, f"refused: {method} is not used here; the console reads with GET and acts with POST")
        if not self.matches(form_token):
            return Refusal(403, "refused: an action must carry the page's token in its form; use the page's buttons")
        origin = headers.get("origin")
        if origin is not None:
            if origin not in {f"http://{name}" for name in self.hosts}:
                return Refusal(403, f"refused: an action from another site ({origin}) is not taken")
            return None
        referer = urlsplit(headers.get("referer", ""))
        if referer.scheme != "http" or referer.netloc not in self.hosts:
            return Refusal(
                403, "refused: an action must come from a page of this console (the browser sent no Origin or Referer)"
            )
        return None


__all__ = ["LOOPBACK", "TOKEN", "Guard", "Refusal"]
