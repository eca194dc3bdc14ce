"""`scheduled-table console` in the local cloud (ministack, IAM enforced), driven in Debian's Chromium (Playwright's
Python package pointed at /usr/bin/chromium): a polling job written to the table shows as upcoming (read from the
due index), then, once the tick ran, as delivered with its lateness (from the processor's log line); an eventbridge
item whose target does not exist is parked with its reason and fix, and once the target is made, the page's redrive
shows its dry run, then replays it when confirmed, and the target gets it. A schedule deleted behind the component's
back shows on Drift (`reconcile --dry-run`'s finding, with what was read and how long it took), and Delivered says
in one line that Scheduler's own deliveries pass through no function's log, with the functions' published metrics
beside the deliveries. Under the read-only policy `scheduled-table policy console` prints, the page has no redrive
button and refuses the action, and Drift is read all the same.

Each view is screenshotted into docs/assets/console-*.png for docs/console.md when CONSOLE_SCREENSHOTS=1.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import boto3
import pytest

from components.cli.aws import clients as operator_clients
from components.cli.console import launch
from components.cli.console.server import Server
from localcloud.deploy import Deployment
from localcloud.emulators import fire_rule
from localcloud.provision import clients
from localcloud.server import Ministack
from tests.e2e.conftest import deploy

REGION = "eu-west-1"
MISSING = "console-missing-target"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync"]  # fmt: skip
DEADLINE_SECONDS = 120.0
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "assets"

CONFIG = f"""
config:
  aws:region: {REGION}
  scheduled-table:deletionProtection: "false"
  scheduled-table:logRetentionDays: "1"
  scheduled-table:logLevel: INFO
  scheduled-table:tables:
    - name: jobs
      mode: polling
      shards: 2
    - name: notes
      mode: eventbridge
      target:
        type: queue
        arn: arn:aws:sqs:{REGION}:ACCOUNT:{MISSING}
"""


def wait_for(what: str, check: Callable[[], Any], every: float = 2.0) -> Any:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_SECONDS:.0f} s: {what}")
        time.sleep(every)
    return found


pytestmark = pytest.mark.usefixtures("operator_credentials")


@pytest.fixture(scope="module")
def deployment(fresh_cloud: Ministack, tmp_path_factory: pytest.TempPathFactory) -> Deployment:
    return deploy(fresh_cloud, tmp_path_factory.mktemp("console"), "console", CONFIG)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()


@pytest.fixture
def console(deployment: Deployment) -> Iterator[tuple[Server, str]]:
    server, address = launch(operator_clients(deployment.endpoint, REGION))
    yield server, address
    server.shutdown()
    server.server_close()


def shot(page: Any, name: str) -> None:
    if os.environ.get("CONSOLE_SCREENSHOTS") == "1":
        page.screenshot(path=str(SHOTS / f"console-{name}.png"), full_page=True)


def opened(browser: Any, address: str) -> Any:
    """A new page at the printed address: the token becomes a cookie and leaves the URL."""
    page = browser.new_page()
    page.goto(address)
    assert urlsplit(page.url).query == ""
    return page


def view(page: Any, address: str, path: str, **query: str) -> str:
    """Open a view (the console's cookie already set) and return its text."""
    parts = urlsplit(address)
    page.goto(f"{parts.scheme}://{parts.netloc}{path}?{urlencode(query)}")
    return str(page.inner_text("main"))


def test_a_due_job_shows_as_upcoming_then_as_delivered_with_its_lateness(
    deployment: Deployment, console: tuple[Server, str], browser: Any
) -> None:
    _, address = console
    jobs = deployment.outputs["jobs"]
    function = jobs["function_name"]
    aws = clients(deployment.endpoint, REGION)
    page = opened(browser, address)
    assert "jobs" in page.inner_text("main")

    due = (datetime.now(UTC) + timedelta(seconds=40)).replace(microsecond=0)
    written = due.strftime("%Y-%m-%dT%H:%M:%SZ")
    aws("dynamodb").put_item(
        TableName=jobs["table_name"], Item={"PK": {"S": "job-1"}, "SK": {"S": "run"}, "dueAt": {"S": written}}
    )

    def listed() -> str:
        text = view(page, address, "/upcoming", stack=function, window="hour")
        return text if "job-1" in text else ""

    upcoming = wait_for("the job in Upcoming (indexed by the assigner)", listed)
    assert written in upcoming and "2 shard(s) queried by due time" in upcoming
    assert page.locator(".timeline .tick").count() == 1
    shot(page, "upcoming")

    time.sleep(max(0.0, due.timestamp() - time.time()) + 1)

    def delivered() -> str:
        fire_rule(aws, jobs["tick_rule_name"], REGION)  # the tick, now rather than at its minute
        text = view(page, address, "/delivered", stack=function, since="3600")
        return text if "job-1" in text else ""

    text = wait_for("the job in Delivered", delivered, every=4.0)
    row = page.locator("tr.delivery", has_text="job-1")
    assert row.count() == 1 and written in row.inner_text()
    late = float(re.findall(r"([\d.]+) s", row.locator("td.late").inner_text())[0])
    assert 0 <= late < DEADLINE_SECONDS
    assert "lateness bound of mode polling" in text
    # The processor's published metrics beside the delivery, summed over the window (its embedded-metric lines).
    dispatched = page.locator("tr.metric", has_text="Dispatched")
    assert dispatched.count() == 1 and int(dispatched.locator("td.number").inner_text()) >= 1
    assert "scheduler-note" not in page.content()  # polling: every send is the processor's, in its log
    shot(page, "delivered")
    after = view(page, address, "/upcoming", stack=function, window="hour")
    assert "job-1" not in after


def visible(aws: Callable[[str], Any], url: str) -> int:
    found = aws("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(found["Attributes"]["ApproximateNumberOfMessages"])


def test_a_parked_item_shows_its_reason_and_is_redriven_from_the_page_after_its_dry_run(
    deployment: Deployment, console: tuple[Server, str], browser: Any
) -> None:
    _, address = console
    notes = deployment.outputs["notes"]
    function = notes["function_name"]
    aws = clients(deployment.endpoint, REGION)
    aws("dynamodb").put_item(
        TableName=notes["table_name"],
        Item={"PK": {"S": "note-1"}, "SK": {"S": "1"}, "dueAt": {"S": "2020-01-01T00:00:00Z"}},
    )  # already due: sent at once, to a queue that does not exist
    wait_for("the note parked in the poison queue", lambda: visible(aws, notes["poison_queue_url"]) >= 1)

    page = opened(browser, address)
    view(page, address, "/parked", stack=function)
    row = page.locator("tr.parked", has_text="note-1")
    assert "NonExistentQueue" in row.locator("td.reason").inner_text()
    assert row.locator("td.fix").inner_text().startswith("the target is missing: create it")
    shot(page, "parked")

    target = aws("sqs").create_queue(QueueName=MISSING)["QueueUrl"]  # the fix
    page.click("text=Redrive poison queue: dry run first")
    dry = page.inner_text("main")
    assert "would replay" in dry and "note-1" in dry
    assert "dry run, nothing changed: all of it can be redriven (exit status 0)" in dry
    assert visible(aws, notes["poison_queue_url"]) == 1  # the dry run changed nothing
    shot(page, "redrive-dry-run")

    confirm = page.locator("input[name=confirm]").get_attribute("value")
    page.click("text=Confirm: redrive poison now")
    done = page.inner_text("main")
    assert "poison queue: 1 replayed" in done and "done: everything in scope was redriven (exit status 0)" in done
    messages = aws("sqs").receive_message(QueueUrl=target, MaxNumberOfMessages=10, WaitTimeSeconds=2)["Messages"]
    assert [json.loads(m["Body"])["keys"]["PK"] for m in messages] == ["note-1"]
    assert visible(aws, notes["poison_queue_url"]) == 0
    shot(page, "redrive-done")

    # The confirmation is used: sent again (as the page sent it), it is refused and nothing runs twice.
    status, body = post(address, stack=function, source="poison", step="confirm", confirm=str(confirm))
    assert status == 409 and "this confirmation is used or expired" in body


def test_a_schedule_deleted_behind_the_components_back_shows_on_drift_and_delivered_says_what_it_cannot_show(
    deployment: Deployment, console: tuple[Server, str], browser: Any
) -> None:
    _, address = console
    notes = deployment.outputs["notes"]
    function, group = notes["function_name"], notes["schedule_group_name"]
    aws = clients(deployment.endpoint, REGION)
    due = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    aws("dynamodb").put_item(
        TableName=notes["table_name"], Item={"PK": {"S": "note-drift"}, "SK": {"S": "1"}, "dueAt": {"S": due}}
    )

    def scheduled() -> list[str]:
        scheduler = aws("scheduler")
        names = [s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]]
        held = {n: scheduler.get_schedule(GroupName=group, Name=n)["Target"]["Input"] for n in names}
        return [n for n, given in held.items() if "note-drift" in given]

    [name] = wait_for("the consumer's schedule of note-drift", scheduled)
    aws("scheduler").delete_schedule(GroupName=group, Name=name)  # behind the component's back

    page = opened(browser, address)
    text = view(page, address, "/drift", stack=function)
    row = page.locator("tr.drift", has_text="note-drift")
    assert row.count() == 1 and row.locator("td").first.inner_text() == "would schedule"
    assert (
        "dry run, nothing changed. reconcile:" in text
        and "The same code as scheduled-table reconcile --dry-run" in text
    )
    assert re.search(r"read: the whole table \(so the schedules no item asks for.*took \d+\.\d s", text)
    assert f"scheduled-table reconcile --table {notes['table_name']} repairs them" in text
    assert page.locator("meta[http-equiv=refresh]").count() == 0  # each load is a scan: no refresh
    assert scheduled() == []  # a dry run: nothing was made
    shot(page, "drift")

    text = view(page, address, "/delivered", stack=function, since="3600")
    assert (
        "Not shown: the due events Scheduler delivers itself at their time, which pass through no function's log"
        in text
    )
    assert f"CloudWatch holds no AWS/Scheduler data point for group {group}" in text  # the local cloud publishes none
    records = page.locator("tr.metric", has_text="Records")
    assert records.count() == 1 and int(records.locator("td.number").inner_text()) >= 1  # the consumer's batches
    shot(page, "delivered-scheduler")


def post(address: str, **form: str) -> tuple[int, str]:
    """A POST as the console's page sends it: its token in the form and the cookie, its own origin."""
    parts = urlsplit(address)
    port, token = parts.port, parts.query.split("=", 1)[1]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {
        "Host": f"127.0.0.1:{port}",
        "Origin": f"http://127.0.0.1:{port}",
        "Cookie": f"scheduled_table_console_{port}={token}",
        "Content-Type": "application/x-www-form-urlencoded",
    }
    connection.request("POST", "/redrive", body=urlencode({**form, "token": token}), headers=headers)
    response = connection.getresponse()
    answer = response.status, response.read().decode()
    connection.close()
    return answer


def read_only_client(deployment: Deployment) -> Callable[[str], Any]:
    """An operator allowed exactly `scheduled-table policy console`'s policy (an IAM user of the local cloud)."""
    from components.cli.command import main

    admin = clients(deployment.endpoint, REGION)
    lines: list[str] = []
    function = deployment.outputs["notes"]["function_name"]
    argv = ["policy", "console", "--function", function, "--endpoint-url", deployment.endpoint, "--region", REGION]
    assert main(argv, emit=lines.append) == 0
    policy = json.loads("\n".join(lines))
    assert not any("sqs:DeleteMessage" in s["Action"] or "lambda:InvokeFunction" in s["Action"]
                   for s in policy["Statement"])  # fmt: skip
    iam = admin("iam")
    iam.create_user(UserName="console-reader")
    iam.put_user_policy(UserName="console-reader", PolicyName="console", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="console-reader")["AccessKey"]
    session = boto3.session.Session(
        region_name=REGION, aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"]
    )
    made: dict[str, Any] = {}

    def client(service: str) -> Any:
        if service not in made:
            made[service] = session.client(service, endpoint_url=deployment.endpoint)
        return made[service]

    return client


def test_under_the_read_only_policy_the_page_has_no_redrive_and_refuses_the_action(
    deployment: Deployment, browser: Any
) -> None:
    notes = deployment.outputs["notes"]
    function = notes["function_name"]
    admin = clients(deployment.endpoint, REGION)
    parked = {"reason": "Throttling", "error": "E", "mode": "eventbridge", "table": notes["table_name"]}
    admin("sqs").send_message(QueueUrl=notes["poison_queue_url"], MessageBody=json.dumps(parked))

    server, address = launch(read_only_client(deployment), [function])
    try:
        page = opened(browser, address)
        text = view(page, address, "/parked", stack=function)
        assert "Throttling" in text and "poison queue: 1 visible" in text
        assert f"read-only: these credentials may not invoke {function} (lambda:InvokeFunction)" in text
        assert page.locator("form").count() == 0
        shot(page, "read-only")
        drift = view(page, address, "/drift", stack=function)  # reconcile --dry-run's reads, granted by the policy
        assert "dry run, nothing changed. reconcile:" in drift and "stopped" not in drift
        delivered = view(page, address, "/delivered", stack=function)  # the logs' metrics, Scheduler's counts
        assert "CloudWatch holds no AWS/Scheduler data point" in delivered and "refused" not in delivered

        # The action, sent as the page would have (its token, its cookie, its origin): refused, nothing changed.
        status, body = post(address, stack=function, source="poison", step="dry-run")
        assert status == 403 and "read-only: these credentials may not invoke" in body
        assert visible(admin, notes["poison_queue_url"]) == 1
    finally:
        server.shutdown()
        server.server_close()
