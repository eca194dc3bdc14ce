"""Every package of the source tree ships in the wheel: pyproject.toml lists its packages by hand (the layout maps
components/ to scheduled_table), so a new sub-package missing from that list installs as an ImportError in users'
projects while every test run from the repository passes."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_under_the_shipped_folders_is_listed_in_pyproject() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    folders = {Path(folder): name for name, folder in setuptools["package-dir"].items()}
    found = set()
    for folder, name in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *relative.parts]))
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
