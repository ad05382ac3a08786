"""Searching partitions: dense and keyword candidates, their fusion, the documents returned.

:class:`PartitionSearch` does the work of ``KnowledgeBase.search``; a tenant's search ranks
its partition and the shared one each as alone (the same scores), merged by score. Chroma gives
ids and distances only, on the knowledge base's thread in hybrid mode while the
keyword cache answers on the caller's; each candidate's source comes from the
keyword cache (Chroma's metadata for the few it lacks). Hybrid search fuses both
sides with each chunk's document (``fusion.fuse_with_documents``); the ranking is
grouped by document and only the results' chunks are read back, in one ``get``.
A metadata filter goes to Chroma on the dense side and is checked on the keyword
hits' metadata, read by id.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from langchain_knowledge_inject._store import documents, fusion
from langchain_knowledge_inject._store.calls import submit, worker_pool
from langchain_knowledge_inject._store.filters import matches, to_chroma
from langchain_knowledge_inject._store.storage import is_not_found

if TYPE_CHECKING:
    from langchain_knowledge_inject._store.chroma import ChromaSide, Fields
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
        self._dense_side = worker_pool(8, "kinject-dense")

    def ranked(
        self, partitions: Sequence[str], text: str, depth: int, where: Mapping[str, Any] | None,
        mode: SearchMode, stopwords: AbstractSet[str], parents: dict[str, str] | None = None,
    ) -> tuple[Hits, Hits]:  # fmt: skip
        """Each partition ranked as alone, merged by score: the ranking and the dense hits."""
        found = [self._ranked(p, text, depth, where, mode, stopwords, parents) for p in partitions]
        if len(found) == 1:
            return found[0]
        ranked = _best([hit for pair in found for hit in pair[0]], depth)
        return ranked, _best([hit for pair in found for hit in pair[1]], depth)

    def _ranked(
        self,
        partition: str,
        text: str,
        depth: int,
        where: Mapping[str, Any] | None,
        mode: SearchMode,
        stopwords: AbstractSet[str],
        parents: dict[str, str] | None = None,
    ) -> tuple[Hits, Hits]:
        """The ranking (``depth`` candidates a side) and the dense hits; sources to ``parents``."""
        if mode == "dense":
            dense = self.dense(partition, text, depth, where)
            if parents is not None:
                self.cache.ensure(partition, wait=False)
                self.sources(partition, [cid for cid, _ in dense], parents)
            return dense, dense
        pending = None
        if mode == "hybrid":  # the dense side on another thread meanwhile
            pending = submit(self._dense_side, self.dense, partition, text, depth, where)
        parents = {} if parents is None else parents
        self.cache.ensure(partition, wait=False)
        keyword = self.keyword(partition, text, depth, where, stopwords)
        by_document = not where and documents.enabled()  # a filter selects chunks, not documents
        whole: Hits = []
        if by_document:
            found = self.cache.search_documents(partition, text, k=depth, stopwords=stopwords)
            whole = [(_document(partition, source), score) for source, score in found]
        dense = [] if pending is None else pending.result()
        parents.update((cid, _document(partition, source)) for cid, _, source in keyword)
        self.sources(partition, [cid for cid, _ in dense if cid not in parents], parents)
        hits = [(cid, score) for cid, score, _ in keyword]
        indexed = set(parents.values()) - {""} if by_document else set()
        if mode == "hybrid":
            fused = fusion.fuse_with_documents(
                dense, hits, parents, document_keyword=whole, indexed=indexed
            )
            return fused, dense
        if not indexed:  # keyword mode: as hybrid search with no dense side, best hit at 1
            return fusion.keyword_unit_scores(hits), dense
        ranked = fusion.fuse_with_documents(
            [], hits, parents, dense_weight=0.0, document_keyword=whole, indexed=indexed
        )
        best = ranked[0][1] if ranked else 0.0
        return [(cid, score / best) for cid, score in ranked] if best > 0 else ranked, dense

    def dense(self, partition: str, text: str, depth: int, where: Mapping[str, Any] | None) -> Hits:
        """Chroma's nearest chunks (ids and distances only), scored (``fusion.dense_score``)."""
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
                    include=["distances"],
                )
                break
            except Exception as exc:
                if attempt == 2 or not is_not_found(exc):
                    raise
                self.chroma.forget()  # deleted under us (server wiped or restarted)
        ids, distances = result["ids"][0], (result["distances"] or [[]])[0]
        return [(cid, fusion.dense_score(d)) for cid, d in zip(ids, distances, strict=True)]

    def keyword(
        self,
        partition: str,
        text: str,
        depth: int,
        where: Mapping[str, Any] | None,
        stopwords: AbstractSet[str],
    ) -> list[tuple[str, float, str]]:
        """``(chunk id, BM25, source)`` from the keyword cache (filter: on metadata)."""
        hits = self.cache.search(
            partition, text, k=depth * 4 if where else depth, stopwords=stopwords
        )
        if where and hits:  # by id, filtered here: Chroma's get by ids and where scans
            got = self.chroma.get(partition, [h[0] for h in hits], fields="meta")
            ids = {c.chunk_id for c in got if matches(c.metadata, where)}
            hits = [h for h in hits if h[0] in ids][:depth]
        return hits

    def sources(self, partition: str, ids: Sequence[str], parents: dict[str, str]) -> None:
        """The source of each of ``ids`` into ``parents``: the keyword cache's, else Chroma's."""
        if ids:
            found = self.cache.sources(partition, ids)
            missing = [cid for cid in ids if cid not in found]
            chunks = self.chroma.get(partition, missing, fields="meta")
            parents.update((cid, _document(partition, source)) for cid, source in found.items())
            parents.update((c.chunk_id, _document(partition, c.source)) for c in chunks)

    def merged(
        self, kb_name: str, kb_id: str, partitions: Sequence[str],
        ranked: Sequence[tuple[str, float]], parents: dict[str, str], k: int,
        fields: Fields = "all",
    ) -> list[Document]:  # fmt: skip
        """The ``k`` best documents of the ranking, each one result of its best chunks."""
        groups = fusion.group_by_document(ranked, parents, k)
        wanted = [(c, s) for s, ids in groups for c in ids]
        chunks = {d.id: d for d in self.documents(kb_name, kb_id, partitions, wanted, fields)}
        found = [(score, [chunks[c] for c in ids if c in chunks]) for score, ids in groups]
        return [fusion.merge_chunks(docs, score) for score, docs in found if docs]

    def documents(
        self, kb_name: str, kb_id: str, partitions: Sequence[str], ranked: Hits,
        fields: Fields = "all",
    ) -> list[Document]:  # fmt: skip
        """The ranked chunks, read from Chroma in one call a partition (text as ``fields`` says)."""
        ids = [cid for cid, _ in ranked]
        found = {c.chunk_id: c for p in partitions for c in self.chroma.get(p, ids, fields=fields)}
        docs = []
        for cid, score in ranked:
            chunk = found.get(cid)
            if chunk is None:  # deleted meanwhile
                continue
            meta = {**chunk.metadata, "score": score, "chunk_id": cid}
            meta.update(kb_name=kb_name, kb_id=kb_id)
            docs.append(Document(id=cid, page_content=chunk.text, metadata=meta))
        return docs


def _document(partition: str, source: str) -> str:  # its source in its partition: two files
    return f"{partition}\x1f{source}" if partition and source else source


def _best(hits: list[Any], depth: int) -> list[Any]:  # of hits pooled from partitions
    return sorted(hits, key=lambda hit: -hit[1])[:depth]
