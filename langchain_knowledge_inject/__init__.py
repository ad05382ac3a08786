"""langchain-knowledge-inject: the right knowledge in front of the model, every turn.

Retrieval over a Chroma knowledge base (dense, keyword and hybrid), a cache-friendly
``dynamic_context`` message, a restricted mode that never lets raw text reach the main
model, as a LangGraph graph, a Runnable, agent middleware and a tool.

The root exports what a user needs. Building blocks live in the subpackages, named for
the architecture: ``store`` (the knowledge base), ``ingest`` (files to documents),
``turn`` (one turn's query, blocks, budget and placement), ``restricted`` (restricted
mode), ``memory`` (procedures, facts, episodes) and ``integrations`` (the surfaces).
"""

import logging

from langchain_knowledge_inject._compat import MOVED_NAMES, install_module_aliases, moved_name
from langchain_knowledge_inject._version import __version__
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    KnowledgeBaseNotFoundError,
    KnowledgeInjectError,
    RetrievalError,
    StoreError,
)
from langchain_knowledge_inject.ingest.loading import IngestReport, aingest, ingest
from langchain_knowledge_inject.ingest.sample_data import build_sample_knowledge_base
from langchain_knowledge_inject.integrations.graph import KnowledgeState, create_knowledge_graph
from langchain_knowledge_inject.integrations.middleware import KnowledgeInjectionMiddleware
from langchain_knowledge_inject.integrations.node import create_knowledge_node
from langchain_knowledge_inject.integrations.runnable import KnowledgeInjector
from langchain_knowledge_inject.integrations.tools import create_knowledge_base_search_tool
from langchain_knowledge_inject.memory.episodic import EpisodicMemory
from langchain_knowledge_inject.memory.facts import UserFacts
from langchain_knowledge_inject.memory.procedures import ProcedureLibrary
from langchain_knowledge_inject.memory.tools import create_memory_tools
from langchain_knowledge_inject.restricted.summary import ReasonCode, SafeSummary
from langchain_knowledge_inject.settings import KnowledgeSettings
from langchain_knowledge_inject.store.knowledge_base import (
    AddResult,
    KnowledgeBase,
    KnowledgeBaseInfo,
)
from langchain_knowledge_inject.store.retriever import KnowledgeBaseRetriever
from langchain_knowledge_inject.turn.formatting import KnowledgeBlockTemplate
from langchain_knowledge_inject.turn.manifest import InjectionManifest
from langchain_knowledge_inject.turn.placement import strip_injected

__all__ = [
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

# Names the root exported before 0.3, now in their subpackage; they still resolve, with a
# DeprecationWarning naming the new home, for one release.
MOVED_NAMES.update(
    {
        "DEFAULT_KNOWLEDGE_TEMPLATE": "turn.formatting",
        "KNOWLEDGE_SYSTEM_PROMPT": "turn.formatting",
        "format_knowledge_block": "turn.formatting",
        "neutralize": "turn.formatting",
        "BlockText": "turn.blocks",
        "ContextBlock": "turn.blocks",
        "assemble_blocks": "turn.blocks",
        "Episode": "memory.episodic",
        "ForkedProcessError": "errors",
        "IngestError": "errors",
        "KnowledgeBaseError": "errors",
        "KnowledgeBaseOpenError": "errors",
        "MemoryWriteError": "errors",
        "StoreTimeoutError": "errors",
        "SummarizerError": "errors",
        "split_documents": "ingest.loading",
        "InjectionConfig": "integrations.runnable",
        "RetrievalOutcome": "integrations.runnable",
        "TurnContext": "integrations.runnable",
        "KnowledgeInjectionState": "integrations.middleware",
        "make_build_context_node": "integrations.graph",
        "make_call_model_node": "integrations.graph",
        "make_record_memory_node": "integrations.graph",
        "make_retrieve_node": "integrations.graph",
        "make_route_after_retrieve": "integrations.graph",
        "make_safe_summarize_node": "integrations.graph",
        "create_store_memory_tool": "memory.tools",
        "create_user_fact_tools": "memory.tools",
        "Placement": "turn.placement",
        "is_injected": "turn.placement",
        "Procedure": "memory.procedures",
        "LeakPolicy": "restricted.summary",
        "LeakReport": "restricted.summary",
        "SafeKnowledgeBaseInfo": "restricted.summary",
        "SummaryBounds": "restricted.summary",
        "asummarize_chunks": "restricted.summary",
        "check_leak": "restricted.summary",
        "format_safe_summary": "restricted.summary",
        "safe_kb_meta": "restricted.summary",
        "summarize_chunks": "restricted.summary",
        "approximate_token_count": "turn.tokens",
        "KnowledgeBaseSearchInput": "integrations.tools",
    }
)
install_module_aliases()


def __getattr__(name: str) -> object:
    return moved_name(name)


logging.getLogger("langchain_knowledge_inject").addHandler(logging.NullHandler())
