"""The scheduled-table Pulumi program: read the stack's config, build the ScheduledTable, export its outputs."""

from __future__ import annotations

import pulumi

from components import ScheduledTable
from components.stack_config import args_from_config

config = pulumi.Config()
reminders = ScheduledTable(config.get("name") or "reminders", args_from_config(config))

pulumi.export("table_name", reminders.table_name)
pulumi.export("table_arn", reminders.table_arn)
pulumi.export("stream_arn", reminders.stream_arn)
pulumi.export("function_name", reminders.function_name)
pulumi.export("stream_dlq_url", reminders.stream_dlq_url)
pulumi.export("poison_queue_url", reminders.poison_queue_url)
for key in ("schedule_group_name", "due_queue_url", "due_queue_arn", "target_dlq_url"):
    if getattr(reminders, key) is not None:
        pulumi.export(key, getattr(reminders, key))
