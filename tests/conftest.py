"""Shared fixtures: fake AWS credentials in an explicit region, so no test can reach a real account."""

from __future__ import annotations

import contextlib
import gc
import os
from pathlib import Path

import pytest

REGION = "eu-west-1"


@pytest.fixture(autouse=True)
def _fake_aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)


TESTS = Path(__file__).resolve().parent

# The garbage collector, tuned for a test process and nothing else. A worker holds millions of long-lived objects
# (pulumi_aws's modules, moto's and botocore's models) and every test makes hundreds of thousands more (a moto
# backend, clients, Pulumi's resources): with CPython's default thresholds (700, 10, 10) a worker spent a fifth of
# its CPU in the collector, most of it in full collections walking the same long-lived objects again (measured
# with gc.callbacks over tests/handlers, 2026-11-26: 22.5 of 112 s). What is loaded by the end of collection is
# moved out of the collector's sight (`gc.freeze`) and young objects are collected less often. No code under test
# runs in this process in production; the handlers' and the component's behaviour does not depend on it.
GC_THRESHOLDS = (50_000, 20, 20)


def pytest_configure(config: pytest.Config) -> None:
    _skip_pulumi_stack_traces()


def _skip_pulumi_stack_traces() -> None:
    """Pulumi's SDK records, for every resource registered, the call stack that made it (`traceback.extract_stack`
    and a file URI per frame) and sends it to the engine for its error messages. Under `set_mocks` nothing reads it,
    and it was 6% of the fast tests' CPU and 15% of the component tests' (cProfile over `make unit`'s tests on one
    worker, 2026-11-27: 20.8 of 324 s). An empty trace is what the SDK itself sends when it finds no user frame. If a
    later SDK moves the function, this does nothing and the tests only run slower."""
    from pulumi.runtime import resource
    from pulumi.runtime.proto import source_pb2

    if callable(getattr(resource, "_get_stack_trace", None)):
        setattr(resource, "_get_stack_trace", source_pb2.StackTrace)  # noqa: B010 (a private name: no attribute access)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


# Kinds of test by where they live, so `make unit` can run the fast part (`-m "not e2e and not model and not slow"`)
# while `make test` runs everything. Registered in pyproject.toml (`--strict-markers` refuses any other).
KINDS = {
    "e2e": ("e2e", "localcloud"),  # a local cloud (ministack) in a process of its own, the real stack deployed
    # builds the wheel and installs it into fresh virtual environments; builds the docs site and renders it in Chromium
    "slow": ("packaging", "docs"),
}


def kind_of(folder: str) -> str | None:
    """The kind (`KINDS`) of the tests in this folder directly under tests/, if any."""
    return next((kind for kind, folders in KINDS.items() if folder in folders), None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        kind = kind_of(Path(str(item.path)).resolve().relative_to(TESTS).parts[0])
        if kind:
            item.add_marker(kind)
        # hypothesis: the state machines (30 sequences per mode) and every property checked over generated inputs
        if item.path.name.startswith("test_model_") or hasattr(getattr(item, "function", None), "hypothesis"):
            item.add_marker("model")


# The local cloud's tests wait far more than they compute (Scheduler's minute, the TTL process: about a third of
# their time is CPU), and the fixtures start each ministack on a free loopback port with scratch directories of its
# own, so each of their folders is a group of its own, on a worker of its own: the waits of tests/localcloud (mostly
# `up --stay`) overlap those of tests/e2e instead of adding to them (2026-11-27, both folders on a shared machine:
# 655 s one after the other with -n 0, tests/localcloud 171 s of it; 420 and 470 s with -n 2 --dist loadgroup).
def group_of(nodeid: str) -> str:
    """The xdist group of a test (its id, relative to the repository): its folder for the e2e kind, else its kind
    (`KINDS`), or the test itself."""
    parts = nodeid.split("/")
    kind = len(parts) > 2 and parts[0] == "tests" and kind_of(parts[1])
    return (parts[1] if kind == "e2e" else kind) or nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`make test` runs pytest with three workers (`-n 3 --dist loadgroup`): each group (`group_of`) runs on one
    worker, so the tests that share a local cloud share one ministack and the wheel is built once; the rest are
    shared. The two local-cloud groups and the slow kind, the largest, go first, one to a worker (xdist's default
    order by size); a worker takes single tests once its group is all but done. The groups come from the test ids:
    xdist 3.8 under pytest 9 no longer carries an `xdist_group` marker into the ids it schedules by, so marked
    groups were spread over the workers (each then started ministacks of its own)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByKind(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return ByKind(config, log)


# AWS runs Scheduler, Lambda and DynamoDB on machines of their own; the local cloud shares two cores with the other
# test workers, which are busy computing while it waits for Scheduler's minute. Its timing is what tests/e2e judges
# (lateness bounds, a past-due item sent within 30 s, drift made while an item is 20 s from due), so the worker goes
# ahead of the others while it runs those tests (and so do the ministacks and functions it starts, which inherit the
# priority) where the machine allows it (root may raise a priority; others keep the default), and back to where it
# began for any other test. tests/localcloud's waits are deadlines of minutes: it keeps the default, so `up --stay`
# and the processes its tests start do not slow tests/e2e's local cloud either.
E2E_PRIORITY = -5
BASE_PRIORITY = os.getpriority(os.PRIO_PROCESS, 0)


def pytest_runtest_setup(item: pytest.Item) -> None:
    wanted = min(E2E_PRIORITY, BASE_PRIORITY) if group_of(item.nodeid) == "e2e" else BASE_PRIORITY
    if os.getpriority(os.PRIO_PROCESS, 0) == wanted:
        return
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, wanted)


def pytest_terminal_summary(terminalreporter: object) -> None:
    """The fault-injection figures, after the run (the policy table prints from tests/policy)."""
    from tests.handlers.faults import REPORTS

    if not REPORTS:
        return
    write = terminalreporter.write_line  # type: ignore[attr-defined]
    terminalreporter.write_sep("-", "fault injection: 20% of AWS calls throttled, 5xx or timed out")  # type: ignore[attr-defined]
    header = ("handler", "AWS calls", "faults", "records", "actions", "duplicates", "losses", "deliveries")
    write("  ".join(f"{h:>11}" for h in header))
    for r in REPORTS:
        row = (r.handler, r.calls, r.faults, r.records, r.actions, r.duplicates, r.losses, r.deliveries)
        write("  ".join(f"{v:>11}" for v in row))
