"""Retrieval: every kind of knowledge source searched the same way, scores that mean one thing.

A surface's ``knowledge_base`` may be any of:

- a :class:`~langchain_knowledge_inject.KnowledgeBase` (or any object with its
  ``search``/``asearch`` signature): hybrid search, tenants, ``min_score`` with the
  package's calibrated default;
- a ``langchain_chroma.Chroma`` store, whatever its distance (L2 by default, cosine,
  inner product): each hit is scored by the cosine of its stored vector and the
  query's, computed here, so ``min_score`` means the same as for a knowledge base;
  the store's ``where`` filter language applies;
- another LangChain ``VectorStore``: its relevance scores where it has a relevance
  function, else its own ``similarity_search_with_score`` where the score's meaning is
  known (``InMemoryVectorStore``: cosine); a store with neither gives no score;
- ``store.as_retriever()``: searched through its store as above, under its
  ``search_kwargs`` (``k``, ``filter``, ``score_threshold``); ``mmr`` runs itself;
- any other LangChain ``BaseRetriever``: its documents as it returns them, scored by a
  numeric ``metadata["score"]`` or ``metadata["relevance_score"]`` when it sets one;
- a sequence mixing these.

Scores are in [0, 1]. With ``min_score`` set, a passage without a score gets its
cosine with the query under an embedding model of the turn (the store's behind the
source, else the first knowledge base's, else another source's); one that nothing can
score is kept unscored (shown without a score) and its source says once, naming no
document, that ``min_score`` cannot apply. ``tenant_id`` is refused for sources without
tenant partitions. Filters are applied by the store where it can (a knowledge base,
Chroma), else to the results' metadata after fetching four times as many. A passage
several sources return is merged once.

All sources are searched side by side (threads for the sync path, tasks for the async
one); a source that fails is left out and reported (``on_error="degrade"``) or raises.
Each search is a retriever run named ``knowledge_retrieval``, visible to callbacks and
``astream_events``; in a restricted turn its output is stubs (a keyed reference and a
score, never the text). A reranker (any ``BaseDocumentCompressor``, or a callable
``(query, documents) -> documents``) then reorders the merged candidates. Sealed text
(:mod:`~langchain_knowledge_inject._store.sealing`) is opened inside ``raw_access()`` alone;
``Retrieved.sealed`` names the sources that returned it unopened.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import itertools
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import ConfigDict

from langchain_knowledge_inject._store.filters import matches
from langchain_knowledge_inject._store.flags import ainside, inside, quiet, unheard
from langchain_knowledge_inject._store.sealing import any_sealed, is_sealed, kept_sealed, opened
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    ForkedProcessError,
    RetrievalError,
)

logger = logging.getLogger("langchain_knowledge_inject")

SOURCE_KINDS = "a KnowledgeBase, a LangChain BaseRetriever or VectorStore, or a sequence of them"
_FILTER_FETCH = 4
_SCORE_KEYS = ("score", "relevance_score")


@dataclass(frozen=True)
class SearchSpec:
    """The search arguments every source of a turn gets."""

    k: int
    min_score: float | None = None
    filter: Mapping[str, Any] | None = None
    mode: str = "hybrid"
    tenant_id: str | None = None
    include_shared: bool = True


@dataclass
class Retrieved:
    """What a search of every source found."""

    documents: list[Document] = field(default_factory=list)
    """The merged results, best first."""
    errors: list[dict[str, str]] = field(default_factory=list)
    """One ``{"stage": "retrieval", "error": <class>, "source": <name>}`` per failed source."""
    error: str | None = None
    """The first failure as ``"Class: message"`` (the non-restricted manifest shows it)."""
    sealed: tuple[str, ...] = ()
    """The sources that returned sealed text not opened: restricted, or without its key."""


# --- the sources ------------------------------------------------------------------------------


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _first_number(meta: Mapping[str, Any], keys: Sequence[str]) -> Any:
    """The value of the first of ``keys`` that holds a finite number, else None."""
    return next((meta[k] for k in keys if _numeric(meta.get(k))), None)


def _refuse_tenant(name: str, tenant_id: str | None) -> None:
    if tenant_id is not None:
        msg = (
            f"source {name!r} has no tenant partitions: tenant_id={tenant_id!r} cannot be "
            "honoured (use a KnowledgeBase, or one retriever per tenant without tenant_id)"
        )
        raise ConfigurationError(msg, option="tenant_id", value=tenant_id)


def _identified(doc: Document, name: str, score: float | None) -> Document:
    """A copy of ``doc`` with a chunk id, its source's name and (when known) its score."""
    metadata = dict(doc.metadata)
    chunk_id = doc.id or metadata.get("chunk_id")
    if not chunk_id:
        import hashlib

        digest = hashlib.sha256(doc.page_content.encode("utf-8", "replace")).hexdigest()[:16]
        chunk_id = f"{name}:{digest}"
    metadata["chunk_id"] = str(chunk_id)
    metadata.setdefault("kb_name", name)
    metadata.pop("score", None)  # a score is a number in [0, 1] or absent, never text
    if score is not None:
        metadata["score"] = min(1.0, max(0.0, float(score)))
    return Document(id=str(chunk_id), page_content=doc.page_content, metadata=metadata)


class _Foreign:
    """A LangChain store or retriever as a source: fetch, score what is unscored, filter."""

    # options: a VectorStoreRetriever's search_kwargs (k, filter, score_threshold)
    _filters = False  # whether the store applies ``spec.filter`` itself
    _warned = False
    embeddings: Any = None  # the model that scores unscored passages
    _fetch: Callable[[str, SearchSpec, Any], list[Document]]
    _afetch: Callable[[str, SearchSpec, Any], Awaitable[list[Document]]]

    def __init__(self, given: Any, name: str, options: Mapping[str, Any] | None = None) -> None:
        self.given, self.name, self.options = given, name, dict(options or {})

    def _spec(self, spec: SearchSpec) -> SearchSpec:
        _refuse_tenant(self.name, spec.tenant_id)
        low = [v for v in (spec.min_score, self.options.get("score_threshold")) if v is not None]
        k = int(self.options.get("k", spec.k))
        return dataclasses.replace(spec, k=k, min_score=max(low) if low else None)

    def _unscored(self, docs: list[Document], spec: SearchSpec) -> list[Document]:
        if spec.min_score is None or self.embeddings is None:
            return []
        return [d for d in docs if not _numeric(d.metadata.get("score"))]

    def search(self, query: str, spec: SearchSpec, config: Any = None) -> list[Document]:
        spec = self._spec(spec)
        docs = self._fetch(query, spec, config)
        if todo := self._unscored(docs, spec):
            vectors = self.embeddings.embed_documents([d.page_content for d in todo])
            _score(todo, self.embeddings.embed_query(query), vectors)
        return self._keep(docs, spec)

    async def asearch(self, query: str, spec: SearchSpec, config: Any = None) -> list[Document]:
        spec = self._spec(spec)
        docs = await self._afetch(query, spec, config)
        if todo := self._unscored(docs, spec):
            vectors = await self.embeddings.aembed_documents([d.page_content for d in todo])
            _score(todo, await self.embeddings.aembed_query(query), vectors)
        return self._keep(docs, spec)

    def _keep(self, docs: list[Document], spec: SearchSpec) -> list[Document]:
        low = spec.min_score
        unscored = any(not _numeric(d.metadata.get("score")) for d in docs)
        if low is not None and unscored and not self._warned:
            self._warned = True
            logger.warning(
                "min_score=%s is not applied to %r: it returns no relevance scores and no "
                "embedding model is known to score its passages (shown without a score)",
                low,
                self.name,
            )

        def kept(doc: Document) -> bool:
            meta = doc.metadata
            below = low is not None and _numeric(meta.get("score")) and meta["score"] < low
            return not below and (self._filters or not spec.filter or matches(meta, spec.filter))

        return [d for d in docs if kept(d)][: spec.k]


def _score(docs: Sequence[Document], query: Sequence[float], vectors: Sequence[Any]) -> None:
    """Each passage's cosine with the query (clipped to [0, 1]) as its score."""
    for doc, vector in zip(docs, vectors, strict=True):
        doc.metadata["score"] = min(1.0, max(0.0, _cosine(query, vector)))


class ChromaSource(_Foreign):
    """A ``langchain_chroma.Chroma`` store: hits scored by the exact cosine of their vectors."""

    _filters = True

    def __init__(self, store: Any, given: Any = None, options: Any = None) -> None:
        name = str(getattr(store._collection, "name", None) or type(store).__name__)
        super().__init__(given or store, name, options)
        self.store = store

    def _query(self, vector: Sequence[float], spec: SearchSpec) -> list[Document]:
        from langchain_knowledge_inject._store.filters import to_chroma

        wheres = [w for w in (to_chroma(spec.filter), self.options.get("filter")) if w]
        result = self.store._collection.query(
            query_embeddings=[list(vector)],
            n_results=spec.k,
            where={"$and": wheres} if len(wheres) > 1 else (wheres or [None])[0],
            where_document=self.options.get("where_document"),
            include=["documents", "metadatas", "embeddings"],
        )
        ids = result["ids"][0]
        texts = (result.get("documents") or [[]])[0]
        metas = (result.get("metadatas") or [[]])[0] or [None] * len(ids)
        vectors = (result.get("embeddings") or [[]])[0]
        docs = []
        for cid, text, meta, vec in zip(ids, texts, metas, vectors, strict=True):
            doc = Document(id=cid, page_content=text or "", metadata=dict(meta or {}))
            docs.append(_identified(doc, self.name, _cosine(vector, vec)))
        return sorted(docs, key=lambda d: -d.metadata["score"])

    def _fetch(self, query: str, spec: SearchSpec, config: Any) -> list[Document]:
        return self._query(self.store.embeddings.embed_query(query), spec)

    async def _afetch(self, query: str, spec: SearchSpec, config: Any) -> list[Document]:
        vector = await self.store.embeddings.aembed_query(query)
        return await asyncio.to_thread(self._query, vector, spec)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    import numpy as np

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    norm = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y) / norm if norm else 0.0


class VectorStoreSource(_Foreign):
    """Any other LangChain ``VectorStore``: relevance scores where they are known."""

    _SIMILARITY_SCORES = ("InMemoryVectorStore",)  # similarity_search_with_score is a cosine

    def __init__(self, store: VectorStore, given: Any = None, options: Any = None) -> None:
        super().__init__(given or store, type(store).__name__, options)
        self.store = store

    def _args(self, spec: SearchSpec) -> dict[str, Any]:
        """The store call's ``k`` (four times as many under a filter), a retriever's options."""
        own = {k: v for k, v in self.options.items() if k not in ("k", "score_threshold")}
        return {**own, "k": spec.k * _FILTER_FETCH if spec.filter else spec.k}

    def _scored(self, pairs: Sequence[tuple[Document, float | None]]) -> list[Document]:
        return [_identified(d, self.name, s) for d, s in pairs]

    def _fetch(self, query: str, spec: SearchSpec, config: Any) -> list[Document]:
        args = self._args(spec)
        if type(self.store).__name__ in self._SIMILARITY_SCORES:
            return self._scored(self.store.similarity_search_with_score(query, **args))
        try:
            with unheard():  # langchain_core's warning quotes the documents
                pairs = self.store.similarity_search_with_relevance_scores(query, **args)
            return self._scored(pairs)
        except NotImplementedError:
            return self._scored([(d, None) for d in self.store.similarity_search(query, **args)])

    async def _afetch(self, query: str, spec: SearchSpec, config: Any) -> list[Document]:
        args = self._args(spec)
        if type(self.store).__name__ in self._SIMILARITY_SCORES:
            return self._scored(await self.store.asimilarity_search_with_score(query, **args))
        try:
            with unheard():
                pairs = await self.store.asimilarity_search_with_relevance_scores(query, **args)
            return self._scored(pairs)
        except NotImplementedError:
            found = await self.store.asimilarity_search(query, **args)
            return self._scored([(d, None) for d in found])


class RetrieverSource(_Foreign):
    """A LangChain ``BaseRetriever``: its documents, scored where it sets a score."""

    def __init__(self, retriever: BaseRetriever) -> None:
        super().__init__(retriever, retriever.get_name())
        self.retriever = retriever

    def _found(self, found: Sequence[Document]) -> list[Document]:
        return [_identified(d, self.name, _first_number(d.metadata, _SCORE_KEYS)) for d in found]

    def _fetch(self, query: str, spec: SearchSpec, config: Any) -> list[Document]:
        return self._found(self.retriever.invoke(query, config))

    async def _afetch(self, query: str, spec: SearchSpec, config: Any) -> list[Document]:
        return self._found(await self.retriever.ainvoke(query, config))


class KnowledgeBaseSource:
    """A ``KnowledgeBase`` (or an object with its ``search``/``asearch``)."""

    def __init__(self, kb: Any) -> None:
        self.kb = self.given = kb
        self.name = str(getattr(kb, "name", type(kb).__name__))

    @staticmethod
    def _args(spec: SearchSpec) -> dict[str, Any]:  # the fields, include_shared only when off
        return {k: v for k, v in vars(spec).items() if k != "include_shared" or v is False}

    def search(self, query: str, spec: SearchSpec) -> list[Document]:
        return list(self.kb.search(query, **self._args(spec)))

    async def asearch(self, query: str, spec: SearchSpec) -> list[Document]:
        return list(await self.kb.asearch(query, **self._args(spec)))


Source = KnowledgeBaseSource | ChromaSource | VectorStoreSource | RetrieverSource


def _one(value: Any) -> Source | None:
    if hasattr(type(value), "restriction") and callable(getattr(value, "search", None)):
        return KnowledgeBaseSource(value)
    store, options = value, None
    if isinstance(value, VectorStoreRetriever) and value.search_type != "mmr":
        store, options = value.vectorstore, value.search_kwargs  # searched with its store's scores
    if isinstance(store, VectorStore):
        chroma = hasattr(store, "_collection") and hasattr(store, "embeddings")
        return (ChromaSource if chroma else VectorStoreSource)(store, value, options)
    if isinstance(value, BaseRetriever):
        return RetrieverSource(value)
    if callable(getattr(value, "search", None)) and callable(getattr(value, "asearch", None)):
        return KnowledgeBaseSource(value)
    return None


def _model_of(value: Any, depth: int = 0) -> Any:
    """The embedding model behind a store or a retriever (a wrapper's first one), or None."""
    if callable(getattr(own := getattr(value, "embeddings", None), "embed_query", None)):
        return own
    inner = [getattr(value, n, None) for n in ("vectorstore", "retriever", "base_retriever")]
    inner += list(getattr(value, "retrievers", None) or ()) if depth < 3 else []
    return next((m for i in inner if i is not None and (m := _model_of(i, depth + 1))), None)


def as_sources(value: Any) -> tuple[Any, ...]:
    """The searchable adapters of a surface's ``knowledge_base`` argument (see the module doc).

    Raises:
        ConfigurationError: Anything else, or an empty sequence.
    """
    single = _one(value)
    many = single is None and isinstance(value, Sequence) and not isinstance(value, str)
    items = tuple(value) if many else (value,)
    sources = tuple(_one(item) for item in items) if many else (single,)
    if not sources or any(s is None for s in sources):
        bad = next((i for i, s in zip(items, sources, strict=True) if s is None), value)
        msg = f"knowledge_base must be {SOURCE_KINDS}; got {type(bad).__name__}"
        raise ConfigurationError(msg, option="knowledge_base", value=value)
    owned = [(source, _model_of(source.given)) for source in sources if source is not None]
    kb_model = next((m for s, m in owned if isinstance(s, KnowledgeBaseSource) and m), None)
    for source, own in owned:  # its own model (its text went there), a KB's, another's
        if isinstance(source, _Foreign):
            source.embeddings = own or kb_model or next((m for _, m in owned if m), None)
    return sources


# --- one search as a retriever run --------------------------------------------------------------


class _TracedSearch(BaseRetriever):
    """One source's search as a retriever run; in a restricted turn its output is stubs.

    A restricted turn's search runs :func:`~.flags.inside` the boundary: the run
    reports stubs, and an error only as its class.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: Any

    def _args(self, run_manager: Any, kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """The source's search arguments; a retriever runs as a child of this run."""
        if not isinstance(self.source, RetrieverSource):
            return (kwargs["spec"],)
        callbacks = quiet() if kwargs["redact"] else run_manager.get_child()  # restricted: none
        return kwargs["spec"], {"callbacks": callbacks}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        search = functools.partial(self.source.search, query, *self._args(run_manager, kwargs))
        return _shown(inside(_opening, search) if kwargs["redact"] else search(), **kwargs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        search = functools.partial(self.source.asearch, query, *self._args(run_manager, kwargs))
        return _shown(
            await (ainside(_aopening, search) if kwargs["redact"] else search()), **kwargs
        )


def _opening(search: Callable[[], list[Document]]) -> list[Document]:
    """``search()`` with its sealed text opened (inside the boundary's context only)."""
    return opened(search())


async def _aopening(search: Callable[[], Awaitable[list[Document]]]) -> list[Document]:
    return opened(await search())


def _shown(
    found: list[Document], *, redact: Redact, sink: list[Document], **_: Any
) -> list[Document]:
    """Everything found into ``sink`` (``opened``); the run shows stubs, or no sealed text."""
    sink.extend(opened(found))
    return [redact(d) if redact else d for d in found if redact or not is_sealed(d.page_content)]


Redact = Callable[[Document], Document] | None


def _one_search(
    source: Source, query: str, spec: SearchSpec, config: RunnableConfig | None, redact: Redact
) -> list[Document]:
    sink: list[Document] = []
    traced = _TracedSearch(source=source, name="knowledge_retrieval")
    with kept_sealed():  # knowledge bases give their text as stored: sealed stays sealed
        traced.invoke(query, config, spec=spec, redact=redact, sink=sink)
    return sink


async def _aone_search(
    source: Source, query: str, spec: SearchSpec, config: RunnableConfig | None, redact: Redact
) -> list[Document]:
    sink: list[Document] = []
    traced = _TracedSearch(source=source, name="knowledge_retrieval")
    with kept_sealed():
        await traced.ainvoke(query, config, spec=spec, redact=redact, sink=sink)
    return sink


def _outcome(
    sources: Sequence[Source], results: Sequence[Any], k: int, on_error: str, restricted: bool
) -> Retrieved:
    """Merge what answered; raise or report what failed."""
    found = [r for r in results if not isinstance(r, BaseException)]
    failed = [(s, r) for s, r in zip(sources, results, strict=True) if isinstance(r, BaseException)]
    for _, exc in failed:
        if not isinstance(exc, Exception) or isinstance(
            exc, (ConfigurationError, ForkedProcessError)
        ):
            raise exc  # cancellation, a wrong setting, a forked process: the caller's to fix
    if failed and on_error == "raise":
        exc = failed[0][1]
        if restricted:  # its message (and causes) may quote raw restricted text: the class only
            raise RetrievalError(f"Knowledge retrieval failed ({type(exc).__name__})") from None
        if isinstance(exc, RetrievalError):
            raise exc
        msg = f"Knowledge retrieval failed: {exc}"
        raise RetrievalError(msg) from exc
    errors = []
    for source, exc in failed:
        what = type(exc).__name__ if restricted else f"{type(exc).__name__}: {exc}"
        logger.warning("knowledge source %r failed, continuing without it: %s", source.name, what)
        errors.append({"stage": "retrieval", "error": type(exc).__name__, "source": source.name})
    first = failed[0][1] if failed else None
    pairs = zip(sources, results, strict=True)
    sealed = [s.name for s, r in pairs if isinstance(r, list) and any_sealed(r)]
    return Retrieved(
        documents=merge_results(found, k),
        errors=errors,
        error=f"{type(first).__name__}: {first}" if first is not None else None,
        sealed=tuple(sealed),
    )


def search_sources(
    sources: Sequence[Source],
    query: str,
    spec: SearchSpec,
    *,
    config: RunnableConfig | None = None,
    redact: Redact = None,
    on_error: str = "degrade",
) -> Retrieved:
    """Search every source side by side (threads); merge, best first, cut to ``spec.k``.

    Raises:
        RetrievalError: A source failed and ``on_error == "raise"``.
        ConfigurationError: A search was refused for a wrong setting.
    """

    def run(source: Source) -> Any:
        try:
            return _one_search(source, query, spec, config, redact)
        except Exception as exc:
            return exc

    if len(sources) == 1:
        results = [run(sources[0])]
    else:  # a slow or frozen store does not delay the others; each thread in this context
        with ThreadPoolExecutor(len(sources), thread_name_prefix="kinject-search") as pool:
            futures = [pool.submit(contextvars.copy_context().run, run, s) for s in sources]
            results = [f.result() for f in futures]
    return _outcome(sources, results, spec.k, on_error, redact is not None)


async def asearch_sources(
    sources: Sequence[Source],
    query: str,
    spec: SearchSpec,
    *,
    config: RunnableConfig | None = None,
    redact: Redact = None,
    on_error: str = "degrade",
) -> Retrieved:
    """Async twin of :func:`search_sources` (the sources' ``asearch``, concurrently)."""
    results = await asyncio.gather(
        *(_aone_search(s, query, spec, config, redact) for s in sources), return_exceptions=True
    )
    return _outcome(sources, results, spec.k, on_error, redact is not None)


def merge_results(found: Sequence[Sequence[Document]], top_k: int) -> list[Document]:
    """Merge several sources' results, best first, each passage once, cut to ``top_k``.

    By score when every result has one, else rank by rank (the first of each source,
    then the second, ...). A passage several sources return (the same text, or a
    text within one kept already) is kept once, with the best score any gave it, every
    copy's id in ``chunk_ids`` (shown once, skipped by the tool as one) and, when they
    name different sources, every one in ``metadata["sources"]``.
    """
    if len(found) == 1:
        return list(found[0][:top_k])
    docs = [d for ds in found for d in ds]
    if all(_numeric(d.metadata.get("score")) for d in docs):
        ordered = sorted(docs, key=lambda d: -float(d.metadata["score"]))
    else:
        ordered = [d for row in itertools.zip_longest(*found) for d in row if d is not None]
    copies: dict[str, list[Document]] = {}
    for doc in ordered:  # the same text, or a text within one kept already
        text = " ".join(doc.page_content.split())
        key = next((kept for kept in copies if text and text in kept), text or f"\x00{doc.id}")
        copies.setdefault(key, []).append(doc)
    merged = []
    for group in list(copies.values())[:top_k]:
        meta = dict(group[0].metadata)
        scores = [d.metadata["score"] for d in group if _numeric(d.metadata.get("score"))]
        meta.update({"score": max(scores)} if scores else {})
        names = [str(d.metadata["source"]) for d in group if d.metadata.get("source")]
        meta.update({"sources": list(dict.fromkeys(names))} if len(set(names)) > 1 else {})
        ids = [str(i) for d in group for i in d.metadata.get("chunk_ids") or [d.id]]
        meta.update({"chunk_ids": list(dict.fromkeys(ids))} if len(group) > 1 else {})
        merged.append(Document(id=group[0].id, page_content=group[0].page_content, metadata=meta))
    return merged


# --- reranking --------------------------------------------------------------------------------


def check_reranker(reranker: Any) -> Any:
    """A ``BaseDocumentCompressor`` or a callable ``(query, documents) -> documents``.

    Raises:
        ConfigurationError: Anything else.
    """
    if reranker is None or callable(getattr(reranker, "compress_documents", None)):
        return reranker
    if callable(reranker):
        return reranker
    msg = (
        "reranker must be a LangChain BaseDocumentCompressor (a cross-encoder, FlashRank, "
        f"Cohere, ...) or a callable (query, documents) -> documents; got {type(reranker).__name__}"
    )
    raise ConfigurationError(msg, option="reranker", value=reranker)


def _reranked(out: Sequence[Document]) -> list[Document]:
    """The reranker's order, each document keeping its retrieval score as ``retrieval_score``."""
    ranked = []
    for position, doc in enumerate(out):
        meta = dict(doc.metadata)
        meta.setdefault("retrieval_score", meta.get("score"))
        rerank = _first_number(meta, ("relevance_score", "rerank_score"))
        if rerank is not None:
            meta["score"] = min(1.0, max(0.0, float(rerank)))
        meta["rerank_position"] = position
        ranked.append(Document(id=doc.id, page_content=doc.page_content, metadata=meta))
    return ranked


def rerank(
    reranker: Any, query: str, docs: Sequence[Document], *, restricted: bool = False
) -> list[Document]:
    """Reorder ``docs`` with ``reranker`` (no reranker, or no documents: as they are).

    ``restricted``: the reranker runs :func:`~.flags.inside` the boundary.
    """
    if restricted and reranker is not None and docs:
        return inside(rerank, reranker, query, docs)
    if reranker is None or not docs:
        return list(docs)
    if callable(getattr(reranker, "compress_documents", None)):
        out = reranker.compress_documents(list(docs), query)
    else:
        out = reranker(query, list(docs))
    return _reranked(out)


async def arerank(
    reranker: Any, query: str, docs: Sequence[Document], *, restricted: bool = False
) -> list[Document]:
    """Async twin of :func:`rerank` (a plain callable runs in a worker thread)."""
    if restricted and reranker is not None and docs:
        return await ainside(arerank, reranker, query, docs)
    if reranker is None or not docs:
        return list(docs)
    if callable(getattr(reranker, "acompress_documents", None)):
        out = await reranker.acompress_documents(list(docs), query)
    else:
        result: Any = await asyncio.to_thread(reranker, query, list(docs))
        out = await result if isinstance(result, Awaitable) else result
    return _reranked(out)
