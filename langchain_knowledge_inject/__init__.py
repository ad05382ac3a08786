"""langchain-knowledge-inject: the right knowledge in front of the model, every turn.

Retrieval over a Chroma knowledge base (dense, keyword and hybrid), a cache-friendly
``dynamic_context`` message, a restricted mode that never lets raw text reach the main
model, as a LangGraph graph, a Runnable, agent middleware and a tool.

The root exports what a user needs; ``errors``, ``settings`` and ``presets`` are the
public modules, and the underscored subpackages are private. Names are imported on
first use (PEP 562), so ``import langchain_knowledge_inject`` loads neither Chroma nor
torch nor ``langchain.agents``: each comes with the first name that needs it.
"""

import importlib
import logging
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._version import __version__

if TYPE_CHECKING:
    from langchain_knowledge_inject._ingest.loading import IngestReport, aingest, ingest
    from langchain_knowledge_inject._ingest.sample_data import build_sample_knowledge_base
    from langchain_knowledge_inject._memory.episodes import EpisodeRecord
    from langchain_knowledge_inject._memory.episodic import EpisodicMemory, EpisodicOptions
    from langchain_knowledge_inject._memory.facts import UserFacts
    from langchain_knowledge_inject._memory.procedures import Procedure, ProcedureLibrary
    from langchain_knowledge_inject._memory.tools import create_memory_tools
    from langchain_knowledge_inject._restricted.boundary import ReasonCode, SafeSummary
    from langchain_knowledge_inject._store.flags import RestrictionFlags
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase
    from langchain_knowledge_inject._store.metadata import AddResult, KnowledgeBaseInfo
    from langchain_knowledge_inject._store.retriever import KnowledgeBaseRetriever
    from langchain_knowledge_inject._surfaces.graph import (
        KnowledgeState,
        create_knowledge_graph,
        create_knowledge_nodes,
    )
    from langchain_knowledge_inject._surfaces.middleware import KnowledgeInjectionMiddleware
    from langchain_knowledge_inject._surfaces.node import create_knowledge_node
    from langchain_knowledge_inject._surfaces.runnable import KnowledgeInjector, cited_documents
    from langchain_knowledge_inject._surfaces.tools import create_knowledge_base_search_tool
    from langchain_knowledge_inject._turn.formatting import KnowledgeBlockTemplate
    from langchain_knowledge_inject._turn.manifest import InjectionManifest
    from langchain_knowledge_inject._turn.placement import strip_injected
    from langchain_knowledge_inject.errors import (
        ConfigurationError,
        KnowledgeBaseNotFoundError,
        KnowledgeInjectError,
        RestrictedKnowledgeError,
        RetrievalError,
        StoreError,
    )
    from langchain_knowledge_inject.settings import KnowledgeContext, KnowledgeSettings

__all__ = [
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
    "create_knowledge_node",
    "create_knowledge_nodes",
    "create_memory_tools",
    "ingest",
    "strip_injected",
]

_MODULES = {
    "_ingest.loading": ("IngestReport", "aingest", "ingest"),
    "_ingest.sample_data": ("build_sample_knowledge_base",),
    "_memory.episodes": ("EpisodeRecord",),
    "_memory.episodic": ("EpisodicMemory", "EpisodicOptions"),
    "_memory.facts": ("UserFacts",),
    "_memory.procedures": ("Procedure", "ProcedureLibrary"),
    "_memory.tools": ("create_memory_tools",),
    "_restricted.boundary": ("ReasonCode", "SafeSummary"),
    "_store.flags": ("RestrictionFlags",),
    "_store.knowledge_base": ("KnowledgeBase",),
    "_store.metadata": ("AddResult", "KnowledgeBaseInfo"),
    "_store.retriever": ("KnowledgeBaseRetriever",),
    "_surfaces.graph": ("KnowledgeState", "create_knowledge_graph", "create_knowledge_nodes"),
    "_surfaces.middleware": ("KnowledgeInjectionMiddleware",),
    "_surfaces.node": ("create_knowledge_node",),
    "_surfaces.runnable": ("KnowledgeInjector", "cited_documents"),
    "_surfaces.tools": ("create_knowledge_base_search_tool",),
    "_turn.formatting": ("KnowledgeBlockTemplate",),
    "_turn.manifest": ("InjectionManifest",),
    "_turn.placement": ("strip_injected",),
    "errors": (
        "ConfigurationError",
        "KnowledgeBaseNotFoundError",
        "KnowledgeInjectError",
        "RestrictedKnowledgeError",
        "RetrievalError",
        "StoreError",
    ),
    "settings": ("KnowledgeContext", "KnowledgeSettings"),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use (PEP 562), then keep it."""
    module = _HOME.get(name)
    if module is None:
        msg = f"module {__name__!r} has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's attributes, the public names not imported yet included."""
    return sorted({*globals(), *__all__})


logging.getLogger("langchain_knowledge_inject").addHandler(logging.NullHandler())
