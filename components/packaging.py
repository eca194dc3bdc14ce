"""Where the Lambda code lives (beside the component in this repo, inside it when installed), its archive, and the
handler modules the component, the operator's command and the local cloud read instead of copying them."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pulumi

_RUNTIME_PACKAGE = "st_core"
_ALIAS = "scheduled_table_runtime"


def handlers_dir() -> Path:
    """`scheduled_table/handlers` in an installed package, `<repo>/handlers` in a checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "handlers", here.parent / "handlers"):
        if (candidate / _RUNTIME_PACKAGE / "__init__.py").is_file():
            return candidate
    raise FileNotFoundError(f"handler code not found beside {here}: reinstall scheduled-table")


def handler_files(root: Path) -> dict[str, Path]:
    """Archive member name -> file: every .py under the handlers folder, nothing else (no caches, no tests)."""
    return {
        path.relative_to(root).as_posix(): path
        for path in sorted(root.rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def handler_archive(runtime: str | None = None) -> pulumi.AssetArchive:
    """The handlers' source, plus their bytecode when `runtime` is this interpreter's Python (see
    `bytecode_runtime`): without it, Lambda compiles every module on each cold start, since its code directory is
    read-only and keeps nothing it compiles. `None`: the source alone."""
    files = handler_files(handlers_dir())
    if runtime is not None and runtime == bytecode_runtime():
        files = {**files, **handler_bytecode()}
    return pulumi.AssetArchive({name: pulumi.FileAsset(str(path)) for name, path in sorted(files.items())})


def bytecode_runtime() -> str | None:
    """The Lambda runtime whose Python loads this interpreter's bytecode (`python3.11` under CPython 3.11), or None
    (another implementation). A `.pyc` holds one minor version's bytecode, named by its cache tag
    (`cpython-311`), and any other Python ignores it, so only this runtime gains from it."""
    if sys.implementation.name != "cpython":
        return None
    return f"python{sys.version_info.major}.{sys.version_info.minor}"


# Run in a child interpreter with a fixed hash seed (PYTHONHASHSEED=0), so nothing whose order follows the string
# hashes can vary between deploys: a set tested with `in` compiles to a frozenset constant (CPython 3.11 and later
# marshal those sorted, and the tests check that two processes with different seeds write the same bytes). The same
# source and the same Python then give the same bytes, so two deploys (or two team members on the same Python)
# upload the same archive and Pulumi sees no change. `dfile` is the member name, not this machine's path: the
# import system sets each code object's file name to where the source is found when it loads the `.pyc`.
_COMPILE = """\
import base64, json, os, py_compile, sys, tempfile
root, names = sys.argv[1], sys.argv[2:]
found = {}
with tempfile.TemporaryDirectory() as scratch:
    target = os.path.join(scratch, "module.pyc")
    for name in names:
        py_compile.compile(
            os.path.join(root, name), cfile=target, dfile=name, doraise=True, optimize=0,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        with open(target, "rb") as compiled:
            found[name] = base64.b64encode(compiled.read()).decode()
print(json.dumps(found))
"""


def compile_handlers(root: Path) -> dict[str, bytes]:
    """Archive member name -> the `.pyc` of every module under `root`, for this interpreter's Python: unchecked
    hash-based (PEP 552), so the import system loads it without comparing it with the source's time or hash (the
    archive's file times are not the source's, and a hash check would read and hash every source file again).
    The source ships beside it unchanged, so tracebacks still show its lines."""
    sources = handler_files(root)
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHON")}
    env["PYTHONHASHSEED"] = "0"
    done = subprocess.run(
        [sys.executable, "-I", "-c", _COMPILE, str(root), *sources],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    tag = sys.implementation.cache_tag
    compiled: dict[str, str] = json.loads(done.stdout)
    result: dict[str, bytes] = {}
    for name, data in compiled.items():
        folder, _, file = name.rpartition("/")
        member = f"{folder}/__pycache__" if folder else "__pycache__"
        result[f"{member}/{file.removesuffix('.py')}.{tag}.pyc"] = base64.b64decode(data)
    return result


@cache
def handler_bytecode() -> dict[str, Path]:
    """Archive member name -> `.pyc` file of the shipped handlers, compiled once per program. Pulumi archives take
    files, not bytes, so they are written to the user's cache folder, in a folder named by their content (Pulumi
    reads them there during the deploy); files already there are checked, and rewritten when their bytes differ.
    Where that folder cannot be written, the functions get the source alone, with a warning, rather than a failed
    deploy."""
    compiled = compile_handlers(handlers_dir())
    digest = hashlib.sha256()
    for name, data in sorted(compiled.items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache_home / "scheduled-table" / "bytecode" / digest.hexdigest()[:32]
    paths: dict[str, Path] = {}
    try:
        for name, data in compiled.items():
            path = folder / name
            if not path.is_file() or path.read_bytes() != data:
                path.parent.mkdir(parents=True, exist_ok=True)
                partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                partial.write_bytes(data)
                partial.replace(path)
            paths[name] = path
    except OSError as error:
        pulumi.log.warn(
            f"scheduled-table: the handlers' bytecode could not be written under {cache_home} ({error}); the "
            "functions get their source alone and compile it on each cold start (set XDG_CACHE_HOME to a "
            "writable folder, or lambda_bytecode=False to silence this)"
        )
        return {}
    return paths


@cache
def runtime_module(name: str) -> ModuleType:
    """A module of the shipped handler runtime (e.g. "templates"), so construction-time checks run the same code
    the Lambda runs instead of a copy of it."""
    package_dir = handlers_dir() / _RUNTIME_PACKAGE
    if _ALIAS not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            _ALIAS, package_dir / "__init__.py", submodule_search_locations=[str(package_dir)]
        )
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[_ALIAS] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"{_ALIAS}.{name}")


class ShadowedError(ImportError):
    """Another module of a handler module's name comes first on the path."""


def handler_module(name: str) -> ModuleType:
    """A handler module or package (e.g. `ttl`, `backfill`) or a package's module (`backfill.resources`), imported as
    the Lambda imports it: the handlers folder on the path (appended: nothing of the caller's is shadowed), its
    `st_core` imports resolved there. Raises `ShadowedError` when another module of that name is found first."""
    folder = handlers_dir()
    if str(folder) not in sys.path:
        sys.path.append(str(folder))
    module = importlib.import_module(name)
    path = folder.joinpath(*name.split("."))
    shipped = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    if Path(str(module.__file__)).resolve() != shipped.resolve():
        raise ShadowedError(f"another module named {name} ({module.__file__}) shadows scheduled-table's")
    return module


# The names and limits the handlers share with everything else (handlers/st_core/constants.py) and the handlers'
# reading of an AWS error's code, loaded from the shipped files. The type checker reads the same files from the
# handlers' folder (mypy_path), so every use is checked against the real names.
if TYPE_CHECKING:
    from st_core import constants as constants
    from st_core.errors import error_code as error_code
else:
    constants = runtime_module("constants")
    error_code = runtime_module("errors").error_code
