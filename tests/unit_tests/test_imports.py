"""The public surface: the root's names pinned, the old paths deprecated but working."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import langchain_knowledge_inject
from langchain_knowledge_inject import __all__, _compat

# This module exercises the deprecated aliases on purpose; everywhere else pyproject turns
# the package's own DeprecationWarning into an error.
pytestmark = pytest.mark.filterwarnings("default::DeprecationWarning")

EXPECTED_ALL = [
    "AddResult",
    "ConfigurationError",
    "EpisodicMemory",
    "IngestReport",
    "InjectionManifest",
    "KnowledgeBase",
    "KnowledgeBaseInfo",
    "KnowledgeBaseNotFoundError",
    "KnowledgeBaseRetriever",
    "KnowledgeBlockTemplate",
    "KnowledgeInjectError",
    "KnowledgeInjectionMiddleware",
    "KnowledgeInjector",
    "KnowledgeSettings",
    "KnowledgeState",
    "ProcedureLibrary",
    "ReasonCode",
    "RetrievalError",
    "SafeSummary",
    "StoreError",
    "UserFacts",
    "__version__",
    "aingest",
    "build_sample_knowledge_base",
    "create_knowledge_base_search_tool",
    "create_knowledge_graph",
    "create_knowledge_node",
    "create_memory_tools",
    "ingest",
    "strip_injected",
]


def test_all_is_pinned() -> None:
    assert sorted(__all__) == sorted(EXPECTED_ALL)


def test_every_name_is_importable() -> None:
    for name in __all__:
        assert getattr(langchain_knowledge_inject, name) is not None, name


def test_the_package_is_marked_typed():
    assert (Path(langchain_knowledge_inject.__file__).parent / "py.typed").is_file()


@pytest.mark.parametrize("name", sorted(_compat.MOVED_NAMES))
def test_a_name_the_root_used_to_export_still_resolves_with_a_warning(name: str) -> None:
    home = importlib.import_module(f"langchain_knowledge_inject.{_compat.MOVED_NAMES[name]}")
    with pytest.warns(DeprecationWarning, match=rf"moved to .*\.{name}\b"):
        value = getattr(langchain_knowledge_inject, name)
    assert value is getattr(home, name)


def test_an_unknown_root_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        langchain_knowledge_inject.no_such_name  # noqa: B018


@pytest.mark.slow  # a fresh interpreter
def test_every_old_module_path_imports_the_moved_module_with_a_warning() -> None:
    # One fresh interpreter, so that no old path is already cached in sys.modules.
    code = (
        "import importlib, warnings\n"
        "from langchain_knowledge_inject import _compat\n"
        "for old, new in sorted(_compat.MOVED_MODULES.items()):\n"
        "    new = 'langchain_knowledge_inject.' + new\n"
        "    module = importlib.import_module(new)\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        warnings.simplefilter('always')\n"
        "        aliased = importlib.import_module('langchain_knowledge_inject.' + old)\n"
        "    warned = any(new in str(w.message) for w in caught)\n"
        "    print(old, aliased is module, warned)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    ).stdout.split("\n")
    rows = [line.split() for line in out if line]
    assert sorted(r[0] for r in rows) == sorted(_compat.MOVED_MODULES)
    assert all(r[1:] == ["True", "True"] for r in rows), rows


def test_from_import_of_an_old_module_name_warns_and_returns_the_new_module() -> None:
    from langchain_knowledge_inject.store import knowledge_base

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from langchain_knowledge_inject import knowledge_base as old  # type: ignore[attr-defined]
    assert old is knowledge_base
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
