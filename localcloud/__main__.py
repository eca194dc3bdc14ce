"""`python -m localcloud preview --stack dev`: what the stack would create, without the CLI or an account."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from .demo import demo
from .deploy import LOCAL_STACK, Deployment, down, up
from .emulators import Emulators, fire_rule
from .program import REPO, run_program
from .provision import clients, describe
from .scenarios import verify_sender
from .server import Ministack

DESCRIPTION = """\
scheduled-table: one Pulumi component, ScheduledTable, that makes things happen at the time named by data in
DynamoDB, in four modes: eventbridge (one Scheduler at() schedule per item), ttl (act on TTL deletions), polling
(a rule ticks, a processor takes due items from a sharded index) and aggregate (running totals, exactly once).

This preview runs the real __main__.py and component under Pulumi mocks (no Pulumi CLI, no AWS account).
`python -m localcloud up --stay` deploys the same program into a local AWS (ministack) and keeps it running.
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


def ready_commands(deployment: Deployment) -> str:
    """Copy-paste commands to write an item and watch its action fire (the seed's CLI loop, against ministack)."""
    endpoint, region = deployment.endpoint, deployment.region
    tasks = deployment.outputs.get("tasks", {})
    table, queue = tasks.get("table_name", "tasks-table"), tasks.get("due_queue_url", "<due queue url>")
    due = "$(date -u -d '+30 seconds' +%Y-%m-%dT%H:%M:%SZ)"
    item = '{"PK":{"S":"TASK#1"},"SK":{"S":"TASK"},"dueAt":{"S":"\'"' + due + '"\'"}}'
    return f"""
Endpoint: {endpoint}   (region {region}; any credentials work)

  export AWS_ENDPOINT_URL={endpoint} AWS_DEFAULT_REGION={region} AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test

With the AWS CLI:
  aws dynamodb put-item --table-name {table} --item '{item}'
  aws scheduler list-schedules --group-name {tasks.get("schedule_group_name", "tasks-schedules")}
  aws sqs receive-message --queue-url {queue} --wait-time-seconds 20

With boto3 (same environment):
  python -c "import boto3, datetime as d; t=(d.datetime.now(d.UTC)+d.timedelta(seconds=30)).isoformat(); \\
boto3.client('dynamodb').put_item(TableName='{table}', \\
Item={{'PK': {{'S': 'TASK#2'}}, 'SK': {{'S': 'TASK'}}, 'dueAt': {{'S': t}}}})"
  python -c "import boto3; print(boto3.client('sqs').receive_message(QueueUrl='{queue}', WaitTimeSeconds=20))"

Emails sent (reminders table, attribute remindAt): curl -s {endpoint}/_ministack/ses/messages
Polling (jobs table): the rule ticks every minute; to tick now:
  python -m localcloud fire --rule jobs-tick --endpoint {endpoint}
Stop with Ctrl-C.
"""


def up_command(stack: str, endpoint: str | None, stay: bool) -> int:
    cloud = None if endpoint else Ministack().start()
    try:
        target = endpoint or cloud.endpoint  # type: ignore[union-attr]
        deployment = up(target, stack)
        print(f"deployed stack '{stack}' to {target}: {len(deployment.resources)} resources")
        print(describe(deployment.outputs))
        if not stay:
            if cloud is not None:
                print("ministack stops as this command exits; use --stay to keep it, or --endpoint for your own.")
            return 0
        verify_sender(deployment)
        with Emulators(target, deployment.region):
            print(ready_commands(deployment))
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                print("stopping")
        return 0
    finally:
        if cloud is not None:
            cloud.stop()


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
    args = parser.parse_args(argv)
    if args.command == "fire":
        invoked = fire_rule(clients(args.endpoint, args.region), args.rule, args.region)
        print(f"rule {args.rule}: invoked {invoked} target(s)")
        return 0
    if args.command == "demo":
        return demo(args.stack)
    if args.command == "up":
        return up_command(args.stack, args.endpoint, args.stay)
    if args.command == "down":
        removed = down(args.endpoint, args.stack)
        print(f"removed {len(removed)} resources of stack '{args.stack}' from {args.endpoint}")
        return 0
    return preview(args.stack)


if __name__ == "__main__":
    sys.exit(main())
