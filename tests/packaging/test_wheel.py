"""`pip install` of this repo gives other Pulumi projects `scheduled_table`, handlers included.

GIVEN a wheel built from the repo, installed into a fresh venv (its dependencies borrowed from the dev venv so the
test needs no network) WHEN a small mocked Pulumi program outside the repo creates a ScheduledTable THEN the
Lambda archive it registers points at handler files inside the installed package.
"""

from __future__ import annotations

import json
import site
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROGRAM = textwrap.dedent(
    """
    import json, sys
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


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(work), str(REPO)],
        check=True,
        cwd=work,
    )
    (wheel,) = work.glob("scheduled_table-*.whl")
    env_dir = work / "venv"
    venv.create(env_dir, with_pip=False)
    purelib = next((env_dir / "lib").glob("python3*/site-packages"))
    # Dependencies (pulumi, pulumi-aws, boto3) come from the dev venv; the package itself only from the wheel.
    (purelib / "borrowed-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(env_dir / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        check=True,
    )
    return env_dir


def test_installed_package_builds_a_stack_with_its_own_handlers(installed: Path, tmp_path: Path) -> None:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    result = subprocess.run(
        [str(installed / "bin" / "python"), str(script)],
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
    assert {"eventbridge.py", "st_core/batch.py", "st_core/dispatch.py"} <= set(report["assets"])
    for path in report["assets"].values():
        assert Path(path).is_file() and Path(path).is_relative_to(package_dir / "handlers")
    assert "ScheduledTable" in report["all"]
