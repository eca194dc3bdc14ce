"""Run the repo's `__main__.py` in-process with a stack's config, the way the Pulumi CLI would hand it over."""

from __future__ import annotations

import runpy
import sys
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime.settings import get_root_resource

from .component import (
    ScheduledTableArgs,
    config_string,
    fabricated_table,
    first_cause,
    runtime_module,
    tables_from_config,
)
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
        raise ConfigError(
            f"{project_dir / 'Pulumi.yaml'}: not a Pulumi project file with a name ({error}); write one beside "
            "__main__.py with two lines, `name: my-app` and `runtime: python`, or name the program's folder with "
            "--program DIR"
        ) from None
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
    if project_dir != REPO and not _reads_tables(config, project_dir):
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

    def mistake(error: BaseException) -> ConfigError:
        return ConfigError(f"{where(error, stack, project_dir, config_file)}: {error}")

    @pulumi.runtime.test
    def execute() -> pulumi.Output[Any]:
        try:
            with _importable(project_dir):
                runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")
        except (ValueError, pulumi.RunError) as error:
            raise mistake(error) from None
        except TypeError as error:
            if not _raised_by_the_component(error):
                raise  # a mistake of the program's own code: its traceback says more than one line could
            raise mistake(error) from None
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
            raise mistake(root) from None
    return mocks


def _component_dirs() -> list[Path]:
    """Where the component, its handlers' runtime and the local cloud live: code a user's mistake passes through,
    never the place to point them at."""
    return [
        Path(sys.modules[ScheduledTableArgs.__module__].__file__ or "").parent,
        Path(runtime_module("templates").__file__ or "").parents[1],
        Path(__file__).parent,
    ]


def _raised_by_the_component(error: BaseException) -> bool:
    """A TypeError the component raised itself (an unknown keyword of `ScheduledTableArgs(...)`, with its fix), not
    one of the program's own code."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and any(Path(frames[-1].filename).is_relative_to(d) for d in _component_dirs())


def where(error: BaseException, stack: str, project_dir: Path = REPO, config_file: Path | None = None) -> str:
    """Where the mistake behind `error` is, for the one line the CLI prints. The stack file when the error came from
    reading it (`tables_from_config`), or when the program builds its tables from it and a value was refused (a
    ValueError: the values are the stack file's); else the program's own file and line the error passed through
    last (its `__main__.py` or a module of its own: a misspelled keyword, a value written in Python); else, for a
    check made once a value resolved (no line of the program is on the stack then), the program's `__main__.py`."""
    frames = traceback.extract_tb(error.__traceback__)
    reading = Path(tables_from_config.__code__.co_filename)
    from_stack_file = project_dir == REPO or _reads_tables(stack_config(stack, project_dir, config_file), project_dir)
    if any(Path(frame.filename) == reading for frame in frames) or (from_stack_file and isinstance(error, ValueError)):
        return str(config_path(stack, project_dir, config_file))
    outside = [Path(sys.prefix), Path(sys.base_prefix), *_component_dirs()]
    own = [
        frame
        for frame in frames
        if Path(frame.filename).is_relative_to(project_dir)
        and not any(Path(frame.filename).is_relative_to(folder) for folder in outside)
    ]
    if own:
        return f"{own[-1].filename}:{own[-1].lineno}"
    return str(config_path(stack, project_dir, config_file) if from_stack_file else project_dir / "__main__.py")


def _reads_tables(config: Mapping[str, str], project_dir: Path) -> bool:
    """Whether the stack file describes the program's tables (`tables:` or a single table's `mode:`)."""
    project = _project_name(project_dir)
    return bool({f"{project}:tables", f"{project}:mode"} & set(config))
