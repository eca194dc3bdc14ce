"""The operator's Lambda client invokes once: a backfill slice or a replay may run up to 15 minutes, and an SDK retry
after a dropped connection or a read timeout would run the same work a second time while the first still goes."""

from __future__ import annotations

import socket
import threading

import pytest

from components.cli.aws import clients


def test_an_invoke_whose_connection_drops_is_not_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    accepted: list[int] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(5.0)

    def drop_every_connection() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            accepted.append(1)
            connection.recv(65536)
            connection.close()  # no answer: what a function still running looks like after a network blip

    threading.Thread(target=drop_every_connection, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
    lam = clients(endpoint, "eu-west-1")("lambda")
    with pytest.raises(Exception, match=r"(?i)connection"):
        lam.invoke(FunctionName="st-backfill", InvocationType="RequestResponse", Payload=b"{}")
    server.close()
    assert len(accepted) == 1
