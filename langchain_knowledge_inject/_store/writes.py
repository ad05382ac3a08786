"""Writing chunks: splitting documents, then Chroma first and SQLite in one transaction.

Every write goes to Chroma first and then to the registry and the keyword index
in one SQLite transaction (:meth:`~.handles.StoreHandles.write_rows`): a crash
in between leaves the registry at the old state, Chroma holds chunks it does
not know (``check()`` adopts them), and running the same add again converges.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from langchain_knowledge_inject._store.catalog import ChunkRow
from langchain_knowledge_inject._store.embeddings import (
    DEFAULT_MODEL_NAME,
    MODEL_WINDOW_TOKENS,
    default_token_counter,
    embedding_model_name,
)
from langchain_knowledge_inject._store.storage import estimated_write_bytes
from langchain_knowledge_inject._store.write_plan import (
    WritePlan,
    chunk_id,
    group_by_partition,
    partition_of,
    plan_writes,
    source_key,
)
from langchain_knowledge_inject.errors import ConfigurationError, KnowledgeBaseOpenError

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import TextSplitter

    from langchain_knowledge_inject._store.chroma import ChromaSide
    from langchain_knowledge_inject._store.handles import StoreHandles

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "RESERVED_KEYS",
    "WINDOW_CHUNK_TOKENS",
    "WINDOW_OVERLAP_TOKENS",
    "default_splitter",
    "delete_chunks",
    "embed_distinct",
    "split_documents",
    "upsert_records",
    "write_chunks",
]

logger = logging.getLogger(__name__)

RESERVED_KEYS = ("score", "chunk_id", "kb_name", "kb_id")
"""Metadata keys a search sets on its results; dropped from documents being added."""
WINDOW_CHUNK_TOKENS = MODEL_WINDOW_TOKENS - 2
"""Largest chunk the default model reads whole: its window less the [CLS] and [SEP] tokens."""
WINDOW_OVERLAP_TOKENS = 32
"""Overlap of consecutive chunks with the default model, in word pieces."""
DEFAULT_CHUNK_TOKENS = 128
"""Default chunk size with the default model, in word pieces (half its window).

Chosen on the 809 BEIR SciFact train queries through the default ingest path
(``benchmarks/retrieval_quality.py --split train``): with hybrid search
scoring each chunk's document too, chunks of 128 word pieces (32 overlap)
reached nDCG@10 0.747 against 0.742 for chunks filling the window (254); dense
search alone 0.689 against 0.665 (a short chunk's vector is about one thing).
"""


def default_splitter(embeddings: Embeddings) -> TextSplitter:
    """Chunks of :data:`DEFAULT_CHUNK_TOKENS` word pieces with the default model.

    They fit its window (:data:`WINDOW_CHUNK_TOKENS`) with room to spare. With
    any other model: 1000 characters with 150 overlap.
    """
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if embedding_model_name(embeddings) == DEFAULT_MODEL_NAME:
        try:
            counter = default_token_counter()
        except KnowledgeBaseOpenError:
            logger.warning("no tokenizer for the default model: splitting by characters")
        else:
            return RecursiveCharacterTextSplitter(
                chunk_size=DEFAULT_CHUNK_TOKENS,
                chunk_overlap=WINDOW_OVERLAP_TOKENS,
                length_function=counter,
            )
    return RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=150)


def _needs_split(splitter: TextSplitter | None, text: str) -> bool:
    if splitter is None or not text.strip():
        return False
    size = getattr(splitter, "_chunk_size", None)  # chunks that already fit are kept whole
    return not (isinstance(size, int) and len(text) <= size)


def split_documents(
    documents: Sequence[Document], tenant_id: str | None, splitter: TextSplitter | None
) -> list[ChunkRow]:
    """The chunks of ``documents``: split, with their partition, source identity and id.

    Raises:
        ConfigurationError: Not a ``Document``, or a tenant that disagrees with ``tenant_id``.
    """
    rows: list[ChunkRow] = []
    for doc in documents:
        if not isinstance(doc, Document):
            msg = f"add_documents takes LangChain Document objects, got {type(doc).__name__}"
            raise ConfigurationError(msg, option="documents", value=doc)
        meta = {k: v for k, v in doc.metadata.items() if k not in RESERVED_KEYS}
        tenant = meta.get("tenant_id")
        if tenant_id is not None and tenant not in (None, tenant_id):
            msg = f"Document tenant {tenant!r} disagrees with tenant_id={tenant_id!r}"
            raise ConfigurationError(msg, option="tenant_id", value=tenant_id)
        tenant = tenant_id if tenant_id is not None else tenant
        if tenant is not None:
            meta["tenant_id"] = str(tenant)
        meta["source"] = str(meta.get("source") or "")
        parts = [doc.page_content]
        if splitter is not None and _needs_split(splitter, doc.page_content):
            parts = splitter.split_text(doc.page_content)
        partition = partition_of(meta.get("tenant_id"))
        for index, text in enumerate(parts):
            chunk_meta = dict(meta)
            if len(parts) > 1:
                if "chunk_index" in chunk_meta:  # a chunk split again: its pieces keep order
                    chunk_meta["chunk_part"] = index
                chunk_meta.setdefault("chunk_index", index)
            key = source_key(chunk_meta)
            cid = chunk_id(partition, key, text)
            rows.append(ChunkRow(cid, partition, key, text, chunk_meta))
    return rows


def embed_distinct(embeddings: Embeddings, texts: Sequence[str]) -> list[list[float]]:
    """Embed ``texts``, each distinct text once: repeated chunks share one vector.

    Corpora repeat chunks (boilerplate, headers, the same page under two paths); a
    text's vector does not depend on where it occurs, so embedding it once and
    reusing the vector stores exactly what embedding every copy would.
    """
    if not texts:
        return []
    distinct = list(dict.fromkeys(texts))
    vectors = embeddings.embed_documents(distinct)
    if len(vectors) != len(distinct):
        msg = f"The embedding model returned {len(vectors)} vectors for {len(distinct)} texts"
        raise ConfigurationError(msg, option="embeddings", value=type(embeddings).__name__)
    if len(distinct) == len(texts):
        return list(vectors)
    by_text = dict(zip(distinct, vectors, strict=True))
    logger.debug("embedded %d distinct texts for %d chunks", len(distinct), len(texts))
    return [by_text[text] for text in texts]


def write_chunks(
    handles: StoreHandles,
    chroma: ChromaSide,
    embeddings: Embeddings,
    chunks: Sequence[ChunkRow],
    fingerprints: Mapping[str, str],
) -> WritePlan:
    """Store chunks idempotently: embed only new ones, replace each source's stale chunks."""
    for partition in sorted({row.partition for row in chunks}):
        chroma.collection(partition, create=False)  # notice a replaced collection first
    plan = plan_writes(handles.catalog, handles.kb_id, chunks)
    texts = [row.text for row in plan.to_embed]
    vectors = embed_distinct(embeddings, texts)
    handles.ensure_room(
        estimated_write_bytes(texts, len(vectors[0]) if vectors else 0), "adding documents"
    )
    with handles.lock:
        _write_plan(handles, chroma, plan, vectors, fingerprints)
    return plan


def _write_plan(
    handles: StoreHandles,
    chroma: ChromaSide,
    plan: WritePlan,
    vectors: Sequence[Sequence[float]],
    fingerprints: Mapping[str, str],
) -> None:
    by_partition: dict[str, tuple[list[ChunkRow], list[Sequence[float]]]] = {}
    for row, vec in zip(plan.to_embed, vectors, strict=True):
        rows, vecs = by_partition.setdefault(row.partition, ([], []))
        rows.append(row)
        vecs.append(vec)
    batch = chroma.write_batch()
    for partition, (rows, vecs) in by_partition.items():
        chroma.upsert(partition, rows, vecs, batch=batch)
    for partition, updated in group_by_partition(plan.to_update).items():
        collection = chroma.collection(partition, create=True)
        for start in range(0, len(updated), batch):
            part = updated[start : start + batch]
            collection.update(
                ids=[r.chunk_id for r in part], metadatas=[chroma.marked(r.metadata) for r in part]
            )
    for partition, ids in plan.stale.items():
        collection = chroma.collection(partition, create=False)
        if collection is not None and ids:
            collection.delete(ids=list(ids))
    handles.write_rows(
        [*plan.to_embed, *plan.to_update],
        indexed=plan.to_embed,  # an update changes metadata only: its keyword row stands
        remove={partition: sorted(ids) for partition, ids in plan.stale.items()},
        sources={(p, s): fingerprints.get(s) for p, s in plan.sources},
        refresh_documents=True,
    )


def upsert_records(
    handles: StoreHandles,
    chroma: ChromaSide,
    embeddings: Embeddings,
    records: Sequence[tuple[str, str, Mapping[str, Any]]],
    partition: str,
) -> None:
    """Store chunks under ids chosen by the caller (no splitting); an existing id is replaced."""
    latest = {str(cid): (text, dict(meta)) for cid, text, meta in records}
    rows = [
        ChunkRow(cid, partition, str(meta.get("source") or ""), text, meta)
        for cid, (text, meta) in latest.items()
    ]
    if not rows:
        return
    texts = [r.text for r in rows]
    vectors = embed_distinct(embeddings, texts)
    handles.ensure_room(
        estimated_write_bytes(texts, len(vectors[0]) if vectors else 0), "adding documents"
    )
    with handles.lock, handles.errors("adding documents"):
        chroma.upsert(partition, rows, vectors, batch=chroma.write_batch())
        handles.write_rows(rows, refresh_documents=True)


def delete_chunks(
    handles: StoreHandles, chroma: ChromaSide, partition: str, ids: Sequence[str]
) -> int:
    """Delete chunks by id from Chroma, then the registry and keyword index; how many existed."""
    with handles.lock, handles.errors("deleting chunks"):
        existing = list(handles.catalog.existing(handles.kb_id, partition, list(ids)))
        collection = chroma.collection(partition, create=False)
        if collection is not None and ids:
            collection.delete(ids=list(ids))
        handles.write_rows(remove={partition: list(ids)}, refresh_documents=True)
    return len(existing)
