"""The functions' archive: the handlers' source, plus bytecode Lambda loads without compiling when the deploying
Python is the function's runtime, the same bytes from every deploy on that Python."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.args import LAMBDA_RUNTIMES
from components.packaging import (
    bytecode_runtime,
    compile_handlers,
    handler_archive,
    handler_bytecode,
    handler_files,
    handlers_dir,
)

# Imports every module named on the command line from the current directory (the extracted archive) and reports,
# for each, where its code came from: the shipped `.pyc` it found, and whether the source's own lines ran.
IMPORT_ALL = """\
import importlib, json, os, sys
sys.dont_write_bytecode = True
sys.path.insert(0, os.getcwd())
found = {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    cached = module.__spec__.cached
    found[name] = {"cached": cached if cached and os.path.isfile(cached) else None,
                   "source_ran": hasattr(module, "SOURCE_RAN")}
print(json.dumps(found))
"""


def extract(archive: pulumi.AssetArchive, into: Path) -> list[str]:
    """Lay the archive's members out as Lambda's /var/task would; their names."""
    for name, asset in archive.assets.items():
        assert isinstance(asset, pulumi.FileAsset)
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(str(asset.path), target)
    return sorted(archive.assets)


def module_name(member: str) -> str:
    return member.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


@pytest.mark.slow  # starts interpreters of its own: `make test` runs it, `make unit` does not
def test_a_function_on_the_deploying_pythons_runtime_loads_every_module_from_the_shipped_bytecode(
    tmp_path: Path,
) -> None:
    # GIVEN the archive for the runtime of the Python running the deploy, laid out as Lambda's code directory
    runtime = bytecode_runtime()
    assert runtime is not None
    members = extract(handler_archive(runtime), tmp_path)
    sources = [m for m in members if m.endswith(".py")]
    tag = sys.implementation.cache_tag
    # THEN every module has its bytecode beside it, for this Python, unchecked, of exactly the shipped source
    for source in sources:
        folder, _, file = source.rpartition("/")
        pyc = f"{folder + '/' if folder else ''}__pycache__/{file.removesuffix('.py')}.{tag}.pyc"
        assert pyc in members, pyc
        data = (tmp_path / pyc).read_bytes()
        assert data[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(data[4:8], "little") == 0b01  # hash-based, not checked against the source
        assert data[8:16] == importlib.util.source_hash((tmp_path / source).read_bytes())
    assert len(members) == 2 * len(sources)
    # WHEN each source is changed after packaging (so a module compiled from its source would show it) and every
    # module is imported there without writing bytecode
    for source in sources:
        with (tmp_path / source).open("a") as changed:
            changed.write("\nSOURCE_RAN = True\n")
    result = subprocess.run(
        [sys.executable, "-I", "-c", IMPORT_ALL, *map(module_name, sources)],
        cwd=tmp_path,
        env={"AWS_DEFAULT_REGION": "eu-west-1", "PATH": os.environ.get("PATH", "")},
        capture_output=True,
        text=True,
        check=False,
    )
    # THEN each one came from its shipped bytecode, none from its source
    assert result.returncode == 0, result.stderr
    found: dict[str, dict[str, Any]] = json.loads(result.stdout)
    assert "eventbridge" in found and "st_core.dispatch" in found
    for name, how in found.items():
        assert how["cached"] is not None and how["cached"].startswith(str(tmp_path)), name
        assert not how["source_ran"], name


def test_a_function_on_another_runtime_gets_the_source_alone() -> None:
    source = sorted(handler_files(handlers_dir()))
    others = sorted(LAMBDA_RUNTIMES - {bytecode_runtime()})
    assert others
    for runtime in [*others, None]:
        assert sorted(handler_archive(runtime).assets) == source, runtime


def test_the_component_ships_bytecode_unless_told_not_to(build: Callable[..., Any]) -> None:
    runtime = bytecode_runtime()
    with_bytecode = build(lambda_runtime=runtime).one("rem-scheduler").inputs["code"].assets
    without = build(lambda_runtime=runtime, lambda_bytecode=False).one("rem-scheduler").inputs["code"].assets
    other = build(lambda_runtime="python3.14").one("rem-scheduler").inputs["code"].assets

    assert any(name.endswith(".pyc") for name in with_bytecode)
    assert sorted(without) == sorted(other) == sorted(handler_files(handlers_dir()))


# A set tested with `in` compiles to a frozenset constant, whose order in memory follows the string hashes and so
# the hash seed.
SET_CONSTANT = "def due(kind):\n    return kind in {" + ", ".join(f'"kind{n}"' for n in range(40)) + "}\n"

DIGEST = """\
import hashlib, sys
from pathlib import Path
from components.packaging import compile_handlers
digest = hashlib.sha256()
for name, data in sorted(compile_handlers(Path(sys.argv[1])).items()):
    digest.update(name.encode() + data)
print(digest.hexdigest())
"""


@pytest.mark.slow  # starts interpreters of its own: `make test` runs it, `make unit` does not
def test_the_bytecode_is_the_same_bytes_from_any_checkout_and_process(tmp_path: Path) -> None:
    # GIVEN the shipped handlers, plus a module with a set constant, in two checkouts (two team members' folders)
    roots = [tmp_path / "ada" / "handlers", tmp_path / "grace" / "src" / "handlers"]
    for root in roots:
        shutil.copytree(handlers_dir(), root, ignore=shutil.ignore_patterns("__pycache__"))
        (root / "kinds.py").write_text(SET_CONSTANT)
    # WHEN each compiles them in a process with its own hash seed
    first, second = (
        subprocess.run(
            [sys.executable, "-c", DIGEST, str(root)],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed, root in zip((1, 2), roots, strict=True)
    )
    # THEN both get the same bytes, so Pulumi sees the same archive
    assert len(first) == 64
    assert first == second


def test_the_bytecode_is_compiled_for_this_python() -> None:
    compiled = compile_handlers(handlers_dir())
    assert all(name.endswith(f".{sys.implementation.cache_tag}.pyc") for name in compiled)
    assert len(compiled) == len(handler_files(handlers_dir()))
    assert len({hashlib.sha256(data).digest() for data in compiled.values()}) > 1


def test_a_cache_folder_that_cannot_be_written_gives_the_source_alone_not_a_failed_deploy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, build: Callable[..., Any]
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    handler_bytecode.cache_clear()
    try:
        code = build(lambda_runtime=bytecode_runtime()).one("rem-scheduler").inputs["code"]
    finally:
        handler_bytecode.cache_clear()

    assert sorted(code.assets) == sorted(handler_files(handlers_dir()))
    assert "bytecode could not be written" in caplog.text


# Puts a folder holding another `backfill` package first on the path, then asks for the shipped one's module.
SHADOWED = """\
import sys
sys.path.insert(0, sys.argv[1])
from components.packaging import ShadowedError, handler_module
try:
    handler_module("backfill.resources")
except ShadowedError as error:
    print(error)
"""


@pytest.mark.slow  # starts an interpreter of its own
def test_a_handler_packages_module_is_loaded_from_the_shipped_folder_and_a_shadowing_one_refused(
    tmp_path: Path,
) -> None:
    """The component reads the backfill package's modules by name (`backfill.resources`), as it reads a flat handler
    module (`ttl`): from the shipped handlers, never from a same-named package the user's path finds first."""
    from components.packaging import handler_module

    shipped = handlers_dir() / "backfill"
    assert Path(str(handler_module("backfill").__file__)) == shipped / "__init__.py"
    assert Path(str(handler_module("backfill.resources").__file__)) == shipped / "resources.py"
    # GIVEN the user's own `backfill` package first on the path
    (tmp_path / "backfill").mkdir()
    (tmp_path / "backfill" / "__init__.py").write_text("")
    (tmp_path / "backfill" / "resources.py").write_text("RESOURCES = ()\n")
    root = Path(__file__).resolve().parents[2]
    refused = subprocess.run(
        [sys.executable, "-c", SHADOWED, str(tmp_path)], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    # THEN the component refuses it, naming the module that shadows its own
    assert "another module named backfill.resources" in refused
    assert str(tmp_path / "backfill" / "resources.py") in refused
