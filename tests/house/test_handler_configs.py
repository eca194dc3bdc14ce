"""Tests and benchmarks run the handlers on the configuration document the component writes, never on one written
by hand: a copy drifts from the real one (a key the handlers read that the copy lacks, a section the mode never
has, a value no option can give), and the handlers are then tested on a document no deployment has. They build it
with tests/support/handler_config.py (`runtime_config.handler_document` for the options the test means, on the
physical names of the resources it made; `Env.configure` in the handler tests).

Found by reading the code: a dict literal holding only keys of the document's top level, `table` among them; a
dict literal with a `ledgerTable` key (a mode's section); and a write of `mode` or of a mode's section into a
configuration (`config["ttl"] = ...`). tests/components/ is left out: there the document is what is tested, and its
expected values are written out."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from st_core.config import HandlerConfig

from components import modes

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("tests", "bench")
LEFT_OUT = ("tests/components/",)
DOCUMENT_KEYS = HandlerConfig.__required_keys__ | HandlerConfig.__optional_keys__


def by_hand(tree: ast.AST, sections: frozenset[str]) -> Iterator[tuple[int, str]]:
    """(line, what) for each configuration document, or part of one, the code writes itself."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if len(keys) == len(node.keys) > 1 and "table" in keys and keys <= DOCUMENT_KEYS:
                yield node.lineno, f"a configuration document with {sorted(keys)}"
            if "ledgerTable" in keys:
                yield node.lineno, "a mode's section of a configuration document"
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if (key == "mode" or key in sections) and "config" in ast.unparse(node.value):
                yield node.lineno, f"{ast.unparse(node)} written into a configuration document"


def found(folders: tuple[str, ...] = FOLDERS) -> list[str]:
    sections = frozenset({*modes.names(), "scheduler"})
    hits: list[str] = []
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name.startswith(LEFT_OUT) or ".venv" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            hits += [f"{name}:{line}: {what}" for line, what in by_hand(tree, sections)]
    return hits


def test_no_test_or_benchmark_writes_a_handler_configuration_by_hand() -> None:
    assert found() == [], (
        "handler configurations written by hand; build them with tests/support/handler_config.py (the options the "
        "test means and its resources' names), or Env.configure in the handler tests:\n" + "\n".join(found())
    )


def test_the_check_finds_each_way_of_writing_one() -> None:
    source = """
config = {"mode": "ttl", "table": "t", "poisonQueueUrl": "q"}
partial = {"table": "t", "maxWorkers": 4}
change = {"table": ""}
env.config["ttl"] = {"ledgerTable": "ledger", "precise": False}
env.config["mode"] = "aggregate"
event = {"mode": "ttl", "table": "t", "keys": {}, "item": {}, "occurrenceId": "x"}
made["polling"] = object()
"""
    hits = [line for line, _ in by_hand(ast.parse(source), frozenset({"ttl", "polling", "scheduler"}))]
    # Every document and section by hand is found; a change of one key, a due event (it names its mode and table)
    # and a dict that is no configuration are not.
    assert hits == [2, 3, 5, 5, 6]
