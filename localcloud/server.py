"""Start, probe, reset and stop a ministack process: the local AWS that the local cloud deploys into."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from .aws_behaviour import REDELIVER_VARIABLE, REDELIVERY_LOG_VARIABLE, seed

HEALTH = "/_ministack/health"
RESET = "/_ministack/reset"
SES_OUTBOX = "/_ministack/ses/messages"
START_TIMEOUT_SECONDS = 60.0


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


class Ministack:
    """One ministack server on a free loopback port, run with this interpreter (so its Lambda workers see the same
    packages), its log kept in a file. Use as a context manager; `stop()` is safe to call twice."""

    def __init__(self, port: int | None = None, log_dir: Path | None = None, redeliver: float = 0.0) -> None:
        """`redeliver`: the fraction of stream batches delivered again later, as Lambda may (see aws_behaviour)."""
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = (log_dir or Path(tempfile.mkdtemp(prefix="localcloud-"))) / "ministack.log"
        self.redeliver = redeliver
        self.redelivery_log = self.log_path.with_name("redelivered.json")
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Ministack:
        seed()  # chosen here, so the emulators in this process and ministack's Scheduler share it
        env = {
            **os.environ,
            "BIND_HOST": "127.0.0.1",
            REDELIVER_VARIABLE: str(self.redeliver),
            REDELIVERY_LOG_VARIABLE: str(self.redelivery_log),
            "GATEWAY_PORT": str(self.port),
            # Listeners the local cloud does not use and that would need extra ports.
            "IOT_MTLS_ENABLED": "0",
            "SFTP_ENABLED": "0",
        }
        log = self.log_path.open("wb")
        self._process = subprocess.Popen(
            # ministack, with Scheduler's AWS timing: an at() runs anywhere in its minute (seeded, see aws_behaviour).
            [sys.executable, "-m", "localcloud.aws_behaviour"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"ministack exited with {self._process.returncode}; see {self.log_path}")
            if self.healthy():
                return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"ministack did not answer {HEALTH} within {START_TIMEOUT_SECONDS:.0f}s; see {self.log_path}"
        )

    def redelivered(self) -> dict[str, int]:
        """Stream batches delivered again, per function name."""
        try:
            counts: dict[str, int] = json.loads(self.redelivery_log.read_text())
        except (OSError, ValueError):
            return {}
        return counts

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
        if self._process is None or self._process.poll() is not None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)

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
