"""The public surface: every name importable from the package root, pinned."""

from __future__ import annotations

import langchain_knowledge_inject
from langchain_knowledge_inject import __all__

EXPECTED_ALL = [
    "DEFAULT_KNOWLEDGE_TEMPLATE",
    "KNOWLEDGE_SYSTEM_PROMPT",
    "AddResult",
    "BlockText",
    "ConfigurationError",
    "ContextBlock",
    "Episode",
    "ForkedProcessError",
    "EpisodicMemory",
    "IngestError",
    "IngestReport",
    "InjectionConfig",
    "InjectionManifest",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "KnowledgeBaseInfo",
    "KnowledgeBaseNotFoundError",
    "KnowledgeBaseOpenError",
    "KnowledgeBaseRetriever",
    "KnowledgeBaseSearchInput",
    "KnowledgeBlockTemplate",
    "KnowledgeInjectError",
    "KnowledgeInjectionMiddleware",
    "KnowledgeInjectionState",
    "KnowledgeInjector",
    "KnowledgeSettings",
    "KnowledgeState",
    "LeakPolicy",
    "LeakReport",
    "Placement",
    "Procedure",
    "ProcedureLibrary",
    "ReasonCode",
    "MemoryWriteError",
    "RetrievalError",
    "RetrievalOutcome",
    "SafeKnowledgeBaseInfo",
    "SafeSummary",
    "StoreError",
    "StoreTimeoutError",
    "SummarizerError",
    "SummaryBounds",
    "TurnContext",
    "UserFacts",
    "__version__",
    "aingest",
    "approximate_token_count",
    "assemble_blocks",
    "asummarize_chunks",
    "build_sample_knowledge_base",
    "check_leak",
    "create_knowledge_base_search_tool",
    "create_knowledge_graph",
    "create_knowledge_node",
    "create_memory_tools",
    "create_store_memory_tool",
    "create_user_fact_tools",
    "format_knowledge_block",
    "format_safe_summary",
    "ingest",
    "is_injected",
    "make_build_context_node",
    "make_call_model_node",
    "make_record_memory_node",
    "make_retrieve_node",
    "make_route_after_retrieve",
    "make_safe_summarize_node",
    "neutralize",
    "safe_kb_meta",
    "split_documents",
    "strip_injected",
    "summarize_chunks",
]


def test_all_is_pinned() -> None:
    assert sorted(__all__) == sorted(EXPECTED_ALL)


def test_every_name_is_importable() -> None:
    for name in __all__:
        assert getattr(langchain_knowledge_inject, name) is not None, name


def test_the_package_is_marked_typed():
    from pathlib import Path

    assert (Path(langchain_knowledge_inject.__file__).parent / "py.typed").is_file()
