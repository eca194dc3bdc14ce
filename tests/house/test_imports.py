"""The house's shape, checked: no import cycle among the modules of `components/` (its subpackages, such as
`components/cli/`, included), `handlers/` and `localcloud/`, and no private name (`_x`) used outside the module or
class that defines it.

Every import that runs counts, including those inside functions: a cycle hidden by a lazy import is still two
modules that cannot be read, tested or changed apart. Imports under `if TYPE_CHECKING:` do not run and only name a
type; they are not edges."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Source folder -> the import name its modules have (handlers/ is on the Lambda's path as the archive's root).
PACKAGES = {"components": "components", "handlers": "", "localcloud": "localcloud"}
# The installed name of components/ (the handlers ship inside it as scheduled_table.handlers).
ALIASES = {"scheduled_table.handlers": "", "scheduled_table": "components"}


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool


def modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for folder, prefix in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            name = ".".join([p for p in [prefix, *parts] if p])
            found[name or prefix] = Module(name or prefix, path, is_package)
    return found


def _canonical(name: str) -> str:
    for alias, real in ALIASES.items():
        if name == alias or name.startswith(alias + "."):
            rest = name[len(alias) :].lstrip(".")
            return ".".join(p for p in (real, rest) if p)
    return name


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A module's tree, parsed once a run (the cycle and the private-name checks walk the same files)."""
    return ast.parse(path.read_text())


def imports(module: Module, known: dict[str, Module]) -> Iterator[tuple[str, ast.stmt, list[str]]]:
    """(imported module, node, names taken from it) for each import of a known module."""
    tree = _tree(module.path)
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}
        for stmt in node.body
        for inner in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _canonical(alias.name)
                if target in known:
                    yield target, node, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = _canonical(node.module or "")
            for alias in node.names:
                submodule = f"{source}.{alias.name}" if source else alias.name
                if submodule in known:
                    yield submodule, node, []
                elif source in known:
                    yield source, node, [alias.name]


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    for module in known.values():
        for target, _, _ in imports(module, known):
            if target != module.name and not module.name.startswith(target + "."):
                edges[module.name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _third_party_names(tree: ast.AST, known: dict[str, Module]) -> set[str]:
    """Names a module binds by importing from outside this repo (ministack's services, say). The local cloud has
    to reach into the emulator's internals to make it behave as AWS does; that is not our own privacy to keep."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname or a.name.split(".")[0] for a in node.names if _canonical(a.name) not in known}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            source = _canonical(node.module or "")
            if source.split(".")[0] not in {m.split(".")[0] for m in known}:
                names |= {a.asname or a.name for a in node.names}
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def private_uses() -> list[str]:
    """`from m import _x` of our own module, and `anything._x` where `anything` is not `self`/`cls` or something
    imported from a third-party package (a private member of another of our objects or modules). Dunders are
    public."""
    known = modules()
    problems: list[str] = []
    for module in known.values():
        for target, statement, names in imports(module, known):
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    problems.append(f"{module.path.relative_to(ROOT)}:{statement.lineno}: imports {target}.{name}")
        tree = _tree(module.path)
        outside = _third_party_names(tree, known) | {"self", "cls"}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and _root(node.value) not in outside
            ):
                problems.append(f"{module.path.relative_to(ROOT)}:{node.lineno}: uses {ast.unparse(node)}")
    return problems


def test_the_walker_sees_the_packages_and_their_imports() -> None:
    """The walk is not vacuous: it finds the modules and the edges everyone knows are there."""
    edges = graph()
    assert "components.component" in edges and "eventbridge" in edges and "localcloud.scenarios" in edges
    assert "components.args" in edges["components.component"]
    assert "st_core.stream" in edges["eventbridge"]
    # subpackages too: the operator's command and its redrive
    assert "components.cli.redrive.run" in edges["components.cli.command"]
    assert "components.cli.redrive.poison" in edges["components.cli.redrive.run"]
    assert "components.cli.redrive.ordering" in edges["components.cli.redrive.poison"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_private_name_check_finds_a_private_use(tmp_path: Path) -> None:
    tree = ast.parse("import ministack.services.scheduler as scheduler\nfrom . import parts\n")
    assert _third_party_names(tree, modules()) == {"scheduler"}
    assert _root(ast.parse("component._args.x()", mode="eval").body) == "component"


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_no_private_name_used_outside_its_module() -> None:
    assert private_uses() == []
