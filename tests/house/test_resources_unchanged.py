"""Refactoring moves code, not resources: every resource of the local stack (the repo's `__main__.py` with
`Pulumi.local.yaml`, every mode and option it sets) keeps its type, logical name and parent, so a deployed stack's
URNs do not change. `resources.local.json` was recorded before the component was split into builders; regenerate it
(`python -m tests.house.test_resources_unchanged`) only for a change that means to add, rename or move a resource,
and say so in the commit."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SNAPSHOT = Path(__file__).with_name("resources.local.json")


def resources(stack: str = "local") -> list[list[str]]:
    from localcloud.program import run_program

    mocks = run_program(stack)
    return sorted([r.type, r.name, r.parent] for r in mocks.by_name.values())


def test_the_local_stack_has_exactly_the_recorded_resources() -> None:
    recorded = json.loads(SNAPSHOT.read_text())
    now = resources()
    assert len(now) > 100  # the whole stack, not an empty run
    missing = [r for r in recorded if r not in now]
    added = [r for r in now if r not in recorded]
    assert (missing, added) == ([], [])


if __name__ == "__main__":
    SNAPSHOT.write_text(json.dumps(resources(), indent=0) + "\n")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
