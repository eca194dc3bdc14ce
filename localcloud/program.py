"""Run the repo's `__main__.py` in-process with a stack's config, the way the Pulumi CLI would hand it over."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime.settings import get_root_resource

from .mocks import Backend, RecordingMocks, install

REPO = Path(__file__).resolve().parent.parent


def stack_config(stack: str, project_dir: Path = REPO) -> dict[str, str]:
    """`Pulumi.<stack>.yaml` as the CLI passes it: namespaced keys, strings, objects as JSON."""
    project = yaml.safe_load((project_dir / "Pulumi.yaml").read_text())["name"]
    document = yaml.safe_load((project_dir / f"Pulumi.{stack}.yaml").read_text()) or {}
    result: dict[str, str] = {}
    for key, value in (document.get("config") or {}).items():
        full = key if ":" in key else f"{project}:{key}"
        result[full] = _as_config_string(value)
    return result


def stack_region(stack: str, project_dir: Path = REPO) -> str:
    return stack_config(stack, project_dir).get("aws:region", "eu-west-1")


def run_program(stack: str, project_dir: Path = REPO, backend: Backend | None = None) -> RecordingMocks:
    """Execute the program under recording mocks whose backend creates (or fabricates) each resource; returns what
    it registered and exported."""
    config = stack_config(stack, project_dir)
    mocks = install(stack_region(stack, project_dir), stack=stack, backend=backend)
    pulumi.runtime.set_all_config(config)

    @pulumi.runtime.test
    def execute() -> pulumi.Output[Any]:
        runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")
        # Under mocks the stack never registers its outputs; read what the program exported and resolve it.
        root = get_root_resource()
        exported = dict(getattr(root, "outputs", {}) or {})
        return pulumi.Output.from_input(exported).apply(mocks.stack_outputs.update)

    execute()
    return mocks


def _as_config_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)
