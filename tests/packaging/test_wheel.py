"""`pip install` of this repo gives other Pulumi projects `scheduled_table`, handlers included, and asks for nothing
but what the component imports.

GIVEN a wheel built from the repo, installed into a fresh venv (its dependencies borrowed from the dev venv so the
tests need no network) WHEN a small mocked Pulumi program outside the repo creates a ScheduledTable, with boto3
unimportable THEN the Lambda archive it registers points at handler files inside the installed package. The wheel
requires pulumi and pulumi-aws only, as ranges; the boto3 pins that moto and ministack need are in the dev extra.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from .conftest import python_of

PROGRAM = textwrap.dedent(
    """
    import json, sys

    # The component never imports boto3 (the handlers do, in Lambda): any boto3 in a user's venv is fine.
    sys.modules["boto3"] = sys.modules["botocore"] = None
    import pulumi

    records = {}

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            outputs = dict(args.inputs)
            region, account = "eu-west-1", "123456789012"
            outputs.setdefault("name", args.name)
            arns = {
                "aws:dynamodb/table:Table": f"arn:aws:dynamodb:{region}:{account}:table/{args.name}",
                "aws:scheduler/scheduleGroup:ScheduleGroup": f"arn:aws:scheduler:{region}:{account}:schedule-group/g",
            }
            outputs["arn"] = arns.get(args.typ, f"arn:aws:sqs:{region}:{account}:{args.name}")
            outputs["url"] = "https://example/" + args.name
            outputs["streamArn"] = outputs["arn"] + "/stream/1"
            records[args.name] = args.inputs
            return args.name + "-id", outputs

        def call(self, args):
            return {}, None

    pulumi.runtime.set_mocks(Mocks(), preview=False)
    import scheduled_table
    from scheduled_table import ScheduledTable, ScheduledTableArgs

    @pulumi.runtime.test
    def program():
        table = ScheduledTable("outside", ScheduledTableArgs(mode="eventbridge"))
        return table.function_name

    program()
    code = records["outside-scheduler"]["code"]
    print(json.dumps({
        "package": scheduled_table.__file__,
        "assets": {name: asset.path for name, asset in code.assets.items()},
        "all": scheduled_table.__all__,
    }))
    """
)


def test_installed_package_builds_a_stack_with_its_own_handlers(installed: Path, tmp_path: Path) -> None:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    result = subprocess.run(
        [str(python_of(installed)), str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    package_dir = Path(report["package"]).parent
    assert package_dir.is_relative_to(installed), "imported from somewhere other than the fresh venv"
    shipped = {"eventbridge/__init__.py", "aggregate/totals.py", "backfill/__init__.py", "backfill/engine.py"}
    assert shipped | {"st_core/batch.py", "st_core/dispatch.py"} <= set(report["assets"])
    for path in report["assets"].values():
        assert Path(path).is_file() and Path(path).is_relative_to(package_dir / "handlers")
    assert "ScheduledTable" in report["all"]


def wheel_requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode()
    lines = [line for line in text.splitlines() if line.startswith("Requires-Dist:")]
    return [Requirement(line.partition(":")[2].strip()) for line in lines]


def closure(names: set[str]) -> set[str]:
    """Every distribution the installed `names` need, themselves included (extras and other platforms' markers out)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.distribution(name).requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name.lower().replace("_", "-"))
    return seen


def test_users_get_pulumi_and_pulumi_aws_as_ranges_and_no_boto3_pin(wheel: Path) -> None:
    requirements = wheel_requirements(wheel)
    base = {r.name: r for r in requirements if r.marker is None}
    assert set(base) == {"pulumi", "pulumi-aws"}
    for requirement in base.values():
        operators = {spec.operator for spec in requirement.specifier}
        assert operators == {">=", "<"}, f"{requirement}: a floor and a ceiling, not a pin"
    aws = base["pulumi-aws"].specifier  # the floor pyproject.toml explains: key_schemas arrived in 7.17.0
    assert "7.17.0" in aws and "7.16.0" not in aws and "8.0.0" not in aws
    dev = {r.name: r for r in requirements if r.marker is not None and r.marker.evaluate({"extra": "dev"})}
    assert {"boto3", "botocore", "moto", "ministack"} <= set(dev)
    # Nor does anything pulumi and pulumi-aws pull in bring boto3 (their versions in the dev venv).
    assert not {"boto3", "botocore", "s3transfer"} & closure({"pulumi", "pulumi-aws"})


def test_testing_kit_needs_neither_pytest_nor_boto3(installed: Path, tmp_path: Path) -> None:
    check = (
        "import sys\n"
        "for name in ('pytest', 'boto3', 'botocore', 'moto'):\n"
        "    sys.modules[name] = None\n"
        "import scheduled_table.testing as kit\n"
        "print(kit.__file__)\n"
    )
    result = subprocess.run(
        [str(python_of(installed)), "-c", check],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert Path(result.stdout.strip()).is_relative_to(installed)


def test_wheel_ships_the_local_cloud_inside_the_package_and_nothing_but_source(wheel: Path) -> None:
    """`scheduled-table local` runs the local cloud from the wheel, so its code is there, under the package's one
    import name (no top-level `localcloud` in a user's site-packages); tests, benchmarks and docs are not."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"scheduled_table"}, tops
    assert {"scheduled_table/localcloud/__main__.py", "scheduled_table/localcloud/aws_behaviour.py"} <= set(names)
    assert not [n for n in names if n.startswith(("tests/", "bench/", "docs/", "localcloud/"))]
    # What keeps it small is what it holds (sizes are measured, not asserted): source, the schema and markers only.
    shipped = [n for n in names if not n.split("/")[0].endswith(".dist-info")]
    assert [n for n in shipped if not n.endswith((".py", ".json", "py.typed"))] == []
