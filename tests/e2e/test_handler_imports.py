"""AWS Lambda's Python runtime has the standard library and boto3, nothing else; ministack's workers can see this
whole virtualenv, so a stray import would pass every other test here and fail in AWS. Import each handler module in
an interpreter that sees only the packaged handlers and boto3's own distribution."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from components.packaging import handler_archive
from localcloud.provision import zip_archive

# boto3 and what it pulls in, as in the Lambda runtime.
RUNTIME_DISTRIBUTIONS = ("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3")


def _runtime_site(tmp: Path) -> Path:
    site = tmp / "site"
    site.mkdir()
    for name in RUNTIME_DISTRIBUTIONS:
        distribution = metadata.distribution(name)
        tops = (distribution.read_text("top_level.txt") or "").split() or [name.replace("python-", "")]
        for top in tops:
            for candidate in (
                Path(str(distribution.locate_file(top))),
                Path(str(distribution.locate_file(f"{top}.py"))),
            ):
                if candidate.exists():
                    (site / candidate.name).symlink_to(candidate)
    return site


def test_every_handler_module_imports_with_only_the_lambda_runtime(tmp_path: Path) -> None:
    # GIVEN the deployment package exactly as the component ships it
    package = tmp_path / "package"
    with zipfile.ZipFile(io.BytesIO(zip_archive(handler_archive()))) as archive:
        archive.extractall(package)
        members = archive.namelist()
    modules = sorted(m.removesuffix(".py").replace("/", ".").removesuffix(".__init__") for m in members)
    # WHEN each module is imported with nothing but the standard library and boto3
    script = "import importlib, sys\nsys.path[:0] = sys.argv[1:3]\n[importlib.import_module(m) for m in sys.argv[3:]]"
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script, str(package), str(_runtime_site(tmp_path)), *modules],
        env={"AWS_DEFAULT_REGION": "eu-west-1"},
        capture_output=True,
        text=True,
        check=False,
    )
    # THEN all of them load
    assert result.returncode == 0, result.stderr
    assert {"eventbridge", "backfill", "backfill.every", "st_core.dispatch"} <= set(modules)
