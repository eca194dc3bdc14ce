"""A user's test with Pulumi's minimal mocks, the ones its documentation shows, does not crash the component.

Those mocks return `[name + "_id", inputs]`: every output the provider computes (each ARN, URL, stream ARN) is None.
GIVEN such mocks WHEN a ScheduledTable of each mode, with every optional part switched on, is built and its outputs
resolved THEN nothing raises. Each case runs in a process of its own: a program that raised inside Pulumi's event
loop leaves registrations in flight that would land in the next case's mocks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from .conftest import REPO

PROGRAM = textwrap.dedent(
    """
    import json, sys
    import pulumi

    class MinimalMocks(pulumi.runtime.Mocks):  # as in Pulumi's unit-testing guide
        def new_resource(self, args):
            return [args.name + "_id", args.inputs]

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(MinimalMocks(), preview=False)
    from components import QueueTarget, ScheduledTable, ScheduledTableArgs

    options = json.loads(sys.argv[1])
    if options.pop("queue_target", False):
        options["target"] = QueueTarget("arn:aws:sqs:eu-west-1:123456789012:jobs")
    resolved = {}

    @pulumi.runtime.test
    def program():
        table = ScheduledTable("minimal", ScheduledTableArgs(**options))
        return pulumi.Output.all(**table.outputs).apply(resolved.update)

    program()
    print(json.dumps(sorted(resolved)))
    """
)

CASES: dict[str, dict[str, object]] = {
    "eventbridge": {"mode": "eventbridge", "create_alarm_topic": True},
    "eventbridge-queue-target": {"mode": "eventbridge", "queue_target": True},
    "ttl": {"mode": "ttl", "create_alarm_topic": True},
    "ttl-precise": {"mode": "ttl", "precise": True},
    "polling": {"mode": "polling", "create_alarm_topic": True},
    "aggregate": {"mode": "aggregate", "create_alarm_topic": True},
    # The user's queues: the deploying account and Region are looked up, and these mocks answer nothing.
    "eventbridge-own-queues": {
        "mode": "eventbridge",
        "existing_poison_queue": {"queueArn": "arn:aws:sqs:eu-west-1:123456789012:parked"},
        "existing_target_dlq": {"queueArn": "arn:aws:sqs:eu-west-1:123456789012:undone"},
    },
}


@pytest.mark.parametrize("options", [pytest.param(o, id=k) for k, o in CASES.items()])
def test_component_survives_pulumi_minimal_mocks(options: dict[str, object]) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(options)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "table_name" in json.loads(result.stdout.strip().splitlines()[-1])
