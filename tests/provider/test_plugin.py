"""The plugin folder as `pulumi package add` uses it: PulumiPlugin.yaml says Python, requirements.txt installs this
repository's package into the venv Pulumi makes there, and `python provider/ <engine>` (what Pulumi's Python host
runs) starts a provider that serves the same schema over gRPC as the in-process one."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import grpc
import pytest
import yaml
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from .support import ROOT, schema

PLUGIN = ROOT / "provider"


def test_the_manifest_declares_a_python_plugin() -> None:
    assert yaml.safe_load((PLUGIN / "PulumiPlugin.yaml").read_text()) == {"runtime": "python"}
    assert (PLUGIN / "__main__.py").is_file()  # the Python host runs a plugin folder's __main__.py
    assert not (PLUGIN / "pyproject.toml").exists()  # else the host would build and run that project instead


def test_requirements_install_this_repository_from_the_plugin_folder() -> None:
    lines = (PLUGIN / "requirements.txt").read_text().splitlines()
    requirements = [line for line in lines if line.strip() and not line.startswith("#")]
    assert requirements == [".."]  # pip runs in provider/: the repository root
    pyproject = tomllib.loads((PLUGIN / ".." / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == "scheduled-table"


def test_the_plugin_folder_is_not_the_stack_program() -> None:
    # The repo root is a Pulumi program (Pulumi.yaml, __main__.py); the plugin lives beside it, not in it.
    assert (ROOT / "Pulumi.yaml").is_file() and not (PLUGIN / "Pulumi.yaml").exists()


@pytest.mark.slow  # starts interpreters of its own: `make test` runs it, `make unit` does not
def test_the_plugin_process_serves_the_schema(tmp_path: Path) -> None:
    # Pulumi's Python host runs `python <plugin folder> <engine address>`, working directory the user's project.
    process = subprocess.Popen(
        [sys.executable, str(PLUGIN), "127.0.0.1:1"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = _first_line(process)
        assert port.strip().isdigit(), f"the plugin printed {port!r}, not its port: {_stderr(process)}"
        with grpc.insecure_channel(f"127.0.0.1:{port.strip()}") as channel:
            response = provider_pb2_grpc.ResourceProviderStub(channel).GetSchema(
                provider_pb2.GetSchemaRequest(version=0), timeout=120
            )
        assert json.loads(response.schema) == schema()
    finally:
        process.kill()
        process.wait()


def _first_line(process: subprocess.Popen[str]) -> str:
    """The plugin's first line of output (its port), or '' if it exits or prints nothing within a generous bound
    (a plugin that hangs must fail the test, not hang it)."""
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline() if process.stdout else ""))
    reader.start()
    reader.join(timeout=120)
    return line[0] if line else ""


def _stderr(process: subprocess.Popen[str]) -> str:
    process.kill()
    _, err = process.communicate()
    return err[-2000:]
