"""Cold start, old code beside new: `import <handler>` alone, in a fresh interpreter that has already imported boto3
and made a client, with no bytecode (our source compiled as Lambda compiles it), in process CPU time; the median
over rounds, the versions and handlers in random order within each round. Steadier than `python -m bench coldstart`
on a busy machine (no reference to subtract, CPU not wall time), so it compares two versions of the handlers
where that benchmark's spread would hide the difference.

    python -m bench.coldstart_ab 13 old=/tmp/old/handlers new=handlers

(`git archive <commit> handlers | tar -x -C /tmp/old` gives an old version.)
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

MODULES = ("eventbridge", "ttl", "polling", "aggregate", "release")
PROBE = """
import gc, os, sys, time
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
import boto3
boto3.client("dynamodb")
young, middle, _ = gc.get_threshold()
gc.set_threshold(young, middle, 10**9)
began = time.process_time()
__import__(sys.argv[1])
print((time.process_time() - began) * 1000)
"""


def probe(directory: Path, module: str) -> float:
    for cache in list(directory.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", PROBE, module], cwd=directory, env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout)


def main(argv: list[str]) -> None:
    rounds = int(argv[0])
    versions = {name: Path(path) for name, path in (arg.split("=", 1) for arg in argv[1:])}
    found: dict[tuple[str, str], list[float]] = {(v, m): [] for v in versions for m in MODULES}
    rng = random.Random(1)
    for _ in range(rounds):
        cases = list(found)
        rng.shuffle(cases)
        for version, module in cases:
            found[(version, module)].append(probe(versions[version], module))
    for module in MODULES:
        print(module, "  ".join(f"{v}: {statistics.median(found[(v, module)]):.2f} ms" for v in versions))


if __name__ == "__main__":
    main(sys.argv[1:])
