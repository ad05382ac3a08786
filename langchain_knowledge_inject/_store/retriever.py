"""``KnowledgeBaseRetriever``: a LangChain ``BaseRetriever`` over a knowledge base.

This module sits below ``knowledge_base`` (which builds retrievers in
``as_retriever``): it names ``KnowledgeBase`` for type checking only, and
``knowledge_base`` completes the model's field type once the class exists.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, model_validator

from langchain_knowledge_inject._store.sealing import kept_sealed
from langchain_knowledge_inject._store.search_args import SearchMode, check_search_args
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.knowledge_base import KnowledgeBase


_OVERRIDABLE = ("k", "min_score", "mode", "filter", "tenant_id", "include_shared")
_VIA = "kb.as_retriever()"


class KnowledgeBaseRetriever(BaseRetriever):
    """Retriever over a :class:`KnowledgeBase`.

    Every option can be set on the retriever and overridden per call:
    ``retriever.invoke("query", k=3, tenant_id="acme")``. Over a restricted
    knowledge base it raises ``RestrictedKnowledgeError`` rather than return raw
    text, except inside the package's surfaces (``flags.raw_access``).

    At its defaults the retriever is pure top-k, as LangChain retrievers are
    expected to be (it passes the ``RetrieversIntegrationTests`` suite): ``k``
    chunks whenever the knowledge base holds that many, however weakly they match
    (``min_score=0.0``). Pass ``min_score`` (``None``: the package's calibrated
    :data:`~langchain_knowledge_inject._store.fusion.DEFAULT_MIN_SCORE`, as ``search``
    and injection use) to make ``k`` an upper bound and drop weak matches.

    Example:
        .. code-block:: python

            from langchain_core.documents import Document
            from langchain_core.embeddings import DeterministicFakeEmbedding
            from langchain_knowledge_inject import KnowledgeBase, KnowledgeBaseRetriever

            emb = DeterministicFakeEmbedding(size=32)
            kb = KnowledgeBase("docs", path=tmp_path, embeddings=emb)
            kb.add_documents([Document("Remote work needs a manager's approval.")])
            retriever = KnowledgeBaseRetriever(knowledge_base=kb, k=1)
            assert retriever.invoke("remote work")[0].page_content.startswith("Remote")
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    knowledge_base: KnowledgeBase
    """The knowledge base to search."""
    k: int = 4
    """How many chunks to return at most."""
    min_score: float | None = 0.0
    """Drop chunks scoring below this. ``0.0`` (the default): pure top-k; ``None``: the
    package's calibrated default threshold, which makes ``k`` an upper bound."""
    mode: SearchMode = "hybrid"
    """``dense``, ``keyword`` or ``hybrid``."""
    filter: dict[str, Any] | None = Field(default=None)
    """Metadata filter in Chroma's ``where`` language."""
    tenant_id: str | None = None
    """Tenant partition to search (None: the shared partition)."""
    include_shared: bool = True
    """With ``tenant_id``: the shared partition's chunks too; False: the tenant's alone."""

    @model_validator(mode="after")
    def _validate(self) -> KnowledgeBaseRetriever:
        check_search_args(self.k, self.min_score, self.mode)
        return self

    def _options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        unknown = set(kwargs) - set(_OVERRIDABLE)
        if unknown:
            msg = f"Unknown retriever options {sorted(unknown)}; allowed: {', '.join(_OVERRIDABLE)}"
            raise ConfigurationError(msg, option=sorted(unknown)[0])
        return {name: getattr(self, name) for name in _OVERRIDABLE} | kwargs

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        options = self._options(kwargs)
        self.knowledge_base.check_raw_read(_VIA)
        with kept_sealed():  # sealed text stays sealed outside raw_access()
            return self.knowledge_base.search(query, **options)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        options = self._options(kwargs)
        await asyncio.to_thread(self.knowledge_base.check_raw_read, _VIA)
        with kept_sealed():
            return await self.knowledge_base.asearch(query, **options)
