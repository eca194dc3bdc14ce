"""Where the Lambda code lives (beside the component in this repo, inside it when installed), its archive, and the
handler modules the component, the operator's command and the local cloud read instead of copying them."""

from __future__ import annotations

import importlib.util
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


def handler_archive() -> pulumi.AssetArchive:
    return pulumi.AssetArchive(
        {name: pulumi.FileAsset(str(path)) for name, path in handler_files(handlers_dir()).items()}
    )


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


# The names and limits the handlers share with everything else (handlers/st_core/constants.py) and the handlers'
# reading of an AWS error's code, loaded from the shipped files. The type checker reads the same files from the
# handlers' folder (mypy_path), so every use is checked against the real names.
if TYPE_CHECKING:
    from st_core import constants as constants
    from st_core.errors import error_code as error_code
else:
    constants = runtime_module("constants")
    error_code = runtime_module("errors").error_code
