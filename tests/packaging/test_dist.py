"""`make dist`: the release's sdist and wheel, as a publisher uploads them.

GIVEN the repository WHEN `make dist` runs (into a temporary folder) THEN it builds one sdist and one wheel of the
package's version, twine's strict check passes on both (it is part of the target: a README PyPI would not render
fails it), the wheel holds the component, the handlers and the local cloud, and the sdist holds their sources, the
licence and the changelog but not the tests.
"""

from __future__ import annotations

import tarfile
import tomllib
import zipfile
from pathlib import Path

import yaml

from .conftest import REPO


def test_make_dist_builds_a_checked_sdist_and_wheel_with_handlers_and_local_cloud(dist: Path) -> None:
    out = dist
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert sorted(p.name for p in out.iterdir()) == [
        f"scheduled_table-{version}-py3-none-any.whl",
        f"scheduled_table-{version}.tar.gz",
    ]
    log = (out.parent / "make-dist.log").read_text()
    assert log.count("PASSED") == 2, log[-2000:]

    with zipfile.ZipFile(out / f"scheduled_table-{version}-py3-none-any.whl") as wheel:
        inside = set(wheel.namelist())
    for path in (
        "scheduled_table/__init__.py",
        "scheduled_table/py.typed",
        "scheduled_table/schemas/due_event.schema.json",
        "scheduled_table/handlers/eventbridge/__init__.py",
        "scheduled_table/handlers/aggregate/totals.py",
        "scheduled_table/handlers/backfill/engine.py",
        "scheduled_table/handlers/st_core/dispatch.py",
        "scheduled_table/localcloud/__init__.py",
        f"scheduled_table-{version}.dist-info/licenses/LICENSE",
    ):
        assert path in inside, path

    with tarfile.open(out / f"scheduled_table-{version}.tar.gz") as sdist:
        names = {name.partition("/")[2] for name in sdist.getnames()}
    assert {"LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml", "handlers/eventbridge/__init__.py"} <= names
    assert {"localcloud/__init__.py", "components/__init__.py"} <= names
    assert not any(name.startswith("tests/") for name in names)


def test_the_publishing_workflow_uses_trusted_publishing_on_version_tags() -> None:
    """Not run here (no public home yet), so its shape is what can be checked: a `v*` tag builds with `make dist`,
    refuses a tag that is not the package's version, and only the publishing job may ask for an OIDC token, which
    PyPI's trusted publishing exchanges; no stored password or token anywhere."""
    text = (REPO / ".github" / "workflows" / "publish.yml").read_text()
    workflow = yaml.safe_load(text)
    assert workflow[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads the key `on` as true
    assert workflow["permissions"] == {"contents": "read"}
    build, publish = workflow["jobs"]["build"], workflow["jobs"]["publish"]
    runs = [step.get("run", "") for step in build["steps"]]
    assert "make dist" in runs and any(
        "scheduled_table.__version__" in run and "GITHUB_REF_NAME" in run for run in runs
    )
    assert "permissions" not in build
    assert publish["needs"] == "build" and publish["permissions"] == {"id-token": "write"}
    assert publish["environment"]["name"] == "pypi"
    (upload,) = [step for step in publish["steps"] if step.get("uses", "").startswith("pypa/gh-action-pypi-publish@")]
    assert "with" not in upload
    assert "secrets." not in text and "password" not in text
