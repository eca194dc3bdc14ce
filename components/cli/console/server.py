"""The console's server: the standard library's threading HTTP server on 127.0.0.1, every request judged by the
`Guard` before anything is read, GET for the views and POST for the one action (a redrive: its dry run, then the
run itself once confirmed), each run by the same function as `scheduled-table redrive`."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from ...packaging import error_code
from ..aws import Client
from ..redrive.discovery import RedriveError, Stack
from ..redrive.report import Selection
from . import page, views
from .guard import LOOPBACK, TOKEN, Guard

CONFIRM_SECONDS = 600  # a dry run's confirmation stays good this long
REFRESH_SECONDS = 5  # the views reload themselves this often
VIEWS = ("/upcoming", "/delivered", "/parked", "/drift")
DENIED = ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "AuthorizationError")


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    headers: tuple[tuple[str, str], ...] = ()


@dataclass
class Console:
    """What the console serves: the stacks (by consumer function), read with `client`; `read_only` per stack says
    why it may not redrive (None: it may). `clock` gives now (tests pass their own)."""

    client: Client
    stacks: dict[str, Stack]
    guard: Guard
    read_only: dict[str, str | None]
    functions: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # a table's functions, log groups
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    limit: int = views.LIMIT
    refresh: int = REFRESH_SECONDS
    confirmations: dict[str, tuple[str, str, datetime]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, method: str, target: str, headers: dict[str, str], body: str = "") -> Answer:
        """The answer to one request (`headers` by lower-case name): refused unless the Guard lets it through."""
        parts = urlsplit(target)
        form = {k: v[0] for k, v in parse_qs(body).items()} if method == "POST" else {}
        refusal = self.guard.check(method, parts.query, headers, form.get(TOKEN))
        if refusal is not None:
            return Answer(refusal.status, page.refused(refusal.message))
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if method == "GET" and TOKEN in query:  # the printed address: keep the token in a cookie, drop it from the URL
            rest = urlencode({k: v for k, v in query.items() if k != TOKEN})
            where = parts.path + (f"?{rest}" if rest else "")
            return Answer(303, "", (("Set-Cookie", self.guard.set_cookie()), ("Location", where)))
        try:
            if method == "POST":
                return self.post(parts.path, form)
            return self.get(parts.path, query)
        except RedriveError as error:
            return Answer(502, page.refused(str(error)))
        except Exception as error:
            if not isinstance(getattr(error, "response", None), dict):
                raise
            return Answer(502, page.refused(f"AWS refused a read: {error_code(error)}: {error}"))

    def stack(self, query: dict[str, str]) -> Stack | None:
        return self.stacks.get(query.get("stack", ""))

    def number(self, query: dict[str, str], name: str, default: int, most: int) -> int:
        value = query.get(name, "")
        return max(1, min(most, int(value))) if value.isdigit() else default

    def get(self, path: str, query: dict[str, str]) -> Answer:
        if path == "/":
            return Answer(200, page.index({f: s.config for f, s in self.stacks.items()}, self.read_only))
        stack = self.stack(query)
        if path not in VIEWS:
            return Answer(404, page.refused(f"no page {path}: the views are /upcoming, /delivered, /parked and /drift"))
        if stack is None:
            return Answer(404, page.refused(f"no stack {query.get('stack')!r} here; the stacks are listed at /"))
        now, table = self.clock(), str(stack.config.get("table"))
        limit = self.number(query, "limit", self.limit, 1000)
        if path == "/upcoming":
            window = query.get("window", "hour") if query.get("window") in views.WINDOWS else "hour"
            found = views.upcoming(self.client, stack, now, views.WINDOWS[window], limit, query.get("cursor"))
            return Answer(200, page.upcoming(stack.function, table, found, now, window, limit, self.refresh))
        if path == "/delivered":
            since = self.number(query, "since", 3600, 7 * 86_400)
            functions = self.functions.get(table) or [(stack.function, f"/aws/lambda/{stack.function}")]
            sent, note = views.delivered(self.client, functions, now, since, limit)
            metrics = views.published(self.client, functions, now, since)
            group = (stack.config.get("scheduler") or {}).get("group")
            scheduler = views.scheduler_counts(self.client, str(group), now, since) if group else None
            shown = page.Shown(sent, note, metrics[0], metrics[1], scheduler)
            return Answer(200, page.delivered(stack.function, stack.config, shown, since, self.refresh))
        if path == "/drift":
            items = self.number(query, "items", views.DRIFT_ITEMS, views.DRIFT_MOST)
            checked = views.drift(self.client, stack, items)
            return Answer(200, page.drift(stack.function, table, checked, items))
        queues = views.parked(self.client, stack, min(limit, 10))
        why = self.read_only.get(stack.function)
        return Answer(200, page.parked(stack.function, table, queues, self.guard.token, why, self.refresh))

    def post(self, path: str, form: dict[str, str]) -> Answer:
        stack = self.stack(form)
        if path != "/redrive" or stack is None:
            return Answer(404, page.refused("the one action is a redrive of a stack listed at /"))
        why = self.read_only.get(stack.function)
        if why is not None:
            return Answer(403, page.refused(f"read-only: {why}; nothing was changed"))
        source = form.get("source", "")
        if source not in ("poison", "stream", "target"):
            return Answer(400, page.refused(f"no source {source!r}: poison, stream or target"))
        table = str(stack.config.get("table"))
        if form.get("step") == "confirm":
            with self.lock:
                held = self.confirmations.pop(form.get("confirm", ""), None)
            if held is None or held[:2] != (stack.function, source) or held[2] < self.clock():
                return Answer(
                    409, page.refused("this confirmation is used or expired; run the dry run again from Parked")
                )
            lines, status = self.redrive(stack, source, dry_run=False)
            return Answer(200, page.redrive(stack.function, table, source, lines, status, False, ""))
        lines, status = self.redrive(stack, source, dry_run=True)
        confirm = ""
        if status != 2:
            key = secrets.token_urlsafe(16)
            with self.lock:
                expires = self.clock().timestamp() + CONFIRM_SECONDS
                self.confirmations[key] = (stack.function, source, datetime.fromtimestamp(expires, UTC))
            confirm = page.form(
                stack.function, source, self.guard.token, "confirm", f"Confirm: redrive {source} now", key
            )
        return Answer(200, page.redrive(stack.function, table, source, lines, status, True, confirm))

    def redrive(self, stack: Stack, source: str, *, dry_run: bool) -> tuple[list[str], int]:
        """The command's redrive (cli.command.redrive), its lines and the problems it reports collected for the page."""
        from ..redrive import queues
        from ..redrive.run import redrive

        lines: list[str] = []
        selection = Selection(None, None, dry_run, queues.WAIT_SECONDS)
        status = redrive(self.client, stack.function, source, selection, lines.append, warn=lines.append)
        return lines, status


def may_redrive(client: Client, stack: Stack) -> str | None:
    """Why these credentials cannot redrive this stack (None: they can), asked without changing anything: Lambda's
    DryRun invocation checks lambda:InvokeFunction, and a DeleteMessage with a receipt handle no message has checks
    sqs:DeleteMessage on the poison queue (IAM refuses before SQS reads the handle)."""
    try:
        client("lambda").invoke(FunctionName=stack.function, InvocationType="DryRun")
    except Exception as error:
        if error_code(error) in DENIED:
            return f"these credentials may not invoke {stack.function} (lambda:InvokeFunction)"
        if not isinstance(getattr(error, "response", None), dict):
            raise
    try:
        client("sqs").delete_message(QueueUrl=stack.poison_url, ReceiptHandle="console-permission-check")
    except Exception as error:
        if error_code(error) in DENIED:
            return "these credentials may not delete from the poison queue (sqs:DeleteMessage)"
        if not isinstance(getattr(error, "response", None), dict):
            raise
    return None


class Handler(BaseHTTPRequestHandler):
    """Hands each request to the server's Console; logs nothing (a request line would carry the token)."""

    server: Server

    def do_GET(self) -> None:
        self.respond("GET")

    def do_POST(self) -> None:
        self.respond("POST")

    def do_PUT(self) -> None:
        self.respond("PUT")

    def do_DELETE(self) -> None:
        self.respond("DELETE")

    def respond(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 65_536)).decode("utf-8", "replace") if length else ""
        headers = {name.lower(): value for name, value in self.headers.items()}
        answer = self.server.console.answer(method, self.path, headers, body)
        data = answer.body.encode("utf-8")
        self.send_response(answer.status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Frame-Options", "DENY")  # no other page frames it (clickjacking the buttons)
        self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
        self.send_header("Referrer-Policy", "same-origin")
        for name, value in answer.headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int) -> None:
        super().__init__((LOOPBACK, port), Handler)
        self.console: Console


def bind(port: int = 0) -> Server:
    """A server on 127.0.0.1 (port 0: a free one, chosen by the system); its Console is set by `start`."""
    return Server(port)


def start(server: Server, console: Console) -> threading.Thread:
    """Serve in a thread of its own (a daemon: it ends with the process); `server.shutdown()` stops it."""
    server.console = console
    thread = threading.Thread(target=server.serve_forever, name="scheduled-table-console", daemon=True)
    thread.start()
    return thread


__all__ = ["Answer", "Console", "Handler", "Server", "bind", "may_redrive", "start"]
