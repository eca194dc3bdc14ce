"""One redrive, as `scheduled-table redrive SOURCE` runs it and the console's button runs it: the path of each
source, its report, and the command's exit status."""

from __future__ import annotations

import sys

from ..aws import Client, Emit
from .discovery import RedriveError, discover, replace_queue
from .poison import poison
from .queues import stopped
from .report import Report, Selection
from .stream import stream_dlq
from .target import target_dlq

PATHS = {
    "poison": (poison, "poison queue"),
    "stream": (stream_dlq, "stream DLQ"),
    "target": (target_dlq, "target DLQ"),
}


def redrive(
    aws: Client,
    function: str,
    source: str,
    selection: Selection,
    emit: Emit,
    queue_url: str | None = None,
    warn: Emit | None = None,
) -> int:
    """One redrive as `scheduled-table redrive SOURCE` runs it (the console's button runs this too): a line per
    message, the summary, and the command's exit status (0 done, 1 something could not be redriven, 2 could not
    start); what stops it goes to `warn` (default: stderr, as the command prints it)."""

    def problem(text: str) -> None:
        if warn is None:
            print(f"scheduled-table: {text}", file=sys.stderr)
        else:
            warn(text)

    run, label = PATHS[source]
    report = Report(emit=emit)
    try:
        stack = discover(aws, function)
        if queue_url:
            stack = replace_queue(stack, source, queue_url)
        run(aws, stack, report, selection)
    except RedriveError as error:
        problem(str(error))
        return 2
    except Exception as error:  # refused mid-run (a permission missing, say): what the run hid is given back
        lines = stopped(error)
        if lines is None:
            raise
        for line in lines:
            problem(f"{label}: {line}")
        emit(report.summary(label))
        return 1
    emit(("dry run, nothing changed. " if selection.dry_run else "") + report.summary(label))
    return 0 if report.ok else 1
