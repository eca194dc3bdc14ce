"""AWS behaviours that break event-driven code and that ministack does not reproduce, put into it.

- Scheduler's minute: AWS runs a one-time `at()` schedule anywhere within the minute it names (seconds ignored):
  `at(12:00:45)` may run at 12:00:03 or at 12:00:59. ministack fires after the named second, which hides every
  early-delivery bug. Here each `at()` runs at an instant drawn within its minute from a seeded generator; the seed
  is printed (`LOCALCLOUD_SEED` replays it). Used by ministack's Scheduler and by the universal-target emulator.
- Recurring schedules (`rate`, `cron`) in their time zone, with DST, start and end dates, each firing anywhere in
  its minute and with `<aws.scheduler.scheduled-time>` written into its input: see localcloud/recurring.py.
- Lambda's at-least-once stream delivery: with `LOCALCLOUD_REDELIVER=<fraction>`, that fraction of the stream
  batches ministack hands a function is delivered again a few seconds later: whole (as after a function timeout),
  or from a record in the middle with everything after it (as a retry from a reported sequence number). Counts
  per function go to the file named by `LOCALCLOUD_REDELIVERY_LOG`.

- AWS limits ministack does not check (it does check SQS's `MaximumMessageSize`, SNS's 256 KiB, TransactWriteItems'
  100 actions and 4 MB, and DynamoDB's number range): Scheduler names and client tokens (64), a schedule's
  `Target.Input` (256 KiB), a function's environment (4 KB), and an event invoke config's
  `MaximumEventAgeInSeconds` (60-21600), each refused with AWS's error code.

- Scheduler's invocation throttle (AWS: 1,000 firings a second, over it delayed, never dropped), scaled 1:10 to
  100 a second (`LOCALCLOUD_SCHEDULER_RATE`): see localcloud/throttle.py.
- Faults (`LOCALCLOUD_FAULTS=<fraction>`, `make soak` only): throttling and 5xx answers, targets refusing
  Scheduler's firings and functions timing out mid-batch, at a stated rate: see localcloud/faults.py.
- Lists in pages: ministack's ListSchedules answers only its first 100 schedules; here it pages with `NextToken`.
- Pollers as AWS runs them: one per stream mapping (ministack runs one thread for every mapping, each batch's
  function before the next mapping's read), and queues polled as soon as a message is visible.
- DynamoDB's TTL process, with AWS's REMOVE record in the stream: see localcloud/ttl.py.

- IAM, enforced as on AWS: ministack's `AUTH=true`, with its Scheduler resource map, `iam:PassRole` and Scheduler's
  role for each firing put right (localcloud/iam.py).

`python -m localcloud.aws_behaviour` patches ministack in its own process, then runs it.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Iterator

from . import faults, throttle, ttl
from .component import constants
from .endpoints import UNIVERSAL_SCHEDULES_PATH, Response, first, json_answer, serve
from .rulebook import limit, rule
from .scheduler_minute import MinuteWindow, seed
from .stores import snapshot

REDELIVER_VARIABLE = "LOCALCLOUD_REDELIVER"
REDELIVERY_LOG_VARIABLE = "LOCALCLOUD_REDELIVERY_LOG"
REDELIVERY_DELAY_SECONDS = (1.0, 8.0)
# ministack sweeps its schedules every 10 s; a 1 s sweep keeps the drawn instant meaningful.
TICK_SECONDS = 1
# ListSchedules' largest page (AWS's MaxResults limit).
PAGE_SCHEDULES = limit("scheduler-list-page")


def patch_ministack(window: MinuteWindow) -> None:
    """ministack's Scheduler fires `at()` once its second has passed: make it fire at the drawn instant instead."""
    rule("scheduler-minute")
    from ministack.services import scheduler

    named_epoch = scheduler._at_time_epoch
    drawn: dict[str, float | None] = {}  # ministack's sweep asks for every schedule every second: drawn once each

    def drawn_epoch(expression: str) -> float | None:
        if expression not in drawn:
            named = named_epoch(expression)
            drawn[expression] = None if named is None else window.instant(expression, named)
        return drawn[expression]

    scheduler._at_time_epoch = drawn_epoch
    scheduler._SCHEDULE_TICK_INTERVAL = TICK_SECONDS


def patch_stream_delivery(fraction: float, rng: random.Random, log_path: str | None) -> None:
    """Deliver `fraction` of DynamoDB stream batches again, later, whole or from a record with all after it."""
    import copy
    import json
    from collections import Counter

    from ministack.services import lambda_svc

    execute = lambda_svc._execute_function
    counts: Counter[str] = Counter()
    depth = threading.local()

    def write_counts() -> None:
        if log_path:
            with open(log_path, "w") as out:
                json.dump(dict(counts), out)

    def redeliver(func: dict, event: dict) -> None:
        depth.inside = True  # a redelivery is not itself redelivered
        with contextlib.suppress(Exception):  # a failing redelivery is the function's business, as on AWS
            execute(func, event)

    def with_redelivery(func: dict, event: dict) -> dict:
        outer = not getattr(depth, "inside", False)
        depth.inside = True
        try:
            result: dict = execute(func, event)
        finally:
            if outer:
                depth.inside = False
        records = event.get("Records") if isinstance(event, dict) else None
        is_stream = bool(records) and all(
            isinstance(r, dict) and r.get("eventSource") == "aws:dynamodb" for r in records or []
        )
        if outer and is_stream and records and rng.random() < fraction:
            start = 0 if rng.random() < 0.5 else rng.randrange(len(records))
            again = {**event, "Records": copy.deepcopy(records[start:])}
            name = str((func.get("config") or func).get("FunctionName", "?"))
            counts[name] += 1
            write_counts()
            timer = threading.Timer(rng.uniform(*REDELIVERY_DELAY_SECONDS), redeliver, (func, again))
            timer.daemon = True
            timer.start()
        return result

    lambda_svc._execute_function = with_redelivery


STREAM_POLL_SECONDS = 0.25  # AWS reads each shard about four times a second
QUEUE_POLL_SECONDS = 0.1  # AWS long-polls a mapping's queue: a message is taken about as soon as it is visible
MAPPINGS_REFRESH_SECONDS = 1.0


def poll_each_mapping() -> None:
    """ministack polls every event source mapping from one thread, and runs a stream batch's function before it reads
    the next mapping: one slow function holds every other table's records back, and a queue's message (a delayed one
    coming due) waits up to a second for the loop. AWS polls each shard of each mapping on its own and long-polls
    queues. Here each DynamoDB stream mapping gets a poller thread of its own (the same poll, with the redelivery and
    the faults put into it), and the loop that is left (queues, Kinesis) runs every `QUEUE_POLL_SECONDS`."""
    from ministack.services import lambda_svc

    poll = lambda_svc._poll_dynamodb_streams
    every_mapping = lambda_svc._iter_all_esms
    own = threading.local()

    def mappings() -> Iterator[tuple[str, str, dict]]:
        """Within a mapping's poller, that mapping alone; elsewhere all of them."""
        uuid = getattr(own, "uuid", None)
        if uuid is None:
            return every_mapping()
        return (entry for entry in every_mapping() if entry[2].get("UUID") == uuid)

    def streams_of_this_poller() -> bool:
        return bool(getattr(own, "uuid", None)) and bool(poll())

    def poller(uuid: str) -> None:
        own.uuid = uuid
        while any(True for _ in mappings()):
            try:
                busy = streams_of_this_poller()
            except Exception:  # as ministack's loop: log it, poll again
                lambda_svc.logger.exception("stream poller of mapping %s failed", uuid)
                busy = False
            if not busy:
                time.sleep(STREAM_POLL_SECONDS)
        started.discard(uuid)

    started: set[str] = set()

    def supervise() -> None:
        while True:
            for _account, _region, mapping in every_mapping():
                uuid = str(mapping.get("UUID", ""))
                if ":dynamodb:" in str(mapping.get("EventSourceArn", "")) and uuid and uuid not in started:
                    started.add(uuid)
                    threading.Thread(target=poller, args=(uuid,), name=f"stream-poller-{uuid}", daemon=True).start()
            lambda_svc._esm_wake.set()  # the loop left to ministack: queues at AWS's pace, not once a second
            time.sleep(QUEUE_POLL_SECONDS)

    lambda_svc._iter_all_esms = mappings
    lambda_svc._poll_dynamodb_streams = streams_of_this_poller
    threading.Thread(target=supervise, name="stream-pollers", daemon=True).start()


EVENT_AGE_SECONDS = (60, limit("lambda-event-age"))


def schedule_problem(name: str, body: dict) -> str:
    """Why Scheduler would refuse this CreateSchedule/UpdateSchedule, or ""."""
    if len(name) > limit("scheduler-name"):
        return (
            f"Value '{name}' at 'name' failed to satisfy constraint: Member must have length less than or equal to 64"
        )
    token = body.get("ClientToken")
    if token is not None and not 1 <= len(str(token)) <= limit("scheduler-client-token"):
        return "Value at 'clientToken' failed to satisfy constraint: Member must have length between 1 and 64"
    payload = str((body.get("Target") or {}).get("Input") or "")
    if len(payload.encode("utf-8")) > limit("scheduler-input-size"):
        return "Value at 'target.input' failed to satisfy constraint: Member must have length less than 262144"
    return ""


def enforce_limits() -> None:
    from ministack.services import lambda_svc, scheduler

    create, update = scheduler._create_schedule, scheduler._update_schedule

    def checked_create(name: str, body: dict) -> object:
        problem = schedule_problem(name, body)
        return scheduler._error(400, "ValidationException", problem) if problem else create(name, body)

    def checked_update(name: str, body: dict) -> object:
        problem = schedule_problem(name, body)
        return scheduler._error(400, "ValidationException", problem) if problem else update(name, body)

    scheduler._create_schedule, scheduler._update_schedule = checked_create, checked_update

    create_function = lambda_svc._create_function
    put_invoke_config = lambda_svc._put_event_invoke_config

    def checked_function(data: dict) -> object:
        size = constants.environment_bytes((data.get("Environment") or {}).get("Variables") or {})
        if size > limit("lambda-environment-size"):
            message = f"Lambda was unable to configure your environment variables because the environment variables you have provided exceeded the 4KB limit. String measured: {size} bytes"  # noqa: E501
            return lambda_svc.error_response_json("InvalidParameterValueException", message, 400)
        return create_function(data)

    def checked_invoke_config(func_name: str, qualifier: str | None, data: dict) -> object:
        age = data.get("MaximumEventAgeInSeconds")
        if age is not None and not EVENT_AGE_SECONDS[0] <= int(age) <= EVENT_AGE_SECONDS[1]:
            message = f"1 validation error detected: Value '{age}' at 'maximumEventAgeInSeconds' failed to satisfy constraint: Member must have value between 60 and 21600"  # noqa: E501
            return lambda_svc.error_response_json("ValidationException", message, 400)
        return put_invoke_config(func_name, qualifier, data)

    lambda_svc._create_function = checked_function
    lambda_svc._put_event_invoke_config = checked_invoke_config


def silence_ttl_reaper() -> None:
    """ministack's own TTL reaper deletes expired items silently (no stream record) within a minute of expiry:
    faster than AWS's TTL, and ahead of precise delete schedules that run in the minute after the due time. The local
    cloud's TTL process (localcloud/ttl.py: a stated delay, AWS's REMOVE record) does the deleting, so the reaper's
    thread is given a clock at the epoch, under which nothing has expired. Other threads keep the real clock."""
    import time as real_time
    from types import SimpleNamespace

    from ministack.services import dynamodb

    def clock() -> float:
        return 0.0 if threading.current_thread().name == "dynamodb-ttl-reaper" else real_time.time()

    dynamodb.time = SimpleNamespace(**{n: getattr(real_time, n) for n in dir(real_time) if not n.startswith("__")})
    dynamodb.time.time = clock


def page_schedule_lists() -> None:
    """ministack's ListSchedules answers the first `MaxResults` (100) schedules and no `NextToken`, so a group of more
    looks smaller than it is (reconcile's sweep reads every schedule of the group). Answer in pages, as AWS does:
    at most `MaxResults`, up to 100, with a `NextToken` while any are left. Only the page's schedules are summarised,
    so reading a group costs what it holds, not its square (ministack summarises all of them for each page)."""

    from ministack.services import scheduler

    def paged(query: dict) -> tuple:
        size = min(int(query.get("MaxResults") or PAGE_SCHEDULES), PAGE_SCHEDULES)
        start = int(query.get("NextToken") or 0)
        everything = {k: v for k, v in query.items() if k not in ("NextToken", "MaxResults")}
        scheduler._ensure_default_group()  # as ministack's ListSchedules does first
        found = [schedule for _, schedule in scheduler._schedules.items() if _listed(schedule, everything)]
        page: dict = {"Schedules": [_summary(schedule) for schedule in found[start : start + size]]}
        if start + size < len(found):
            page["NextToken"] = str(start + size)
        return scheduler._json_resp(200, page)

    scheduler._list_schedules = paged


def _summary(schedule: dict) -> dict:
    """A schedule as ListSchedules lists it (ministack's fields)."""
    fields = ("Arn", "Name", "GroupName", "State", "CreationDate", "LastModificationDate")
    return {name: schedule[name] for name in fields} | {"Target": {"Arn": schedule["Target"].get("Arn", "")}}


def _listed(schedule: dict, query: dict) -> bool:
    """ListSchedules' filters (group, name prefix, state), as ministack applies them."""
    group, prefix, state = query.get("ScheduleGroup"), query.get("NamePrefix", ""), query.get("State")
    return (
        (not group or schedule["GroupName"] == group)
        and (not prefix or schedule["Name"].startswith(prefix))
        and (not state or schedule["State"] == state)
    )


def serve_universal_schedules() -> None:
    """`GET /_localcloud/universal-schedules?region=R`: the schedules of region R whose target is universal, each as
    GetSchedule answers, which the emulators run (localcloud/emulators.py). Read from ministack's store in one
    request a second, rather than through every page of every group's ListSchedules and a GetSchedule for each new
    one: with thousands of schedules, a busy ministack took minutes to answer them all, and schedules fired late."""
    from ministack.services import scheduler

    def answer(query: dict) -> Response:
        region = first(query.get("region"))
        found = [
            {k: v for k, v in schedule.items() if v is not None}  # as GetSchedule answers
            for (_, where, _), schedule in snapshot(scheduler._schedules._data)
            if where == region
            and str((schedule.get("Target") or {}).get("Arn", "")).startswith(constants.UNIVERSAL_TARGET_PREFIX)
        ]
        return json_answer({"Schedules": found})

    serve(UNIVERSAL_SCHEDULES_PATH, answer)


def enforce_iam() -> None:
    from . import iam

    iam.install()


def main() -> None:
    from .recurring import install as fire_recurring_schedules

    window = MinuteWindow(seed())
    patch_ministack(window)
    fire_recurring_schedules(window.instant)
    silence_ttl_reaper()
    ttl.install()  # switched on by the emulators, with their delays
    enforce_limits()
    page_schedule_lists()
    serve_universal_schedules()
    enforce_iam()  # AUTH=true (set by server.Ministack): ministack's IAM, with what it gets wrong put right
    fraction = float(os.environ.get(REDELIVER_VARIABLE, "0") or 0)
    if fraction > 0:  # rule("lambda-stream-redelivery")
        rng = random.Random(seed() + 1)
        patch_stream_delivery(fraction, rng, os.environ.get(REDELIVERY_LOG_VARIABLE))
    fault_rate = float(os.environ.get(faults.FAULTS_VARIABLE, "0") or 0)
    if fault_rate > 0:  # `make soak`: throttling, 5xx and timeouts at a stated rate (localcloud/faults.py)
        faults.install(fault_rate, seed(), os.environ.get(faults.FAULT_LOG_VARIABLE))
    throttle.install()  # after IAM and the faults: the whole firing waits its turn (LOCALCLOUD_SCHEDULER_RATE)
    poll_each_mapping()  # last: each mapping's poller runs the poll as patched above
    from ministack.app import main as ministack_main

    ministack_main()


if __name__ == "__main__":
    main()
