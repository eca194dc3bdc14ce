"""`python -m localcloud`: preview a stack under mocks, run the demo, deploy a stack into a local AWS (`up`, `--stay`
to keep it and try it by hand), remove it (`down`), tick a polling rule now (`fire`), read the local SES outbox
(`emails`)."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from botocore.exceptions import ClientError, EndpointConnectionError

from .demo import demo
from .deploy import LOCAL_STACK, down, up
from .emulators import Emulators, fire_rule
from .interrupts import interrupting
from .program import ConfigError, config_path, run_program, stack_tables
from .provision import clients, describe
from .server import Ministack, ses_outbox
from .stay import instructions, verify_senders

DESCRIPTION = """\
scheduled-table: one Pulumi component, ScheduledTable, that makes things happen at the time named by data in
DynamoDB, in four modes: eventbridge (one Scheduler at() schedule per item), ttl (act on TTL deletions), polling
(a rule ticks, a processor takes due items from a sharded index) and aggregate (running totals, exactly once).

This preview runs the real __main__.py and component under Pulumi mocks (no Pulumi CLI, no AWS account).
`python -m localcloud up --stay` deploys the same program into a local AWS (ministack) and keeps it running.
"""


def preview(stack: str, config_file: Path | None = None) -> int:
    mocks = run_program(stack, config_file=config_file)
    registrations = [r for r in mocks.by_name.values() if r.type != "pulumi:pulumi:Stack"]
    print(DESCRIPTION)
    source = config_path(stack, config_file=config_file)
    print(f"Stack '{stack}' ({source}) would create {len(registrations)} resources:\n")
    width = max(len(r.type) for r in registrations)
    for registration in registrations:
        print(f"  {registration.type:<{width}}  {registration.name}")
    print(
        "\nBy type:", ", ".join(f"{n} x {t.split(':')[-1]}" for t, n in Counter(r.type for r in registrations).items())
    )
    return 0


def up_command(stack: str, endpoint: str | None, stay: bool, config_file: Path | None) -> int:
    stack_tables(stack, config_file=config_file)  # a configuration error stops here, before a cloud is started
    cloud = None if endpoint else Ministack()
    try:
        target = endpoint or cloud.start().endpoint  # type: ignore[union-attr]
        deployment = up(target, stack, config_file=config_file)
        print(f"deployed stack '{stack}' to {target}: {len(deployment.resources)} resources")
        print(describe(deployment.outputs))
        if not stay:
            if cloud is not None:
                print("ministack stops as this command exits; use --stay to keep it, or --endpoint for your own.")
            return 0
        verify_senders(deployment)
        with Emulators(target, deployment.region):
            print(instructions(deployment, _stack_options(stack, config_file)), flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                print("stopping", flush=True)
        return 0
    finally:
        if cloud is not None:
            cloud.stop()


def _stack_options(stack: str, config_file: Path | None) -> list[str]:
    """The options that name this stack again in a later command."""
    options = [] if stack == LOCAL_STACK else ["--stack", stack]
    return options + (["--config-file", str(config_file.resolve())] if config_file is not None else [])


def emails(endpoint: str) -> int:
    """The local SES outbox, oldest first: what an email target sent."""
    sent = ses_outbox(endpoint)
    for message in sent:
        at = datetime.fromtimestamp(float(message.get("Timestamp", 0)), UTC).strftime("%H:%M:%S")
        print(f"{at}  to {', '.join(message.get('To', []))}: {message.get('Subject', '')}")
    if not sent:
        print("no email sent yet")
    return 0


def _show_emulator_notes() -> None:
    """The emulators' notes (a table gone after `down`, a failed delivery) as plain lines on stderr."""
    logger = logging.getLogger("localcloud")
    if logger.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("localcloud: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcloud")
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("preview", help="print the resources a stack would create (Pulumi mocks)")
    show.add_argument("--stack", default="dev")
    run_demo = commands.add_parser("demo", help="start ministack, deploy, run every scenario, print a summary")
    run_demo.add_argument("--stack", default=LOCAL_STACK)
    deploy = commands.add_parser("up", help="deploy a stack into ministack (started for you unless --endpoint)")
    deploy.add_argument("--stack", default=LOCAL_STACK)
    deploy.add_argument("--endpoint", help="an already running ministack, e.g. http://127.0.0.1:4566")
    deploy.add_argument("--stay", action="store_true", help="keep the cloud and its emulators running until Ctrl-C")
    destroy = commands.add_parser("down", help="delete every resource of a stack from a running ministack")
    destroy.add_argument("--stack", default=LOCAL_STACK)
    destroy.add_argument("--endpoint", required=True)
    fire = commands.add_parser("fire", help="invoke a schedule rule's targets now instead of at its next rate() tick")
    fire.add_argument("--rule", required=True, help="e.g. jobs-tick (output tick_rule_name)")
    fire.add_argument("--endpoint", required=True)
    fire.add_argument("--region", default="eu-west-1")
    outbox = commands.add_parser("emails", help="print the emails the local SES sent (email targets)")
    outbox.add_argument("--endpoint", required=True)
    for command in (show, deploy, destroy):
        command.add_argument(
            "--config-file", type=Path, help="the stack's settings from this file, not Pulumi.<stack>.yaml"
        )
    args = parser.parse_args(argv)
    _show_emulator_notes()
    try:
        with interrupting():
            return _run(args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except EndpointConnectionError as error:
        print(f"error: {error} (is the local cloud running there?)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace) -> int:
    if args.command == "fire":
        try:
            invoked = fire_rule(clients(args.endpoint, args.region), args.rule, args.region)
        except ClientError as error:
            print(f"error: rule {args.rule}: {error}", file=sys.stderr)
            return 1
        print(f"rule {args.rule}: invoked {invoked} target(s)")
        return 0
    if args.command == "emails":
        return emails(args.endpoint)
    if args.command == "demo":
        return demo(args.stack)
    if args.command == "up":
        return up_command(args.stack, args.endpoint, args.stay, args.config_file)
    if args.command == "down":
        removed = down(args.endpoint, args.stack, config_file=args.config_file)
        print(f"removed {len(removed)} resources of stack '{args.stack}' from {args.endpoint}")
        return 0
    return preview(args.stack, args.config_file)


if __name__ == "__main__":
    sys.exit(main())
