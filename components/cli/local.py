"""`scheduled-table local preview|up|down|fire|emails`: the local cloud (ministack, IAM enforced) for a user's own
Pulumi program, run from its folder or with `--program DIR`.

The local cloud ships in the package as `scheduled_table.localcloud` (in a checkout of this repo it is the
top-level `localcloud`); what it needs beyond the component (ministack, which brings PyYAML and botocore, and
boto3) comes with the `local` extra: `pip install "scheduled-table[local]"`. This module only finds it and says
how to install what is missing, so `scheduled-table --help` works without the extra.
"""

from __future__ import annotations

import importlib
import importlib.util
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PROG = "scheduled-table local"
# What the extra brings, by import name: a missing one means the extra is not installed.
EXTRA_MODULES = {"ministack", "yaml", "boto3", "botocore"}
INSTALL_HINT = 'scheduled-table local needs the local extra: pip install "scheduled-table[local]"'


def localcloud_cli() -> ModuleType:
    """The local cloud's command line: the installed package's, else (a checkout of this repo) the top-level one."""
    package = (__package__ or "").rpartition(".")[0]  # scheduled_table (this module is scheduled_table.cli.local)
    for name in (f"{package}.localcloud.__main__", "localcloud.__main__"):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name in EXTRA_MODULES or (error.name or "").split(".")[0] in EXTRA_MODULES:
                raise SystemExit(f"{INSTALL_HINT} ({error.name} is missing)") from None
            if error.name is None or not name.startswith(error.name):
                raise
    raise SystemExit(f"{INSTALL_HINT} (the local cloud is not installed with this package)")


def invocation(script: str | None = None, interpreter: str | None = None) -> str:
    """This command as the commands it prints must name it to run verbatim in any shell, its venv activated or not:
    the installed script that is running (a venv's `bin/scheduled-table`) by its absolute path, else this
    interpreter running the package (`python -m scheduled_table`). Quoted for the shell."""
    path = Path(sys.argv[0] if script is None else script)
    if path.name == "scheduled-table" and path.is_file():
        return f"{shlex.quote(str(path.absolute()))} local"
    package = (__package__ or "").rpartition(".")[0]
    return f"{shlex.quote(interpreter or sys.executable)} -m {package} local"


def main(argv: Sequence[str]) -> int:
    """Run the local cloud's command line for the program in the current folder unless `--program` names another."""
    cli = localcloud_cli()
    # ministack runs in a process of its own, started by `up` (and `demo`): say what is missing before starting it.
    if list(argv)[:1] in (["up"], ["demo"]) and importlib.util.find_spec("ministack") is None:
        raise SystemExit(f"{INSTALL_HINT} (ministack is missing)")
    return int(cli.main(list(argv), prog=PROG, default_program=Path.cwd(), command=invocation()))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
