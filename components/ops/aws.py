"""How the operator's commands reach AWS: through an injected `client(service)`, so the same code runs against
AWS, the local cloud and moto alike; `clients` makes the real one from boto3, imported only here and only when a
command runs (boto3 is not a dependency of the package: the component never talks to AWS itself)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Client = Callable[[str], Any]
Emit = Callable[[str], None]

REGION_HINT = (
    "pass --region (the stack's region, e.g. --region eu-west-1), or set AWS_REGION, or `region` in ~/.aws/config "
    "(aws configure)"
)


class RedriveError(Exception):
    """What the operator must fix before a command can start (a wrong function name, a queue not found, no
    region); the command prints it as one line and exits 2."""


def endpoint_url(value: str) -> str:
    """`--endpoint-url` as botocore takes it: a URL with its scheme. Checked as the command line is read (argparse
    `type`), so `127.0.0.1:4566` is a usage error naming the fix instead of botocore's ValueError traceback."""
    import argparse
    from urllib.parse import urlsplit

    parts = urlsplit(value)
    if parts.scheme in ("http", "https") and parts.netloc:
        return value
    raise argparse.ArgumentTypeError(
        f"{value!r} is not a URL; write it with its scheme, e.g. http://{value.split('://')[-1] or '127.0.0.1:4566'}"
    )


class Clients:
    """The handlers' client registry (`get(service)`), answered by the command's clients, so the handler code a
    command runs (dispatch, the backfill engine) calls the command's endpoint with its credentials."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def get(self, service: str) -> Any:
        return self.client(service)


def clients(endpoint_url: str | None, region: str | None) -> Client:
    """One boto3 client per service, created on first use. Against a local endpoint without credentials configured,
    the local cloud's dummy ones are used (it accepts any)."""
    try:
        import boto3
    except ImportError:
        raise SystemExit(
            "scheduled-table redrive needs boto3, which the package does not install (the component never calls "
            "AWS): pip install boto3"
        ) from None
    session = boto3.session.Session(region_name=region)
    if endpoint_url and session.get_credentials() is None:
        session = boto3.session.Session(
            region_name=region or "us-east-1", aws_access_key_id="test", aws_secret_access_key="test"
        )
    if session.region_name is None:
        # botocore would raise NoRegionError at the first call, deep inside the command, as a long traceback.
        raise RedriveError(f"no AWS region configured; {REGION_HINT}")
    made: dict[str, Any] = {}

    from botocore.config import Config

    # A replay is a RequestResponse invoke that may run up to Lambda's 900 s: wait for it, and never let botocore
    # invoke again on a read timeout while the first run still goes (it would report done work as failed).
    invoke = Config(read_timeout=960, connect_timeout=10, retries={"total_max_attempts": 1})

    def client(service: str) -> Any:
        if service not in made:
            config = invoke if service == "lambda" else None
            made[service] = session.client(service, endpoint_url=endpoint_url, config=config)
        return made[service]

    return client
