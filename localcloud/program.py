"""Run the repo's `__main__.py` in-process with a stack's config, the way the Pulumi CLI would hand it over."""

from __future__ import annotations

import runpy
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime.settings import get_root_resource

from .component import ScheduledTableArgs, config_string, fabricated_table, first_cause, tables_from_config
from .interrupts import deferred
from .mocks import Backend, Invoke, RecordingMocks, install

REPO = Path(__file__).resolve().parent.parent


class ConfigError(Exception):
    """The stack's configuration cannot be used; the message names the file and says what to change, so the CLI
    prints it as one line instead of a traceback."""


def config_path(stack: str, project_dir: Path = REPO, config_file: Path | None = None) -> Path:
    """`Pulumi.<stack>.yaml` beside the project, or the file given instead (as `pulumi --config-file` would)."""
    return config_file if config_file is not None else project_dir / f"Pulumi.{stack}.yaml"


def _project_name(project_dir: Path) -> str:
    try:
        project = yaml.safe_load((project_dir / "Pulumi.yaml").read_text())["name"]
    except (OSError, yaml.YAMLError, TypeError, KeyError) as error:
        raise ConfigError(f"{project_dir / 'Pulumi.yaml'}: not a Pulumi project file with a name ({error})") from None
    return str(project)


def stack_config(stack: str, project_dir: Path = REPO, config_file: Path | None = None) -> dict[str, str]:
    """`Pulumi.<stack>.yaml` as the CLI passes it: namespaced keys, strings, objects as JSON."""
    project = _project_name(project_dir)
    path = config_path(stack, project_dir, config_file)
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        if project_dir != REPO and config_file is None:
            return {}  # as `pulumi up` on a new stack: a user's project may have no settings for it yet
        known = ", ".join(sorted(p.name.split(".")[1] for p in project_dir.glob("Pulumi.*.yaml"))) or "none"
        raise ConfigError(f"{path}: no such stack configuration (stacks here: {known})") from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: not valid YAML: {error.problem or error}") from None
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"{path}: {' '.join(str(error).split())}") from None
    config = document.get("config") if isinstance(document, dict) else None
    if not isinstance(document, dict) or not isinstance(config or {}, dict):
        raise ConfigError(f"{path}: must be a mapping with a 'config' mapping of keys to values")
    result: dict[str, str] = {}
    for key, value in (config or {}).items():
        full = key if ":" in key else f"{project}:{key}"
        result[full] = config_string(value)
    return result


def stack_region(stack: str, project_dir: Path = REPO, config_file: Path | None = None) -> str:
    return stack_config(stack, project_dir, config_file).get("aws:region", "eu-west-1")


def stack_tables(
    stack: str, project_dir: Path = REPO, config_file: Path | None = None
) -> list[tuple[str, ScheduledTableArgs]]:
    """The tables the stack's configuration describes, read and checked as the program does (`ScheduledTableArgs`
    refuses bad values), without running it: a configuration error is found before any cloud is started."""
    config = stack_config(stack, project_dir, config_file)
    project = _project_name(project_dir)
    if project_dir != REPO and not {f"{project}:tables", f"{project}:mode"} & set(config):
        return []  # a user's program that builds its tables in Python, not from its stack file
    pulumi.runtime.set_all_config(config)
    try:
        return tables_from_config(pulumi.Config(project))
    except (ValueError, pulumi.RunError) as error:
        raise ConfigError(f"{config_path(stack, project_dir, config_file)}: {error}") from None


@contextmanager
def _importable(folder: Path) -> Iterator[None]:
    """The program's folder first on the import path while it runs, as when Python runs its `__main__.py` (so the
    Pulumi CLI does): a program imports its own modules (this repo's `components`, a user's helpers) from there."""
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with suppress(ValueError):
            sys.path.remove(entry)


def run_program(
    stack: str,
    project_dir: Path = REPO,
    backend: Backend | None = None,
    config_file: Path | None = None,
    lookups: Mapping[str, Invoke] | None = None,
) -> RecordingMocks:
    """Execute the program under recording mocks whose backend creates (or fabricates) each resource; returns what
    it registered and exported. The program's own checks raise ValueError naming the setting and the fix; those
    become a `ConfigError` naming the file too."""
    config = stack_config(stack, project_dir, config_file)
    region = stack_region(stack, project_dir, config_file)
    if lookups is None:  # nothing to ask: answer as the fabricating backend would
        lookups = {"aws:dynamodb/getTable:getTable": lambda args: fabricated_table(args["name"], region)}
    mocks = install(region, project=_project_name(project_dir), stack=stack, backend=backend, lookups=lookups)
    pulumi.runtime.set_all_config(config)

    @pulumi.runtime.test
    def execute() -> pulumi.Output[Any]:
        try:
            with _importable(project_dir):
                runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")
        except (ValueError, pulumi.RunError) as error:
            raise ConfigError(f"{config_path(stack, project_dir, config_file)}: {error}") from None
        # Under mocks the stack never registers its outputs; read what the program exported and resolve it.
        root = get_root_resource()
        exported = dict(getattr(root, "outputs", {}) or {})
        return pulumi.Output.from_input(exported).apply(mocks.stack_outputs.update)

    with deferred("stopping once the program has run (a few seconds)"):
        try:
            execute()
        except ConfigError:
            raise
        except Exception as error:
            # A check made when a value resolves (a target ARN in another region) or by the engine (a duplicate
            # URN) fails inside Pulumi's machinery: the same one line as a check made at construction.
            root = first_cause(error)
            if not isinstance(root, ValueError):
                raise
            raise ConfigError(f"{config_path(stack, project_dir, config_file)}: {root}") from None
    return mocks
