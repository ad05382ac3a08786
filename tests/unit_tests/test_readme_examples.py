"""Run the ```python blocks of README.md and docs/*.md, so the documentation never rots.

The blocks of one file run in order in one namespace, offline:

- the default embedding model is replaced by the ``fake_default_model`` fixture, so
  ``KnowledgeBase("hr")`` opens without the real model; ``KINJECT_HOME`` points into
  ``tmp_path``;
- ``model`` is a ``RecordingChatModel`` (it answers every call and accepts
  ``bind_tools``), ``emb`` a ``WordHashEmbedding``, ``kb`` a knowledge base holding the
  sample HR policies, ``tmp_path`` a fresh folder; the working directory holds
  ``policies/`` with the same policies as files.

A block that needs what a unit test must not have (a Chroma server, the real model,
a network) is preceded by ``<!-- not-run: <reason> -->``; it is reported as skipped
with that reason by :func:`test_marked_blocks_are_skipped_visibly`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.unit_tests.fakes import RecordingChatModel, WordHashEmbedding

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
_NOT_RUN = re.compile(r"<!--\s*not-run:\s*(.+?)\s*-->\s*$")


def _blocks(path: Path) -> list[tuple[int, str, str | None]]:
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


def _label(path: Path) -> str:
    return str(path.relative_to(ROOT))


RUN_FILES = [p for p in DOC_FILES if any(reason is None for _, _, reason in _blocks(p))]
NOT_RUN = [
    (f"{_label(p)}:{line}", reason)
    for p in DOC_FILES
    for line, _, reason in _blocks(p)
    if reason is not None
]


def test_the_docs_have_python_examples():
    assert _label(ROOT / "README.md") in {_label(p) for p in RUN_FILES}
    assert len(RUN_FILES) >= 3


@pytest.mark.parametrize("path", RUN_FILES, ids=_label)
def test_examples_run(path, tmp_path, monkeypatch, fake_default_model):
    from langchain_knowledge_inject import KnowledgeBase
    from langchain_knowledge_inject._ingest.sample_data import SAMPLE_DOCUMENTS

    monkeypatch.setenv("KINJECT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KINJECT_CHAT_MODEL", raising=False)
    work = tmp_path / "work"
    (work / "policies").mkdir(parents=True)
    for doc in SAMPLE_DOCUMENTS:
        (work / "policies" / doc.metadata["source"]).write_text(doc.page_content)
    monkeypatch.chdir(work)
    kb = KnowledgeBase("examples", path=tmp_path / "examples", embeddings=WordHashEmbedding())
    kb.add_documents(SAMPLE_DOCUMENTS)
    model = RecordingChatModel(reply="You get 25 days of leave.")
    example_dir = tmp_path / "example"
    example_dir.mkdir()
    namespace: dict[str, Any] = {
        "__name__": "__example__",
        "tmp_path": example_dir,
        "kb": kb,
        "emb": WordHashEmbedding(),
        "model": model,
    }
    ran = 0
    try:
        for line, code, reason in _blocks(path):
            if reason is not None:
                continue
            exec(compile(code, f"{_label(path)}:{line}", "exec"), namespace)
            ran += 1
    finally:
        for value in {id(v): v for v in [kb, *namespace.values()]}.values():
            if isinstance(value, KnowledgeBase):
                value.close()
    assert ran > 0


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
                broken.append(f"{_label(path)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"{_label(path)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


_DOTTED = re.compile(r"`(langchain_knowledge_inject(?:\.\w+)+)")
_FILE = re.compile(
    r"`((?:langchain_knowledge_inject/|benchmarks/|scripts/|tests/|notebooks/|"
    r"(?:store|ingest|turn|restricted|memory|integrations)/)[\w/.-]+\.(?:py|ipynb))`"
)


def _resolves(dotted: str) -> bool:
    import importlib
    import logging

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
                missing.append(f"{_label(path)}: {dotted}")
        for name in sorted(set(_FILE.findall(text))):
            candidates = [ROOT / name, ROOT / "langchain_knowledge_inject" / name]
            if not any(c.exists() for c in candidates):
                missing.append(f"{_label(path)}: {name}")
    assert not missing, "named but not found (or only at a deprecated path):\n" + "\n".join(missing)
