"""`python -m localcloud preview --stack dev`: what the stack would create, without the CLI or an account."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from .program import REPO, run_program

DESCRIPTION = """\
scheduled-table: one Pulumi component, ScheduledTable, that makes things happen at the time named by data in
DynamoDB. In `eventbridge` mode every item with a due time gets one EventBridge Scheduler at() schedule, kept in
step with the item through the table's stream, that delivers a due event to the target when the time comes.

This preview runs the real __main__.py and component under Pulumi mocks (no Pulumi CLI, no AWS account).
The local cloud that deploys and runs the stack for real on this machine is the next milestone.
"""


def preview(stack: str) -> int:
    mocks = run_program(stack)
    registrations = [r for r in mocks.by_name.values() if r.type != "pulumi:pulumi:Stack"]
    print(DESCRIPTION)
    print(f"Stack '{stack}' ({REPO / f'Pulumi.{stack}.yaml'}) would create {len(registrations)} resources:\n")
    width = max(len(r.type) for r in registrations)
    for registration in registrations:
        print(f"  {registration.type:<{width}}  {registration.name}")
    print(
        "\nBy type:", ", ".join(f"{n} x {t.split(':')[-1]}" for t, n in Counter(r.type for r in registrations).items())
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcloud")
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("preview", help="print the resources a stack would create (Pulumi mocks)")
    show.add_argument("--stack", default="dev")
    run_demo = commands.add_parser("demo", help="start ministack, deploy, run every scenario, print a summary")
    run_demo.add_argument("--stack", default="local")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import demo

        return demo(args.stack)
    return preview(args.stack)


if __name__ == "__main__":
    sys.exit(main())
