"""Rebuilding a knowledge base's catalog and keyword index from Chroma.

Chroma is the record: every chunk's text and metadata are stored with its
vector, and the knowledge base's own settings (``restricted``,
``sensitive_sources``, description, topics, embedding model) are kept in a
small record collection (``storage.write_kb_record``). The catalog's registry
and the keyword index are derived from it, so a lost, emptied or damaged
catalog, or a catalog that describes another server's collections, is rebuilt
from Chroma instead of being trusted or deleted.

Records that cannot be explained (no text stored with them) are reported,
never deleted. Every Chroma call here goes through the knowledge base's bounded
calls (``calls.py``), as every other server call does: the collections handed
in come bounded from ``chroma.ChromaSide``, and the listing is bounded here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._store.catalog import ChunkRow
from langchain_knowledge_inject._store.keyword import table_name
from langchain_knowledge_inject._store.storage import chroma_metadata, is_not_found
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    KnowledgeBaseNotFoundError,
    KnowledgeBaseOpenError,
)

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from langchain_knowledge_inject._store.calls import BoundedCalls
    from langchain_knowledge_inject._store.handles import StoreHandles

logger = logging.getLogger(__name__)

PAGE = 1000
"""Records read from Chroma per request while rebuilding."""


@dataclass
class Adoption:
    """What rebuilding one partition from its Chroma collection found."""

    partition: str
    """The tenant partition ("" is the shared one)."""
    adopted: int = 0
    """Chunks written into the registry and the keyword index."""
    unexplained: list[str] = field(default_factory=list)
    """Chroma records without text: left in place and reported, never deleted."""


def iter_records(
    collection: Any, *, ids: list[str] | None = None, page: int = PAGE
) -> Iterator[tuple[str, str | None, dict[str, Any]]]:
    """Every ``(id, text, metadata)`` of a collection (or of ``ids``), page by page."""
    if ids is not None:
        for start in range(0, len(ids), page):
            got = collection.get(ids=ids[start : start + page], include=["documents", "metadatas"])
            yield from zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        return
    offset = 0
    while True:
        got = collection.get(limit=page, offset=offset, include=["documents", "metadatas"])
        if not got["ids"]:
            return
        yield from zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        offset += len(got["ids"])
        if len(got["ids"]) < page:
            return


def rows_from_records(
    records: Iterator[tuple[str, str | None, dict[str, Any]]], partition: str
) -> tuple[list[ChunkRow], list[str]]:
    """Registry rows for the records that hold text, and the ids of those that do not."""
    rows: list[ChunkRow] = []
    unexplained: list[str] = []
    for chunk_id, text, metadata in records:
        if not isinstance(text, str) or not text.strip():
            unexplained.append(chunk_id)
            continue
        meta = user_metadata(metadata)
        rows.append(ChunkRow(chunk_id, partition, str(meta.get("source") or ""), text, meta))
    return rows, unexplained


def user_metadata(metadata: Any) -> dict[str, Any]:
    """A chunk's metadata as read from Chroma, without the package's own ``kinject_*`` keys."""
    return {k: v for k, v in dict(metadata or {}).items() if not str(k).startswith("kinject_")}


def adopt_rows(
    handles: StoreHandles, partition: str, rows: list[ChunkRow], *, replace: bool
) -> None:
    """Write rows read from Chroma into the registry and the keyword index (one transaction).

    Their sources are registered too (without a fingerprint, unless one is stored).

    Args:
        handles: The knowledge base's SQLite side.
        partition: Their partition.
        rows: Rows read from Chroma.
        replace: Drop the partition's registry rows, sources and keyword rows first
            (the catalog described another collection).
    """
    handles.write_rows(rows, clear=[partition] if replace else (), sources="register")


def adopt_partition(
    handles: StoreHandles, partition: str, collection: Any, *, replace: bool = False
) -> Adoption:
    """Rebuild one partition's registry and keyword rows from its (bounded) Chroma collection."""
    rows, unexplained = rows_from_records(iter_records(collection), partition)
    adopt_rows(handles, partition, rows, replace=replace)
    if unexplained:
        logger.warning(
            "Knowledge base %r: %d Chroma records of partition %r hold no text; they are "
            "left in place and not searchable by keyword (kb.check() lists them)",
            handles.name,
            len(unexplained),
            partition or "(shared)",
        )
    return Adoption(partition, adopted=len(rows), unexplained=unexplained)


def chroma_partitions(client: Any, kb_id: str) -> dict[str, Any]:
    """The partition collections of a knowledge base found in Chroma, by partition."""
    prefix = f"kinject-{kb_id}-"
    found: dict[str, Any] = {}
    for collection in client.list_collections():
        metadata = getattr(collection, "metadata", None) or {}
        if collection.name.startswith(prefix) and "kinject_partition" in metadata:
            found[str(metadata["kinject_partition"])] = collection
    return found


def rebuild_from_chroma(
    handles: StoreHandles, client: Any, calls: BoundedCalls, *, bounded: Any
) -> list[Adoption]:
    """Rebuild every partition of a knowledge base found in Chroma (a catalog without its rows).

    Args:
        handles: The knowledge base's SQLite side.
        client: Its ``chromadb`` client.
        calls: Its bounded calls (the listing of collections is bounded by them).
        bounded: Wraps a collection so that its calls are bounded too.
    """
    kb_id = handles.kb_id
    found = sorted(calls.call("list_collections", chroma_partitions, client, kb_id).items())
    with handles.transaction() as conn:  # the keyword side afresh: a half-emptied catalog
        handles.keyword.delete_kb(kb_id)  # may hold orphans
        for partition, _ in found:
            conn.execute(f"DROP TABLE IF EXISTS {table_name(kb_id, partition)}")
    done = []
    for partition, collection in found:
        handles.catalog.add_partition(kb_id, partition)
        adoption = adopt_partition(handles, partition, bounded(collection))
        handles.catalog.set_collection_id(kb_id, partition, str(collection.id))
        done.append(adoption)
    if done:
        logger.warning(
            "Knowledge base %r: the catalog held no record of it; rebuilt %d chunks in %d "
            "partitions from Chroma",
            handles.name,
            sum(a.adopted for a in done),
            len(done),
        )
    return done


MODEL_CHECK_SAMPLES = 3
"""Stored documents embedded again to check that a collection was made with the given model."""
MODEL_CHECK_MIN_COSINE = 0.98
"""Lowest cosine similarity between a stored vector and its text embedded now."""


def check_model(
    embeddings: Embeddings, kb_name: str, collection_name: str, sample: list[tuple[str, Any]]
) -> None:
    """Embed a few stored documents and compare with their stored vectors.

    Raises:
        KnowledgeBaseOpenError: The vectors were made by another model.
    """
    if not sample:
        return
    fresh = embeddings.embed_documents([text for text, _ in sample])
    for (_, stored), now in zip(sample, fresh, strict=True):
        stored = [float(x) for x in stored]
        if len(stored) != len(now):
            similarity = None
        else:
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
            raise KnowledgeBaseOpenError(msg, kb_name=kb_name)


def find_collection(
    collection_name: str, *, client: Any, persist_directory: Any, kb_name: str
) -> Any:
    """The Chroma collection to adopt, from a client or an embedded store's directory.

    Raises:
        ConfigurationError: Neither or both of ``client`` and ``persist_directory``.
        KnowledgeBaseNotFoundError: No such collection.
    """
    if (client is None) == (persist_directory is None):
        msg = "Give exactly one of client= and persist_directory= to find the collection"
        raise ConfigurationError(msg, option="client", value=client)
    if client is not None:
        source_client = client
    else:
        import chromadb

        source_client = chromadb.PersistentClient(path=str(persist_directory))
    try:
        return source_client.get_collection(collection_name, embedding_function=None)
    except Exception as exc:
        if not is_not_found(exc):
            raise
        msg = f"No Chroma collection named {collection_name!r} to adopt"
        raise KnowledgeBaseNotFoundError(msg, kb_name=kb_name) from exc


def copy_collection(
    handles: StoreHandles, embeddings: Embeddings, source: Any, target: Any, partition: str
) -> Adoption:
    """Adopt an existing Chroma collection (langchain-chroma's layout) without re-embedding.

    Its ids, documents, metadatas and vectors are copied into the knowledge
    base's own cosine collection of ``partition`` (``target``), and the registry
    and keyword index are built from them. Records without text are reported,
    not copied. Both collections come bounded by the caller in server mode.
    """
    adoption = Adoption(partition)
    offset, checked = 0, False
    while True:
        got = source.get(
            limit=PAGE, offset=offset, include=["documents", "metadatas", "embeddings"]
        )
        ids = list(got["ids"])
        if not ids:
            break
        records = list(zip(ids, got["documents"], got["metadatas"], got["embeddings"], strict=True))
        kept = [r for r in records if isinstance(r[1], str) and r[1].strip()]
        adoption.unexplained.extend(r[0] for r in records if r not in kept)
        if not checked and kept:
            check_model(
                embeddings,
                handles.name,
                source.name,
                [(r[1], r[3]) for r in kept[:MODEL_CHECK_SAMPLES]],
            )
            checked = True
        rows = []
        for chunk_id, text, metadata, _ in kept:
            meta = user_metadata(metadata)
            if partition:
                meta["tenant_id"] = partition
            rows.append(ChunkRow(chunk_id, partition, str(meta.get("source") or ""), text, meta))
        if kept:
            target.upsert(
                ids=[r[0] for r in kept],
                embeddings=[[float(x) for x in r[3]] for r in kept],
                documents=[r[1] for r in kept],
                metadatas=[chroma_metadata(row.metadata) or None for row in rows],
            )
            adopt_rows(handles, partition, rows, replace=False)
            adoption.adopted += len(rows)
        offset += len(ids)
        if len(ids) < PAGE:
            break
    return adoption
