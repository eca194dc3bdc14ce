"""One wheel per test session, and fresh venvs that hold it, for tests that use the package as a user would.

A fresh venv gets only the wheel; its dependencies (pulumi, pulumi-aws, and pytest for running a user's tests) are
borrowed from the dev venv through a .pth file, so building one needs no network and takes a second. Paths a .pth
file adds are not themselves scanned for .pth files, so the dev venv's editable install of this repo stays out.
"""

from __future__ import annotations

import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "user_project"


def python_of(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def pip_into(env_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The dev venv's pip acting on `env_dir` (a fresh venv has no pip of its own)."""
    command = [sys.executable, "-m", "pip", "--python", str(python_of(env_dir)), "install", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def fresh_venv(env_dir: Path, wheel: Path) -> Path:
    """A venv holding `wheel` alone, its dependencies borrowed from the dev venv."""
    venv.create(env_dir, with_pip=False)
    purelib = next((env_dir / "lib").glob("python3*/site-packages"))
    (purelib / "borrowed-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    result = pip_into(env_dir, "-q", "--no-deps", str(wheel))
    assert result.returncode == 0, result.stderr[-3000:]
    return env_dir


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(work), str(REPO)],
        check=True,
        cwd=work,
    )
    (built,) = work.glob("scheduled_table-*.whl")
    return built


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make dist` into a folder of its own: the sdist and the wheel, checked by twine (its output beside them)."""
    out = tmp_path_factory.mktemp("dist") / "dist"
    result = subprocess.run(
        ["make", "--no-print-directory", "dist", f"DIST={out}"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    (out.parent / "make-dist.log").write_text(result.stdout)
    return out


@pytest.fixture(scope="session")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the wheel installed (shared: tests must not install anything more into it)."""
    return fresh_venv(tmp_path_factory.mktemp("installed") / "venv", wheel)
