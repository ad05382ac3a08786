"""The search methods of :class:`~.knowledge_base.KnowledgeBase`: search, search_hits, asearch.

The search arguments are checked here, a damaged catalog is healed and the
search run again, and every other failure becomes a :class:`RetrievalError`;
the search of one partition itself is :class:`~.search.PartitionSearch`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, Literal, overload

from langchain_core.documents import Document

from langchain_knowledge_inject._store import fusion
from langchain_knowledge_inject._store.filters import split_tenant
from langchain_knowledge_inject._store.keyword import STOPWORDS
from langchain_knowledge_inject._store.search_args import (
    MAX_QUERY_CHARS,
    SearchMode,
    check_search_args,
)
from langchain_knowledge_inject._store.write_plan import partition_of
from langchain_knowledge_inject.errors import ConfigurationError, RetrievalError

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.calls import BoundedCalls
    from langchain_knowledge_inject._store.search import PartitionSearch


class SearchMixin:
    """The search methods of ``KnowledgeBase`` (a part of its class, not used alone)."""

    if TYPE_CHECKING:  # what it uses of the facade
        name: str
        _searcher: PartitionSearch

        @property
        def _calls(self) -> BoundedCalls: ...
        def _check_process(self) -> None: ...
        def _heal_damaged_catalog(self, exc: BaseException) -> bool: ...
        async def _in_thread(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any: ...

    def search(
        self,
        query: str,
        *,
        k: int = 4,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: SearchMode = "hybrid",
        tenant_id: str | None = None,
    ) -> list[Document]:
        """Return the chunks most relevant to ``query``, best first.

        Args:
            query: The question (cut to :data:`MAX_QUERY_CHARS` characters).
            k: How many chunks at most (>= 1).
            min_score: Drop chunks scoring below this, in [0, 1]; see
                :mod:`langchain_knowledge_inject._store.fusion` for what a score means.
                None uses :data:`~langchain_knowledge_inject._store.fusion.DEFAULT_MIN_SCORE`.
            filter: Metadata filter in Chroma's ``where`` language; its
                ``tenant_id`` selects the tenant partition.
            mode: ``"dense"``, ``"keyword"`` or ``"hybrid"`` (the default, a fusion).
            tenant_id: Search this tenant's partition; None searches the shared one.

        Returns:
            Documents with ``id`` (the chunk id) and ``metadata["score"]``,
            ``["chunk_id"]``, ``["kb_name"]``, ``["kb_id"]``, ``["source"]``.

        Raises:
            ConfigurationError: An argument has a value that is not allowed.
            RetrievalError: The store could not be searched.
            StoreTimeoutError: A Chroma server did not answer within ``timeout``.
            ForkedProcessError: Used in a process forked after it was opened.
        """
        partition, ranked, _ = self._ranked(query, k, min_score, filter, mode, tenant_id)
        if not ranked:
            return []
        try:
            with self._calls.operation():
                return self._searcher.documents(self.name, partition, ranked)
        except (RetrievalError, ConfigurationError):
            raise
        except sqlite3.DatabaseError as exc:
            if self._heal_damaged_catalog(exc):
                return self.search(
                    query, k=k, min_score=min_score, filter=filter, mode=mode, tenant_id=tenant_id
                )
            msg = f"Search of knowledge base {self.name!r} failed: {exc}"
            raise RetrievalError(msg, kb_name=self.name) from exc
        except Exception as exc:
            msg = f"Search of knowledge base {self.name!r} failed: {type(exc).__name__}: {exc}"
            raise RetrievalError(msg, kb_name=self.name) from exc

    @overload
    def search_hits(
        self,
        query: str,
        *,
        k: int = ...,
        min_score: float | None = ...,
        filter: Mapping[str, Any] | None = ...,
        mode: SearchMode = ...,
        tenant_id: str | None = ...,
        stopwords: AbstractSet[str] | None = ...,
        with_dense: Literal[False] = ...,
    ) -> list[tuple[str, float]]: ...

    @overload
    def search_hits(
        self,
        query: str,
        *,
        k: int = ...,
        min_score: float | None = ...,
        filter: Mapping[str, Any] | None = ...,
        mode: SearchMode = ...,
        tenant_id: str | None = ...,
        stopwords: AbstractSet[str] | None = ...,
        with_dense: Literal[True],
    ) -> list[tuple[str, float, float]]: ...

    def search_hits(
        self,
        query: str,
        *,
        k: int = 4,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: SearchMode = "hybrid",
        tenant_id: str | None = None,
        stopwords: AbstractSet[str] | None = None,
        with_dense: bool = False,
    ) -> list[tuple[str, float]] | list[tuple[str, float, float]]:
        """:meth:`search` without reading the chunks back: ``(chunk id, score)`` pairs, best first.

        For a caller that re-ranks a pool of hits by fields it keeps itself and
        reads back only the chunks it returns (:meth:`get_by_ids`); same
        arguments, order and scores as :meth:`search`, and ``stopwords``: the
        query words the keyword side leaves out (lowercase; default ``None``:
        the 33 of :data:`~langchain_knowledge_inject._store.keyword.STOPWORDS`).

        With ``with_dense=True``, ``(chunk id, score, cosine)`` triples: the
        dense side's score of each hit beside its fused score (as
        :func:`~langchain_knowledge_inject._store.fusion.fuse` counts it: the
        dense list's lowest for a chunk found by the keyword side alone; 0 in
        keyword mode). Order, scores and ``min_score`` are the same.
        """
        if stopwords is not None and not (
            isinstance(stopwords, AbstractSet) and all(isinstance(w, str) for w in stopwords)
        ):
            msg = "stopwords must be a set of lowercase words, or None"
            raise ConfigurationError(msg, option="stopwords", value=stopwords)
        _, ranked, dense = self._ranked(query, k, min_score, filter, mode, tenant_id, stopwords)
        if not with_dense:
            return ranked
        cosines, floor = fusion.dense_cosines(dense)
        return [(cid, score, cosines.get(cid, floor)) for cid, score in ranked]

    def _ranked(
        self,
        query: str,
        k: int,
        min_score: float | None,
        filter: Mapping[str, Any] | None,
        mode: SearchMode,
        tenant_id: str | None,
        stopwords: AbstractSet[str] | None = None,
    ) -> tuple[str, list[tuple[str, float]], list[tuple[str, float]]]:
        """The searched partition, its best ``k`` hits scoring ``min_score`` or more, dense hits."""
        stop = STOPWORDS if stopwords is None else stopwords
        self._check_process()
        k, min_score, mode = check_search_args(k, min_score, mode)
        tenant, where = split_tenant(filter, tenant_id)
        partition = partition_of(tenant)
        text = (query or "")[:MAX_QUERY_CHARS]
        if not text.strip():
            return partition, [], []
        depth = max(k, fusion.CANDIDATE_DEPTH) if mode == "hybrid" else k
        searcher = self._searcher
        try:
            candidates = searcher.candidates(partition, text, depth, where, mode, stop)
        except (RetrievalError, ConfigurationError):
            raise
        except Exception as exc:
            if self._heal_damaged_catalog(exc):  # rebuilt from Chroma: search again
                return self._ranked(query, k, min_score, filter, mode, tenant_id, stopwords)
            msg = f"Search of knowledge base {self.name!r} failed: {type(exc).__name__}: {exc}"
            raise RetrievalError(msg, kb_name=self.name) from exc
        ranked = searcher.rank(partition, text, depth, where, mode, candidates, stop)
        kept = [(cid, s) for cid, s in ranked if s >= min_score][:k]
        return partition, kept, candidates[0]

    async def asearch(
        self,
        query: str,
        *,
        k: int = 4,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: SearchMode = "hybrid",
        tenant_id: str | None = None,
    ) -> list[Document]:
        """Async twin of :meth:`search` (runs it in a worker thread: Chroma's client is sync).

        With a Chroma server the thread is one of this knowledge base's own, and
        the wait is bounded by ``timeout``: a frozen server never takes a thread
        from the event loop's default executor, so other knowledge bases are not slowed.
        """
        self._check_process()
        return await self._in_thread(
            self.search,
            query,
            k=k,
            min_score=min_score,
            filter=filter,
            mode=mode,
            tenant_id=tenant_id,
        )
