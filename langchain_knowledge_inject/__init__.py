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

from langchain_knowledge_inject._ingest.loading import IngestReport, aingest, ingest
from langchain_knowledge_inject._ingest.sample_data import build_sample_knowledge_base
from langchain_knowledge_inject._memory.episodic import EpisodicMemory
from langchain_knowledge_inject._memory.facts import UserFacts
from langchain_knowledge_inject._memory.procedures import ProcedureLibrary
from langchain_knowledge_inject._memory.tools import create_memory_tools
from langchain_knowledge_inject._restricted.boundary import ReasonCode, SafeSummary
from langchain_knowledge_inject._store.knowledge_base import (
    AddResult,
    KnowledgeBase,
    KnowledgeBaseInfo,
)
from langchain_knowledge_inject._store.retriever import KnowledgeBaseRetriever
from langchain_knowledge_inject._surfaces.graph import KnowledgeState, create_knowledge_graph
from langchain_knowledge_inject._surfaces.middleware import KnowledgeInjectionMiddleware
from langchain_knowledge_inject._surfaces.node import create_knowledge_node
from langchain_knowledge_inject._surfaces.runnable import KnowledgeInjector, cited_documents
from langchain_knowledge_inject._surfaces.tools import create_knowledge_base_search_tool
from langchain_knowledge_inject._turn.formatting import KnowledgeBlockTemplate
from langchain_knowledge_inject._turn.manifest import InjectionManifest
from langchain_knowledge_inject._turn.placement import strip_injected
from langchain_knowledge_inject._version import __version__
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    KnowledgeBaseNotFoundError,
    KnowledgeInjectError,
    RetrievalError,
    StoreError,
)
from langchain_knowledge_inject.settings import KnowledgeContext, KnowledgeSettings

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

logging.getLogger("langchain_knowledge_inject").addHandler(logging.NullHandler())
