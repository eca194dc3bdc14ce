"""boto3 clients, created once per container on first use and shared by threads; replaceable in tests."""

from __future__ import annotations

import threading
from typing import Any

# At least as many pooled connections as the most workers a batch can run (`max_workers` is 1-64): with botocore's
# default of 10, workers beyond the tenth wait for a connection (and log "Connection pool is full").
POOL_CONNECTIONS = 64


class Clients:
    """A lazy registry: boto3 is imported only when a handler first talks to AWS."""

    def __init__(self) -> None:
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
                    retries={"mode": "standard", "max_attempts": 3},
                    connect_timeout=5,
                    read_timeout=15,
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
