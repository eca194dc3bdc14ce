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
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from .component import REGION_HINT, REGION_RULE, endpoint_url, launch_console, profile_problem, rule_region
from .demo import demo
from .deploy import LOCAL_STACK, Deployment, TableKeys, down, up
from .emulators import Emulators, fire_rule
from .guide import program_instructions, time_attribute_notes, verify_program_senders
from .interrupts import interrupting
from .program import REPO, ConfigError, config_path, run_program, stack_tables
from .provision import clients, describe
from .server import Ministack, ses_outbox
from .try_it import instructions, verify_senders

COMMAND = ".venv/bin/python -m localcloud"
# How often `up --stay` reads its tables again for items without their time attribute (one Scan page each).
WATCH_SECONDS = 10.0

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
        noted = _new_notes(deployment, set())
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
            console = _start_console(target, deployment.region)
            try:
                while True:  # items your app writes now are looked at too
                    time.sleep(WATCH_SECONDS)
                    noted |= _new_notes(deployment, noted)
            except KeyboardInterrupt:
                print("stopping", flush=True)
            finally:
                if console is not None:
                    console.shutdown()
        return 0
    finally:
        if cloud is not None:
            cloud.stop()


def _start_console(endpoint: str, region: str) -> Any:
    """`scheduled-table console` on this local cloud, in a thread of this process; its address printed. A console
    that cannot start is a note, never the end of `up --stay` (the stack is deployed and usable without it)."""
    try:
        server, address = launch_console(clients(endpoint, region))
    except Exception as error:
        print(f"note: the console did not start ({error})", flush=True)
        return None
    print(f"console: open {address} (what is due, delivered and parked; redrive with a dry run first)", flush=True)
    return server


def _new_notes(deployment: Deployment, noted: set[str]) -> set[str]:
    """Print the notes on items without their table's time attribute not printed before; returns them."""
    notes = [note for note in time_attribute_notes(deployment) if note not in noted]
    for note in notes:
        print(f"note: {note}", flush=True)
    return set(notes)


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
        print(
            "no email sent yet: an email is sent within a minute or two of its due time; one that is not was parked "
            "(`scheduled-table inspect --table TABLE --endpoint-url URL` says why)"
        )
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


# Each subcommand: its one-line help (in the list of commands) and its description (its own --help).
SUBCOMMANDS = {
    "preview": (
        "print the resources the program would create (Pulumi mocks)",
        "Run the program under Pulumi mocks, as `pulumi preview` would, and list the resources it would create. "
        "Nothing is started and no AWS account is needed; a mistake in the program or its stack file is reported "
        "as one line naming the file (and line) and the fix.",
    ),
    "demo": (
        "start ministack, deploy this repository's stack, run every scenario (make demo)",
        "Start ministack, deploy this repository's own local stack, drive every scenario (each mode, redelivered "
        "batches, a backlog, a drifted resource) and print what was delivered, early, late or lost. It needs a "
        "checkout of the repository (its stack files), so an installed package does not offer it.",
    ),
    "up": (
        "deploy the program into ministack (started for you unless --endpoint-url)",
        "Deploy the program into a local AWS: ministack with IAM enforced, plus emulators for what it lacks "
        "(Scheduler's deliveries, TTL deletions). With --stay it keeps running and prints commands to try each "
        "table: write an item, then see its due event arrive.",
    ),
    "down": (
        "delete every resource of the program from a running ministack",
        "Delete every resource the program defines from a running local cloud, dependents first; tables it does not "
        "own are left.",
    ),
    "fire": (
        "invoke a schedule rule's targets now instead of at its next rate() tick",
        "Invoke a rule's Lambda targets now, with the event EventBridge would send, instead of waiting for its "
        "rate(): a polling table's processor takes its due items at once.",
    ),
    "emails": (
        "print the emails the local SES sent (email targets)",
        "Print what the local SES sent, oldest first: the time, the recipients and the subject of each email an "
        "email target sent.",
    ),
}


DEMO_ONLY_IN_A_CHECKOUT = (
    "the demo deploys the scheduled-table repository's own stack, which an installed package does not hold; run "
    "`make demo` in a clone of the repository, or try your own program with `up --stay`"
)


def is_checkout(folder: Path = REPO) -> bool:
    """Whether the local cloud runs from a checkout of this repository (its stack files beside it), not from an
    installed package: only a checkout has the stack `demo` deploys."""
    return (folder / "Pulumi.yaml").is_file() and (folder / "__main__.py").is_file()


def parser(prog: str = "python -m localcloud", default_program: Path = REPO) -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog=prog,
        description="Run a Pulumi program that uses ScheduledTable in a local AWS (ministack), with IAM enforced.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def subcommand(name: str) -> argparse.ArgumentParser:
        summary, description = SUBCOMMANDS[name]
        return commands.add_parser(name, help=summary, description=description)

    show = subcommand("preview")
    offered = [show]
    if is_checkout():
        offered.append(subcommand("demo"))
    deploy = subcommand("up")
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
    destroy = subcommand("down")
    destroy.add_argument(
        "--endpoint-url", dest="endpoint", type=endpoint_url, metavar="URL", required=True, help=ENDPOINT_HELP
    )
    fire = subcommand("fire")
    fire.add_argument("--rule", required=True, help="the rule's name, e.g. jobs-tick (output tick_rule_name)")
    fire.add_argument(
        "--endpoint-url", dest="endpoint", type=endpoint_url, metavar="URL", required=True, help=ENDPOINT_HELP
    )
    fire.add_argument("--region", help=REGION_RULE)
    fire.add_argument(
        "--profile",
        help="the AWS profile whose region is the default (its credentials are not used: the local cloud has its own)",
    )
    outbox = subcommand("emails")
    outbox.add_argument(
        "--endpoint-url", dest="endpoint", type=endpoint_url, metavar="URL", required=True, help=ENDPOINT_HELP
    )
    for command in [*offered, deploy, destroy]:
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


def configured_region(given: str | None, profile: str | None = None) -> str:
    """`--region`, else the AWS configuration's region, by the rule every operator command follows (REGION_RULE);
    none, or a profile that cannot be read, is a one-line error naming the fix."""
    try:
        region = boto3.session.Session(profile_name=profile, region_name=rule_region(given)).region_name
    except BotoCoreError as error:  # --profile or AWS_PROFILE names a profile the files do not have
        raise ConfigError(profile_problem(profile, error)) from None
    if not region:
        raise ConfigError(f"no AWS region configured; {REGION_HINT}")
    return str(region)


def main(
    argv: list[str] | None = None,
    prog: str = "python -m localcloud",
    default_program: Path = REPO,
    command: str | None = None,
) -> int:
    """The command line. `command`: how the commands it prints run this command line again, from any shell (the
    path of the running executable); `prog` by default."""
    if list(sys.argv[1:] if argv is None else argv)[:1] == ["demo"] and not is_checkout():
        print(f"error: {prog} demo: {DEMO_ONLY_IN_A_CHECKOUT}", file=sys.stderr)
        return 2
    args = parser(prog, default_program).parse_args(argv)
    _show_emulator_notes()
    try:
        with interrupting():
            return _run(args, command or prog)
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
        region = configured_region(args.region, args.profile)
        try:
            invoked = fire_rule(clients(args.endpoint, region), args.rule, region)
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
