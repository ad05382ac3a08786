"""The public surface: the root's names pinned, everything else private."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import langchain_knowledge_inject
from langchain_knowledge_inject import __all__

EXPECTED_ALL = [
    "AddResult",
    "ConfigurationError",
    "EpisodeRecord",
    "EpisodicMemory",
    "EpisodicOptions",
    "IngestReport",
    "InjectionManifest",
    "KnowledgeBase",
    "KnowledgeBaseInfo",
    "KnowledgeBaseNotFoundError",
    "KnowledgeBaseRetriever",
    "KnowledgeBlockTemplate",
    "KnowledgeContext",
    "KnowledgeInjectError",
    "KnowledgeInjectionMiddleware",
    "KnowledgeInjector",
    "KnowledgeSettings",
    "KnowledgeState",
    "Procedure",
    "ProcedureLibrary",
    "ReasonCode",
    "RestrictedKnowledgeError",
    "RestrictionFlags",
    "RetrievalError",
    "SafeSummary",
    "StoreError",
    "UserFacts",
    "__version__",
    "aingest",
    "build_sample_knowledge_base",
    "cited_documents",
    "create_knowledge_base_search_tool",
    "create_knowledge_graph",
    "create_knowledge_nodes",
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


def test_dir_lists_every_public_name_before_it_is_imported() -> None:
    assert set(__all__) <= set(dir(langchain_knowledge_inject))


def test_type_checkers_see_the_names_the_root_resolves_at_run_time() -> None:
    """The ``if TYPE_CHECKING:`` imports, ``__all__`` and the lazy map name the same things."""
    tree = ast.parse(Path(langchain_knowledge_inject.__file__).read_text(encoding="utf-8"))
    [block] = [node for node in tree.body if isinstance(node, ast.If)]
    seen = {
        f"{node.module.removeprefix('langchain_knowledge_inject.')}:{alias.name}"
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    lazy = {f"{module}:{name}" for name, module in langchain_knowledge_inject._HOME.items()}
    assert seen == lazy
    assert {name for name in __all__ if name != "__version__"} == set(
        langchain_knowledge_inject._HOME
    )


HEAVY = ("chromadb", "torch", "sentence_transformers", "tantivy", "langchain.agents")


@pytest.mark.parametrize(
    "statement",
    [
        "import langchain_knowledge_inject",
        "from langchain_knowledge_inject import KnowledgeSettings, ConfigurationError",
        "import langchain_knowledge_inject._surfaces.cli",
    ],
)
def test_importing_the_package_loads_no_heavy_library(statement: str) -> None:
    """Chroma, torch, sentence-transformers, tantivy and the agents come with their first use."""
    code = f"import sys; {statement}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.split() == []


def test_the_package_is_marked_typed():
    assert (Path(langchain_knowledge_inject.__file__).parent / "py.typed").is_file()


def test_an_unknown_root_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        langchain_knowledge_inject.no_such_name  # noqa: B018


PUBLIC_MODULES = {"errors", "presets", "settings"}


def test_everything_but_the_root_and_the_documented_modules_is_private() -> None:
    package = Path(langchain_knowledge_inject.__file__).parent
    public = {
        path.stem if path.is_file() else path.name
        for path in package.iterdir()
        if not path.name.startswith("_")
        and (path.suffix == ".py" or path.is_dir())
        and path.name != "py.typed"
    }
    assert public == PUBLIC_MODULES
