"""Adopting a collection ``langchain_chroma.Chroma`` wrote (``KnowledgeBase.from_chroma``).

Its ids, documents, metadatas and vectors are copied without re-embedding into
the knowledge base's own cosine collection; a few stored documents are embedded
again first and compared with their stored vectors, so a collection made with
another model is refused. Records without text are counted, not copied.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._store.chroma import PAGE, Chunk, source_of, user_metadata
from langchain_knowledge_inject._store.storage import is_not_found
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    KnowledgeBaseNotFoundError,
    KnowledgeBaseOpenError,
)

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from langchain_knowledge_inject._store.chroma import ChromaSide
    from langchain_knowledge_inject._store.keyword_cache import KeywordCache

MODEL_CHECK_SAMPLES = 3
"""Stored documents embedded again to check that a collection was made with the given model."""
MODEL_CHECK_MIN_COSINE = 0.98
"""Lowest cosine similarity between a stored vector and its text embedded now."""


def find_collection(collection_name: str, *, client: Any, persist_directory: Any) -> Any:
    """The Chroma collection to adopt, from a client or an embedded store's directory.

    Raises:
        ConfigurationError: Neither or both of ``client`` and ``persist_directory``.
        KnowledgeBaseNotFoundError: No such collection.
    """
    if (client is None) == (persist_directory is None):
        msg = "Give exactly one of client= and persist_directory= to find the collection"
        raise ConfigurationError(msg, option="client", value=client)
    if client is None:
        import chromadb

        client = chromadb.PersistentClient(path=str(persist_directory))
    try:
        return client.get_collection(collection_name, embedding_function=None)
    except Exception as exc:
        if not is_not_found(exc):
            raise
        msg = f"No Chroma collection named {collection_name!r} to adopt"
        raise KnowledgeBaseNotFoundError(msg, kb_name=collection_name) from exc


def check_model(
    embeddings: Embeddings, collection_name: str, sample: list[tuple[str, Any]]
) -> None:
    """Embed a few stored documents and compare with their stored vectors.

    Raises:
        KnowledgeBaseOpenError: The vectors were made by another model.
    """
    fresh = embeddings.embed_documents([text for text, _ in sample]) if sample else []
    for (_, stored), now in zip(sample, fresh, strict=True):
        stored = [float(x) for x in stored]
        similarity = None
        if len(stored) == len(now):
            dot = sum(a * b for a, b in zip(stored, now, strict=True))
            norms = (sum(a * a for a in stored) * sum(b * b for b in now)) ** 0.5
            similarity = dot / norms if norms else 0.0
        if similarity is None or similarity < MODEL_CHECK_MIN_COSINE:
            found = (
                f"{len(stored)}-dimensional vectors, the model gives {len(now)}"
                if similarity is None
                else f"cosine similarity {similarity:.3f} between a stored vector and its text "
                "embedded now"
            )
            msg = (
                f"The Chroma collection {collection_name!r} was not embedded with the model "
                f"given ({found}). Pass the embedding model that built it."
            )
            raise KnowledgeBaseOpenError(msg)


def copy_collection(
    chroma: ChromaSide, cache: KeywordCache, embeddings: Embeddings, source: Any, partition: str
) -> tuple[int, int]:
    """Copy ``source`` into ``partition`` of a knowledge base; (chunks adopted, records without text)."""
    adopted = unexplained = offset = 0
    while True:
        got = source.get(
            limit=PAGE, offset=offset, include=["documents", "metadatas", "embeddings"]
        )
        ids = list(got["ids"])
        if not ids:
            break
        records = list(zip(ids, got["documents"], got["metadatas"], got["embeddings"], strict=True))
        kept = [r for r in records if isinstance(r[1], str) and r[1].strip()]
        unexplained += len(records) - len(kept)
        if not adopted and kept:
            check_model(embeddings, source.name, [(r[1], r[3]) for r in kept[:MODEL_CHECK_SAMPLES]])
        stamp = round(time.time(), 6)
        chunks = []
        for chunk_id, text, metadata, _ in kept:
            meta = user_metadata(metadata)
            if partition:
                meta["tenant_id"] = partition
            chunks.append(Chunk(chunk_id, partition, source_of(meta), text, meta, stamp))
        if chunks:
            chroma.upsert(partition, chunks, [[float(x) for x in r[3]] for r in kept])
            cache.apply(partition, upserted=chunks)
            adopted += len(chunks)
        offset += len(ids)
        if len(ids) < PAGE:
            break
    return adopted, unexplained
