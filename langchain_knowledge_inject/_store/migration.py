"""Stores written by version 1 (a SQLite catalog beside Chroma), moved onto Chroma alone.

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
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

from langchain_knowledge_inject._store.flags import FORMAT, PREFIX, merged_metadata
from langchain_knowledge_inject._store.storage import (
    collection_name,
    is_not_found,
    knowledge_base_id,
)

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
    """Migrate every knowledge base of the store's version-1 catalog, then set the catalog aside."""
    catalog = store / "catalog.sqlite3"
    if not catalog.is_file() or not _writable(store):
        return
    for row in _catalog_rows(catalog):
        migrate_kb(client, row["name"], row)
    for suffix in ("", "-wal", "-shm"):
        old = Path(f"{catalog}{suffix}")
        if old.exists():
            old.rename(Path(f"{store / 'catalog.sqlite3.migrated'}{suffix}"))
    logger.warning(
        "Store %s migrated to version 2: settings moved into Chroma; the old catalog is kept "
        "as catalog.sqlite3.migrated and no longer read (delete it once you have checked)",
        store,
    )


def _writable(store: Path) -> bool:
    import os

    return os.access(store, os.W_OK)


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


def needs_migration(metadata: dict[str, Any] | None) -> bool:
    """Whether a shared collection's metadata is version 1's (or the collection is missing)."""
    return metadata is None or not isinstance((metadata or {}).get(PREFIX + "format"), int)
