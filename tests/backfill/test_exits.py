"""Exit statuses that send the operator the right way: what can never succeed by running again is 2 ("could not
start") with the fix named, never 3 ("interrupted: run again with the same --checkpoint") or 1 after feeding the
wrong function."""

from __future__ import annotations

from typing import Any

from tests.backfill.conftest import command, consumer
from tests.handlers.conftest import Env
from tests.redrive.conftest import Function, aws


def test_a_table_that_no_longer_exists_cannot_start_and_says_so(env: Env, capsys: Any) -> None:
    env.put({"PK": "a", "SK": "A", "dueAt": "2099-01-01T00:00:00Z"})
    env.stream.read()
    function = consumer(env)
    env.ddb.delete_table(TableName=env.table)

    status, lines = command(function, "reconcile", "--checkpoint", "/dev/null/never-written")

    assert status == 2, lines
    error = capsys.readouterr().err
    assert f"table {env.table!r}" in error and "does not exist" in error and "pulumi up" in error, error


class BackfillFunction(Function):
    """The stack's backfill function as Lambda describes it: the backfill entry point, no stream mapping."""

    def get_function_configuration(self, FunctionName: str) -> dict[str, Any]:
        return {**super().get_function_configuration(FunctionName), "Handler": "backfill.handler"}

    def list_event_source_mappings(self, FunctionName: str | None = None, EventSourceArn: str | None = None) -> Any:
        return {"EventSourceMappings": []}


def test_the_backfill_function_passed_as_function_cannot_start_and_names_the_fix(env: Env, capsys: Any) -> None:
    env.put({"PK": "a", "SK": "A", "dueAt": "2099-01-01T00:00:00Z"})
    env.stream.read()
    wrong = BackfillFunction(env, consumer(env).handle, [], name="items-backfill")

    status, _ = command(wrong, "backfill")

    assert status == 2
    assert wrong.invoked == []  # no stream batch was fed to it
    error = capsys.readouterr().err
    assert "is the stack's backfill function" in error and "--in-lambda" in error, error
    assert env.messages(env.poison_url) == []


def test_a_wrong_in_lambda_name_cannot_start_and_names_the_fix(env: Env, capsys: Any) -> None:
    env.put({"PK": "a", "SK": "A", "dueAt": "2099-01-01T00:00:00Z"})
    env.stream.read()
    function = consumer(env)

    status, _ = command(function, "backfill", "--in-lambda", "no-such-function", client=aws(function))

    assert status == 2
    error = capsys.readouterr().err
    assert "--in-lambda 'no-such-function'" in error and "backfill_function_name" in error, error

    class Consumer(Function):
        def get_function_configuration(self, FunctionName: str) -> dict[str, Any]:
            return {**super().get_function_configuration(FunctionName), "Handler": "eventbridge.handler"}

    live = Consumer(env, function.handle, [])
    status, _ = command(live, "backfill", "--in-lambda", live.name)  # the consumer, not the backfill function
    assert status == 2
    assert "not backfill.handler" in capsys.readouterr().err
