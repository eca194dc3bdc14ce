"""`python -m localcloud up --stay` as its user meets it. The commands it prints are run as printed (bash, from the
repository root; the AWS CLI where it is installed and a botocore stand-in for it everywhere, `.venv/bin/python` for
real) and must do what they say; `down` while it runs, then Ctrl-C or `kill`, end it without a traceback; its
temporary directory goes with it; a configuration error is one line. Tests run in file order against one deploy."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from localcloud.deploy import Deployment
from localcloud.program import run_program, stack_tables
from localcloud.provision import clients
from localcloud.scenarios import drain_due_events, queue_depth
from localcloud.server import HEALTH, Ministack, http_json
from localcloud.try_it import instructions
from tests.e2e.conftest import snapshot
from tests.localcloud import aws_cli

REPO = Path(__file__).resolve().parents[2]
REGION = "eu-west-1"
# Deadlines, not expectations: a deploy takes about 5 s and an effect a few seconds (the local TTL: about 15 s), but a
# loaded two-core machine may be many times slower. An item due in 30 s fires in the minute at or after its time (up
# to 90 s after the write): at a load average of 12 that, and the functions behind it, took more than 120 s.
DEPLOY_SECONDS = 240.0
EFFECT_SECONDS = 240.0
EXIT_SECONDS = 60.0
DUE_TIME = re.compile(r"\$\(\(\$\(date \+%s\) \+ \d+\)\)|\$\(date \+%s\)")


# How often a table's effect is looked for while it is awaited: each look runs printed commands as processes (the AWS
# CLI: 0.7 s of CPU; `localcloud emails`: 2.6 s), so looking every 0.2 s kept a core busy while it waited, slowing the
# local cloud and every other worker.
EFFECT_POLL_SECONDS = 2.0


def until(condition: Callable[[], object], seconds: float, what: str, every: float = 0.2) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds:.0f}s: {what}")
        time.sleep(every)


@dataclass
class Printed:
    """The commands `up --stay` printed: the export line, each table's heading and commands, and `down`."""

    export: str = ""
    tables: list[tuple[str, list[str]]] = field(default_factory=list)
    down: str = ""

    @property
    def commands(self) -> list[str]:
        return [command for _, commands in self.tables for command in commands]


def parse_printed(lines: list[str]) -> Printed:
    printed = Printed()
    heading = ""
    for line in lines[next(i for i, line in enumerate(lines) if line.startswith("Ready:")) :]:
        if not line.startswith("  "):
            heading = line
            continue
        command = line.strip()
        if command.startswith("export "):
            printed.export = command
        elif re.search(r" local(?:cloud)? down ", command):
            printed.down = command
        elif printed.tables and printed.tables[-1][0] == heading:
            printed.tables[-1][1].append(command)
        else:
            printed.tables.append((heading, [command]))
    return printed


class Localcloud:
    """A `python -m localcloud ...` process (or `command ...`: the installed `scheduled-table local`, say), its output
    collected line by line as it comes."""

    def __init__(
        self, args: list[str], env: dict[str, str], command: list[str] | None = None, cwd: Path = REPO
    ) -> None:
        self.process = subprocess.Popen(
            [*(command or [sys.executable, "-m", "localcloud"]), *args],
            cwd=cwd,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: list[str] = []
        self.err: list[str] = []
        self._readers = [
            threading.Thread(target=self._collect, args=(stream, lines), daemon=True)
            for stream, lines in ((self.process.stdout, self.out), (self.process.stderr, self.err))
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _collect(stream: Any, lines: list[str]) -> None:
        for line in stream:
            lines.append(line.rstrip("\n"))

    def wait_for(self, condition: Callable[[], object], seconds: float, what: str) -> None:
        def met() -> bool:
            if condition():
                return True
            assert self.process.poll() is None, f"exited with {self.process.returncode} before {what}: {self.err}"
            return False

        until(met, seconds, what)

    def ready(self) -> Printed:
        self.wait_for(lambda: any(line.startswith("Stop the cloud:") for line in self.out), DEPLOY_SECONDS, "ready")
        return parse_printed(list(self.out))

    def stop(self, signum: int) -> int:
        self.process.send_signal(signum)
        code = self.process.wait(timeout=EXIT_SECONDS)
        for reader in self._readers:
            reader.join(timeout=EXIT_SECONDS)
        return code

    def close(self) -> None:
        """After a failure too: SIGTERM first, so the ministack it started is stopped and its files removed."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=EXIT_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=EXIT_SECONDS)


def sh(command: str, export: str, env: dict[str, str], cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """One printed command, after the printed export line, as a user's bash would run it (failing if any part of a
    pipeline fails)."""
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", f"{export}\n{command}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=EFFECT_SECONDS,
    )


def without_aws_settings() -> dict[str, str]:
    """This environment less every AWS setting, and no config files: the printed export line must be enough."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


def aws_calls(command: str) -> list[list[str]]:
    """Each `aws ...` invocation in a printed command line, as its arguments (the shell's due time read as 0)."""
    segments = re.split(r"\s*(?:\||;|\bdo\b|\bdone\b)\s*", DUE_TIME.sub("0", command))
    return [shlex.split(segment)[1:] for segment in segments if segment.startswith("aws ")]


def option(command: str, name: str) -> str:
    found = re.search(rf"--{name} (\S+)", command)
    assert found, f"--{name} in {command}"
    return shlex.split(found.group(1))[0]


def item_of(put: str) -> dict[str, Any]:
    [argv] = aws_calls(put)
    item: dict[str, Any] = json.loads(argv[argv.index("--item") + 1])
    return item


def echoed(stdout: str) -> list[dict[str, Any]]:
    """The message bodies a printed receive echoed (one JSON object a line)."""
    bodies = []
    for line in stdout.splitlines():
        with contextlib.suppress(ValueError):
            body = json.loads(line)
            if isinstance(body, dict):
                bodies.append(body)
    return bodies


def effect(
    commands: list[str],
    run: Callable[[str], subprocess.CompletedProcess[str]],
    client: Callable[[str], Any],
    printed: dict[str, str],
) -> Callable[[], bool]:
    """Whether the item a table's printed put-item wrote has done what the table is for, as its other printed
    commands show (`printed`: what each printed when it ran as printed), or its due queue."""
    [put] = [c for c in commands if "put-item" in c]
    table, item = option(put, "table-name"), item_of(put)
    schema = client("dynamodb").describe_table(TableName=table)["Table"]["KeySchema"]
    key = {k["AttributeName"]: item[k["AttributeName"]] for k in schema}
    # A ttl table's due event may already be in the queue when its printed receive runs (its item expires seconds
    # after the write; on a loaded machine the commands between take longer): that receive then printed it.
    seen: list[dict[str, Any]] = [body for command in commands for body in echoed(printed.get(command, ""))]

    def met() -> bool:
        for command in commands:
            if "get-item" in command:  # aggregate: the group's total is the one score written
                total = json.loads(run(command).stdout or "{}").get("Item", {})
                scores = {v["N"] for v in item.values() if "N" in v}
                return any(v.get("N") in scores for name, v in total.items() if name not in key)
            if " fire " in command:  # polling: the job ran (tick again: the first tick may precede its indexing)
                found = client("dynamodb").get_item(TableName=table, Key=key).get("Item", {})
                if found.get("stStatus", {}).get("S") == "DONE":
                    return True
                assert run(command).returncode == 0
                return False
        for command in commands:
            # eventbridge: the item's schedule (it fires a minute or two later); ttl: the expired item's due event,
            # printed by the printed receive or in the queue after it (a precise table's schedule may be gone by then)
            if "list-schedules" in command and json.loads(run(command).stdout)["Schedules"]:
                return True
            if " emails " in command:  # email: the reminder itself (its at() schedule is gone once it has run)
                addresses = [value["S"] for value in item.values() if "@" in value.get("S", "")]
                if addresses and all(address in run(command).stdout for address in addresses):
                    return True
            if "receive-message" in command:
                seen.extend(body for body, _ in drain_due_events(client, option(command, "queue-url")))
                if {name: next(iter(value.values())) for name, value in key.items()} in [b.get("keys") for b in seen]:
                    return True
        return False

    return met


@pytest.fixture(scope="module")
def stay(fresh_cloud: Ministack) -> Iterator[tuple[Localcloud, Printed]]:
    running = Localcloud(["up", "--stay", "--endpoint-url", fresh_cloud.endpoint], dict(os.environ))
    try:
        yield running, running.ready()
    finally:
        running.close()


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """Where `aws` is the AWS CLI installed here, or, on a machine without one, the botocore stand-in
    (tests/localcloud/aws_cli.py). One of the two: running the printed commands through both doubled the test's
    time (every table's effect is waited for again) to check the stand-in, which is only a fallback."""
    env = without_aws_settings()
    if shutil.which("aws") is not None:
        return env
    script = tmp_path / "bin" / "aws"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m tests.localcloud.aws_cli "$@"\n')
    script.chmod(0o755)
    return {**env, "PATH": f"{script.parent}{os.pathsep}{env['PATH']}", "PYTHONPATH": str(REPO)}


def test_the_printed_commands_name_only_the_deployed_stack_and_suit_both_cli_versions(
    stay: tuple[Localcloud, Printed], fresh_cloud: Ministack
) -> None:
    _, printed = stay
    endpoint = fresh_cloud.endpoint
    assert printed.export.split()[1:] == [
        "AWS_ACCESS_KEY_ID=test",
        "AWS_SECRET_ACCESS_KEY=test",
        f"AWS_DEFAULT_REGION={REGION}",
        "AWS_PAGER=",  # CLI v2 pages output otherwise; v1 ignores it
    ]
    for command in [*printed.commands, printed.down]:
        assert command.startswith(("aws ", ".venv/bin/python -m localcloud ")), command
        calls = aws_calls(command)
        assert len(calls) == command.count("aws "), command
        for argv in calls:
            # Every call reaches the local cloud (an older CLI ignores AWS_ENDPOINT_URL), and takes only options the
            # operation has in both versions: no v2-only option, no blob (v1 reads it raw, v2 as base64).
            assert argv[argv.index("--endpoint-url") + 1] == endpoint, argv
            aws_cli.request(argv)
        if "receive-message" in command:
            assert "delete-message" in command, f"a receive must delete what it read: {command}"
    state = snapshot(endpoint)
    joined = "\n".join(printed.commands)
    # One group of commands per table of the stack (the ledgers are the component's own), naming what it deployed.
    assert {option(c, "table-name") for c in printed.commands if "put-item" in c} == {
        t for t in state["tables"] if not t.endswith("-ledger")
    }
    # One block per component; each has a ledger (two of them share the table the stack does not own).
    assert len(printed.tables) == len([t for t in state["tables"] if t.endswith("-ledger")])
    assert set(re.findall(r"--table-name (\S+)", joined)) <= set(state["tables"])
    assert set(re.findall(r"--queue-url (\S+)", joined)) <= set(state["queues"])
    assert {option(c, "group-name") for c in printed.commands if "list-schedules" in c} == set(state["schedule_groups"])
    # Every polling tick rule can be fired by hand; `reconcile_every`'s rule (`{name}-reconcile`) runs by itself and
    # needs no command of the user's.
    ticks = {r for r in state["rules"] if not r.endswith("-reconcile")}
    assert {option(c, "rule") for c in printed.commands if " fire " in c} == ticks


def test_the_printed_commands_work_as_printed(
    stay: tuple[Localcloud, Printed], fresh_cloud: Ministack, cli_env: dict[str, str]
) -> None:
    _, printed = stay
    client = clients(fresh_cloud.endpoint, REGION)
    sqs = client("sqs")
    # GIVEN a message waiting in every queue a printed receive reads (so none waits out its 20 s)
    markers = {}
    for command in printed.commands:
        if "receive-message" in command:
            markers[command] = f"marker-{uuid.uuid4()}"
            sqs.send_message(
                QueueUrl=option(command, "queue-url"), MessageBody=json.dumps({"marker": markers[command]})
            )
    # WHEN each printed command runs, in order, as printed
    out: dict[str, str] = {}
    for command in printed.commands:
        result = sh(command, printed.export, cli_env)
        assert (result.returncode, result.stderr) == (0, ""), command
        out[command] = result.stdout
        if command in markers:
            # THEN a receive printed what it read and deleted it: nothing is left in flight to come back later
            assert markers[command] in result.stdout
            attributes = sqs.get_queue_attributes(
                QueueUrl=option(command, "queue-url"), AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
            )["Attributes"]
            assert attributes["ApproximateNumberOfMessagesNotVisible"] == "0", command
    # AND each item written does what its table is for
    for heading, commands in printed.tables:
        met = effect(commands, lambda c: sh(c, printed.export, cli_env), client, out)
        until(met, EFFECT_SECONDS, heading, every=EFFECT_POLL_SECONDS)
    # AND nothing written was refused: no dead letter and no poison anywhere
    for url in snapshot(fresh_cloud.endpoint)["queues"]:
        if "poison" in url or "dlq" in url:
            assert queue_depth(client, url) == 0, url


def test_up_stay_prints_the_consoles_address_and_the_page_shows_the_stack(
    stay: tuple[Localcloud, Printed], fresh_cloud: Ministack
) -> None:
    """The console comes with `up --stay`: its printed address (with its token) opens a page naming the tables.
    (Before the test that runs `down` and stops the shared `up --stay`.)"""
    import http.cookiejar
    import urllib.request

    running, _ = stay
    running.wait_for(lambda: any(line.startswith("console: open ") for line in running.out), 60, "console")
    line = next(line for line in running.out if line.startswith("console: open "))
    address = line.split()[2]
    assert address.startswith("http://127.0.0.1:") and "token=" in address, line
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    with browser.open(address, timeout=30) as answer:  # the token is moved into a cookie by a redirect
        page = answer.read().decode()
    assert answer.status == 200
    tables = [t for t in snapshot(fresh_cloud.endpoint)["tables"] if not t.endswith("-ledger")]
    assert any(table in page for table in tables), page[:2000]


def test_down_while_it_runs_then_ctrl_c_end_it_without_a_traceback(
    stay: tuple[Localcloud, Printed], fresh_cloud: Ministack
) -> None:
    running, printed = stay
    # WHEN the printed `down` runs while `up --stay` and its emulators are running
    result = sh(printed.down, printed.export, without_aws_settings())
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("removed ")
    # (all but `backlog` and `clinic`, the tables the stack acts on but does not own)
    assert {kind: left for kind, left in snapshot(fresh_cloud.endpoint).items() if left} == {
        "tables": ["backlog", "clinic"],
        "ttl": {"backlog": {"TimeToLiveStatus": "DISABLED"}, "clinic": {"TimeToLiveStatus": "DISABLED"}},
    }
    # THEN the emulators let go of the deleted tables with a note, not a traceback
    running.wait_for(lambda: any("no longer emulated" in line for line in running.err), EFFECT_SECONDS, "TTL note")
    # AND Ctrl-C ends it
    assert running.stop(signal.SIGINT) == 0
    assert running.out[-1] == "stopping"
    assert [line for line in running.err if not line.startswith("localcloud: ")] == []


def test_kill_stops_its_own_ministack_and_removes_every_temporary_file(tmp_path: Path) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    running = Localcloud(["up", "--stay"], {**os.environ, "TMPDIR": str(temporary)})
    try:
        printed = running.ready()
        # GIVEN its scratch directory, holding ministack's log, pid file and (once a function ran) Lambda workers
        [scratch] = temporary.iterdir()
        assert (scratch / "ministack.log").is_file()
        [pid_file] = scratch.glob("tmp/ministack-*.pid")
        ministack_pid = int(pid_file.read_text())
        fire = next(c for c in printed.commands if " fire " in c)
        assert sh(fire, printed.export, without_aws_settings()).returncode == 0
        running.wait_for(lambda: list(scratch.glob("tmp/ministack-lambda-*")), EFFECT_SECONDS, "a Lambda worker")
        endpoint = option(fire, "endpoint-url")
        # WHEN it is killed (SIGTERM)
        assert running.stop(signal.SIGTERM) == 0
    finally:
        running.close()
    # THEN it stopped as Ctrl-C stops it, ministack is gone and so is every file either wrote
    assert running.out[-1] == "stopping"
    assert running.err == []
    assert list(temporary.iterdir()) == []
    with pytest.raises(ProcessLookupError):
        os.kill(ministack_pid, 0)
    with pytest.raises(OSError):
        http_json(endpoint + HEALTH, timeout=1.0)


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["preview", "--config-file", "{bad}"], "mode: 'sometimes' is not a mode"),
        (["up", "--stay", "--config-file", "{bad}"], "mode: 'sometimes' is not a mode"),
        (["down", "--endpoint-url", "http://127.0.0.1:9", "--config-file", "{bad}"], "mode: 'sometimes' is not a mode"),
        (["up", "--config-file", "{unreadable}"], ":2:1: not valid YAML"),
        (["up", "--stack", "nonexistent"], "Pulumi.nonexistent.yaml: no such stack configuration (stacks here:"),
    ],
)
def test_a_configuration_error_is_one_line_and_leaves_nothing_behind(
    tmp_path: Path, args: list[str], problem: str
) -> None:
    (tmp_path / "bad.yaml").write_text("config:\n  scheduled-table:mode: sometimes\n")
    (tmp_path / "unreadable.yaml").write_text("config: [1\n")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    paths = {"bad": tmp_path / "bad.yaml", "unreadable": tmp_path / "unreadable.yaml"}
    result = subprocess.run(
        [sys.executable, "-m", "localcloud", *(a.format(**paths) for a in args)],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(temporary)},
        capture_output=True,
        text=True,
        timeout=EFFECT_SECONDS,
    )
    assert (result.returncode, result.stdout) == (2, "")
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and problem in line
    assert list(temporary.iterdir()) == []


def test_the_instructions_follow_the_stack_deployed() -> None:
    # GIVEN the one-table dev stack (eventbridge to its due queue), deployed under mocks
    mocks = run_program("dev")
    deployment = Deployment("dev", "http://127.0.0.1:1", REGION, mocks.registrations(), mocks.stack_outputs)
    deployment = Deployment(**{**deployment.__dict__, "tables": stack_tables("dev")})
    # WHEN its instructions are made
    printed = parse_printed(instructions(deployment, ["--stack", "dev"]).splitlines())
    # THEN they name its table, schedule group and queue, none of the local stack's, and `down` names the stack
    joined, outputs = "\n".join(printed.commands), mocks.stack_outputs
    assert set(re.findall(r"--table-name (\S+)", joined)) == {outputs["table_name"]}
    assert set(re.findall(r"--group-name (\S+)", joined)) == {outputs["schedule_group_name"]}
    assert set(re.findall(r"--queue-url (\S+)", joined)) == {outputs["due_queue_url"]}
    assert "fire" not in joined and "emails" not in joined
    assert printed.down.endswith("--stack dev")
