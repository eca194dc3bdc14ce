"""The shared handler runtime's pure parts, and direct dispatch to each target kind (moto)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws
from st_core import naming, release, schedules, templates, timeparse
from st_core.clients import Clients
from st_core.dispatch import due_event, send_now, target_input
from st_core.errors import PermanentError, TransientError, is_transient
from st_core.poison import poison_message
from st_core.stream import decode_image, key_identity
from st_core.target_types.email import email_request

from tests.conftest import REGION
from tests.iam.enforce import acting_for_target

# -- time -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("due", "minute"),
    [
        pytest.param(datetime(2030, 1, 2, 3, 5, tzinfo=UTC), datetime(2030, 1, 2, 3, 5, tzinfo=UTC), id="on-a-minute"),
        pytest.param(
            datetime(2030, 1, 2, 3, 4, 59, tzinfo=UTC), datetime(2030, 1, 2, 3, 5, tzinfo=UTC), id="second-59"
        ),
    ],
)
def test_a_schedule_may_have_started_from_its_minute_less_the_clock_skew(due: datetime, minute: datetime) -> None:
    # Inside the 10 s lead a schedule may be firing (no new one is made for that minute), yet one deleted there has
    # surely not run: a cancel then forgets its marker (issue 24, defect 5).
    inside_lead = minute - timedelta(seconds=5)
    assert schedules.may_be_firing(due, inside_lead) and not schedules.may_have_started(due, inside_lead)
    assert not schedules.may_have_started(due, minute - schedules.CLOCK_SKEW - timedelta(milliseconds=1))
    assert schedules.may_have_started(due, minute - schedules.CLOCK_SKEW)
    # precision="second": its release schedule names the minute before the due time's
    before = minute - timedelta(minutes=1) if due.second == 0 else minute - timedelta(minutes=2)
    assert not release.may_have_started(due, before - timedelta(seconds=2))
    assert release.may_have_started(due, before - timedelta(seconds=1))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2030-01-02T03:04:05Z", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2030-01-02T03:04:05+01:00", datetime(2030, 1, 2, 2, 4, 5, tzinfo=UTC)),
        ("2030-01-02T03:04:05", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2030-01-02", datetime(2030, 1, 2, tzinfo=UTC)),
        (1893553445, datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
        # A fraction rounds up: acting at the returned second is never before the time the item names.
        (Decimal("1893553445.75"), datetime(2030, 1, 2, 3, 4, 6, tzinfo=UTC)),
        (" 1893553445 ", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ],
)
def test_parse_due_accepts_iso_and_epoch_seconds(value: object, expected: datetime) -> None:
    assert timeparse.parse_due(value) == expected


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("tomorrow", "is not ISO-8601 or epoch seconds"),
        ("", "empty string"),
        (True, "got a boolean"),
        (1893553445000, "milliseconds"),
        ([1], "got list"),
        (Decimal("NaN"), "not a finite number"),
    ],
)
def test_parse_due_refuses_with_a_reason(value: object, reason: str) -> None:
    with pytest.raises(PermanentError, match=reason):
        timeparse.parse_due(value)


def test_at_expression_and_due_format_are_utc() -> None:
    moment = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert timeparse.at_expression(moment) == "at(2030-01-02T03:04:05)"
    assert timeparse.format_due(moment) == "2030-01-02T03:04:05Z"


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        pytest.param(datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC), "0999-01-02T03:04:05Z", id="year-below-1000"),
        pytest.param(datetime(2030, 1, 2, 3, 4, 5, 999999, tzinfo=UTC), "2030-01-02T03:04:05Z", id="microseconds"),
        pytest.param(
            datetime(2030, 1, 1, 1, 30, tzinfo=timezone(timedelta(hours=2))), "2029-12-31T23:30:00Z", id="offset"
        ),
    ],
)
def test_due_times_are_written_in_utc_whole_seconds_and_four_digit_years(moment: datetime, text: str) -> None:
    """format_due's text whatever the moment's zone, fraction or year (its cheaper isoformat form writes the same)."""
    assert timeparse.format_due(moment) == text
    assert timeparse.at_expression(moment) == f"at({text[:-1]})"


def test_json_text_is_jsons_own_where_json_can_write_it_and_exact_where_it_cannot() -> None:
    from enum import StrEnum

    from st_core.jsontext import dumps

    class Kind(StrEnum):
        QUEUE = "queue"

    native = {"b": [1, 2.5, None, True, "é"], "a": {"z": (1, 2), "y": "x"}}
    assert dumps(native) == json.dumps(native, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    # Keys that are not strings are sorted as text (json would sort these as numbers: 1, 2, 10) and written as text.
    assert dumps({1: "a", 10: "b", 2: "c"}) == '{"1":"a","10":"b","2":"c"}'
    assert dumps({"n": Decimal("0.1000000000000000000000000000000000001"), "s": {"a"}}) == (
        '{"n":0.1000000000000000000000000000000000001,"s":"{\'a\'}"}'
    )
    assert dumps({"k": Kind.QUEUE, "nan": Decimal("NaN")}) == '{"k":"queue","nan":"NaN"}'
    # A document whose keys are strings (a due event) is written the same without the walk that checks them first.
    for document in (
        native,
        {"n": Decimal("0.1000000000000000000000000000000000001"), "s": {"a"}},
        {"k": Kind.QUEUE, "nan": Decimal("NaN"), "l": [Decimal("1.5"), {"z": 1, "a": None}]},
    ):
        assert dumps(document, str_keys=True) == dumps(document)


# -- names ------------------------------------------------------------------------------------------------------


def test_schedule_names_are_deterministic_valid_and_distinct() -> None:
    a = naming.schedule_name('{"PK":{"S":"1"}}', "1")
    assert a == naming.schedule_name('{"PK":{"S":"1"}}', "1")
    assert a != naming.schedule_name('{"PK":{"N":"1"}}', "1")  # same value, other type: other item
    for readable in ["", "#", "ü" * 100, "a" * 500, "x/y z"]:
        name = naming.schedule_name("k" + readable, readable)
        assert re.fullmatch(r"[0-9A-Za-z_.-]{1,64}", name), name


# -- templates --------------------------------------------------------------------------------------------------


def test_render_fills_attributes_and_keeps_literal_braces() -> None:
    assert templates.render("{{x}} {a} {n}", {"a": "A", "n": 2.0}) == "{x} A 2"


def test_render_cannot_reach_python_attributes() -> None:
    with pytest.raises(PermanentError, match=r"a\.__class__"):
        templates.render("{a.__class__}", {"a": "A"})


def test_render_names_missing_attributes() -> None:
    with pytest.raises(PermanentError, match="needs attribute\\(s\\) b, c"):
        templates.render("{c} {a} {b}", {"a": 1})


# -- stream decoding --------------------------------------------------------------------------------------------


def test_decode_image_gives_plain_json() -> None:
    image: dict[str, Any] = {
        "s": {"S": "x"},
        "n": {"N": "3"},
        "f": {"N": "2.5"},
        "b": {"BOOL": True},
        "z": {"NULL": True},
        "m": {"M": {"k": {"L": [{"N": "1"}, {"S": "a"}]}}},
        "ss": {"SS": ["b", "a"]},
        "ns": {"NS": ["10", "9"]},
        "bin": {"B": b"hi"},
    }
    assert decode_image(image) == {
        "s": "x",
        "n": 3,
        "f": 2.5,
        "b": True,
        "z": None,
        "m": {"k": [1, "a"]},
        "ss": ["a", "b"],
        "ns": [9, 10],
        "bin": "aGk=",
    }
    assert decode_image(None) is None


def test_numeric_keys_keep_every_digit_dynamodb_holds_in_their_identity() -> None:
    def record(number: str) -> Any:
        return {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"N": number}}}}

    # 38 significant digits (DynamoDB's most): keys that differ only in the last are two items, not one
    first, second = "1.234567890123456789012345678901234567", "1.234567890123456789012345678901234568"
    assert key_identity(record(first)) != key_identity(record(second))
    assert '"N":"' + first + '"' in key_identity(record(first))
    # and the forms DynamoDB takes for one number are still one identity
    assert key_identity(record("1.50")) == key_identity(record("1.5")) and key_identity(record("1.0")) == key_identity(
        record("1")
    )


def test_a_record_without_keys_is_permanent() -> None:
    with pytest.raises(PermanentError):
        key_identity({"eventName": "INSERT", "dynamodb": {}})  # type: ignore[typeddict-item]


# -- errors -----------------------------------------------------------------------------------------------------


def client_error(code: str, status: int) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        (client_error("ThrottlingException", 400), True),
        (client_error("Anything", 503), True),
        (client_error("TooManyRequestsException", 429), True),
        (EndpointConnectionError(endpoint_url="https://x"), True),
        (TransientError("race"), True),
        (client_error("ValidationException", 400), False),
        (ValueError("bug"), False),
    ],
)
def test_transient_classification(exc: Exception, transient: bool) -> None:
    assert is_transient(exc) is transient


def test_every_code_botocore_retries_is_retried_by_the_handlers_too() -> None:
    """The handlers' transient codes are a superset of botocore's standard retry mode's throttled and transient
    codes: what the SDK gave up retrying is retried with the record (Lambda's retry), not parked as poison."""
    from botocore.retries.standard import ThrottledRetryableChecker, TransientRetryableChecker
    from st_core.errors import TRANSIENT_CODES

    botocore_codes = set(ThrottledRetryableChecker()._throttled_error_codes)
    botocore_codes |= set(TransientRetryableChecker()._transient_error_codes)
    assert botocore_codes - TRANSIENT_CODES == set()
    for code in sorted(botocore_codes):
        assert is_transient(client_error(code, 400)), code


def test_poison_message_drops_images_that_do_not_fit_but_keeps_keys() -> None:
    big = {"S": "x" * 1_100_000}  # over the 1 MiB the component's own queues take
    record = {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "k"}}, "NewImage": {"blob": big}}}
    body = json.loads(poison_message(record=record, reason="r", error="E", mode="eventbridge", table="t"))
    assert body["record"]["dynamodb"] == {"Keys": {"PK": {"S": "k"}}} and "trimmed" in body["note"]


# -- dispatch ---------------------------------------------------------------------------------------------------


def event() -> Any:
    return due_event(
        mode="eventbridge",
        table="t",
        keys={"PK": "k"},
        due=datetime(2030, 1, 1, tzinfo=UTC),
        item={"a": 1},
        occurrence="k-occ",
    )


def test_email_request_needs_a_recipient_address() -> None:
    email = {"sender": "s@x.y", "recipientAttribute": "to", "subject": "S", "body": "B"}
    with pytest.raises(PermanentError, match="recipient attribute 'to'"):
        email_request(email, {"to": "nobody"})  # type: ignore[arg-type]


def test_send_now_to_sns_reaches_subscribers() -> None:
    with mock_aws():
        sns, sqs = boto3.client("sns", region_name=REGION), boto3.client("sqs", region_name=REGION)
        topic = sns.create_topic(Name="t")["TopicArn"]
        url = sqs.create_queue(QueueName="sub")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
        payload = target_input({"kind": "sns", "arn": topic}, event())
        with acting_for_target({"kind": "sns", "arn": topic}):
            send_now({"kind": "sns", "arn": topic}, payload, occurrence="o", clients=Clients())
        (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
        assert json.loads(message["Body"])["keys"] == {"PK": "k"}


def test_send_now_to_step_functions_starts_one_named_execution_even_twice() -> None:
    with mock_aws():
        sfn = boto3.client("stepfunctions", region_name=REGION)
        definition = json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}})
        machine = sfn.create_state_machine(name="m", definition=definition, roleArn="arn:aws:iam::123456789012:role/r")[
            "stateMachineArn"
        ]
        target = {"kind": "stepfunctions", "arn": machine}
        clients = Clients()
        for _ in range(2):
            with acting_for_target(target):
                send_now(target, target_input(target, event()), occurrence="occurrence-1", clients=clients)  # type: ignore[arg-type]
        executions = sfn.list_executions(stateMachineArn=machine)["executions"]
        assert [e["name"] for e in executions] == ["occurrence-1"]


def test_send_now_to_lambda_is_an_async_invoke() -> None:
    from botocore.stub import Stubber

    clients = Clients()
    client = boto3.client("lambda", region_name=REGION)
    clients.override("lambda", client)
    arn = "arn:aws:lambda:eu-west-1:123456789012:function:f"
    payload = target_input({"kind": "lambda", "arn": arn}, event())
    with Stubber(client) as stub:
        stub.add_response(
            "invoke",
            {"StatusCode": 202},
            {"FunctionName": arn, "InvocationType": "Event", "Payload": payload.encode()},
        )
        with acting_for_target({"kind": "lambda", "arn": arn}):
            send_now({"kind": "lambda", "arn": arn}, payload, occurrence="o", clients=clients)
        stub.assert_no_pending_responses()


def test_access_denied_is_retried_only_while_iam_may_still_be_propagating(monkeypatch: pytest.MonkeyPatch) -> None:
    from st_core import errors

    denied = client_error("AccessDeniedException", 403)
    monkeypatch.setattr(errors, "container_age", lambda: 5.0)  # just deployed: the new policy may not be visible yet
    assert is_transient(denied)
    monkeypatch.setattr(errors, "container_age", lambda: errors.IAM_PROPAGATION_SECONDS + 1)
    assert not is_transient(denied)  # a real misconfiguration: parked with the denial as its reason
