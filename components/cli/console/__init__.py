"""`scheduled-table console`: a page on 127.0.0.1 showing each ScheduledTable's upcoming occurrences, recent
deliveries with their lateness and the metrics published beside them, what is parked and why, with a redrive that
shows its dry run before it acts, and drift (`reconcile --dry-run` on a sample).

Standard library only (http.server, html.escape, string templates), so it adds nothing to the component's
dependencies; boto3, as every operator command, is the operator's. It reads with the operator's credentials and
writes only through a confirmed redrive; `scheduled-table policy console` prints the read-only policy it needs
(`--redrive` adds the redrive's calls). Security: guard.py.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from ..aws import Client, Emit
from ..redrive.discovery import RedriveError, Stack, discover
from .guard import LOOPBACK, Guard
from .server import Console, Server, bind, may_redrive, start
from .views import consumers, stack_functions

HOSTS = (LOOPBACK, "localhost")


def stacks_of(client: Client, functions: list[str] | None) -> tuple[dict[str, Stack], dict[str, list[tuple[str, str]]]]:
    """The stacks to show (by consumer function: those named, else every ScheduledTable consumer of the region)
    and every ScheduledTable function by table (whose logs hold deliveries)."""
    by_table = stack_functions(client)
    names = functions if functions else consumers(client, sorted(by_table))
    return {name: discover(client, name) for name in names}, by_table


def launch(
    client: Client, functions: list[str] | None = None, *, port: int = 0, read_only: bool = False
) -> tuple[Server, str]:
    """Find the stacks, bind 127.0.0.1 (port 0: a free one), serve in a thread; the server and the address to open
    (with its token). `local up --stay` calls this with the local cloud's client."""
    stacks, by_table = stacks_of(client, functions)
    why: dict[str, str | None] = {
        name: "started with --read-only" if read_only else may_redrive(client, stack) for name, stack in stacks.items()
    }
    server = bind(port)
    guard = Guard.new(server.server_address[1])
    start(server, Console(client, stacks, guard, why, by_table))
    return server, guard.address()


def add_parser(commands: Any, add_stack_options: Any) -> None:
    """`scheduled-table console [--function NAME | --table NAME] [--port N] [--read-only]`."""
    command = commands.add_parser(
        "console",
        help="serve a page on 127.0.0.1: upcoming occurrences, deliveries and their lateness, parked work, redrive, "
        "drift",
        description="Serve a local page for the ScheduledTables named (--function or --table) or, with neither, "
        "every one in the region: upcoming occurrences over the next hour, day or week (read a page at a time, "
        "never the whole table), recent deliveries with their lateness against the mode's bound and the metrics "
        "the functions published (from their logs; Scheduler's own counts from CloudWatch), parked messages with "
        "their reason and fix, a redrive that shows its dry run before it acts, and drift (reconcile --dry-run "
        "on a sample of the table). It listens on 127.0.0.1 only; the address it prints carries a secret token (as "
        "Jupyter's). `scheduled-table policy console` prints the read-only policy it needs. Exit status 0 when "
        "stopped (Ctrl-C), 2 when it cannot start.",
    )
    add_stack_options(command)
    command.add_argument(
        "--host", default=LOOPBACK, help="127.0.0.1 (the default) or localhost: the console never listens elsewhere"
    )
    command.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    command.add_argument(
        "--read-only", action="store_true", help="no redrive: the buttons are absent and actions are refused"
    )


def main(args: Any, client: Client, emit: Emit) -> int:
    """Serve until interrupted; 2 when --host is not this machine's loopback or no stack can be read."""
    if args.host not in HOSTS:
        print(
            f"scheduled-table console: --host {args.host!r} refused: the console listens on 127.0.0.1 only (anyone "
            "who reaches it could read your stacks); reach it from elsewhere through an SSH tunnel "
            "(ssh -L PORT:127.0.0.1:PORT)",
            file=sys.stderr,
        )
        return 2
    try:
        server, address = launch(client, [args.function] if args.function else None, port=args.port,
                                 read_only=args.read_only)  # fmt: skip
    except (RedriveError, OSError) as error:
        print(f"scheduled-table console: {error}", file=sys.stderr)
        return 2
    emit(f"scheduled-table console: open {address} (Ctrl-C stops it)")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


__all__ = ["Console", "Guard", "add_parser", "launch", "main", "stacks_of"]
