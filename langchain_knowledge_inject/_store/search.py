"""Searching one partition: dense and keyword candidates, their fusion, the documents returned.

:class:`PartitionSearch` does the work of ``KnowledgeBase.search`` once its
arguments are checked: the dense side asks Chroma (with each candidate's
source, its document), the keyword side the keyword cache (caught up first when
it may be behind), hybrid search fuses both with each chunk's document
(``fusion.fuse_with_documents``, the document's keyword side from the cache's
document rows), and the best chunks are read back from Chroma. A metadata
filter goes to Chroma on the dense side and, on the keyword side, to a Chroma
``get`` of the keyword hits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from langchain_knowledge_inject._store import documents, fusion
from langchain_knowledge_inject._store.chroma import Chunk, source_key, to_chunks
from langchain_knowledge_inject._store.filters import to_chroma
from langchain_knowledge_inject._store.storage import is_not_found

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.chroma import ChromaSide
    from langchain_knowledge_inject._store.keyword_cache import KeywordCache
    from langchain_knowledge_inject._store.search_args import SearchMode

Hits = list[tuple[str, float]]
"""``(chunk id, score)`` pairs, best first."""


class PartitionSearch:
    """The search path of one knowledge base.

    Args:
        chroma: Its Chroma side (client, partition collections, bounded calls).
        cache: Its keyword cache.
        query_vector: Embeds a query (the knowledge base's cache).
    """

    def __init__(
        self, chroma: ChromaSide, cache: KeywordCache, query_vector: Callable[[str], list[float]]
    ) -> None:
        self.chroma = chroma
        self.cache = cache
        self.query_vector = query_vector

    def ranked(
        self,
        partition: str,
        text: str,
        depth: int,
        where: Mapping[str, Any] | None,
        mode: SearchMode,
        stopwords: AbstractSet[str],
        parents: dict[str, str] | None = None,
    ) -> tuple[Hits, Hits, dict[str, Chunk]]:
        """The partition's ranking (``depth`` candidates a side), the dense hits, chunks read.

        Dense mode reads the chunks with the query (its ranking is Chroma's): a
        search needs no second call to read them back. Each hit's source goes to
        ``parents`` when given.
        """
        parents = {} if parents is None else parents
        read: dict[str, Chunk] = {}
        if mode != "keyword":
            dense = self.dense(
                partition, text, depth, where, parents, read if mode == "dense" else None
            )
        else:
            dense = []
        keyword: Hits = []
        if mode != "dense":
            self.cache.ensure(partition, wait=False)
            keyword = self.keyword(partition, text, depth, where, stopwords, parents)
        if mode == "dense":
            return dense, dense, read
        whole: Hits = []
        indexed: set[str] = set()
        if not where and documents.enabled():  # a filter selects chunks, not whole documents
            sources = set(parents.values()) - {""}
            whole, indexed = self.cache.search_documents(
                partition, text, k=depth, stopwords=stopwords, sources=sources
            )
        if mode == "hybrid":
            fused = fusion.fuse_with_documents(
                dense, keyword, parents, document_keyword=whole, indexed=indexed
            )
            return fused, dense, read
        if not indexed:  # keyword mode: as hybrid search with no dense side, best hit at 1
            return fusion.keyword_unit_scores(keyword), dense, read
        ranked = fusion.fuse_with_documents(
            [], keyword, parents, dense_weight=0.0, document_keyword=whole, indexed=indexed
        )
        best = ranked[0][1] if ranked else 0.0
        return [(cid, score / best) for cid, score in ranked] if best > 0 else ranked, dense, read

    def dense(
        self,
        partition: str,
        text: str,
        depth: int,
        where: Mapping[str, Any] | None,
        parents: dict[str, str],
        read: dict[str, Chunk] | None = None,
    ) -> Hits:
        """Chroma's nearest chunks, scored (``fusion.dense_score``); their sources to ``parents``.

        With ``read``, the chunks themselves too (text and metadata), by id.
        """
        vector = self.query_vector(text)
        for attempt in (1, 2):
            collection = self.chroma.collection(partition)
            if collection is None:
                return []
            try:
                result = collection.query(
                    query_embeddings=[vector],
                    n_results=depth,
                    where=to_chroma(where),
                    include=[
                        "distances",
                        "metadatas",
                        *(["documents"] if read is not None else []),
                    ],
                )
                break
            except Exception as exc:
                if attempt == 2 or not is_not_found(exc):
                    raise
                self.chroma.forget()  # deleted under us (server wiped or restarted)
        ids, distances = result["ids"][0], (result["distances"] or [[]])[0]
        for cid, meta in zip(ids, (result["metadatas"] or [[None] * len(ids)])[0], strict=True):
            parents[cid] = source_key(meta)
        if read is not None:
            got = {key: (result[key] or [[]])[0] for key in ("documents", "metadatas")}
            read.update((c.chunk_id, c) for c in to_chunks({"ids": ids, **got}, partition))
        return [(cid, fusion.dense_score(d)) for cid, d in zip(ids, distances, strict=True)]

    def keyword(
        self,
        partition: str,
        text: str,
        depth: int,
        where: Mapping[str, Any] | None,
        stopwords: AbstractSet[str],
        parents: dict[str, str],
    ) -> Hits:
        """BM25 hits of the keyword cache (a metadata filter checked by Chroma)."""
        hits = self.cache.search(
            partition, text, k=depth * 4 if where else depth, stopwords=stopwords
        )
        if where and hits:
            kept = {
                c.chunk_id
                for c in self.chroma.get(
                    partition, [h[0] for h in hits], where=to_chroma(where), text=False
                )
            }
            hits = [h for h in hits if h[0] in kept][:depth]
        for cid, _, source in hits:
            parents.setdefault(cid, source)
        return [(cid, score) for cid, score, _ in hits]

    def merged(
        self, kb_name: str, kb_id: str, partition: str, ranked: Sequence[tuple[str, float]],
        parents: dict[str, str], k: int, read: Mapping[str, Chunk],
    ) -> list[Document]:  # fmt: skip
        """The ``k`` best documents of the ranking, each one result of its best chunks."""
        groups = fusion.group_by_document(ranked, parents, k)
        wanted = [(c, s) for s, ids in groups for c in ids]
        chunks = {d.id: d for d in self.documents(kb_name, kb_id, partition, wanted, read)}
        out = []
        for score, ids in groups:
            found = [chunks[c] for c in ids if c in chunks]
            if found:
                out.append(fusion.merge_chunks(found, score))
        return out

    def documents(
        self,
        kb_name: str,
        kb_id: str,
        partition: str,
        ranked: Sequence[tuple[str, float]],
        read: Mapping[str, Chunk],
    ) -> list[Document]:
        """The ranked chunks (read from Chroma unless in ``read``), with score and origin."""
        missing = [cid for cid, _ in ranked if cid not in read]
        found = {**read, **{c.chunk_id: c for c in self.chroma.get(partition, missing)}}
        docs = []
        for cid, score in ranked:
            chunk = found.get(cid)
            if chunk is None:  # deleted meanwhile
                continue
            meta = {**chunk.metadata, "score": score, "chunk_id": cid}
            meta.update(kb_name=kb_name, kb_id=kb_id)
            docs.append(Document(id=cid, page_content=chunk.text, metadata=meta))
        return docs
