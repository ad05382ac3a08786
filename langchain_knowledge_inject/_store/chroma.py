"""The Chroma side of one knowledge base: the one record of its chunks and settings.

Every chunk is stored with its text, its metadata, a write stamp (:data:`STAMP`,
the writer's clock, from which keyword caches catch up) and its source's
fingerprint when one was given (:data:`FINGERPRINT`); the knowledge base's
settings are the metadata of every partition collection (:mod:`~.flags`), read
through a cache of at most :data:`SETTINGS_TTL` seconds.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_knowledge_inject._store.calls import BoundedCalls, BoundedCollection
from langchain_knowledge_inject._store.flags import PREFIX, merged_metadata, read_settings
from langchain_knowledge_inject._store.sealing import Sealer, is_sealed
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
Fields = Literal["ids", "meta", "all", "stored"]
"""What a read returns of each chunk: its id, its metadata, its text opened, or as stored."""
_INCLUDE: dict[str, list[Any]] = {
    "ids": [],
    "meta": ["metadatas"],
    "all": ["documents", "metadatas"],
    "stored": ["documents", "metadatas"],
}
SOURCE_PATH_KEY = "source_path"
"""Metadata key of the full path of an ingested file: the identity of its source."""


@dataclass(frozen=True)
class Chunk:
    """One chunk as Chroma stores it."""

    chunk_id: str
    partition: str
    """Tenant partition ("" for the shared one)."""
    source: str
    """The identity of its source (:func:`source_key`; "" when unknown)."""
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    """Its metadata, without the package's own ``kinject_`` keys."""
    stamp: float = 0.0
    """Its :data:`STAMP` (0 when written without one)."""
    fingerprint: str | None = None


def source_key(metadata: Mapping[str, Any] | None) -> str:
    """The identity of a chunk's source: ``metadata["source_path"]``, else ``metadata["source"]``.

    ``ingest`` stores a short ``source`` (the path relative to the ingest root, what
    the model cites) and the file's full path in ``source_path``: chunk ids,
    replacement of a changed file and fingerprints key on the full path, so two
    files with the same name in different folders stay apart.
    """
    meta = metadata or {}
    return str(meta.get(SOURCE_PATH_KEY) or meta.get("source") or "")


def to_chunks(
    got: Mapping[str, Any], partition: str, op: Callable[[str], str] = str
) -> list[Chunk]:
    """The records of a Chroma ``get`` result as chunks (``op`` applied to text; "" unread)."""
    ids = got["ids"]
    texts, metas = got.get("documents") or [""] * len(ids), got.get("metadatas") or [{}] * len(ids)
    out = []
    for cid, text, meta in zip(ids, texts, metas, strict=True):
        meta = meta or {}
        own = {k: v for k, v in meta.items() if not str(k).startswith("kinject_")}
        stamp, fingerprint = float(meta.get(STAMP) or 0.0), meta.get(FINGERPRINT)
        text = op(text) if isinstance(text, str) else ""
        out.append(Chunk(cid, partition, source_key(meta), text, own, stamp, fingerprint))
    return out


def stored_metadata(chunk: Chunk) -> dict[str, Any]:
    """What Chroma stores as a chunk's metadata: its own, its stamp and its fingerprint."""
    own = {STAMP: chunk.stamp, FINGERPRINT: chunk.fingerprint}
    return chroma_metadata({**chunk.metadata, **own})


class ChromaSide:
    """A knowledge base's Chroma client, partition collections and settings.

    Args:
        client: The ``chromadb`` client.
        kb_id: The knowledge base's id (collection names derive from it).
        server: Whether ``client`` is shared with other processes (calls bounded).
        calls: Runs each server call within the knowledge base's timeout.
    """

    def __init__(self, client: Any, *, kb_id: str, server: bool, calls: BoundedCalls) -> None:
        self.client, self.kb_id, self.server, self.calls = client, kb_id, server, calls
        self.sealer: Sealer | None = None  # seals a restricted knowledge base's text
        self._collections: dict[str, Any] = {}
        self._settings: tuple[float, dict[str, Any]] | None = None
        self.last: dict[str, Any] = {}
        """The settings read last: what a shared collection deleted under us comes back with."""

    def _get(self, partition: str) -> Any:
        name = collection_name(self.kb_id, partition)
        found = self.calls.call(
            "get_collection", self.client.get_collection, name, embedding_function=None
        )
        return found if not self.server else BoundedCollection(found, self.calls)

    def collection(self, partition: str, *, create: bool = False) -> Any:
        """The partition's collection (bounded); None when absent and not created.

        A tenant partition created here copies the shared collection's settings,
        read afresh; the shared one, deleted under us, comes back as it was.
        """
        found = self._collections.get(partition)
        if found is None:
            try:
                found = self._get(partition)
            except Exception as exc:
                if not is_not_found(exc):
                    raise
                if not create:
                    return None
                found = self.create(
                    partition, self.settings(fresh=True) if partition else self.last
                )
            self._collections[partition] = found
        return found

    def create(self, partition: str, settings: Mapping[str, Any]) -> Any:
        """Create a partition's collection holding ``settings`` (restriction checked once more)."""
        metadata = merged_metadata({}, {**settings, "partition": partition})
        created = self.calls.call(
            "get_or_create_collection",
            self.client.get_or_create_collection,
            collection_name(self.kb_id, partition),
            metadata={"hnsw:space": "cosine", **metadata},
            embedding_function=None,
        )
        late = partition and not read_settings(created.metadata)["restricted"]
        if late and self.settings(fresh=True)["restricted"]:  # restricted while being created
            restricted = merged_metadata(created.metadata, {"restricted": True})
            self.calls.call("modify", created.modify, metadata=restricted)
        found = created if not self.server else BoundedCollection(created, self.calls)
        self._collections[partition] = found
        if not partition:
            self._settings, self.last = None, dict(settings)
        return found

    def forget(self) -> None:
        """Drop cached collection handles and settings (a collection was deleted under us)."""
        self._collections.clear()
        self._settings = None

    def settings(self, *, fresh: bool = False) -> dict[str, Any]:
        """The knowledge base's settings, from the shared collection's metadata.

        Reused for at most :data:`SETTINGS_TTL` seconds unless ``fresh``.
        """
        cached = self._settings
        if cached is None or fresh or time.monotonic() - cached[0] >= SETTINGS_TTL:
            self.last = read_settings(self._get("").metadata)
            self._settings = cached = (time.monotonic(), self.last)
        return cached[1]

    def update_settings(self, updates: Mapping[str, Any]) -> None:
        """Write ``updates`` into the metadata of every partition collection.

        Each is read afresh and merged just before it is written (``modify``
        replaces the whole metadata). Restriction turned on is written to the
        shared collection first, turned off last: a failure half way leaves it on.
        """
        off = updates.get("restricted") is False
        for partition in sorted(self.partitions(), key=lambda p: (p == "") == off):
            current = self._get(partition)
            merged = merged_metadata(current.metadata, updates)
            modify = getattr(current, "unbounded", current).modify
            self.calls.call("modify", modify, metadata=merged)
        self._settings = None

    def partitions(self) -> dict[str, Any]:
        """The knowledge base's partition collections in Chroma, by partition."""
        found = {}
        for collection in self.calls.call("list_collections", self.client.list_collections):
            meta = collection.metadata or {}
            partition = meta.get(PREFIX + "partition", meta.get("kinject_partition"))
            if collection.name.startswith(f"kinject-{self.kb_id}-") and partition is not None:
                found[str(partition)] = collection
        return found

    # -- chunks ---------------------------------------------------------------------
    def _batches(self, items: Sequence[Any]) -> Iterator[slice]:
        batch = int(self.calls.call("get_max_batch_size", self.client.get_max_batch_size))
        batch = min(batch, SERVER_WRITE_BATCH) if self.server else batch
        return (slice(start, start + batch) for start in range(0, len(items), batch))

    def upsert(
        self, partition: str, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]]
    ) -> None:
        """Write chunks with their vectors, in batches."""
        collection = self.collection(partition, create=True)
        sealer = self.sealer if self.settings(fresh=self.server)["restricted"] else None
        for part in self._batches(chunks):
            collection.upsert(
                ids=[c.chunk_id for c in chunks[part]],
                embeddings=[list(v) for v in vectors[part]],
                documents=[sealer.seal(c.text) if sealer else c.text for c in chunks[part]],
                metadatas=[stored_metadata(c) for c in chunks[part]],
            )

    def update(self, partition: str, chunks: Sequence[Chunk]) -> None:
        """Rewrite the metadata of stored chunks (their text and vector stay)."""
        collection = self.collection(partition, create=True)
        for part in self._batches(chunks):
            ids = [c.chunk_id for c in chunks[part]]
            collection.update(ids=ids, metadatas=[stored_metadata(c) for c in chunks[part]])

    def reseal(self, sealed: bool) -> int:
        """Seal (or open) every chunk's text in place, vectors passed back; how many changed."""
        assert self.sealer is not None
        change, changed = self.sealer.seal if sealed else self.sealer.open, 0
        for collection in map(self.collection, sorted(self.partitions())):
            for offset in itertools.count(0, PAGE):
                got = collection.get(limit=PAGE, offset=offset, include=["documents", "embeddings"])
                rows = zip(got["ids"], got["documents"], got["embeddings"], strict=True)
                todo = [r for r in rows if r[1] and is_sealed(r[1]) != sealed]
                for n in range(0, len(todo), SERVER_WRITE_BATCH):
                    ids, texts, stored = zip(*todo[n : n + SERVER_WRITE_BATCH], strict=True)
                    vectors = [[float(x) for x in v] for v in stored]
                    collection.update(list(ids), vectors, documents=[change(t) for t in texts])
                changed += len(todo)
                if len(got["ids"]) < PAGE:
                    break
        return changed

    def delete(self, partition: str, ids: Sequence[str]) -> None:
        """Delete chunks by id (unknown ids are ignored)."""
        collection = self.collection(partition) if ids else None
        if collection is not None:
            for part in self._batches(ids):
                collection.delete(ids=list(ids[part]))

    def get(
        self,
        partition: str,
        ids: Sequence[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        fields: Fields = "all",
    ) -> list[Chunk]:
        """Stored chunks by id (each once) and/or ``where``."""
        collection = self.collection(partition)
        if collection is None or (ids is not None and not ids):
            return []
        include, op = _INCLUDE[fields], self._opener(fields)
        if ids is None:  # page by page: Chroma fails on a large match at once (SQL variables)
            return [c for page in self.pages(partition, fields=fields, where=where) for c in page]
        ids = list(dict.fromkeys(ids))  # Chroma refuses an id given twice
        pages = (ids[start : start + PAGE] for start in range(0, len(ids), PAGE))
        return [
            c
            for page in pages
            for c in to_chunks(
                collection.get(ids=page, where=where, include=include), partition, op
            )
        ]

    def _opener(self, fields: Fields) -> Callable[[str], str]:
        """What a read of ``fields`` does to stored text: opens it (``"all"``) or keeps it."""
        return self.sealer.open if fields == "all" and self.sealer is not None else str

    def pages(
        self, partition: str, *, fields: Fields = "all", where: Mapping[str, Any] | None = None
    ) -> Iterator[list[Chunk]]:
        """Every chunk of a partition, :data:`PAGE` at a time (matching ``where``: newest first)."""
        collection, offset = self.collection(partition), 0
        if collection is not None and where is not None:  # an offset would scan the match again
            ids = collection.get(where=where, include=[])["ids"][::-1]
            yield from (self.get(partition, ids[i : i + PAGE], fields=fields)
                        for i in range(0, len(ids), PAGE))  # fmt: skip
            return
        while collection is not None:
            got = collection.get(where=where, limit=PAGE, offset=offset, include=_INCLUDE[fields])
            if got["ids"]:
                yield to_chunks(got, partition, self._opener(fields))
            if len(got["ids"]) < PAGE:
                return
            offset += PAGE

    def of_sources(self, partition: str, sources: Sequence[str], *, fields: Fields) -> list[Chunk]:
        """Every stored chunk of ``sources`` (by source identity)."""
        return [c for page in self.source_pages(partition, sources, fields=fields) for c in page]

    def source_pages(
        self, partition: str, sources: Sequence[str], *, fields: Fields
    ) -> Iterator[list[Chunk]]:
        """The stored chunks of ``sources``, a page at a time (a large source never at once)."""
        wanted = sorted(set(sources) - {""})
        for start in range(0, len(wanted), 100):
            part = wanted[start : start + 100]
            where = {"$or": [{"source_path": {"$in": part}}, {"source": {"$in": part}}]}
            for page in self.pages(partition, fields=fields, where=where):
                yield [c for c in page if c.source in part]

    def count(self, partition: str) -> int:
        """How many chunks the partition holds (0 when it has no collection)."""
        collection = self.collection(partition)
        return 0 if collection is None else int(collection.count())
