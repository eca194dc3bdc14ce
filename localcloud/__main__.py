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

from .component import endpoint_url
from .demo import demo
from .deploy import LOCAL_STACK, TableKeys, down, up
from .emulators import Emulators, fire_rule
from .guide import program_instructions, verify_program_senders
from .interrupts import interrupting
from .program import REPO, ConfigError, config_path, run_program, stack_tables
from .provision import clients, describe
from .server import Ministack, ses_outbox
from .stay import instructions, verify_senders

COMMAND = ".venv/bin/python -m localcloud"

DESCRIPTION = """\
scheduled-table: one Pulumi component, ScheduledTable, that makes things happen at the time named by data in
DynamoDB, in four modes: eventbridge (one Scheduler at() schedule per item), ttl (act on TTL deletions), polling
(a rule ticks, a processor takes due items from a sharded index) and aggregate (running totals, exactly once).

This preview runs the real __main__.py and component under Pulumi mocks (no Pulumi CLI, no AWS account).
`python -m localcloud up --stay` deploys the same program into a local AWS (ministack) and keeps it running;
`scheduled-table local up --stay --program DIR` does the same for your own program.
"""


def preview(stack: str, config_file: Path | None = None, program: Path = REPO) -> int:
    mocks = run_program(stack, program, config_file=config_file)
    registrations = [r for r in mocks.by_name.values() if r.type != "pulumi:pulumi:Stack"]
    if program == REPO:
        print(DESCRIPTION)
    source = config_path(stack, program, config_file=config_file)
    given = f"{source}" if source.exists() else f"{source.name} absent: no configuration"
    print(f"Program {program}, stack '{stack}' ({given}) would create {len(registrations)} resources:\n")
    width = max((len(r.type) for r in registrations), default=0)
    for registration in registrations:
        print(f"  {registration.type:<{width}}  {registration.name}")
    print(
        "\nBy type:", ", ".join(f"{n} x {t.split(':')[-1]}" for t, n in Counter(r.type for r in registrations).items())
    )
    return 0


def up_command(
    stack: str,
    endpoint: str | None,
    stay: bool,
    config_file: Path | None,
    program: Path = REPO,
    existing: list[TableKeys] | None = None,
    command: str = COMMAND,
) -> int:
    stack_tables(stack, program, config_file=config_file)  # a configuration error stops here, before a cloud starts
    cloud = None if endpoint else Ministack()
    try:
        target = endpoint or cloud.start().endpoint  # type: ignore[union-attr]
        deployment = up(target, stack, program, config_file=config_file, existing=existing or [])
        print(f"deployed stack '{stack}' of {program} to {target}: {len(deployment.resources)} resources")
        print(describe(deployment.outputs))
        if not stay:
            if cloud is not None:
                print("ministack stops as this command exits; use --stay to keep it, or --endpoint-url for your own.")
            return 0
        if program == REPO:
            verify_senders(deployment)
        else:
            verify_program_senders(deployment)
        with Emulators(target, deployment.region):
            options = _stack_options(stack, config_file, program)
            text = (
                instructions(deployment, options)
                if program == REPO
                else program_instructions(deployment, command, options)
            )
            print(text, flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                print("stopping", flush=True)
        return 0
    finally:
        if cloud is not None:
            cloud.stop()


def _stack_options(stack: str, config_file: Path | None, program: Path = REPO) -> list[str]:
    """The options that name this stack again in a later command."""
    options = [] if stack == LOCAL_STACK else ["--stack", stack]
    if program != REPO:
        options += ["--program", str(program)]
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


def _program(value: str) -> Path:
    folder = Path(value).resolve()
    if not (folder / "Pulumi.yaml").is_file():
        raise argparse.ArgumentTypeError(f"{folder} has no Pulumi.yaml: give the folder of your Pulumi project")
    return folder


def _table_keys(value: str) -> TableKeys:
    name, _, keys = value.partition(":")
    partition, _, sort = keys.partition(":")
    if not name or not partition:
        raise argparse.ArgumentTypeError(f"{value!r}: write NAME:PARTITION_KEY or NAME:PARTITION_KEY:SORT_KEY")
    return TableKeys(name, partition, sort or None)


ENDPOINT_HELP = "a local cloud already running there, e.g. http://127.0.0.1:4566 (as the AWS CLI's --endpoint-url)"
EXIT_CODES = """\
exit status: 0 done; 1 the cloud refused or could not be reached, or a demo scenario failed; 2 a usage or
configuration error (the message names the file and the setting); 130 interrupted."""


def parser(prog: str = "python -m localcloud", default_program: Path = REPO) -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=prog,
        description="Run a Pulumi program that uses ScheduledTable in a local AWS (ministack), with IAM enforced.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    show = commands.add_parser("preview", help="print the resources the program would create (Pulumi mocks)")
    run_demo = commands.add_parser(
        "demo", help="start ministack, deploy this repo's stack, run every scenario (a checkout only: make demo)"
    )
    deploy = commands.add_parser("up", help="deploy the program into ministack (started for you unless --endpoint-url)")
    deploy.add_argument("--endpoint-url", dest="endpoint", type=endpoint_url, metavar="URL", help=ENDPOINT_HELP)
    deploy.add_argument("--stay", action="store_true", help="keep the cloud and its emulators running until Ctrl-C")
    deploy.add_argument(
        "--existing-table",
        dest="existing",
        type=_table_keys,
        action="append",
        default=[],
        metavar="NAME:PK[:SK]",
        help="make this table (string keys, a NEW_AND_OLD_IMAGES stream) before deploying, as your own table would "
        "exist on AWS; repeat for several",
    )
    destroy = commands.add_parser("down", help="delete every resource of the program from a running ministack")
    destroy.add_argument(
        "--endpoint-url", dest="endpoint", type=endpoint_url, metavar="URL", required=True, help=ENDPOINT_HELP
    )
    fire = commands.add_parser("fire", help="invoke a schedule rule's targets now instead of at its next rate() tick")
    fire.add_argument("--rule", required=True, help="the rule's name, e.g. jobs-tick (output tick_rule_name)")
    fire.add_argument(
        "--endpoint-url", dest="endpoint", type=endpoint_url, metavar="URL", required=True, help=ENDPOINT_HELP
    )
    fire.add_argument("--region", default="eu-west-1", help="the stack's region (default: eu-west-1)")
    outbox = commands.add_parser("emails", help="print the emails the local SES sent (email targets)")
    outbox.add_argument(
        "--endpoint-url", dest="endpoint", type=endpoint_url, metavar="URL", required=True, help=ENDPOINT_HELP
    )
    for command in (show, run_demo, deploy, destroy):
        default = "dev" if command is show and default_program == REPO else LOCAL_STACK
        command.add_argument(
            "--stack", default=default, help=f"the stack whose Pulumi.<stack>.yaml configures it (default: {default})"
        )
    for command in (show, deploy, destroy):
        command.add_argument(
            "--config-file", type=Path, help="the stack's settings from this file, not Pulumi.<stack>.yaml"
        )
        command.add_argument(
            "--program",
            type=_program,
            default=default_program,
            metavar="DIR",
            help=f"the folder of the Pulumi project to run (Pulumi.yaml, __main__.py; default: {default_program})",
        )
    return top


def main(argv: list[str] | None = None, prog: str = "python -m localcloud", default_program: Path = REPO) -> int:
    args = parser(prog, default_program).parse_args(argv)
    _show_emulator_notes()
    try:
        with interrupting():
            return _run(args, prog)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except EndpointConnectionError as error:
        print(f"error: {error} (is the local cloud running there?)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _run(args: argparse.Namespace, prog: str) -> int:
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
        return up_command(
            args.stack, args.endpoint, args.stay, args.config_file, args.program, args.existing, command=prog
        )
    if args.command == "down":
        removed = down(args.endpoint, args.stack, args.program, config_file=args.config_file)
        print(f"removed {len(removed)} resources of stack '{args.stack}' from {args.endpoint}")
        return 0
    return preview(args.stack, args.config_file, args.program)


if __name__ == "__main__":
    sys.exit(main())
