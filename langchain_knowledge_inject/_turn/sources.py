"""Knowledge sources: a ``KnowledgeBase``, any LangChain retriever or vector store, or a mix.

Every surface (the injector, the graph, the middleware, the tool) takes as its
``knowledge_base`` argument any of:

- a :class:`~langchain_knowledge_inject.KnowledgeBase` (or anything with the same
  ``search`` / ``asearch`` signature): hybrid search, tenants, ``min_score`` with
  the package's calibrated default;
- a LangChain ``BaseRetriever``: its documents as it returns them, cut to
  ``top_k`` (the retriever's own ``k`` / ``search_kwargs`` decide how many it
  returns at most);
- a LangChain ``VectorStore``: ``similarity_search_with_relevance_scores`` where
  the store offers relevance scores (their ``[0, 1]`` value lands in
  ``metadata["score"]``), else a plain ``similarity_search`` (no score);
- a non-empty sequence mixing these.

What the settings mean for each kind:

================ ================= ====================== =========================
setting          KnowledgeBase     VectorStore            BaseRetriever
================ ================= ====================== =========================
``top_k``        ``k`` of search   ``k`` of the search    cuts the returned list
``min_score``    ``None``: the KB  applied to relevance   applied to a numeric
                 default           scores; ``None`` or    ``metadata["score"]``;
                                   no scores: no          ``None`` or none: no
                                   threshold              threshold
``mode``         dense/keyword/    ignored (similarity)   ignored (its own search)
                 hybrid
``tenant_id``    tenant partition  refused: raises ``ConfigurationError`` (no
                                   partitions, so a tenant could see another's data)
filter (tool)    Chroma ``where``  applied to the metadata of the results (fetches
                                   4x ``top_k`` first)
================ ================= ====================== =========================

Several sources are merged best first by score when every result has one,
otherwise rank by rank (the first of each source, then the second, ...), and
cut to ``top_k``.

Each search runs as a retriever run (:class:`TracedSearch`): ``on_retriever_start``
/ ``on_retriever_end`` with the documents, visible in callbacks, ``astream_events``
and LangSmith. In restricted mode the run's documents are stubs with the chunk id
and score only, never the text, and a wrapped retriever runs without callbacks, so
no trace carries a protected passage.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict

from langchain_knowledge_inject._store.filters import matches
from langchain_knowledge_inject.errors import ConfigurationError

__all__ = [
    "RetrieverSource",
    "TracedSearch",
    "VectorStoreSource",
    "as_sources",
    "merge_results",
]

_FILTER_FETCH = 4  # foreign sources: results fetched per wanted result when a filter is given
SOURCE_KINDS = "a KnowledgeBase, a LangChain BaseRetriever or VectorStore, or a sequence of them"


def _refuse_tenant(name: str, tenant_id: str | None) -> None:
    if tenant_id is not None:
        msg = (
            f"source {name!r} has no tenant partitions: tenant_id={tenant_id!r} cannot be "
            "honoured (use a KnowledgeBase, or one retriever per tenant without tenant_id)"
        )
        raise ConfigurationError(msg, option="tenant_id", value=tenant_id)


def _with_identity(doc: Document, name: str, score: float | None) -> Document:
    """A copy of ``doc`` with a chunk id, the source name and (when known) the score."""
    chunk_id = doc.id or doc.metadata.get("chunk_id")
    if not chunk_id:
        digest = hashlib.sha256(doc.page_content.encode("utf-8", "replace")).hexdigest()[:16]
        chunk_id = f"{name}:{digest}"
    metadata = {**doc.metadata, "chunk_id": str(chunk_id)}
    metadata.setdefault("kb_name", name)
    if score is not None:
        metadata["score"] = min(1.0, max(0.0, float(score)))
    return Document(id=str(chunk_id), page_content=doc.page_content, metadata=metadata)


def _keep(
    docs: Sequence[Document], *, k: int, min_score: float | None, where: Mapping[str, Any] | None
) -> list[Document]:
    kept = []
    for doc in docs:
        score: Any = doc.metadata.get("score")
        if min_score is not None and _numeric(score) and float(score) < min_score:
            continue
        if where and not matches(doc.metadata, where):
            continue
        kept.append(doc)
    return kept[:k]


class VectorStoreSource:
    """A LangChain ``VectorStore`` as a knowledge source (see the module docstring).

    Args:
        store: The vector store.
        name: Name reported in ``metadata["kb_name"]`` (default: the store's class name).
    """

    def __init__(self, store: VectorStore, *, name: str | None = None) -> None:
        self.store = store
        self.name = name or type(store).__name__
        self._scored: bool | None = None  # None: not tried yet

    def __repr__(self) -> str:
        return f"VectorStoreSource({self.name!r})"

    def search(
        self,
        query: str,
        *,
        k: int = 4,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: str = "hybrid",
        tenant_id: str | None = None,
        quiet: bool = False,
    ) -> list[Document]:
        """Similarity search, with relevance scores where the store offers them.

        ``quiet=True`` (restricted mode) skips LangChain's warning about scores
        outside ``[0, 1]``, whose message carries the documents' text.
        """
        _refuse_tenant(self.name, tenant_id)
        fetch = k * _FILTER_FETCH if filter else k
        if self._scored is not False:
            try:
                if quiet:  # the public method warns with the documents' text on odd scores
                    pairs = self.store._similarity_search_with_relevance_scores(query, k=fetch)
                else:
                    pairs = self.store.similarity_search_with_relevance_scores(query, k=fetch)
                self._scored = True
                docs = [_with_identity(d, self.name, s) for d, s in pairs]
                return _keep(docs, k=k, min_score=min_score, where=filter)
            except NotImplementedError:
                self._scored = False
        docs = [
            _with_identity(d, self.name, None) for d in self.store.similarity_search(query, k=fetch)
        ]
        return _keep(docs, k=k, min_score=None, where=filter)

    async def asearch(
        self,
        query: str,
        *,
        k: int = 4,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: str = "hybrid",
        tenant_id: str | None = None,
        quiet: bool = False,
    ) -> list[Document]:
        """Async twin of :meth:`search` (the store's async methods)."""
        _refuse_tenant(self.name, tenant_id)
        fetch = k * _FILTER_FETCH if filter else k
        if self._scored is not False:
            try:
                if quiet:
                    pairs = await self.store._asimilarity_search_with_relevance_scores(
                        query, k=fetch
                    )
                else:
                    pairs = await self.store.asimilarity_search_with_relevance_scores(
                        query, k=fetch
                    )
                self._scored = True
                docs = [_with_identity(d, self.name, s) for d, s in pairs]
                return _keep(docs, k=k, min_score=min_score, where=filter)
            except NotImplementedError:
                self._scored = False
        found = await self.store.asimilarity_search(query, k=fetch)
        docs = [_with_identity(d, self.name, None) for d in found]
        return _keep(docs, k=k, min_score=None, where=filter)


class RetrieverSource:
    """A LangChain ``BaseRetriever`` as a knowledge source (see the module docstring).

    Args:
        retriever: The retriever.
        name: Name reported in ``metadata["kb_name"]`` (default: the retriever's name).
    """

    def __init__(self, retriever: BaseRetriever, *, name: str | None = None) -> None:
        self.retriever = retriever
        self.name = name or retriever.get_name()

    def __repr__(self) -> str:
        return f"RetrieverSource({self.name!r})"

    def search(
        self,
        query: str,
        *,
        k: int = 4,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: str = "hybrid",
        tenant_id: str | None = None,
        config: RunnableConfig | None = None,
        traced: bool = True,
    ) -> list[Document]:
        """The retriever's documents, cut to ``k``.

        ``traced=False`` (restricted mode) runs the retriever with no callbacks at
        all, so its run, which carries raw text, is never reported anywhere.
        """
        _refuse_tenant(self.name, tenant_id)
        found = self.retriever.invoke(query, config) if traced else _untraced(self.retriever, query)
        docs = [_with_identity(d, self.name, None) for d in found]
        return _keep(docs, k=k, min_score=min_score, where=filter)

    async def asearch(
        self,
        query: str,
        *,
        k: int = 4,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: str = "hybrid",
        tenant_id: str | None = None,
        config: RunnableConfig | None = None,
        traced: bool = True,
    ) -> list[Document]:
        """Async twin of :meth:`search`."""
        _refuse_tenant(self.name, tenant_id)
        if traced:
            found = await self.retriever.ainvoke(query, config)
        else:
            found = await _auntraced(self.retriever, query)
        docs = [_with_identity(d, self.name, None) for d in found]
        return _keep(docs, k=k, min_score=min_score, where=filter)


def _untraced(retriever: BaseRetriever, query: str) -> list[Document]:
    if retriever._new_arg_supported:
        return retriever._get_relevant_documents(
            query, run_manager=CallbackManagerForRetrieverRun.get_noop_manager()
        )
    return retriever._get_relevant_documents(query)  # type: ignore[call-arg]


async def _auntraced(retriever: BaseRetriever, query: str) -> list[Document]:
    if retriever._new_arg_supported:
        return await retriever._aget_relevant_documents(
            query, run_manager=AsyncCallbackManagerForRetrieverRun.get_noop_manager()
        )
    return await retriever._aget_relevant_documents(query)  # type: ignore[call-arg]


def _is_source(value: Any) -> bool:
    return callable(getattr(value, "search", None)) and callable(getattr(value, "asearch", None))


def _one(value: Any) -> Any:
    if isinstance(value, VectorStore):
        return VectorStoreSource(value)
    if isinstance(value, BaseRetriever):
        return RetrieverSource(value)
    if _is_source(value):
        return value
    return None


def as_sources(value: Any) -> tuple[Any, ...]:
    """The knowledge sources of a surface's ``knowledge_base`` argument.

    Args:
        value: A ``KnowledgeBase`` (or an object with its ``search``/``asearch``), a
            ``BaseRetriever``, a ``VectorStore``, or a non-empty sequence of these.

    Returns:
        One searchable source per item: knowledge bases as given, retrievers and
        vector stores wrapped in :class:`RetrieverSource` / :class:`VectorStoreSource`.

    Raises:
        ConfigurationError: Something else, or an empty sequence.
    """
    single = _one(value)
    if single is not None:
        return (single,)
    items = tuple(value) if isinstance(value, Sequence) and not isinstance(value, str) else ()
    sources = tuple(_one(item) for item in items)
    if not sources or any(s is None for s in sources):
        bad = next((i for i, s in zip(items, sources, strict=True) if s is None), value)
        msg = f"knowledge_base must be {SOURCE_KINDS}; got {type(bad).__name__}"
        raise ConfigurationError(msg, option="knowledge_base", value=value)
    return sources


def merge_results(found: Sequence[Sequence[Document]], top_k: int) -> list[Document]:
    """Merge the results of several sources, best first, without repeats, cut to ``top_k``.

    By score when every result has one, else rank by rank (the first of each
    source, then the second, ...). A chunk found by two sources (same id) is kept once.
    """
    if len(found) == 1:
        return list(found[0][:top_k])
    docs = [d for ds in found for d in ds]
    if all(_numeric(d.metadata.get("score")) for d in docs):
        ordered = sorted(docs, key=lambda d: -float(d.metadata["score"]))
    else:
        ordered = [d for row in itertools.zip_longest(*found) for d in row if d is not None]
    seen: set[str] = set()
    merged = []
    for doc in ordered:
        key = str(doc.id or doc.metadata.get("chunk_id") or id(doc))
        if key not in seen:
            seen.add(key)
            merged.append(doc)
    return merged[:top_k]


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --- the retriever run ------------------------------------------------------------------------


def _stub(doc: Document) -> Document:
    """Restricted mode: what a trace may show of a chunk (its id and score, never its text)."""
    metadata: dict[str, Any] = {"chunk_id": str(doc.id or doc.metadata.get("chunk_id", ""))}
    if _numeric(doc.metadata.get("score")):
        metadata["score"] = float(doc.metadata["score"])
    return Document(id=metadata["chunk_id"] or None, page_content="", metadata=metadata)


class TracedSearch(BaseRetriever):
    """Runs one source's search as a retriever run, so traces show the retrieval.

    Invoked as ``traced.invoke(query, config, search={...}, restricted=..., sink=[])``:
    the documents found go into ``sink``; the run's output (what callbacks and
    ``astream_events`` see) is the documents, or in restricted mode their stubs
    (chunk id and score, no text).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: Any
    """The source (a ``KnowledgeBase``, :class:`RetrieverSource` or :class:`VectorStoreSource`)."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        search, restricted, sink = kwargs["search"], kwargs["restricted"], kwargs["sink"]
        if isinstance(self.source, RetrieverSource):
            child: RunnableConfig = {"callbacks": run_manager.get_child()}
            found = self.source.search(query, **search, config=child, traced=not restricted)
        elif isinstance(self.source, VectorStoreSource):
            found = self.source.search(query, **search, quiet=restricted)
        else:
            found = self.source.search(query, **search)
        sink.extend(found)
        return [_stub(d) for d in found] if restricted else list(found)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        search, restricted, sink = kwargs["search"], kwargs["restricted"], kwargs["sink"]
        if isinstance(self.source, RetrieverSource):
            child: RunnableConfig = {"callbacks": run_manager.get_child()}
            found = await self.source.asearch(query, **search, config=child, traced=not restricted)
        elif isinstance(self.source, VectorStoreSource):
            found = await self.source.asearch(query, **search, quiet=restricted)
        else:
            found = await self.source.asearch(query, **search)
        sink.extend(found)
        return [_stub(d) for d in found] if restricted else list(found)


def traced(sources: Sequence[Any]) -> tuple[TracedSearch, ...]:
    """One :class:`TracedSearch` per source, named ``knowledge_retrieval``."""
    return tuple(TracedSearch(source=s, name="knowledge_retrieval") for s in sources)


def search_one(
    traced_search: TracedSearch,
    query: str,
    search: Mapping[str, Any],
    *,
    config: RunnableConfig | None,
    restricted: bool,
) -> list[Document]:
    """Search one source as a retriever run under ``config``; its raw results."""
    sink: list[Document] = []
    traced_search.invoke(query, config, search=dict(search), restricted=restricted, sink=sink)
    return sink


async def asearch_one(
    traced_search: TracedSearch,
    query: str,
    search: Mapping[str, Any],
    *,
    config: RunnableConfig | None,
    restricted: bool,
) -> list[Document]:
    """Async twin of :func:`search_one`."""
    sink: list[Document] = []
    await traced_search.ainvoke(
        query, config, search=dict(search), restricted=restricted, sink=sink
    )
    return sink


def search_all(
    searches: Sequence[TracedSearch],
    query: str,
    search: Mapping[str, Any],
    *,
    config: RunnableConfig | None,
    restricted: bool,
) -> list[list[Document]]:
    """Search every source in turn (each as a retriever run); raw results per source."""
    return [search_one(t, query, search, config=config, restricted=restricted) for t in searches]


async def asearch_all(
    searches: Sequence[TracedSearch],
    query: str,
    search: Mapping[str, Any],
    *,
    config: RunnableConfig | None,
    restricted: bool,
) -> list[list[Document]]:
    """Async twin of :func:`search_all`."""
    return [
        await asearch_one(t, query, search, config=config, restricted=restricted) for t in searches
    ]
