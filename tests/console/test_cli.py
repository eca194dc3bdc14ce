"""The console's command line: it never listens on another address than this machine's loopback, and its policy's
`--redrive` belongs to `policy console` alone."""

from __future__ import annotations

import pytest

from components.cli.command import main


def no_aws(service: str) -> None:
    raise AssertionError(f"a refused command line reached AWS ({service})")


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "example.com"])
def test_the_console_refuses_any_host_but_the_loopback(host: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["console", "--function", "f", "--host", host], client=no_aws)
    assert status == 2
    said = capsys.readouterr().err
    assert f"--host {host!r} refused: the console listens on 127.0.0.1 only" in said
    assert "ssh -L PORT:127.0.0.1:PORT" in said


def test_policy_redrive_is_for_the_console_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "inspect", "--function", "f", "--redrive"], client=no_aws) == 2
    assert "--redrive is for console, not inspect" in capsys.readouterr().err
