"""What each Lambda entry point compiles on a cold start: our source is compiled on every cold start (Lambda's code
directory is read-only and the archive ships no bytecode), so a module a cold invocation does not need must not be
imported with the handler. Each case imports the handler in a fresh interpreter and lists the modules it loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HANDLERS = Path(__file__).resolve().parents[2] / "handlers"

PROBE = """
import json, sys
before = set(sys.modules)
for name in sys.argv[1].split(","):
    __import__(name)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def loaded(modules: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, modules], cwd=HANDLERS, capture_output=True, text=True, check=True
    ).stdout
    return set(json.loads(out))


@pytest.mark.parametrize(
    ("entry", "never"),
    [
        # the release and recurrence modules only for tables that use them; templates only for email targets
        ("eventbridge", {"st_core.release", "st_core.recurrence", "st_core.templates", "st_core.shapes"}),
        ("ttl", {"st_core.schedules", "st_core.release", "st_core.recurrence", "st_core.templates", "st_core.shapes"}),
        # the tick: not the assigner, nor the stream batch machinery only the assigner uses
        # (nor the poison queue's code, which only a task that failed for good needs)
        (
            "polling",
            {"polling_assign", "st_core.batch", "st_core.idempotency", "st_core.poison", "st_core.templates"}
            | {"st_core.shapes"},
        ),
        # the assigner: not the tick's module (its shard scanning), nor email templates
        ("polling_assign", {"polling", "st_core.dispatch", "st_core.templates", "st_core.shapes"}),
        ("aggregate", {"st_core.templates", "st_core.dispatch", "st_core.shapes"}),
        # the releaser: not the schedules module, which only the scheduling function (eventbridge) uses
        ("release", {"st_core.recurrence", "st_core.schedules", "st_core.templates", "st_core.shapes"}),
    ],
)
@pytest.mark.slow  # starts interpreters of its own: `make test` runs it, `make unit` does not
def test_a_cold_start_compiles_only_what_the_entry_point_needs(entry: str, never: set[str]) -> None:
    found = loaded(entry)
    assert entry in found
    assert not (found & never), f"{entry} imports {sorted(found & never)} at cold start"


DATACLASSES = """
import dataclasses, json, os, sys
before = set(sys.modules)
for name in sys.argv[1].split(","):
    __import__(name)
here = os.getcwd()
ours = [m for n, m in sys.modules.items() if n not in before and (getattr(m, "__file__", "") or "").startswith(here)]
print(json.dumps(sorted(
    f"{m.__name__}.{name}"
    for m in ours
    for name, value in vars(m).items()
    if isinstance(value, type) and value.__module__ == m.__name__ and dataclasses.is_dataclass(value)
)))
"""


@pytest.mark.slow  # starts interpreters of its own: `make test` runs it, `make unit` does not
@pytest.mark.parametrize("entry", ["eventbridge", "ttl", "polling", "polling_assign", "aggregate", "release"])
def test_a_cold_start_builds_no_dataclass(entry: str) -> None:
    """A dataclass generates the source of its methods and compiles it when its module is imported (0.5-0.9 ms a
    class, on every cold start): the records on a cold path are NamedTuples or plain classes."""
    out = subprocess.run(
        [sys.executable, "-c", DATACLASSES, entry], cwd=HANDLERS, capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_the_configuration_shapes_are_still_there_for_whoever_asks() -> None:
    """The shapes are built on first use (a test reading a shape's keys), not at import."""
    from st_core import config

    assert "arn" in config.TargetConfig.__annotations__
    with pytest.raises(AttributeError):
        _ = config.NoSuchShape
