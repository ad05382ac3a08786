"""The Chroma side of one knowledge base: its client, bounded calls and partition collections.

:class:`ChromaSide` holds the client, the :class:`~.calls.BoundedCalls` that
bound every call to a server, and the collection handle of each partition,
looked up once and checked against the collection id the catalog recorded
(:meth:`ChromaSide.collection`). A collection that is gone or replaced means
the catalog describes another server or an earlier state: the partition's
registry and keyword rows are rebuilt from Chroma (``recovery``).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_knowledge_inject._store.calls import BoundedCalls, BoundedCollection
from langchain_knowledge_inject._store.catalog import ChunkRow
from langchain_knowledge_inject._store.handles import StoreHandles
from langchain_knowledge_inject._store.recovery import adopt_partition, adopt_rows
from langchain_knowledge_inject._store.storage import (
    WRITE_MARK,
    chroma_metadata,
    collection_name,
    is_not_found,
    strip_mark,
    write_mark,
)
from langchain_knowledge_inject._store.write_plan import source_key

__all__ = ["SERVER_WRITE_BATCH", "ChromaSide"]

logger = logging.getLogger(__name__)

SERVER_WRITE_BATCH = 256
"""Most chunks per write request to a Chroma server, so each request fits in the timeout."""


class ChromaSide:
    """A knowledge base's Chroma client and partition collections.

    Args:
        client: The ``chromadb`` client.
        handles: The knowledge base's SQLite side (collection ids are recorded there).
        server: Whether ``client`` talks to a Chroma server (calls are bounded, writes marked).
        calls: Runs each server call within the knowledge base's timeout.
    """

    def __init__(
        self, client: Any, handles: StoreHandles, *, server: bool, calls: BoundedCalls
    ) -> None:
        self.client = client
        self.handles = handles
        self.server = server
        self.calls = calls
        self._collections: dict[str, Any] = {}
        self._verified: set[str] = set()

    def bounded(self, collection: Any) -> Any:
        """``collection`` with its data calls bounded by the timeout (server mode)."""
        if not self.server or isinstance(collection, BoundedCollection):
            return collection
        return BoundedCollection(collection, self.calls)

    def verified(self, partition: str) -> bool:
        """Whether ``partition``'s collection was checked against the catalog."""
        return partition in self._verified

    def collection(self, partition: str, *, create: bool) -> Any:
        """The partition's collection (bounded in server mode); None when absent and not created."""
        handles = self.handles
        with handles.lock:
            found = self._collections.get(partition)
            if found is not None:
                return found
            name = collection_name(handles.kb_id, partition)
            try:
                if create:
                    handles.catalog.add_partition(handles.kb_id, partition)
                    found = self.calls.call(
                        "get_or_create_collection",
                        self.client.get_or_create_collection,
                        name,
                        metadata={"hnsw:space": "cosine", "kinject_partition": partition},
                        embedding_function=None,
                    )
                else:
                    found = self.calls.call(
                        "get_collection",
                        self.client.get_collection,
                        name,
                        embedding_function=None,
                    )
            except Exception as exc:
                if not create and is_not_found(exc):
                    self._verify(partition, None)
                    return None
                raise
            found = self.bounded(found)
            self._verify(partition, found)
            self._collections[partition] = found
            return found

    def forget(self) -> None:
        """Drop cached collection handles (one was deleted under us): look them up again."""
        with self.handles.lock:
            self._collections.clear()
            self._verified.clear()

    def _verify(self, partition: str, found: Any) -> None:
        """Notice a collection that is not the one the catalog recorded, and re-adopt it.

        The catalog records each partition's Chroma collection id. A collection
        that is gone, replaced (another id), or empty while the registry holds
        chunks means the catalog describes another server or an earlier state
        of this one: Chroma is the record, so the partition's registry and
        keyword rows are rebuilt from what the collection holds now, with a
        warning, and the next ``add_documents`` writes whatever is missing.
        """
        if partition in self._verified:
            return
        handles = self.handles
        kb_id = handles.kb_id
        recorded = handles.catalog.collection_id(kb_id, partition)
        current = None if found is None else str(found.id)
        registry = handles.catalog.count(kb_id, partition)
        if found is None:
            mismatch = registry > 0
        elif recorded is None:
            mismatch = registry > 0 and found.count() == 0
        else:
            mismatch = recorded != current
        if mismatch and not handles.read_only:
            what = "is gone" if found is None else f"is not the one recorded ({recorded})"
            logger.warning(
                "Knowledge base %r: the Chroma collection of partition %r %s while the catalog "
                "holds %d chunks for it; the catalog and keyword index of that partition are "
                "rebuilt from Chroma, and documents added again are written to it",
                handles.name,
                partition or "(shared)",
                what,
                registry,
            )
            if found is None:
                adopt_rows(handles, partition, [], replace=True)
            else:
                adopt_partition(handles, partition, found, replace=True)
        if current is not None and current != recorded and not handles.read_only:
            try:
                handles.catalog.set_collection_id(kb_id, partition, current)
            except sqlite3.OperationalError as exc:  # disk full: recorded on a later call
                handles.conn.rollback()
                logger.warning("Could not record the collection id of %r: %s", partition, exc)
                return
        self._verified.add(partition)

    # -- writes and reads ------------------------------------------------------
    def marked(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """Metadata as Chroma stores it, with the write mark other processes catch up from."""
        out = chroma_metadata(metadata)
        if self.server:
            out[WRITE_MARK] = write_mark()
        return out

    def write_batch(self) -> int:
        """Most records per write request (smaller for a server: each must beat the timeout)."""
        batch = int(self.calls.call("get_max_batch_size", self.client.get_max_batch_size))
        return min(batch, SERVER_WRITE_BATCH) if self.server else batch

    def upsert(
        self,
        partition: str,
        rows: Sequence[ChunkRow],
        vectors: Sequence[Sequence[float]],
        *,
        batch: int,
    ) -> None:
        """Write rows with their vectors to the partition's collection, ``batch`` at a time."""
        collection = self.collection(partition, create=True)
        for start in range(0, len(rows), batch):
            part = rows[start : start + batch]
            collection.upsert(
                ids=[r.chunk_id for r in part],
                embeddings=[list(v) for v in vectors[start : start + batch]],
                documents=[r.text for r in part],
                metadatas=[self.marked(r.metadata) or None for r in part],
            )

    def rows(self, partition: str, ids: Sequence[str]) -> dict[str, ChunkRow]:
        """Chunks read from Chroma by id (written by another process to a shared server)."""
        collection = self.collection(partition, create=False)
        if collection is None:
            return {}
        got = collection.get(ids=list(ids), include=["documents", "metadatas"])
        return {
            cid: ChunkRow(cid, partition, source_key(meta or {}), text or "", strip_mark(meta))
            for cid, text, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        }
