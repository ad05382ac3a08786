"""The package's layout, checked over its source (AST): the architecture stays as drawn.

- no import cycle among modules, counting imports inside functions too (only
  ``if TYPE_CHECKING:`` imports are left out: they never run);
- no cycle among the subpackages (``_store``, ``_ingest``, ``_turn``, ``_restricted``,
  ``_memory``, ``_surfaces``; the root modules ``errors`` and ``settings`` count as
  units of their own);
- no module imports another module's ``_private`` name;
- the surfaces in ``_surfaces/`` (Runnable, graph, node, middleware, chat, and any
  module added later) do not import each other; the shared machinery (``pipeline``,
  ``hosting``, and the search tool ``tools``) imports no surface.
  ``cli`` may run ``chat`` (one command calling another).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = "langchain_knowledge_inject"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE
SHARED = frozenset({"pipeline", "hosting", "tools"})
"""The modules of ``_surfaces/`` the surfaces share: the turn pipeline, what a surface does
around the model call, and the search tool (also a surface of its own: the graph and the
middleware offer it)."""
ALLOWED_SURFACE_IMPORTS = frozenset({("cli", "chat")})


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found.update(id(inner) for inner in ast.walk(node))
    return found


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str | None:
    """The absolute module of a ``from X import ...`` (relative imports resolved)."""
    if node.level == 0:
        return node.module
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _collect() -> tuple[dict[str, set[str]], list[tuple[str, str, str]]]:
    """Each module's package imports (inside functions too), and the private names imported."""
    modules = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    private: list[tuple[str, str, str]] = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = _type_checking_nodes(tree)
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PACKAGE + "."):
                        graph[name].add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(name, node, is_package)
                if source is None or not (source == PACKAGE or source.startswith(PACKAGE + ".")):
                    continue
                for alias in node.names:
                    target = f"{source}.{alias.name}"
                    graph[name].add(target if target in modules else source)
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        private.append((name, source, alias.name))
    for name in graph:
        graph[name] = {t for t in graph[name] if t in modules and t not in (name, PACKAGE)}
    return dict(graph), private


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    nodes = set(graph) | {t for targets in graph.values() for t in targets}
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _unit(module: str) -> str:
    """The subpackage of a module (a root module is a unit of its own)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def _in_store(module: str) -> bool:
    return module.startswith(f"{PACKAGE}._store.")


GRAPH, PRIVATE = _collect()


def test_the_package_is_found_and_parsed() -> None:
    assert f"{PACKAGE}._surfaces.pipeline" in GRAPH
    assert f"{PACKAGE}._turn.assemble" in GRAPH[f"{PACKAGE}._surfaces.pipeline"]


def test_no_import_cycle_outside_the_store() -> None:
    cycles = [c for c in _cycles(GRAPH) if not all(_in_store(m) for m in c)]
    assert cycles == []


def test_no_import_cycle_inside_the_store() -> None:
    assert _cycles(GRAPH) == []


def test_no_cycle_among_subpackages() -> None:
    units: dict[str, set[str]] = defaultdict(set)
    for module, targets in GRAPH.items():
        for target in targets:
            if _unit(module) != _unit(target):
                units[_unit(module)].add(_unit(target))
    assert _cycles(dict(units)) == []


def test_turn_does_not_import_restricted_mode() -> None:
    """The data of a turn flows one way: restricted mode uses the turn's text tools, not back."""
    upward = {
        (m, t)
        for m, targets in GRAPH.items()
        for t in targets
        if _unit(m) == "_turn" and _unit(t) in {"_restricted", "_memory", "_surfaces", "settings"}
    }
    assert upward == set()


def test_no_private_name_imported_from_another_module() -> None:
    found = [item for item in PRIVATE if not _in_store(item[1])]
    assert found == []


def test_no_private_name_imported_from_the_store() -> None:
    assert [item for item in PRIVATE if _in_store(item[1])] == []


def _integrations() -> list[tuple[str, str]]:
    """``(module, target)`` for every import between two modules of ``integrations/``."""
    prefix = f"{PACKAGE}._surfaces."
    return sorted(
        (module[len(prefix) :], target[len(prefix) :])
        for module, targets in GRAPH.items()
        if module.startswith(prefix)
        for target in targets
        if target.startswith(prefix)
    )


def test_surfaces_do_not_import_each_other() -> None:
    """Every module of ``integrations/`` but the shared ones is a surface."""
    found = [(m, t) for m, t in _integrations() if m not in SHARED and t not in SHARED]
    assert [pair for pair in found if pair not in ALLOWED_SURFACE_IMPORTS] == []
    assert {m for m, _ in _integrations()} >= {"runnable", "graph", "node", "middleware"}


def test_the_shared_modules_import_no_surface() -> None:
    assert [(m, t) for m, t in _integrations() if m in SHARED and t not in SHARED] == []


def test_the_checks_find_what_they_look_for() -> None:
    """The cycle finder and the unit mapping work on a graph with known answers."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}}) == []
    assert _unit(f"{PACKAGE}._turn.assemble") == "_turn"
    assert _unit(f"{PACKAGE}.settings") == "settings"
    assert _unit(PACKAGE) == PACKAGE
