"""The public surface: the root's names pinned, everything else private."""

from __future__ import annotations

from pathlib import Path

import pytest

import langchain_knowledge_inject
from langchain_knowledge_inject import __all__

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
    "KnowledgeContext",
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
    "cited_documents",
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


def test_an_unknown_root_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        langchain_knowledge_inject.no_such_name  # noqa: B018


PUBLIC_MODULES = {"errors", "presets", "settings"}


def test_everything_but_the_root_and_the_documented_modules_is_private() -> None:
    package = Path(langchain_knowledge_inject.__file__).parent
    public = {
        path.stem if path.is_file() else path.name
        for path in package.iterdir()
        if not path.name.startswith("_") and (path.suffix == ".py" or path.is_dir())
        and path.name != "py.typed"
    }
    assert public == PUBLIC_MODULES
