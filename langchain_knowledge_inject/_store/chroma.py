"""The Chroma side of one knowledge base: the one record of its chunks and settings.

:class:`ChromaSide` holds the client, the :class:`~.calls.BoundedCalls` that
bound every call to a server, and each partition's collection. Every chunk is
stored with its text, its metadata, a write stamp (:data:`STAMP`: the writer's
clock, from which keyword caches catch up) and the fingerprint of its source
when one was given (:data:`FINGERPRINT`); the knowledge base's settings are the
metadata of every partition collection (:mod:`~.flags`), read through a cache of
at most :data:`SETTINGS_TTL` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_knowledge_inject._store.calls import BoundedCalls, BoundedCollection
from langchain_knowledge_inject._store.flags import PREFIX, merged_metadata, read_settings
from langchain_knowledge_inject._store.storage import (
    chroma_metadata,
    collection_name,
    is_not_found,
)

SERVER_WRITE_BATCH = 256
"""Most chunks per write request to a Chroma server, so each request fits in the timeout."""
SETTINGS_TTL = 1.0
"""Seconds the settings read from Chroma are reused: another process's change shows after it."""
STAMP = "kinject_written"
"""Chunk metadata: when the chunk was written (seconds since the epoch, the writer's clock)."""
FINGERPRINT = "kinject_fingerprint"
"""Chunk metadata: the fingerprint of its source given to ``add_documents`` (a file hash)."""
PAGE = 1000
"""Records per ``get`` when reading a collection page by page."""


@dataclass(frozen=True)
class Chunk:
    """One chunk as Chroma stores it."""

    chunk_id: str
    """Its id (derived from partition, source and content, or chosen by the caller)."""
    partition: str
    """Tenant partition ("" for the shared partition)."""
    source: str
    """The identity of its source (``writes.source_key``; "" when unknown)."""
    text: str
    """The chunk text."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Its metadata, without the package's own ``kinject_`` keys."""
    stamp: float = 0.0
    """Its :data:`STAMP` (0 when written without one)."""
    fingerprint: str | None = None
    """Its source's fingerprint, when one was stored."""


def user_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Chunk metadata without the package's own ``kinject_`` keys."""
    return {k: v for k, v in (metadata or {}).items() if not str(k).startswith("kinject_")}


def source_of(metadata: Mapping[str, Any] | None) -> str:
    """The identity of a chunk's source: ``source_path``, else ``source`` (see ``writes``)."""
    meta = metadata or {}
    return str(meta.get("source_path") or meta.get("source") or "")


def to_chunks(got: Mapping[str, Any], partition: str) -> list[Chunk]:
    """The records of a Chroma ``get`` result as :class:`Chunk` (text "" when not asked)."""
    metas = got.get("metadatas") or [None] * len(got["ids"])
    texts = got.get("documents") or [""] * len(got["ids"])
    return [
        Chunk(
            cid,
            partition,
            source_of(meta),
            text if isinstance(text, str) else "",
            user_metadata(meta),
            float((meta or {}).get(STAMP) or 0.0),
            (meta or {}).get(FINGERPRINT),
        )
        for cid, text, meta in zip(got["ids"], texts, metas, strict=True)
    ]


class ChromaSide:
    """A knowledge base's Chroma client, partition collections and settings.

    Args:
        client: The ``chromadb`` client.
        kb_name: The knowledge base's name.
        kb_id: Its id (collection names derive from it).
        server: Whether ``client`` is shared with other processes (calls bounded).
        calls: Runs each server call within the knowledge base's timeout.
    """

    def __init__(
        self, client: Any, *, kb_name: str, kb_id: str, server: bool, calls: BoundedCalls
    ) -> None:
        self.client = client
        self.kb_name = kb_name
        self.kb_id = kb_id
        self.server = server
        self.calls = calls
        self._collections: dict[str, Any] = {}
        self._settings: tuple[float, dict[str, Any]] | None = None
        self.last: dict[str, Any] = {}
        """The settings read last (what a shared collection deleted under us comes back with)."""

    def bounded(self, collection: Any) -> Any:
        """``collection`` with its data calls bounded by the timeout (server mode)."""
        if not self.server or isinstance(collection, BoundedCollection):
            return collection
        return BoundedCollection(collection, self.calls)

    def _get(self, partition: str) -> Any:
        name = collection_name(self.kb_id, partition)
        found = self.calls.call(
            "get_collection", self.client.get_collection, name, embedding_function=None
        )
        return self.bounded(found)

    def collection(self, partition: str, *, create: bool = False) -> Any:
        """The partition's collection (bounded); None when absent and not created.

        A tenant partition created here copies the shared collection's settings
        (restriction included), read afresh, and checks them again once created.
        """
        found = self._collections.get(partition)
        if found is not None:
            return found
        try:
            found = self._get(partition)
        except Exception as exc:
            if not is_not_found(exc):
                raise
            if not create:
                return None
            # the shared collection is the knowledge base: gone under us, it comes back as it was
            found = self._create(partition, self.settings(fresh=True) if partition else self.last)
        self._collections[partition] = found
        return found

    def _create(self, partition: str, settings: Mapping[str, Any]) -> Any:
        metadata = {
            "hnsw:space": "cosine",
            **merged_metadata({}, {**settings, "partition": partition}),
        }
        name = collection_name(self.kb_id, partition)
        created = self.calls.call(
            "get_or_create_collection",
            self.client.get_or_create_collection,
            name,
            metadata=metadata,
            embedding_function=None,
        )
        if (
            partition
            and self.settings(fresh=True)["restricted"]
            and not read_settings(created.metadata)["restricted"]
        ):  # restricted while it was being created
            self.calls.call(
                "modify",
                created.modify,
                metadata=merged_metadata(created.metadata, {"restricted": True}),
            )
        return self.bounded(created)

    def create_shared(self, settings: Mapping[str, Any]) -> Any:
        """Create the shared partition's collection, which holds the knowledge base itself."""
        found = self._create("", settings)
        self._collections[""] = found
        self._settings, self.last = None, dict(settings)
        return found

    def forget(self) -> None:
        """Drop cached collection handles and settings (a collection was deleted under us)."""
        self._collections.clear()
        self._settings = None

    # -- settings -------------------------------------------------------------------
    def settings(self, *, fresh: bool = False) -> dict[str, Any]:
        """The knowledge base's settings (:func:`~.flags.read_settings` of the shared collection).

        Reused for at most :data:`SETTINGS_TTL` seconds unless ``fresh``.

        Raises:
            Exception: Chroma could not be asked, or the knowledge base is gone.
        """
        cached = self._settings
        if cached is not None and not fresh and time.monotonic() - cached[0] < SETTINGS_TTL:
            return cached[1]
        settings = read_settings(self._get("").metadata)
        self._settings, self.last = (time.monotonic(), settings), settings
        return settings

    def update_settings(self, updates: Mapping[str, Any]) -> None:
        """Write ``updates`` into the metadata of every partition collection.

        Each is read afresh and merged just before it is written (Chroma's
        ``modify`` replaces the whole metadata). Turning restriction on writes
        the shared collection first, turning it off last, so that a failure half
        way leaves the knowledge base restricted.
        """
        names = sorted(
            self.partitions(), key=lambda p: (p != "") == (updates.get("restricted") is False)
        )
        for partition in names:
            current = self._get(partition)
            merged = merged_metadata(current.metadata, updates)
            self.calls.call(
                "modify", getattr(current, "unbounded", current).modify, metadata=merged
            )
        self._settings = None

    def partitions(self) -> dict[str, Any]:
        """The knowledge base's partition collections in Chroma, by partition."""
        prefix = f"kinject-{self.kb_id}-"
        found: dict[str, Any] = {}
        for collection in self.calls.call("list_collections", self.client.list_collections):
            meta = getattr(collection, "metadata", None) or {}
            partition = meta.get(PREFIX + "partition", meta.get("kinject_partition"))
            if collection.name.startswith(prefix) and partition is not None:
                found[str(partition)] = collection
        return found

    # -- chunks ---------------------------------------------------------------------
    def write_batch(self) -> int:
        """Most records per write request (smaller for a server: each must beat the timeout)."""
        batch = int(self.calls.call("get_max_batch_size", self.client.get_max_batch_size))
        return min(batch, SERVER_WRITE_BATCH) if self.server else batch

    def upsert(
        self, partition: str, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]
    ) -> None:
        """Write chunks with their vectors, in batches."""
        collection, batch = self.collection(partition, create=True), self.write_batch()
        for start in range(0, len(chunks), batch):
            part = chunks[start : start + batch]
            collection.upsert(
                ids=[c.chunk_id for c in part],
                embeddings=[list(v) for v in vectors[start : start + batch]],
                documents=[c.text for c in part],
                metadatas=[stored_metadata(c) for c in part],
            )

    def update(self, partition: str, chunks: Sequence[Chunk]) -> None:
        """Rewrite the metadata of stored chunks (their text and vector stay)."""
        collection, batch = self.collection(partition, create=True), self.write_batch()
        for start in range(0, len(chunks), batch):
            part = chunks[start : start + batch]
            collection.update(
                ids=[c.chunk_id for c in part], metadatas=[stored_metadata(c) for c in part]
            )

    def delete(self, partition: str, ids: Sequence[str]) -> None:
        """Delete chunks by id (unknown ids are ignored)."""
        collection = self.collection(partition)
        if collection is None or not ids:
            return
        batch = self.write_batch()
        for start in range(0, len(ids), batch):
            collection.delete(ids=list(ids[start : start + batch]))

    def get(
        self,
        partition: str,
        ids: Sequence[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        text: bool = True,
    ) -> list[Chunk]:
        """Stored chunks by id and/or ``where`` (text "" unless ``text``)."""
        collection = self.collection(partition)
        if collection is None or (ids is not None and not ids):
            return []
        include = ["documents", "metadatas"] if text else ["metadatas"]
        if ids is None:
            return to_chunks(collection.get(where=where, include=include), partition)
        out: list[Chunk] = []
        for start in range(0, len(ids), PAGE):
            part = list(ids[start : start + PAGE])
            out += to_chunks(collection.get(ids=part, where=where, include=include), partition)
        return out

    def pages(self, partition: str, *, text: bool = True) -> Iterator[list[Chunk]]:
        """Every chunk of a partition, :data:`PAGE` at a time."""
        collection = self.collection(partition)
        offset = 0
        while collection is not None:
            include = ["documents", "metadatas"] if text else []
            got = collection.get(limit=PAGE, offset=offset, include=include)
            if not got["ids"]:
                return
            yield to_chunks(got, partition)
            offset += len(got["ids"])
            if len(got["ids"]) < PAGE:
                return

    def of_sources(self, partition: str, sources: Sequence[str], *, text: bool) -> list[Chunk]:
        """Every stored chunk of ``sources`` (by source identity)."""
        wanted, out = sorted(set(sources) - {""}), []
        for start in range(0, len(wanted), 100):
            part = wanted[start : start + 100]
            where = {"$or": [{"source_path": {"$in": part}}, {"source": {"$in": part}}]}
            out += [c for c in self.get(partition, where=where, text=text) if c.source in part]
        return out

    def count(self, partition: str) -> int:
        """How many chunks the partition holds (0 when it has no collection)."""
        collection = self.collection(partition)
        return 0 if collection is None else int(collection.count())


def stored_metadata(chunk: Chunk) -> dict[str, Any]:
    """What Chroma stores as a chunk's metadata: its own, its stamp and its fingerprint."""
    out = chroma_metadata(chunk.metadata)
    out[STAMP] = chunk.stamp
    if chunk.fingerprint is not None:
        out[FINGERPRINT] = chunk.fingerprint
    return out
