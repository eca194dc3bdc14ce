"""Benchmark 4: cold start. For each handler module, the median of fresh-interpreter imports of the deployment
package (the handler and the boto3 it will use) minus the median of `import boto3` alone, and the archive size;
beside it, a handler on Powertools for AWS Lambda's batch utility, if it installs."""

from __future__ import annotations

import io
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from .harness import table

RUNS = 20
HANDLERS = ("eventbridge", "ttl", "polling", "aggregate")
PROBE = (
    "import sys, time\n"
    "sys.path[:0] = sys.argv[1].split(':')\n"
    "t = time.perf_counter()\n"
    "for name in sys.argv[2:]:\n"
    "    __import__(name)\n"
    "print(time.perf_counter() - t)\n"
)


def import_seconds(path: str, modules: list[str], runs: int = RUNS) -> float:
    """Median seconds to import `modules` in a fresh interpreter that also sees `path` (first)."""
    samples = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", PROBE, path, *modules], capture_output=True, text=True, check=True
        ).stdout
        samples.append(float(out.strip().splitlines()[-1]))
    return statistics.median(samples)


def our_package(directory: Path) -> int:
    """Extract our deployment package; returns its zipped size."""
    from components.packaging import handler_archive
    from localcloud.provision import zip_archive

    data = zip_archive(handler_archive())
    zipfile.ZipFile(io.BytesIO(data)).extractall(directory)
    return len(data)


def powertools_package(directory: Path) -> int | None:
    """Install Powertools and the baseline handler into `directory`; its zipped size, or None if pip cannot."""
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(directory),
            "aws-lambda-powertools",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if install.returncode != 0:
        return None
    source = Path(__file__).parent / "baselines" / "powertools_handler.py"
    (directory / "powertools_handler.py").write_text(source.read_text())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as package:
        for path in sorted(directory.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and ".dist-info" not in str(path):
                package.write(path, path.relative_to(directory))
    return len(buffer.getvalue())


def run() -> tuple[str, dict[str, float]]:
    rows: list[list[Any]] = []
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as ours_dir, tempfile.TemporaryDirectory() as pt_dir:
        size = our_package(Path(ours_dir))
        boto3_alone = import_seconds(ours_dir, ["boto3"])
        rows.append(["import boto3 alone (reference)", boto3_alone * 1000, "", ""])
        for module in HANDLERS:
            total = import_seconds(ours_dir, [module, "boto3"])
            rows.append([f"ours: {module}", total * 1000, (total - boto3_alone) * 1000, size / 1024])
            figures[f"coldstart_ms_{module}"] = (total - boto3_alone) * 1000
        pt_size = powertools_package(Path(pt_dir))
        if pt_size is None:
            rows.append(["Powertools batch handler (baseline)", "did not install", "", ""])
        else:
            total = import_seconds(pt_dir, ["powertools_handler"])
            rows.append(
                ["Powertools batch handler (baseline)", total * 1000, (total - boto3_alone) * 1000, pt_size / 1024]
            )
            figures["coldstart_ms_powertools"] = (total - boto3_alone) * 1000
            figures["archive_kib_powertools"] = pt_size / 1024
        figures["archive_kib_ours"] = size / 1024
    note = (
        f"Median of {RUNS} fresh interpreters each (this machine's Python {sys.version.split()[0]}). 'over boto3' is "
        "the import time minus `import boto3` alone: what the handler adds to a cold start. Ours import boto3 lazily "
        "(on the first AWS call), so the measured import includes it for a fair comparison. The archive is what "
        "is uploaded: ours, the handlers folder (every mode shares it); Powertools, its package and the handler."
    )
    header = ["handler", "import ms", "over boto3 ms", "archive KiB"]
    return table("4. cold start (fresh-interpreter import) and package size", header, rows, note), figures
