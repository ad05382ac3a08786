"""Run the examples in the package's docstrings, so they never rot.

Two kinds are run: ``>>>`` doctests, and ``.. code-block:: python`` examples
(the blocks of one docstring run in order in one namespace, offline, with
``tmp_path`` and ``kb``, a small knowledge base over fake embeddings holding
the sample HR documents, in scope).
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil
import re
import textwrap

import pytest

import langchain_knowledge_inject

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(
        langchain_knowledge_inject.__path__, "langchain_knowledge_inject."
    )
    if info.name != "langchain_knowledge_inject._compat"
)
_BLOCK = re.compile(r"\.\. code-block:: python\n((?:\n|[ \t]+.*\n)+)")


def _code_blocks(module) -> list[tuple[str, str]]:
    """One entry per documented object: its code blocks joined in order."""
    found = []
    members = [
        obj
        for _, obj in inspect.getmembers(module)
        if getattr(obj, "__module__", None) == module.__name__
    ]
    for obj in [module, *members]:
        doc = inspect.getdoc(obj) or ""
        blocks = [textwrap.dedent(m.group(1)) for m in _BLOCK.finditer(doc + "\n")]
        if blocks:
            found.append((getattr(obj, "__qualname__", module.__name__), "\n".join(blocks)))
    return found


CODE_BLOCKS = [
    (f"{name}:{label}", code)
    for name in MODULES
    for label, code in _code_blocks(importlib.import_module(name))
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(module):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"


def test_there_are_code_block_examples():
    assert any("KnowledgeBase" in label for label, _ in CODE_BLOCKS)


@pytest.mark.parametrize(("label", "code"), CODE_BLOCKS, ids=[label for label, _ in CODE_BLOCKS])
def test_code_block_examples(label, code, tmp_path, monkeypatch):
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from langchain_knowledge_inject import KnowledgeBase
    from langchain_knowledge_inject._ingest.sample_data import SAMPLE_DOCUMENTS

    monkeypatch.setenv("KINJECT_HOME", str(tmp_path / "home"))
    kb = KnowledgeBase(
        "examples", path=tmp_path / "examples", embeddings=DeterministicFakeEmbedding(size=32)
    )
    kb.add_documents(SAMPLE_DOCUMENTS)
    namespace = {"tmp_path": tmp_path / "example", "kb": kb, "__name__": "__example__"}
    (tmp_path / "example").mkdir()
    exec(compile(code, label, "exec"), namespace)
