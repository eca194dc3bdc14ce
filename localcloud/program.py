"""Run the repo's `__main__.py` in-process with a stack's config, the way the Pulumi CLI would hand it over."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pulumi
import yaml

from .mocks import RecordingMocks, install

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


def run_program(stack: str, project_dir: Path = REPO) -> RecordingMocks:
    """Execute the program under recording mocks; returns what it registered."""
    config = stack_config(stack, project_dir)
    region = config.get("aws:region", "eu-west-1")
    mocks = install(region, stack=stack)
    pulumi.runtime.set_all_config(config)

    @pulumi.runtime.test
    def execute() -> None:
        runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")

    execute()
    return mocks


def _as_config_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)
