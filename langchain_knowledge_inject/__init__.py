"""langchain-knowledge-inject: the right knowledge in front of the model, every turn.

Retrieval over a Chroma knowledge base (dense, keyword and hybrid), a
cache-friendly ``dynamic_context`` message, a restricted mode that never lets
raw text reach the main model, as a LangGraph graph, a Runnable, agent
middleware and a tool.
"""

import logging

from langchain_knowledge_inject._version import __version__
from langchain_knowledge_inject.blocks import BlockText, ContextBlock, assemble_blocks
from langchain_knowledge_inject.episodic import Episode, EpisodicMemory
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    ForkedProcessError,
    IngestError,
    KnowledgeBaseError,
    KnowledgeBaseNotFoundError,
    KnowledgeBaseOpenError,
    KnowledgeInjectError,
    MemoryWriteError,
    RetrievalError,
    StoreError,
    StoreTimeoutError,
    SummarizerError,
)
from langchain_knowledge_inject.facts import UserFacts
from langchain_knowledge_inject.formatting import (
    DEFAULT_KNOWLEDGE_TEMPLATE,
    KNOWLEDGE_SYSTEM_PROMPT,
    KnowledgeBlockTemplate,
    format_knowledge_block,
    neutralize,
)
from langchain_knowledge_inject.graph import (
    KnowledgeState,
    create_knowledge_graph,
    make_build_context_node,
    make_call_model_node,
    make_record_memory_node,
    make_retrieve_node,
    make_route_after_retrieve,
    make_safe_summarize_node,
)
from langchain_knowledge_inject.ingestion import IngestReport, aingest, ingest, split_documents
from langchain_knowledge_inject.injector import (
    InjectionConfig,
    KnowledgeInjector,
    RetrievalOutcome,
    TurnContext,
)
from langchain_knowledge_inject.knowledge_base import AddResult, KnowledgeBase, KnowledgeBaseInfo
from langchain_knowledge_inject.manifest import InjectionManifest
from langchain_knowledge_inject.memory_tools import (
    create_memory_tools,
    create_store_memory_tool,
    create_user_fact_tools,
)
from langchain_knowledge_inject.middleware import (
    KnowledgeInjectionMiddleware,
    KnowledgeInjectionState,
)
from langchain_knowledge_inject.node import create_knowledge_node
from langchain_knowledge_inject.placement import Placement, is_injected, strip_injected
from langchain_knowledge_inject.procedures import Procedure, ProcedureLibrary
from langchain_knowledge_inject.restriction import (
    LeakPolicy,
    LeakReport,
    ReasonCode,
    SafeKnowledgeBaseInfo,
    SafeSummary,
    SummaryBounds,
    asummarize_chunks,
    check_leak,
    format_safe_summary,
    safe_kb_meta,
    summarize_chunks,
)
from langchain_knowledge_inject.retriever import KnowledgeBaseRetriever
from langchain_knowledge_inject.sample_data import build_sample_knowledge_base
from langchain_knowledge_inject.settings import KnowledgeSettings
from langchain_knowledge_inject.tokens import approximate_token_count
from langchain_knowledge_inject.tools import (
    KnowledgeBaseSearchInput,
    create_knowledge_base_search_tool,
)

__all__ = [
    "DEFAULT_KNOWLEDGE_TEMPLATE",
    "KNOWLEDGE_SYSTEM_PROMPT",
    "AddResult",
    "BlockText",
    "ConfigurationError",
    "ContextBlock",
    "Episode",
    "EpisodicMemory",
    "ForkedProcessError",
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
    "MemoryWriteError",
    "Placement",
    "Procedure",
    "ProcedureLibrary",
    "ReasonCode",
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

logging.getLogger("langchain_knowledge_inject").addHandler(logging.NullHandler())
