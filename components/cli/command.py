"""`scheduled-table` (also `python -m scheduled_table`): the operator's command. Thin: argparse, boto3 clients, and
one line per message from `redrive`.

boto3 is imported lazily (`aws.clients`), and is not a dependency of the package: the component is a Pulumi library
and never talks to AWS itself. The command says so, with the fix, when boto3 is missing.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any

from . import inspection
from .aws import Client, Emit, add_stack_options, clients, stack_problem
from .inspection import SAMPLE_ITEMS
from .redrive import queues
from .redrive.discovery import RedriveError, consumer_of, discover
from .redrive.report import Selection
from .redrive.run import PATHS, redrive


def parser() -> argparse.ArgumentParser:
    from .. import __version__

    top = argparse.ArgumentParser(
        prog="scheduled-table",
        description="Operate a ScheduledTable's deployed stack.",
        epilog="exit status: 0 done; 1 something could not be redriven (or a call was refused midway: what the run "
        "hid is given back); 2 nothing could start (a wrong function "
        "name, a missing queue, a usage error). Every command names its stack by --function or --table and takes "
        "--profile, --region and --endpoint-url as the AWS CLI does (`scheduled-table COMMAND --help` says how each "
        "is read). `scheduled-table local --help` for the local cloud.",
    )
    top.add_argument("--version", action="version", version=f"scheduled-table {__version__}")
    commands = top.add_subparsers(dest="command", required=True)
    command = commands.add_parser(
        "redrive",
        help="get parked work back after a fix",
        description=(
            "Replay what a ScheduledTable parked, once its cause is fixed. poison: re-run parked records through the "
            "consumer function; stream: re-read failed batches from the stream (while it still holds them: 24 h) "
            "and re-run them; target: send dead-lettered due events to the target again (precision second: back into "
            "the release queue). A record is replayed whole only while it is its item's latest change, otherwise "
            "only for the due time it left. A message is deleted only once what it holds succeeded. Exit status 1 "
            "when something could not be redriven."
        ),
    )
    command.add_argument("source", choices=sorted(PATHS), help="which queue to redrive from")
    add_stack_options(command)
    command.add_argument("--queue-url", help="read this queue instead of the one the function's configuration names")
    command.add_argument("--max", type=int, dest="limit", metavar="N", help="redrive at most N messages")
    command.add_argument("--reason", help="only messages whose reason matches this regular expression")
    command.add_argument("--dry-run", action="store_true", help="list what would be redriven; change nothing")
    _scan_commands(commands)
    look = commands.add_parser(
        "inspect",
        help="show what a deployed table holds: pending occurrences, parked messages and why (changes nothing)",
        description="Read-only: the occurrences waiting to fire and what sits in the poison queue, the stream DLQ and "
        "the target DLQ, with reasons; messages are read with VisibilityTimeout=0 and left in place. It also reads a "
        "sample of the table (the first --sample-items items of a scan, never the whole table) for items without the "
        "time attribute, which are never scheduled, and names the attributes holding a time they carry instead. Exit "
        "status 0 when read, 2 when the function or a queue cannot be found.",
    )
    add_stack_options(look)
    look.add_argument(
        "--max", type=int, default=10, dest="limit", metavar="N", help="show up to N of each (default 10)"
    )
    look.add_argument(
        "--sample-items",
        type=int,
        default=SAMPLE_ITEMS,
        metavar="N",
        help=f"read the first N items of the table for items without the time attribute (default {SAMPLE_ITEMS}; 0 "
        "skips it)",
    )
    look.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="text (default) or json: one JSON document, its shape in docs/operations.md",
    )
    from .console import add_parser as add_console_parser
    from .permissions import add_parser as add_policy_parser

    add_policy_parser(commands)
    add_console_parser(commands, add_stack_options)
    # Parsed by scheduled_table.local (its own --help); listed here so `scheduled-table --help` shows it.
    commands.add_parser(
        "local",
        help="run your Pulumi program in a local AWS: local preview|up|down|fire|emails (extra [local])",
        description="Run a Pulumi program that uses ScheduledTable in a local AWS (ministack); "
        "`scheduled-table local --help` lists its commands.",
    )
    return top


def _scan_commands(commands: Any) -> None:
    """`backfill` and `reconcile`: one scan machinery (cli/backfill.py), two intents."""
    helps = {
        "backfill": (
            "make existing items what a fresh write would have made",
            "Scan the table and hand each item to the deployed consumer as the INSERT a fresh write would produce "
            "(schedules, past-due deliveries, polling index entries; aggregate: totals recomputed from the items). "
            "Safe to run twice and beside live traffic: an item a live write changes during the run ends as the live "
            "write says.",
        ),
        "reconcile": (
            "find and repair drift between items and what they should have",
            "Like backfill, and also repair what exists but disagrees: a precise-ttl schedule holding another time, "
            "a polling index entry that disagrees with its item, a total that disagrees with its items (onChange "
            "ignore: reported only). --dry-run reports each kind with counts and examples.",
        ),
    }
    for name, (short, long) in helps.items():
        command = commands.add_parser(
            name,
            help=short,
            description=long + " Exit status: 0 done; 1 something failed or a total was busy (parked in the poison "
            "queue or listed: run again); 2 could not start; 3 interrupted (run again with the same --checkpoint).",
        )
        add_stack_options(command)
        command.add_argument("--segments", type=int, default=4, help="parallel scan segments (default 4)")
        command.add_argument(
            "--read-units", type=float, default=500.0, help="ceiling on read capacity units per second (default 500)"
        )
        command.add_argument(
            "--scheduler-calls",
            type=float,
            default=200.0,
            help="ceiling on Scheduler calls per second (default 200; the account's CreateSchedule quota, 5,000/s by "
            "default, is shared with the live function)",
        )
        command.add_argument("--checkpoint", help="a JSON file: each segment's position, to resume an interrupted run")
        command.add_argument("--dry-run", action="store_true", help="count what would be done; change nothing")
        command.add_argument("--page-items", type=int, default=100, help="items per scan page (default 100)")
        if name == "backfill":
            command.add_argument(
                "--fresh",
                action="store_true",
                help="a first attach: do not look up existing schedules (one Scheduler call per occurrence instead "
                "of two); safe either way, an existing schedule is updated in place",
            )
        command.add_argument(
            "--deliver-past-due",
            action="store_true",
            help="eventbridge: also deliver past occurrences whose delivery the ledger no longer remembers (due more "
            "than the idempotency window, 48 h by default, ago); they may have been delivered long ago, so each may "
            "arrive a second time. Without it they are reported, never delivered again (a backfill's first run "
            "delivers them)",
        )
        command.add_argument(
            "--in-lambda",
            metavar="BACKFILL_FUNCTION",
            help="fan the segments out over the stack's backfill function (backfill_function=True; its output "
            "backfill_function_name), one chain of invocations per segment",
        )


def scan_main(args: argparse.Namespace, aws: Client, emit: Emit) -> int:
    from pathlib import Path

    from . import backfill, scan_report

    if args.segments < 1 or args.page_items < 1 or args.read_units <= 0 or args.scheduler_calls <= 0:
        problem = "--segments, --page-items, --read-units and --scheduler-calls must be positive"
        print(f"scheduled-table: {problem}", file=sys.stderr)
        return backfill.CANNOT_START
    plan = backfill.Plan(
        command=args.command,
        segments=args.segments,
        read_units_per_second=args.read_units,
        scheduler_calls_per_second=args.scheduler_calls,
        dry_run=args.dry_run,
        checkpoint=Path(args.checkpoint) if args.checkpoint else None,
        in_lambda=args.in_lambda,
        page_items=args.page_items,
        fresh=bool(getattr(args, "fresh", False)),
        deliver_past_due=args.deliver_past_due,
    )
    try:
        stack = discover(aws, args.function)
        tally, finished = backfill.run(aws, stack, plan)
    except RedriveError as error:
        print(f"scheduled-table: {error}", file=sys.stderr)
        return backfill.CANNOT_START
    except KeyboardInterrupt:
        print("scheduled-table: interrupted; run again with the same --checkpoint to resume", file=sys.stderr)
        return backfill.INTERRUPTED
    for line in scan_report.summary(args.command, tally, finished, args.dry_run):
        emit(line)
    if not finished:
        return backfill.INTERRUPTED
    return backfill.UNRESOLVED if tally.failed else backfill.DONE


def main(argv: Sequence[str] | None = None, client: Client | None = None, emit: Emit = print) -> int:
    """0: everything in scope was redriven (or, with --dry-run, could be), or inspected; 1: something could not be
    redriven; 2: nothing could start (a wrong function name, a missing queue). `local ...` is the local cloud's own
    command line (scheduled_table.local), with its own exit statuses."""
    given = list(sys.argv[1:] if argv is None else argv)
    if given[:1] == ["local"]:
        from . import local

        return local.main(given[1:])
    args = parser().parse_args(given)
    problem = stack_problem(args.function, args.table)
    if problem and not (args.command == "console" and not args.function and not args.table):  # console: all of them
        print(f"scheduled-table {args.command}: {problem}", file=sys.stderr)
        return 2
    try:
        aws = client or clients(args.endpoint_url, args.region, args.profile)
        if args.table:  # the rest of the command reads the stack from its consumer function
            args.function = consumer_of(aws, args.table)
    except RedriveError as error:
        print(f"scheduled-table: {error}", file=sys.stderr)
        return 2
    if args.command in ("backfill", "reconcile"):
        return scan_main(args, aws, emit)
    if args.command == "console":
        from .console import main as console_main

        return console_main(args, aws, emit)
    if args.command == "policy":
        from .permissions import main as policy_main

        return policy_main(args, aws, emit)
    if args.command == "inspect":
        try:
            inspection.inspect(aws, args.function, args.limit, emit, args.output, args.sample_items)
        except RedriveError as error:
            print(f"scheduled-table: {error}", file=sys.stderr)
            return 2
        return 0
    try:
        pattern = re.compile(args.reason) if args.reason else None
    except re.error as error:
        print(f"scheduled-table: --reason {args.reason!r} is not a regular expression: {error}", file=sys.stderr)
        return 2
    selection = Selection(pattern, args.limit, args.dry_run, queues.WAIT_SECONDS)
    return redrive(aws, args.function, args.source, selection, emit, args.queue_url)
