"""boto3 clients, created once per container on first use and shared by threads; replaceable in tests."""

from __future__ import annotations

import threading
from typing import Any

# At least as many pooled connections as the most workers a batch can run (`max_workers` is 1-64): with botocore's
# default of 10, workers beyond the tenth wait for a connection (and log "Connection pool is full").
POOL_CONNECTIONS = 64
# The SDK's wait before its n-th retry (standard mode): a random share of 2^(n-1) s, at most this long.
MAX_RETRY_WAIT_SECONDS = 20.0


class CallLimits:
    """How long one SDK call may take: each attempt connects within `connect` s and waits at most `read` s for the
    answer, `attempts` attempts in all with the SDK's waits between them. What a caller that must finish before a
    deadline (the polling processor's send and its completions) counts on (`worst_seconds`)."""

    def __init__(self, connect: float, read: float, attempts: int) -> None:
        self.connect = connect
        self.read = read
        self.attempts = attempts

    def __repr__(self) -> str:
        return f"CallLimits(connect={self.connect}, read={self.read}, attempts={self.attempts})"

    def worst_seconds(self) -> float:
        """The longest one call can take: every attempt to its timeouts, every wait between them at its longest."""
        waits = sum(min(2.0 ** (n - 1), MAX_RETRY_WAIT_SECONDS) for n in range(1, self.attempts))
        return self.attempts * (self.connect + self.read) + waits


# Every handler's calls but the polling processor's: generous, since a slow answer only delays.
DEFAULT_LIMITS = CallLimits(connect=5, read=15, attempts=3)


class Clients:
    """A lazy registry: boto3 is imported only when a handler first talks to AWS. Its clients keep to `limits`."""

    def __init__(self, limits: CallLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, service: str) -> Any:
        # Made already (every call but the first): no lock, which every worker of a batch would otherwise queue on
        # for each call it makes (a dict read is atomic under the interpreter lock).
        made = self._clients.get(service)
        if made is not None:
            return made
        with self._lock:  # boto3 sessions are not thread-safe while creating clients; clients themselves are
            if service not in self._clients:
                import boto3
                from botocore.config import Config

                config = Config(
                    retries={"mode": "standard", "max_attempts": self.limits.attempts},
                    connect_timeout=self.limits.connect,
                    read_timeout=self.limits.read,
                    max_pool_connections=POOL_CONNECTIONS,
                )
                self._clients[service] = boto3.client(service, config=config)
            return self._clients[service]

    def override(self, service: str, client: Any) -> None:
        """Inject a client (a Stubber-wrapped one, say) for tests."""
        with self._lock:
            self._clients[service] = client

    def reset(self) -> None:
        with self._lock:
            self._clients.clear()


CLIENTS = Clients()
