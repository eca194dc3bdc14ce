"""Cold start, old code beside new: `import <handler>` alone, in a fresh interpreter that has already imported boto3
and made a client, with no bytecode (our source compiled as Lambda compiles it), in process CPU time. Each round
runs every handler once in each version, the handlers in random order and the two versions of one handler back to
back in random order, so the per-round difference of a handler cancels the drift of a shared machine; the figures
are medians over rounds. Steadier than the reference-subtracting table of `python -m bench coldstart` (no boto3 to
subtract, CPU not wall time), so it compares two versions of the handlers where that table's spread would hide the
difference. `python -m bench coldstart` runs it against main's handlers; by hand:

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

# What each case imports: its handler module (`polling_assign` is polling's stream consumer, `polling_assign.handler`).
IMPORTS = {
    "eventbridge": "eventbridge",
    "ttl": "ttl",
    "polling": "polling",
    "aggregate": "aggregate",
    "release": "release",
    "polling_assign": "polling_assign",
}
PROBE = """
import gc, os, sys, time
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
import boto3
boto3.client("dynamodb")
gc.collect()  # as bench_coldstart's "alone": boto3's young objects are not the handler's to collect
young, middle, _ = gc.get_threshold()
gc.set_threshold(young, middle, 10**9)
began = time.process_time()
for name in sys.argv[1].split(","):
    __import__(name)
print((time.process_time() - began) * 1000)
"""


def probe(directory: Path, modules: str) -> float:
    """CPU ms of importing `modules` (comma-separated) from `directory`, after boto3 and a client, no bytecode."""
    for cache in list(directory.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", PROBE, modules], cwd=directory, env=env, capture_output=True, text=True, check=True
    )
    return float(out.stdout)


def compare(
    rounds: int, old: Path, new: Path, seed: int = 1, imports: dict[str, str] | None = None
) -> dict[str, tuple[list[float], list[float]]]:
    """Per case (`imports`, default every handler's), its `rounds` samples in the old and the new directory (ms, the
    same round at the same index)."""
    imports = IMPORTS if imports is None else imports
    found: dict[str, tuple[list[float], list[float]]] = {case: ([], []) for case in imports}
    rng = random.Random(seed)
    for _ in range(rounds):
        cases = list(imports)
        rng.shuffle(cases)
        for case in cases:
            olds, news = found[case]
            if rng.random() < 0.5:
                olds.append(probe(old, imports[case]))
                news.append(probe(new, imports[case]))
            else:
                news.append(probe(new, imports[case]))
                olds.append(probe(old, imports[case]))
    return found


def summary(olds: list[float], news: list[float]) -> tuple[float, float, float]:
    """Median old, median new, and the median of the per-round differences (new - old), in ms."""
    changes = [n - o for o, n in zip(olds, news, strict=True)]
    return statistics.median(olds), statistics.median(news), statistics.median(changes)


def main(argv: list[str]) -> None:
    rounds = int(argv[0])
    (old_name, old), (new_name, new) = ((name, Path(path)) for name, path in (arg.split("=", 1) for arg in argv[1:3]))
    for case, (olds, news) in compare(rounds, old, new).items():
        before, after, change = summary(olds, news)
        print(f"{case}  {old_name}: {before:.2f} ms  {new_name}: {after:.2f} ms  paired change: {change:+.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
