"""The order of the layering rule in CONTRIBUTING.md, checked on the source.

Imports go one way: errors -> store -> ingest -> turn -> restricted -> memory -> settings ->
integrations. A module imports its own subpackage and the ones before it, never one after
it. Every import counts, also inside functions; type-only imports (``if TYPE_CHECKING:``)
do not. ``KNOWN_EXCEPTIONS`` lists the imports that break the order today; a new one fails,
and so does an entry that no longer exists (delete it from the list). Cycles, private
names and the surfaces of ``integrations/`` are checked by ``test_layout.py``.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "langchain_knowledge_inject"
NAME = "langchain_knowledge_inject"
ORDER = ["errors", "_store", "_ingest", "_turn", "_restricted", "_memory", "settings", "_surfaces"]

KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()
"""(importer, imported), below the package: imports that break the rule today."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` outside ``if TYPE_CHECKING:`` bodies."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        found.append(node)
        if _is_type_checking(node):
            stack.extend(node.orelse)  # type: ignore[attr-defined]
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules that ``path`` imports (module level and inside functions)."""
    names = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            if target == NAME or not target.startswith(f"{NAME}."):
                continue
            inner = target.removeprefix(f"{NAME}.")
            if inner in modules:
                names.add(inner)
    return names


def _layer(module: str) -> int | None:
    head = module.split(".")[0]
    return ORDER.index(head) if head in ORDER else None


def _violations() -> set[tuple[str, str]]:
    modules = _modules()
    found = set()
    for module, path in modules.items():
        src = _layer(module)
        if src is None:  # the root __init__, _compat, _version
            continue
        for imported in _imports(path, modules):
            dst = _layer(imported)
            if imported == "_compat" or (dst is not None and dst > src):
                found.add((module, imported))
    return found


def test_imports_follow_the_layering_rule():
    found = _violations()
    new = sorted(found - KNOWN_EXCEPTIONS)
    gone = sorted(KNOWN_EXCEPTIONS - found)
    assert not new, f"imports that break the layering rule (CONTRIBUTING.md): {new}"
    assert not gone, f"fixed, so delete them from KNOWN_EXCEPTIONS: {gone}"


def test_the_rule_in_contributing_is_the_one_checked():
    text = (PACKAGE.parent / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert " -> ".join(ORDER) in text
