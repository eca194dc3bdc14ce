"""The handlers' JSON log lines carry Powertools for AWS Lambda Logger's standard keys, in its formats, without
importing Powertools: one Logs Insights query reads both (docs/operations.md).

GIVEN an invocation with Lambda's context and trace header WHEN a handler logs THEN its line has every key Powertools'
Logger writes for the same invocation, with the same values where they are the invocation's (cold start, function,
request, trace) and the same shapes where they are the line's (level, location, timestamp); every entry point notes
its invocation; and the second invocation of a sandbox is not a cold start.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from st_core import log

TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
CONTEXT = SimpleNamespace(
    function_name="reminders-scheduler-1a2b3c",
    memory_limit_in_mb=1024,
    invoked_function_arn="arn:aws:lambda:eu-west-1:123456789012:function:reminders-scheduler-1a2b3c",
    aws_request_id="c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
    get_remaining_time_in_millis=lambda: 30_000,
)


def powertools_line(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What Powertools' Logger writes for the same invocation."""
    from aws_lambda_powertools import Logger

    monkeypatch.setenv("_X_AMZN_TRACE_ID", TRACE)
    written = io.StringIO()
    logger = Logger(service="scheduled-table", logger_handler=logging.StreamHandler(written))

    @logger.inject_lambda_context
    def handler(event: Any, context: Any) -> None:
        logger.info("schedule-created")

    handler({}, CONTEXT)
    line: dict[str, Any] = json.loads(written.getvalue())
    return line


def test_a_line_has_powertools_loggers_keys_values_and_formats(monkeypatch: pytest.MonkeyPatch) -> None:
    def entry(event: Any, context: Any) -> None:
        log.invoked(context)
        log.info("schedule-created", schedule="s-1")

    entry({}, CONTEXT)
    [ours] = flush()
    theirs = powertools_line(monkeypatch)
    assert set(theirs) <= set(ours), set(theirs) - set(ours)
    same = ("level", "message", "service", "cold_start", "function_name", "function_memory_size", "function_arn")
    assert {k: ours[k] for k in (*same, "function_request_id", "xray_trace_id")} == {
        k: theirs[k] for k in (*same, "function_request_id", "xray_trace_id")
    }
    assert ours["location"] == f"entry:{entry.__code__.co_firstlineno + 2}"  # the function and line that logged
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\+0000", ours["timestamp"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\+0000", theirs["timestamp"])
    assert (ours["action"], ours["schedule"]) == ("schedule-created", "s-1")  # the line's own fields stay


_captured: list[io.StringIO] = []


def flush() -> list[dict[str, Any]]:
    return [json.loads(text) for buffer in _captured for text in buffer.getvalue().splitlines()]


@pytest.fixture(autouse=True)
def capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("_X_AMZN_TRACE_ID", TRACE)
    monkeypatch.setattr(log, "_cold", [True])
    monkeypatch.setattr(log, "_invocation", {})
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    logger = logging.getLogger("scheduled_table")
    logger.addHandler(handler)
    _captured[:] = [buffer]
    yield
    logger.removeHandler(handler)


def test_only_the_first_invocation_of_a_sandbox_is_a_cold_start() -> None:
    for _ in range(2):
        log.invoked(CONTEXT)
        log.info("batch")
    assert [line["cold_start"] for line in flush()] == [True, False]


def test_without_a_trace_header_there_is_no_trace_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("_X_AMZN_TRACE_ID")
    log.invoked(CONTEXT)
    log.info("batch")
    [line] = flush()
    assert "xray_trace_id" not in line and line["function_request_id"] == CONTEXT.aws_request_id


def entry_points() -> dict[str, tuple[str, str]]:
    """Each Lambda entry point: (module, the function it hands the batch to)."""
    return {
        "eventbridge.handler": ("eventbridge", "handle_batch"),
        "ttl.handler": ("ttl", "handle_batch"),
        "aggregate.handler": ("aggregate", "handle_batch"),
        "polling_assign.handler": ("polling_assign", "handle_assign_batch"),
        "polling.handler": ("polling", "process"),
        "release.handler": ("release", "handle_messages"),
    }


@pytest.mark.parametrize("entry", sorted(entry_points()))
def test_every_entry_point_notes_its_invocation(entry: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    module_name, work = entry_points()[entry]
    module = importlib.import_module(module_name)

    class Done(Exception):
        pass

    def logged(*args: Any, **kwargs: Any) -> None:
        log.info("working")
        raise Done

    monkeypatch.setattr(module, "load_config", lambda: {})
    monkeypatch.setattr(module, work, logged)
    handler: Callable[[Any, Any], Any] = getattr(module, entry.split(".")[1])
    with pytest.raises(Done):
        handler({}, CONTEXT)
    [line] = flush()
    assert (line["function_request_id"], line["cold_start"]) == (CONTEXT.aws_request_id, True)


def test_the_backfill_function_notes_its_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    import backfill
    from st_core import config

    def no_config() -> None:
        log.info("loading")
        raise LookupError

    monkeypatch.setattr(config, "load_config", no_config)
    with pytest.raises(LookupError):
        backfill.handler({}, CONTEXT)
    [line] = flush()
    assert line["function_arn"] == CONTEXT.invoked_function_arn
