"""langchain-knowledge-inject: the right knowledge in front of the model, every turn.

Retrieval over a Chroma knowledge base (dense, keyword and hybrid), a
cache-friendly ``dynamic_context`` message, a restricted mode that never lets
raw text reach the main model, as a LangGraph graph, a Runnable, agent
middleware and a tool.
"""

from langchain_knowledge_inject._version import __version__
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    IngestError,
    KnowledgeBaseError,
    KnowledgeBaseNotFoundError,
    KnowledgeBaseOpenError,
    KnowledgeInjectError,
    RetrievalError,
    SummarizerError,
)
from langchain_knowledge_inject.knowledge_base import AddResult, KnowledgeBase, KnowledgeBaseInfo
from langchain_knowledge_inject.retriever import KnowledgeBaseRetriever

__all__ = [
    "AddResult",
    "ConfigurationError",
    "IngestError",
    "KnowledgeBase",
    "KnowledgeBaseError",
    "KnowledgeBaseInfo",
    "KnowledgeBaseNotFoundError",
    "KnowledgeBaseOpenError",
    "KnowledgeBaseRetriever",
    "KnowledgeInjectError",
    "RetrievalError",
    "SummarizerError",
    "__version__",
]
