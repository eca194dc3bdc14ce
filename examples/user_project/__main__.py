"""A user's Pulumi program: reminders emailed at the time each item names, and jobs queued when they fall due."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
from scheduled_table import EmailTarget, Mode, QueueTarget, ScheduledTable, ScheduledTableArgs, Target

config = pulumi.Config()
# Tables keep deletion protection unless the stack says otherwise: `pulumi config set protect false`, `pulumi up`,
# then `pulumi destroy` removes everything.
protect = config.get_bool("protect") is not False


def reminders(sender: str) -> ScheduledTable:
    """One email per item, at its `remindAt` time, from `sender` (a verified SES identity)."""
    target: Target = EmailTarget(sender, subject="Reminder: {title}", body="{title} is due at {remindAt}.")
    args = ScheduledTableArgs(
        mode=Mode.EVENTBRIDGE, time_attribute="remindAt", target=target, deletion_protection=protect
    )
    return ScheduledTable("reminders", args)


jobs = aws.sqs.Queue("jobs", visibility_timeout_seconds=120)
work = ScheduledTable(
    "work",
    ScheduledTableArgs(mode="polling", target=QueueTarget(jobs.arn), shards=4, deletion_protection=protect),
)
emails = reminders(config.get("sender") or "reminders@example.com")

outputs: dict[str, pulumi.Output[str]] = emails.outputs
pulumi.export("reminders_table", outputs["table_name"])
pulumi.export("work_table", work.table_name)
pulumi.export("jobs_queue_url", jobs.url)
