"""A stand-in for the AWS CLI on machines without it: `aws <service> <operation> --option value ...` runs that
operation through botocore, with the CLI's own option names (each input member in kebab case), JSON for structured
values, and `--query` / `--output text` applied as the CLI applies them. It knows only what the commands
`python -m localcloud up --stay` prints need, and refuses what it does not know, so a printed command it runs is one
the real CLI parses too. Where the real CLI is installed the tests run the printed commands with both.

Run as `python -m tests.localcloud.aws_cli ...` (tests put an `aws` script doing that first on PATH)."""

from __future__ import annotations

import json
import os
import sys
from functools import cache
from typing import Any

import botocore.session
import jmespath
from botocore import xform_name
from botocore.exceptions import ClientError
from botocore.model import Shape

# Options every CLI command takes that are not parameters of the operation.
GLOBAL_OPTIONS = ("endpoint-url", "region", "output", "query")
SCALARS = ("string", "integer", "long", "float", "double", "boolean", "timestamp")


class Refused(Exception):
    """A command the stand-in cannot run as the real CLI would."""


def parse(argv: list[str]) -> tuple[str, str, dict[str, list[str]]]:
    """`[service, operation, --name, value..., ...]` -> service, operation, {name: values}."""
    if len(argv) < 2 or argv[0].startswith("-") or argv[1].startswith("-"):
        raise Refused(f"expected `aws <service> <operation> [--option value ...]`, got {argv}")
    options: dict[str, list[str]] = {}
    current: str | None = None
    for token in argv[2:]:
        if token.startswith("--"):
            current = token[2:]
            if current in options:
                raise Refused(f"--{current} given twice")
            options[current] = []
        elif current is None:
            raise Refused(f"unexpected argument {token!r}")
        else:
            options[current].append(token)
    return argv[0], argv[1], options


def convert(name: str, shape: Shape, values: list[str]) -> Any:
    """One option's value as the CLI reads it for a parameter of this shape."""
    kind = shape.type_name
    if kind == "blob":
        raise Refused(f"--{name} is a blob: CLI v1 reads it raw, v2 as base64, so no command should pass one")
    if kind == "boolean":
        if values:
            raise Refused(f"--{name} is a flag and takes no value")
        return True
    if kind == "list" and values and not values[0].lstrip().startswith("["):
        member: Shape = shape.member
        return [convert(name, member, [value]) for value in values]
    if len(values) != 1:
        raise Refused(f"--{name} takes one value, got {values}")
    value = values[0]
    if kind in ("integer", "long"):
        return int(value)
    if kind in ("float", "double"):
        return float(value)
    if kind in ("structure", "map", "list"):
        try:
            return json.loads(value)
        except ValueError:
            raise Refused(f"--{name}: only JSON is understood here (not the CLI's shorthand): {value!r}") from None
    return value


def text(value: Any) -> list[str]:
    """The CLI's text output for the shapes a `--query` gives here: rows of tab-separated values, one per list."""
    if value is None:
        return ["None"]
    if isinstance(value, list):
        if all(isinstance(row, list) for row in value):
            return ["\t".join(map(str, row)) for row in value]
        return ["\t".join(map(str, value))] if value else []
    if isinstance(value, dict):
        return ["\t".join(str(v) for v in value.values() if not isinstance(v, dict | list))]
    return [str(value)]


@cache
def _session() -> botocore.session.Session:
    """One botocore session per process (loading its data is most of the cost of a client)."""
    return botocore.session.get_session()


def request(argv: list[str]) -> tuple[Any, str, dict[str, Any], dict[str, str]]:
    """The client, method name and parameters a command means, and its global options; refused if the CLI would
    not take it (an unknown operation or option, a blob) or the stand-in cannot tell how it would."""
    service_name, operation, options = parse(argv)
    single = {name: options.pop(name)[0] for name in GLOBAL_OPTIONS if len(options.get(name, [])) == 1}
    region = single.get("region") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    client = _session().create_client(service_name, region_name=region, endpoint_url=single.get("endpoint-url"))
    model = client.meta.service_model
    operations = {xform_name(name, "-"): name for name in model.operation_names}
    if operation not in operations:
        raise Refused(f"{service_name} has no operation {operation!r}")
    operation_model = model.operation_model(operations[operation])
    members = operation_model.input_shape.members if operation_model.input_shape else {}
    by_option = {xform_name(name, "-"): name for name in members}
    params: dict[str, Any] = {}
    for option, values in options.items():
        negated = option.removeprefix("no-")
        if option.startswith("no-") and negated in by_option and members[by_option[negated]].type_name == "boolean":
            params[by_option[negated]] = False
        elif option in by_option:
            params[by_option[option]] = convert(option, members[by_option[option]], values)
        else:
            raise Refused(f"{service_name} {operation} has no option --{option}")
    return client, xform_name(operations[operation]), params, single


def run(argv: list[str]) -> int:
    client, method, params, single = request(argv)
    try:
        response = getattr(client, method)(**params)
    except ClientError as error:
        details = error.response["Error"]
        operation = error.operation_name
        print(
            f"\nAn error occurred ({details.get('Code')}) when calling the {operation} operation: "
            f"{details.get('Message')}",
            file=sys.stderr,
        )
        return 254
    response.pop("ResponseMetadata", None)
    result = jmespath.search(single["query"], response) if "query" in single else response
    if single.get("output") == "text":
        for line in text(result):
            print(line)
    elif result or "query" in single:
        print(json.dumps(result, indent=4, default=str))
    return 0


def main() -> int:
    try:
        return run(sys.argv[1:])
    except Refused as refused:
        print(f"aws (stand-in): {refused}", file=sys.stderr)
        return 252


if __name__ == "__main__":
    sys.exit(main())
