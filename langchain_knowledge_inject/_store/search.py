"""Searching one partition: dense and keyword candidates, their fusion, the documents returned.

:class:`PartitionSearch` does the work of ``KnowledgeBase.search`` once its
arguments are checked: the dense side asks Chroma, the keyword side the
SQLite index (caught up with the server first in server mode), hybrid search
fuses both with each chunk's document (``fusion.fuse_with_documents``, the
document's keyword side from :mod:`langchain_knowledge_inject._store.documents`),
and the best chunks are read back from the registry (or from Chroma, for
chunks another process wrote). Errors pass through: the knowledge base turns
them into ``RetrievalError`` and heals a damaged catalog.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from langchain_knowledge_inject._store import fusion
from langchain_knowledge_inject._store.filters import matches, to_chroma
from langchain_knowledge_inject._store.keyword import STOPWORDS
from langchain_knowledge_inject._store.storage import is_not_found

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.chroma import ChromaSide
    from langchain_knowledge_inject._store.handles import StoreHandles
    from langchain_knowledge_inject._store.search_args import SearchMode
    from langchain_knowledge_inject._store.sync import KeywordSync

__all__ = ["DOCUMENT_REFRESH", "Hits", "PartitionSearch"]

logger = logging.getLogger(__name__)

DOCUMENT_REFRESH = 200
"""Most dirty documents a search rebuilds before it ranks (writes rebuild all of theirs)."""

Hits = list[tuple[str, float]]
"""``(chunk id, score)`` pairs, best first."""


class PartitionSearch:
    """The search path of one knowledge base, over the handles it owns.

    Args:
        handles: Its SQLite side (registry, keyword index, document index).
        chroma: Its Chroma side (client, partition collections, bounded calls).
        query_vector: Embeds a query (the knowledge base's cache).
        sync: Server mode: catches the keyword index up before a keyword search.
    """

    def __init__(
        self,
        handles: StoreHandles,
        chroma: ChromaSide,
        query_vector: Callable[[str], list[float]],
        sync: KeywordSync | None,
    ) -> None:
        self.handles = handles
        self.chroma = chroma
        self.query_vector = query_vector
        self.sync = sync

    def candidates(
        self,
        partition: str,
        text: str,
        depth: int,
        where: Mapping[str, Any] | None,
        mode: SearchMode,
        stopwords: AbstractSet[str] = STOPWORDS,
    ) -> tuple[Hits, Hits]:
        """The dense and keyword candidates (``depth`` each) of ``partition``."""
        calls = self.chroma.calls
        if not self.chroma.verified(partition):  # the catalog describes it still
            self.chroma.collection(partition, create=False)
        if self.sync is not None and mode != "dense":
            with calls.per_call():  # a catch-up may be long: each call is bounded
                self.sync.maybe_catch_up(partition)
        with calls.operation():  # one deadline for the Chroma calls of the search
            dense = self.dense(partition, text, depth, where) if mode != "keyword" else []
            keyword = (
                self.keyword(partition, text, depth, where, stopwords) if mode != "dense" else []
            )
        return dense, keyword

    def rank(
        self,
        partition: str,
        text: str,
        depth: int,
        where: Mapping[str, Any] | None,
        mode: SearchMode,
        candidates: tuple[Hits, Hits],
        stopwords: AbstractSet[str] = STOPWORDS,
    ) -> Hits:
        """One ranking from the candidates: as they are, unit keyword scores, or fused."""
        dense, keyword = candidates
        if mode == "dense":
            return dense
        if mode == "keyword":
            return self.keyword_rank(partition, text, depth, where, keyword, stopwords)
        parents = self.parents(partition, {cid for cid, _ in [*dense, *keyword]})
        whole, indexed = self.document_hits(partition, text, depth, where, parents, stopwords)
        return fusion.fuse_with_documents(
            dense, keyword, parents, document_keyword=whole, indexed=indexed
        )

    def keyword_rank(
        self,
        partition: str,
        text: str,
        depth: int,
        where: Mapping[str, Any] | None,
        keyword: Hits,
        stopwords: AbstractSet[str] = STOPWORDS,
    ) -> Hits:
        """Keyword mode: each chunk's BM25 blended with its document's, the best hit at 1.

        As hybrid search does with no dense side (``fusion.fuse_with_documents``,
        ``dense_weight=0``): a chunk scores ``DOCUMENT_WEIGHT * document +
        (1 - DOCUMENT_WEIGHT) * chunk``, then all are divided by the best, so
        the best hit scores 1 as before. Where the document index does not
        answer (a metadata filter, ``DOCUMENT_KEYWORD = "pool"``, a store
        without it), chunks are scored alone (``fusion.keyword_unit_scores``).
        """
        parents = self.parents(partition, {cid for cid, _ in keyword}) if keyword else {}
        whole, indexed = self.document_hits(partition, text, depth, where, parents, stopwords)
        if not indexed:
            return fusion.keyword_unit_scores(keyword)
        ranked = fusion.fuse_with_documents(
            [], keyword, parents, dense_weight=0.0, document_keyword=whole, indexed=indexed
        )
        best = ranked[0][1] if ranked else 0.0
        return [(cid, score / best) for cid, score in ranked] if best > 0 else ranked

    def dense(self, partition: str, text: str, depth: int, where: Mapping[str, Any] | None) -> Hits:
        """Chroma's nearest chunks, scored (``fusion.dense_score``)."""
        collection = self.chroma.collection(partition, create=False)
        if collection is None:
            return []
        vector = self.query_vector(text)
        try:
            result = collection.query(
                query_embeddings=[vector],
                n_results=depth,
                where=to_chroma(where),
                include=["distances"],
            )
        except Exception as exc:
            if not is_not_found(exc):
                raise
            self.chroma.forget()  # deleted under us (server wiped or restarted)
            collection = self.chroma.collection(partition, create=False)
            if collection is None:
                return []
            result = collection.query(
                query_embeddings=[vector],
                n_results=depth,
                where=to_chroma(where),
                include=["distances"],
            )
        ids, distances = result["ids"][0], (result["distances"] or [[]])[0]
        return [(cid, fusion.dense_score(d)) for cid, d in zip(ids, distances, strict=True)]

    def keyword(
        self,
        partition: str,
        text: str,
        depth: int,
        where: Mapping[str, Any] | None,
        stopwords: AbstractSet[str] = STOPWORDS,
    ) -> Hits:
        """BM25 hits of the keyword index (a metadata filter applied to the registry rows)."""
        handles = self.handles
        search = handles.keyword.search
        if not where:
            return search(handles.kb_id, partition, text, k=depth, stopwords=stopwords)
        hits = search(handles.kb_id, partition, text, k=depth * 4, stopwords=stopwords)
        rows = handles.catalog.get_chunks(handles.kb_id, partition, [cid for cid, _ in hits])
        return [(c, s) for c, s in hits if c in rows and matches(rows[c].metadata, where)][:depth]

    def document_hits(
        self,
        partition: str,
        text: str,
        depth: int,
        where: Mapping[str, Any] | None,
        parents: Mapping[str, str],
        stopwords: AbstractSet[str] = STOPWORDS,
    ) -> tuple[Hits, set[str]]:
        """BM25 over whole documents, for the hybrid document score (:mod:`.documents`).

        Not with a metadata filter (a document's whole text is not what the
        filter selects: its chunks' scores are pooled instead), nor with
        ``fusion.DOCUMENT_KEYWORD = "pool"``. A few sources left dirty by a
        write from another path (a catch-up, a recovery) are rebuilt first
        (at most :data:`DOCUMENT_REFRESH`); when that write fails (a full
        disk), they are pooled and the search goes on.
        """
        if where or fusion.DOCUMENT_KEYWORD != "index" or fusion.DOCUMENT_WEIGHT <= 0:
            return [], set()
        handles = self.handles
        documents = handles.documents
        with handles.lock:
            if not handles.read_only:
                try:
                    if documents.refresh(handles.kb_id, limit=DOCUMENT_REFRESH):
                        handles.conn.commit()
                except (sqlite3.OperationalError, sqlite3.IntegrityError) as exc:
                    # a full disk, a locked file, a keyword table out of step with its rows
                    handles.conn.rollback()  # they stay dirty, so pooled: the search goes on
                    logger.warning("document index not refreshed before a search: %s", exc)
            return documents.search(
                handles.kb_id,
                partition,
                text,
                k=depth,
                sources=set(parents.values()),
                stopwords=stopwords,
            )

    def parents(self, partition: str, ids: set[str]) -> dict[str, str]:
        """Chunk id -> source, for the chunks of the registry (others are their own document)."""
        handles = self.handles
        found: dict[str, str] = {}
        batch = list(ids)
        with handles.lock:
            for start in range(0, len(batch), 500):
                part = batch[start : start + 500]
                marks = ",".join("?" * len(part))
                found.update(
                    handles.conn.execute(
                        "SELECT chunk_id, source FROM chunks WHERE kb_id = ? AND partition = ?"
                        f" AND chunk_id IN ({marks}) AND source != ''",
                        (handles.kb_id, partition, *part),
                    ).fetchall()
                )
        return found

    def documents(
        self, kb_name: str, partition: str, ranked: Sequence[tuple[str, float]]
    ) -> list[Document]:
        """The ranked chunks as documents, with their score and where they come from."""
        handles = self.handles
        ids = [cid for cid, _ in ranked]
        rows = handles.catalog.get_chunks(handles.kb_id, partition, ids)
        missing = [cid for cid in ids if cid not in rows]
        if missing:  # written by another process to a shared Chroma server
            rows.update(self.chroma.rows(partition, missing))
        docs = []
        for cid, score in ranked:
            row = rows.get(cid)
            if row is None:
                continue
            meta = {**row.metadata, "score": score, "chunk_id": cid}
            meta.update(kb_name=kb_name, kb_id=handles.kb_id)
            docs.append(Document(id=cid, page_content=row.text, metadata=meta))
        return docs
