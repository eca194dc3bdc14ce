"""Start, probe, reset and stop a ministack process: the local AWS that the local cloud deploys into."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

from .aws_behaviour import REDELIVER_VARIABLE, REDELIVERY_LOG_VARIABLE
from .faults import FAULT_LOG_VARIABLE, FAULTS_VARIABLE, HELD_FILE
from .iam import AUTH_VARIABLE
from .interrupts import deferred
from .scheduler_minute import seed

HEALTH = "/_ministack/health"
RESET = "/_ministack/reset"
SES_OUTBOX = "/_ministack/ses/messages"
START_TIMEOUT_SECONDS = 60.0
CALLER_CREDENTIALS = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"})


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def http_json(url: str, method: str = "GET", timeout: float = 5.0) -> object:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


def counts_in(path: Path) -> dict[str, int]:
    """Counts ministack's process writes as JSON (redeliveries, faults); none before the first."""
    try:
        counts: dict[str, int] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return counts


class Ministack:
    """One ministack server on a free loopback port, run with this interpreter (so its Lambda workers see the same
    packages). Use as a context manager; `stop()` is safe to call twice.

    Everything it writes goes into one scratch directory of its own, removed by `stop()`: ministack's temporary
    files (its pid file, each Lambda worker's unpacked code) follow `TMPDIR` there, and its log goes there unless
    `log_dir` keeps it elsewhere (tests keep theirs in pytest's tmp_path)."""

    def __init__(
        self, port: int | None = None, log_dir: Path | None = None, redeliver: float = 0.0, faults: float = 0.0
    ) -> None:
        """`redeliver`: the fraction of stream batches delivered again later, as Lambda may (see aws_behaviour);
        `faults`: the rate of injected throttling, 5xx and timeouts (see faults), 0 for none."""
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.scratch = Path(tempfile.mkdtemp(prefix="localcloud-"))
        self.log_path = (log_dir or self.scratch) / "ministack.log"
        self.redeliver = redeliver
        self.redelivery_log = self.log_path.with_name("redelivered.json")
        self.faults = faults
        self.fault_log = self.log_path.with_name("faults.json")
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Ministack:
        seed()  # chosen here, so the emulators in this process and ministack's Scheduler share it
        temporary = self.scratch / "tmp"
        temporary.mkdir(parents=True, exist_ok=True)  # parents: started again after a stop()
        env = {
            # Not the caller's AWS credentials: ministack's root (admin) is then exactly the local cloud's own
            # (provision.CREDENTIALS), and nothing real reaches its Lambda workers.
            **{k: v for k, v in os.environ.items() if k not in CALLER_CREDENTIALS},
            "BIND_HOST": "127.0.0.1",
            # IAM enforced, as on AWS: every call is checked against its caller's policies (localcloud/iam.py).
            AUTH_VARIABLE: "true",
            REDELIVER_VARIABLE: str(self.redeliver),
            REDELIVERY_LOG_VARIABLE: str(self.redelivery_log),
            FAULTS_VARIABLE: str(self.faults),
            FAULT_LOG_VARIABLE: str(self.fault_log),
            "GATEWAY_PORT": str(self.port),
            # Listeners the local cloud does not use and that would need extra ports.
            "IOT_MTLS_ENABLED": "0",
            "SFTP_ENABLED": "0",
            # ministack's files (pid file, Lambda workers' code, any persisted state) go where stop() removes them.
            "TMPDIR": str(temporary),
            "STATE_DIR": str(temporary / "state"),
            "S3_DATA_DIR": str(temporary / "s3"),
        }
        with self.log_path.open("wb") as log:
            self._process = subprocess.Popen(
                # ministack, with Scheduler's AWS timing: an at() runs anywhere in its minute (seeded, see
                # aws_behaviour).
                [sys.executable, "-m", f"{__package__}.aws_behaviour"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # Where the package's top level is importable from (`-m` puts the working directory first on the
                # path): the repo for `localcloud`, site-packages for the installed `scheduled_table.localcloud`,
                # never the component's own folder, whose types.py would hide the standard library's.
                cwd=Path(__file__).resolve().parents[str(__package__).count(".") + 1],
            )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._fail(f"ministack exited with {self._process.returncode}")
            if self.healthy():
                return self
            time.sleep(0.2)
        self._fail(f"ministack did not answer {HEALTH} within {START_TIMEOUT_SECONDS:.0f}s")

    def _fail(self, problem: str) -> NoReturn:
        """Stop, and raise with the end of the log (the scratch directory holding it is gone after `stop()`)."""
        try:
            tail = self.log_path.read_text(errors="replace").splitlines()[-20:]
        except OSError:
            tail = []
        self.stop()
        raise RuntimeError("\n".join([f"{problem}; the end of its log:", *tail]))

    def redelivered(self) -> dict[str, int]:
        """Stream batches delivered again, per function name."""
        return counts_in(self.redelivery_log)

    def injected(self) -> dict[str, int]:
        """Faults injected so far, per kind (none unless started with `faults`)."""
        return counts_in(self.fault_log)

    def held(self) -> dict[str, tuple[float, float]]:
        """Occurrences whose firing Scheduler retried after an injected target fault: when it was first attempted
        and when it was let through (epoch seconds)."""
        try:
            document = json.loads(self.fault_log.with_name(HELD_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return {str(k): (float(v[0]), float(v[1])) for k, v in document.items()}

    def healthy(self) -> bool:
        try:
            http_json(self.endpoint + HEALTH, timeout=1.0)
        except OSError:
            return False
        return True

    def reset(self) -> None:
        """Forget every resource (ministack's own reset endpoint)."""
        http_json(self.endpoint + RESET, method="POST")

    def stop(self) -> None:
        """Stop ministack and whatever it started (Lambda workers share its process group), then remove the scratch
        directory; a Ctrl-C meanwhile waits until that is done."""
        with deferred():
            self._stop()

    def _stop(self) -> None:
        process = self._process
        if process is not None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)  # its own session: only ministack's leftover children
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Ministack:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


def ses_outbox(endpoint: str) -> list[dict[str, Any]]:
    """Every email ministack's SES and SESv2 accepted, oldest first."""
    document = http_json(endpoint + SES_OUTBOX)
    by_account = document.get("messages", {}) if isinstance(document, dict) else {}
    messages = [message for account in by_account.values() for message in account]
    return sorted(messages, key=lambda message: float(message.get("Timestamp", 0)))
