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
# The one region rule of every operator command, as the AWS CLI reads it; each command's --region help says it.
REGION_RULE = (
    "the stack's AWS region; default: AWS_REGION, else AWS_DEFAULT_REGION, else the profile's `region` in "
    "~/.aws/config (the AWS CLI's order)"
)
PROFILE_HELP = (
    "the AWS profile (in ~/.aws/config or ~/.aws/credentials) whose credentials, and region unless --region, the "
    "command uses; default: AWS_PROFILE, else the default profile (as the AWS CLI's --profile)"
)
ENDPOINT_HELP = "another AWS endpoint, e.g. the local cloud's http://127.0.0.1:4566 (as the AWS CLI's --endpoint-url)"
FUNCTION_HELP = "the stack's consumer function (its function_name output); or give --table"
TABLE_HELP = (
    "the stack's table (its table_name output): its consumer is the ScheduledTable function that reads the table's "
    "stream; or give --function (not both)"
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


def add_stack_options(command: Any) -> None:
    """The options every operator command shares, with one text each: which stack (`--function` or `--table`, one
    of them, so neither name misleads), and how to reach AWS (`--profile`, `--region`, `--endpoint-url`), as the AWS
    CLI names them."""
    which = command.add_argument_group("the stack (one of)")
    which.add_argument("--function", help=FUNCTION_HELP)
    which.add_argument("--table", help=TABLE_HELP)
    command.add_argument("--profile", help=PROFILE_HELP)
    command.add_argument("--region", help=REGION_RULE)
    command.add_argument("--endpoint-url", type=endpoint_url, help=ENDPOINT_HELP)


def stack_problem(function: str | None, table: str | None) -> str | None:
    """The one line for a command given both `--function` and `--table`, or neither (None: one of them)."""
    if function and table:
        return (
            f"give --function or --table, not both: --function {function!r} names the consumer function, --table "
            f"{table!r} the table whose stream it reads"
        )
    if not function and not table:
        return "name the stack: --function (its consumer function, the function_name output) or --table (its table)"
    return None


def profile_problem(profile: str | None, error: Exception) -> str:
    """One line for a profile boto3 cannot use: which profile, where its name came from, and the fix (instead of
    botocore's traceback from deep inside the first call)."""
    import os

    import botocore.exceptions
    import botocore.session

    source = "--profile" if profile else ("AWS_PROFILE" if os.environ.get("AWS_PROFILE") else "AWS_DEFAULT_PROFILE")
    named = profile or os.environ.get(source) or "default"
    if not isinstance(error, botocore.exceptions.ProfileNotFound):  # there, but its SSO, role or process fails
        said = str(error).rstrip(".")
        return (
            f"AWS profile {named!r} gives no credentials: {said}; fix it (aws configure --profile {named}, or aws sso "
            f"login --profile {named}) or pass --profile with another"
        )
    missing = str(error.kwargs.get("profile") or named)
    files = botocore.session.Session()  # reads only the files, not the profile the environment names
    try:
        known = ", ".join(sorted(files.available_profiles)) or "none"
    except Exception:  # a config file botocore cannot read: the profiles are not listed, the fix still stands
        known = "unreadable"
    places = " or ".join(str(files.get_config_variable(name)) for name in ("config_file", "credentials_file")).replace(
        os.path.expanduser("~"), "~"
    )
    where = f"AWS profile {missing!r} " + (f"(from {source})" if missing == named else f"(named by {named!r})")
    instead = "pass --profile with one of them" + ("" if source == "--profile" else f", or unset {source}")
    create = f"aws configure --profile {missing}"
    return f"{where} is not in {places} (profiles there: {known}); {instead}, or create it: {create}"


def rule_region(region: str | None) -> str | None:
    """What REGION_RULE puts before botocore's own reading (AWS_DEFAULT_REGION, then the profile's): `region`, else
    AWS_REGION, which botocore ignores and the AWS CLI (v2) and the other SDKs read first. A boto3 session made with
    it has the rule's region."""
    import os

    return region or os.environ.get("AWS_REGION") or None


def clients(endpoint_url: str | None, region: str | None, profile: str | None = None) -> Client:
    """One boto3 client per service, created on first use, from `profile` (else AWS_PROFILE, else the default) and
    REGION_RULE's region. A profile that is unknown or gives no credentials is a RedriveError naming it, before any
    call. Against a local endpoint without credentials configured, the local cloud's dummy ones are used (it
    accepts any)."""
    try:
        import boto3
        import botocore.exceptions
    except ImportError:
        raise SystemExit(
            "scheduled-table redrive needs boto3, which the package does not install (the component never calls "
            "AWS): pip install boto3"
        ) from None
    region = rule_region(region)
    try:
        session = boto3.session.Session(profile_name=profile, region_name=region)
        credentials = session.get_credentials()
    except botocore.exceptions.BotoCoreError as error:  # an unknown profile, one whose SSO or process fails
        raise RedriveError(profile_problem(profile, error)) from None
    if endpoint_url and credentials is None:
        session = boto3.session.Session(
            region_name=session.region_name, aws_access_key_id="test", aws_secret_access_key="test"
        )
        credentials = session.get_credentials()
    if session.region_name is None:
        # botocore would raise NoRegionError at the first call, deep inside the command, as a long traceback.
        raise RedriveError(f"no AWS region configured; {REGION_HINT}")
    if credentials is None:
        # botocore would raise NoCredentialsError at the first call, as a traceback or a line about another thing.
        raise RedriveError(
            "no AWS credentials found; run `aws configure` (or `aws sso login --profile NAME` and pass --profile "
            "NAME), or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
        )
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
