"""`scheduled-table local up` on a user's own program, outside this repo: a Pulumi project in a temporary folder
with its own queue, its own event bus and a table it expects to exist (made by `--existing-table`), deployed into
ministack by the command's entry point; an item written into the user's table arrives as a due event in the
user's queue, and what `up --stay` would print names that table and that queue.

Second precision is used so the due event comes within seconds (a minute-precision schedule may run up to two
minutes after its due time), which keeps this test well under a minute."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from localcloud.__main__ import main
from localcloud.deploy import TableKeys, up
from localcloud.guide import found_tables, program_instructions
from localcloud.provision import clients
from localcloud.server import Ministack

from .conftest import snapshot

PROJECT = "name: shop\nruntime: python\ndescription: a user's project\n"
PROGRAM = """\
import pulumi
import pulumi_aws as aws
from scheduled_table import ExistingTable, QueueTarget, ScheduledTable, ScheduledTableArgs

inbox = aws.sqs.Queue("inbox")
bus = aws.cloudwatch.EventBus("orders-bus")
orders = ScheduledTable(
    "orders",
    ScheduledTableArgs(
        mode="eventbridge",
        precision="second",
        existing_table=ExistingTable(name="orders"),
        time_attribute="shipAt",
        target=QueueTarget(inbox.arn),
    ),
)
pulumi.export("inbox_url", inbox.url)
pulumi.export("bus_name", bus.name)
"""
REGION = "eu-west-1"


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shop")
    (folder / "Pulumi.yaml").write_text(PROJECT)
    (folder / "__main__.py").write_text(PROGRAM)
    return folder


def test_local_up_deploys_a_users_program_and_its_due_event_arrives(
    program: Path, fresh_cloud: Ministack, capsys: pytest.CaptureFixture[str]
) -> None:
    endpoint = fresh_cloud.endpoint
    # WHEN the user runs `scheduled-table local up --endpoint-url URL --existing-table orders:PK:SK` in their folder
    code = main(
        ["up", "--endpoint-url", endpoint, "--existing-table", "orders:PK:SK"],
        prog="scheduled-table local",
        default_program=program,
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "made table 'orders'" in printed
    state = snapshot(endpoint)
    # THEN the user's own resources are there beside the component's
    assert "orders" in state["tables"] and any(url.endswith("/inbox") for url in state["queues"])
    assert "orders-bus" in [b["Name"] for b in clients(endpoint, REGION)("events").list_event_buses()["EventBuses"]]
    inbox = next(url for url in state["queues"] if url.endswith("/inbox"))
    # WHEN an item is written due in 5 s THEN its due event reaches the user's queue, not before its second
    due = int(time.time()) + 5
    client = clients(endpoint, REGION)
    client("dynamodb").put_item(
        TableName="orders", Item={"PK": {"S": "ORDER#1"}, "SK": {"S": "SHIP"}, "shipAt": {"N": str(due)}}
    )
    body = None
    deadline = time.time() + 40
    while body is None and time.time() < deadline:
        messages = client("sqs").receive_message(QueueUrl=inbox, WaitTimeSeconds=2).get("Messages", [])
        body = json.loads(messages[0]["Body"]) if messages else None
    assert body is not None, "no due event reached the user's queue within 40 s"
    assert body["keys"] == {"PK": "ORDER#1", "SK": "SHIP"}
    assert time.time() >= due


def test_up_stay_tells_the_user_how_to_write_their_table_and_read_their_queue(
    program: Path, fresh_cloud: Ministack
) -> None:
    # GIVEN the program deployed (again: `up` is idempotent)
    deployment = up(fresh_cloud.endpoint, "local", program, existing=[TableKeys("orders", "PK", "SK")])
    [found] = found_tables(deployment.resources)
    assert (found.component, found.table, found.config["timeAttribute"]) == ("orders", "orders", "shipAt")
    text = program_instructions(deployment, "scheduled-table local", ["--program", str(program)])
    # THEN the printed commands write into the user's table and read the user's queue, and `down` names the program
    put = next(line for line in text.splitlines() if "dynamodb put-item" in line)
    assert "--table-name orders" in put and '"shipAt":{"N":' in put
    receive = next(line for line in text.splitlines() if "sqs receive-message" in line)
    assert "--queue-url " in receive and receive.split("--queue-url ")[1].split()[0].endswith("/inbox")
    assert f"scheduled-table local down --endpoint-url {fresh_cloud.endpoint} --program {program}" in text
    assert "seed" not in text


def test_inspect_reads_the_deployed_users_table_in_the_local_cloud(
    program: Path, fresh_cloud: Ministack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`scheduled-table inspect` against the local cloud: the user's table is found from its consumer function, its
    pending schedule (an item due next year) listed, its queues read and left as they were. The operator's
    credentials are the local cloud's admin's (IAM is enforced there; the suite's placeholder keys are unknown)."""
    from components.cli.command import main as operator
    from localcloud.provision import CREDENTIALS

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", CREDENTIALS["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CREDENTIALS["aws_secret_access_key"])
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)

    deployment = up(fresh_cloud.endpoint, "local", program, existing=[TableKeys("orders", "PK", "SK")])
    consumer = next(
        r.outputs["name"] for r in deployment.of_type("lambda/function:Function") if r.name == "orders-scheduler"
    )
    client = clients(fresh_cloud.endpoint, REGION)
    due = int(time.time()) + 365 * 24 * 3600
    client("dynamodb").put_item(
        TableName="orders", Item={"PK": {"S": "ORDER#2"}, "SK": {"S": "SHIP"}, "shipAt": {"N": str(due)}}
    )
    group = str(deployment.outputs.get("orders", {}).get("schedule_group_name") or "")
    lines: list[str] = []

    def scheduled() -> bool:
        lines.clear()
        argv = ["inspect", "--function", consumer, "--endpoint-url", fresh_cloud.endpoint, "--region", REGION]
        assert operator(argv, emit=lines.append) == 0, lines
        return any(line.startswith("  schedule group ") and line.endswith(": 1") for line in lines)

    deadline = time.time() + 40
    while not scheduled() and time.time() < deadline:
        time.sleep(1)
    assert scheduled(), lines
    assert lines[0].startswith("table orders (mode eventbridge)"), lines
    assert "  poison queue: 0 visible, 0 in flight" in lines, lines
    assert group == "" or any(group in line for line in lines), lines


def test_up_names_items_written_under_another_time_attribute(
    program: Path, fresh_cloud: Ministack, capsys: pytest.CaptureFixture[str]
) -> None:
    """Items the program writes with its due time under another name (`shipWhen`) than the table's time_attribute
    (`shipAt`) are ignored without a trace: no schedule, nothing parked. Failed before: `up` said nothing of them."""
    endpoint = fresh_cloud.endpoint
    up(endpoint, "local", program, existing=[TableKeys("orders", "PK", "SK")])
    dynamodb = clients(endpoint, REGION)("dynamodb")
    for number, when in ((7, {"S": "2027-03-01T09:00:00Z"}), (8, {"N": "1803200000"})):
        item = {"PK": {"S": f"ORDER#{number}"}, "SK": {"S": "SHIP"}, "shipWhen": when, "weight": {"N": "3"}}
        dynamodb.put_item(TableName="orders", Item=item)
    # WHEN `up` runs again THEN its summary counts them and names the attribute they carry
    code = main(
        ["up", "--endpoint-url", endpoint, "--existing-table", "orders:PK:SK"],
        prog="scheduled-table local",
        default_program=program,
    )
    printed = capsys.readouterr().out.splitlines()
    assert code == 0, printed
    [note] = [line for line in printed if line.startswith("note: ")]
    assert note.startswith("note: table orders: 2 of "), note
    assert note.endswith(" items sampled have no `shipAt`; they have `shipWhen` (2): set time_attribute='shipWhen'?")
