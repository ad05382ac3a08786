"""The documentation's own checks: its commands, links, named modules and not-run blocks.

The ```python blocks of README.md and docs/*.md are run, each alone in a fresh
interpreter with the real model, by ``tests/integration_tests/test_docs_examples.py``,
which reads them with :func:`python_blocks`. A block that cannot run there (it needs an
API key, say) is preceded by ``<!-- not-run: <reason> -->``; it is reported as skipped
with that reason by :func:`test_marked_blocks_are_skipped_visibly`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
_NOT_RUN = re.compile(r"<!--\s*not-run:\s*(.+?)\s*-->\s*$")


def python_blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """The ```python blocks of ``path``: (line, code, not-run reason or None)."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        if match.group(1) != "python":
            continue
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = _NOT_RUN.search(before)
        line = text.count("\n", 0, match.start()) + 1
        found.append((line, match.group(2), marker.group(1) if marker else None))
    return found


def label(path: Path) -> str:
    return str(path.relative_to(ROOT))


NOT_RUN = [
    (f"{label(p)}:{line}", reason)
    for p in DOC_FILES
    for line, _, reason in python_blocks(p)
    if reason is not None
]


@pytest.mark.parametrize(
    ("where", "reason"), NOT_RUN or [("none", "")], ids=[w for w, _ in NOT_RUN] or ["none"]
)
def test_marked_blocks_are_skipped_visibly(where, reason):
    if where == "none":
        return
    assert reason.strip(), f"{where}: a not-run marker must say why"
    pytest.skip(f"{where} not run: {reason}")


def test_readme_opens_with_the_commands_of_setup_and_ci():
    """The README's two commands stay in step with scripts/setup.sh and .ci/run."""
    first = _FENCE.search((ROOT / "README.md").read_text(encoding="utf-8"))
    assert first is not None
    assert first.group(1) == "bash", "the README opens with its two commands"
    commands = [line.split("#")[0].strip() for line in first.group(2).splitlines() if line.strip()]
    assert len(commands) == 2
    ci = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    setup = "bash scripts/setup.sh"
    assert setup in ci
    assert ".venv" in (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    assert all(command.startswith(f"{setup} && ") for command in commands)
    env = [line.removeprefix("export ") for line in ci if line.startswith("export ")]
    pytest_line = next(line for line in ci if " -m pytest" in line)
    assert commands[1] == f"{setup} && " + " ".join([*env, pytest_line])
    assert commands[0] == f"{setup} && .venv/bin/kinject demo"
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'kinject = "langchain_knowledge_inject.' in pyproject


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)}


def test_links_between_the_docs_resolve():
    broken = []
    for path in [*DOC_FILES, ROOT / "CONTRIBUTING.md"]:
        text = _FENCE.sub("", path.read_text(encoding="utf-8"))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                broken.append(f"{label(path)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"{label(path)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


_DOTTED = re.compile(r"`(langchain_knowledge_inject(?:\.\w+)+)")
_FILE = re.compile(
    r"`((?:langchain_knowledge_inject/|benchmarks/|scripts/|tests/|notebooks/|"
    r"(?:store|ingest|turn|restricted|memory|integrations)/)[\w/.-]+\.(?:py|ipynb))`"
)


def _resolves(dotted: str) -> bool:
    import importlib
    import logging

    importlib.import_module("langchain_knowledge_inject._surfaces.pipeline")  # its loggers exist
    if dotted in logging.root.manager.loggerDict:  # a logger's name, not a module
        return True
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_named_modules_objects_and_files_exist():
    """Every `langchain_knowledge_inject.x.y` and every file path the docs name is real."""
    import warnings

    missing = []
    for path in [*DOC_FILES, ROOT / "CONTRIBUTING.md"]:
        text = path.read_text(encoding="utf-8")
        for dotted in sorted(set(_DOTTED.findall(text))):
            with warnings.catch_warnings():
                warnings.simplefilter("error", DeprecationWarning)
                try:
                    ok = _resolves(dotted)
                except DeprecationWarning:
                    ok = False
            if not ok:
                missing.append(f"{label(path)}: {dotted}")
        for name in sorted(set(_FILE.findall(text))):
            candidates = [ROOT / name, ROOT / "langchain_knowledge_inject" / name]
            if not any(c.exists() for c in candidates):
                missing.append(f"{label(path)}: {name}")
    assert not missing, "named but not found (or only at a deprecated path):\n" + "\n".join(missing)


_SAMPLE_IN_THE_USERS_STORE = re.compile(r"(\w+) = build_sample_knowledge_base\(\s*\)")
_WRITES = ("add_documents", "upsert_records", "restrict", "unrestrict", "delete", "drop", "ingest")


def test_no_block_writes_to_the_sample_knowledge_base_of_the_users_store():
    """A reader who runs a block keeps the ``hr-demo`` of ``kinject demo`` as it was."""
    for path in DOC_FILES:
        for line, code, _ in python_blocks(path):
            for name in _SAMPLE_IN_THE_USERS_STORE.findall(code):
                writes = [w for w in _WRITES if re.search(rf"\b{name}\.a?{w}\(", code)]
                assert not writes, f"{label(path)}:{line} writes to the user's hr-demo ({writes})"
                assert not re.search(rf"\bingest\(\s*{name}\b", code), f"{label(path)}:{line}"
