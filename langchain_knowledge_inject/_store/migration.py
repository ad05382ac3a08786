"""Stores written elsewhere: version 1 (a SQLite catalog beside Chroma), and plain collections.

Version 1 kept each knowledge base's settings in ``catalog.sqlite3`` (with a
registry of every chunk and its FTS5 keyword index) and the restriction flags
once more in a record collection ``kinject-<id>-kb``. Migrating a knowledge
base writes its settings into the metadata of every partition collection
(:mod:`~.flags`), creating the shared one when it had none, and deletes the
record collection; where the catalog and the record disagree on a flag, "on"
wins, and a knowledge base found in Chroma with neither opens restricted with
sensitive sources (nothing can show it was not). The chunks stay where they are;
the keyword cache is built from them when first searched. Source fingerprints
are not carried over: the next ``ingest`` reads each file once more and finds
its chunks unchanged (nothing is embedded again). The catalog is then renamed
``catalog.sqlite3.migrated`` (with its ``-wal``/``-shm`` files), kept, never
read again: delete it once the migration is checked.

``KnowledgeBase.from_chroma`` adopts a collection ``langchain_chroma.Chroma`` wrote
(:func:`copy_collection`).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_knowledge_inject._store.chroma import PAGE
from langchain_knowledge_inject._store.flags import FORMAT, merged_metadata
from langchain_knowledge_inject._store.sealing import open_sealed
from langchain_knowledge_inject._store.storage import (
    collection_name,
    is_not_found,
    knowledge_base_id,
)
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    KnowledgeBaseNotFoundError,
    KnowledgeBaseOpenError,
    SealedKnowledgeError,
)

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from langchain_knowledge_inject._store.writes import Writes

logger = logging.getLogger(__name__)

_OLD_FLAGS = ("restricted", "sensitive_sources")


def _catalog_rows(catalog: Path) -> list[dict[str, Any]]:
    """The knowledge bases of a version-1 catalog (none when it cannot be read)."""
    try:
        conn = sqlite3.connect(f"{catalog.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = conn.execute(
                "SELECT id, name, description, topics, embedding_model, settings FROM kbs"
            ).fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        logger.warning("The version-1 catalog %s cannot be read (%s): not migrated", catalog, exc)
        return []
    keys = ("id", "name", "description", "topics", "model", "settings")
    out = [dict(zip(keys, row, strict=True)) for row in rows]
    for row in out:
        row["topics"] = json.loads(row["topics"] or "[]")
        row["settings"] = json.loads(row["settings"] or "{}")
    return out


def migrate_store(store: Path, client: Any) -> None:
    """Migrate every knowledge base of the store's version-1 catalog, then set the catalog aside.

    An unreadable catalog is set aside too: its knowledge bases are migrated from
    their record collections when opened.
    """
    catalog = store / "catalog.sqlite3"
    if not catalog.is_file() or not os.access(store, os.W_OK):
        return
    for row in _catalog_rows(catalog):
        migrate_kb(client, row["name"], row)
    for suffix in ("", "-wal", "-shm"):
        old = Path(f"{catalog}{suffix}")
        if old.exists():
            old.rename(Path(f"{store / 'catalog.sqlite3.migrated'}{suffix}"))
    logger.warning(
        "Store %s migrated to format %d: settings moved into Chroma; the old catalog is kept "
        "as catalog.sqlite3.migrated and no longer read (delete it once you have checked)",
        store,
        FORMAT,
    )


def migrate_kb(client: Any, name: str, row: dict[str, Any] | None = None) -> bool:
    """Move one knowledge base's version-1 settings into its collections; True when it had any.

    Args:
        client: The ``chromadb`` client holding its collections.
        name: Its name.
        row: Its catalog row, when a catalog holds it.
    """
    kb_id = knowledge_base_id(name)
    record = None
    try:
        record = client.get_collection(f"kinject-{kb_id}-kb", embedding_function=None)
    except Exception as exc:
        if not is_not_found(exc):
            raise
    prefix = f"kinject-{kb_id}-"
    partitions = {
        str((c.metadata or {}).get("kinject_partition", "")): c
        for c in client.list_collections()
        if c.name.startswith(prefix) and "kinject_partition" in (c.metadata or {})
    }
    if record is None and row is None and not partitions:
        return False
    old = dict(record.metadata or {}) if record is not None else {}
    settings = (row or {}).get("settings", {})
    flags = {k: bool(settings.get(k)) or old.get(f"kinject_{k}") is True for k in _OLD_FLAGS}
    if record is None and row is None:
        flags = dict.fromkeys(_OLD_FLAGS, True)
        logger.warning(
            "Knowledge base %r was found in Chroma without its settings, so whether it is "
            "restricted cannot be established: it opens restricted with sensitive sources "
            "(kb.unrestrict() turns that off)",
            name,
        )

    def listed(key: str) -> list[str]:
        try:
            return list(json.loads(old.get(f"kinject_{key}") or "[]"))
        except (TypeError, ValueError):
            return []

    new = {
        "kb": name,
        "kb_id": kb_id,
        "format": FORMAT,
        "model": (row or {}).get("model") or str(old.get("kinject_embedding_model") or ""),
        "description": (row or {}).get("description") or str(old.get("kinject_description") or ""),
        "topics": (row or {}).get("topics") or listed("topics"),
        "routing_hint": settings.get("routing_hint") or str(old.get("kinject_routing_hint") or ""),
        "routing_keywords": settings.get("routing_keywords") or listed("routing_keywords"),
        **flags,
    }
    if "" not in partitions:  # created here, unless a later version made it already
        client.get_or_create_collection(
            collection_name(kb_id, ""),
            metadata={"hnsw:space": "cosine", **merged_metadata({}, {**new, "partition": ""})},
            embedding_function=None,
        )
    for partition, collection in partitions.items():
        kept = {k: v for k, v in (collection.metadata or {}).items() if not k.startswith("kinject")}
        collection.modify(metadata=merged_metadata(kept, {**new, "partition": partition}))
    if record is not None:
        client.delete_collection(record.name)
    logger.warning(
        "Knowledge base %r migrated to store format %d: its settings now live in its Chroma "
        "collections' metadata (%srestricted)",
        name,
        FORMAT,
        "" if flags["restricted"] else "not ",
    )
    return True


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


def _plain(text: str, collection: str) -> str:
    """A record's text, opened with the keyring when sealed (refused without the key)."""
    if (opened := open_sealed(text)) is None:
        msg = f"Collection {collection!r} is sealed: open its KnowledgeBase with its key first"
        raise SealedKnowledgeError(msg, kb_name=collection)
    return opened


def copy_collection(writes: Writes, source: Any, partition: str) -> None:
    """Copy a collection into ``partition`` of a knowledge base, without re-embedding.

    A few stored documents are embedded again first and compared with their stored
    vectors (another model is refused); records without text are counted, not copied.
    """
    adopted = unexplained = offset = 0
    while True:
        got = source.get(
            limit=PAGE, offset=offset, include=["documents", "metadatas", "embeddings"]
        )
        ids = list(got["ids"])
        if not ids:
            break
        records = list(zip(ids, got["documents"], got["metadatas"], got["embeddings"], strict=True))
        kept = [
            (r[0], _plain(r[1], source.name), *r[2:])
            for r in records
            if isinstance(r[1], str) and r[1].strip()
        ]
        unexplained += len(records) - len(kept)
        if not adopted and kept:
            sample = [(r[1], r[3]) for r in kept[:MODEL_CHECK_SAMPLES]]
            check_model(writes.embeddings, source.name, sample)
        tenant = {"tenant_id": partition} if partition else {}
        own = [
            {k: v for k, v in (r[2] or {}).items() if not k.startswith("kinject_")} for r in kept
        ]
        rows = [
            (str(r[0]), str(r[1]), {**meta, **tenant}) for r, meta in zip(kept, own, strict=True)
        ]
        writes.upsert(rows, partition, vectors=[[float(x) for x in r[3]] for r in kept])
        adopted += len(rows)
        offset += len(ids)
        if len(ids) < PAGE:
            break
    if unexplained:
        logger.warning(
            "Adopting %r: %d records hold no text and were not copied", source.name, unexplained
        )
