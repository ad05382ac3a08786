"""Writing chunks: splitting documents, planning against Chroma, then Chroma and the keyword cache.

Chunk ids derive from the tenant partition, the source and the content, so the
same chunk always gets the same id. Against what Chroma holds, each chunk of a
call is new (embed it), known with other metadata (update it) or unchanged
(skip it); every source named in the call keeps exactly the chunks given now,
so its other chunks are stale and removed, unless it continues in a later call
(``unfinished``); its fingerprint goes on its last chunk, once they are gone. A write
goes to Chroma, then to the keyword cache, which catches up from Chroma after a crash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from langchain_knowledge_inject._store import documents
from langchain_knowledge_inject._store.chroma import Chunk, source_key
from langchain_knowledge_inject._store.embeddings import model_errors, model_window
from langchain_knowledge_inject._store.storage import (
    chroma_metadata,
    ensure_room,
    estimated_write_bytes,
)
from langchain_knowledge_inject.errors import ConfigurationError

if TYPE_CHECKING:
    from pathlib import Path

    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import TextSplitter

    from langchain_knowledge_inject._store.chroma import ChromaSide
    from langchain_knowledge_inject._store.keyword_cache import KeywordCache

logger = logging.getLogger(__name__)

RESERVED_KEYS = ("score", "chunk_id", "kb_name", "kb_id")
"""Metadata keys a search sets on its results; dropped from documents being added."""
FALLBACK_CHUNK_CHARS = (1000, 150)
"""Chunk size and overlap, in characters, when the model's window cannot be read."""


def chunk_id(partition: str, source: str, text: str) -> str:
    """The stable id of a chunk: derived from its partition, source and content."""
    return hashlib.sha256(f"{partition}\x1f{source}\x1f{text}".encode()).hexdigest()[:32]


def partition_of(tenant_id: str | None) -> str:
    """The partition of a tenant: the tenant id, or "" for the shared partition."""
    if tenant_id == "":  # "" names the shared partition: it must not be a tenant
        msg = "tenant_id must be a non-empty string, or None for the shared partition"
        raise ConfigurationError(msg, option="tenant_id", value=tenant_id)
    return "" if tenant_id is None else str(tenant_id)


def default_splitter(embeddings: Embeddings) -> TextSplitter:
    """A splitter that follows the model: half its window, an eighth of it as overlap.

    Measured in the model's own word pieces wherever its window and tokenizer can
    be read (``embeddings.model_window``; the default model: 128 with 32 overlap),
    else :data:`FALLBACK_CHUNK_CHARS` characters, said once in the log.
    """
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    window = model_window(embeddings)
    if window is None:
        size, overlap = FALLBACK_CHUNK_CHARS
        logger.info("the window of %s cannot be read: chunks of %d characters",
                    type(embeddings).__name__, size)  # fmt: skip
        return RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap)
    tokens, count = window
    return RecursiveCharacterTextSplitter(
        chunk_size=tokens // 2, chunk_overlap=tokens // 8, length_function=count
    )


def split_documents(
    documents: Sequence[Document], tenant_id: str | None, splitter: TextSplitter | None
) -> list[Chunk]:
    """The chunks of ``documents``: split, with their partition, source identity and id.

    A chunk that comes with a ``chunk_index`` and is split again keeps it, its
    pieces numbered in ``chunk_part``.

    Raises:
        ConfigurationError: Not a ``Document``, or a tenant that disagrees with ``tenant_id``.
    """
    chunks: list[Chunk] = []
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
        text, size = doc.page_content, getattr(splitter, "_chunk_size", None)
        fits = isinstance(size, int) and len(text) <= size  # chunks that fit stay whole
        parts = splitter.split_text(text) if splitter and text.strip() and not fits else [text]
        partition = partition_of(meta.get("tenant_id"))
        for index, part in enumerate(parts):
            chunk_meta = dict(meta)
            if len(parts) > 1:
                if "chunk_index" in chunk_meta:  # a chunk split again: its pieces keep order
                    chunk_meta["chunk_part"] = index
                chunk_meta.setdefault("chunk_index", index)
            key = source_key(chunk_meta)
            chunks.append(Chunk(chunk_id(partition, key, part), partition, key, part, chunk_meta))
    return chunks


def embed_distinct(embeddings: Embeddings, texts: Sequence[str]) -> list[list[float]]:
    """Embed ``texts``, each distinct text once: repeated chunks share one vector."""
    distinct = list(dict.fromkeys(texts))
    vectors = embeddings.embed_documents(distinct) if distinct else []
    if len(vectors) != len(distinct):
        msg = f"The embedding model returned {len(vectors)} vectors for {len(distinct)} texts"
        raise ConfigurationError(msg, option="embeddings", value=type(embeddings).__name__)
    by_text = dict(zip(distinct, vectors, strict=True))
    return [list(by_text[text]) for text in texts]


@dataclass
class WritePlan:
    """What one ``add_documents`` call writes: new, updated and stale chunks, per partition."""

    to_embed: list[Chunk] = field(default_factory=list)
    to_update: list[Chunk] = field(default_factory=list)
    stale: dict[str, list[str]] = field(default_factory=dict)
    complete: dict[str, dict[str, list[Chunk]]] = field(default_factory=dict)
    """Per partition, every chunk of each source named (what its document row is made of)."""
    ids: list[str] = field(default_factory=list)
    updated: int = 0
    unchanged: int = 0
    skipped: int = 0


def plan_writes(
    chroma: ChromaSide, chunks: Sequence[Chunk], fingerprints: Mapping[str, str],
    unfinished: AbstractSet[str], given: dict[tuple[str, str], tuple[set[str], list[Chunk]]],
) -> WritePlan:  # fmt: skip
    """Decide what a call of ``add_documents`` must write; ``given``: unfinished sources' so far."""
    plan = WritePlan()
    for partition in dict.fromkeys(c.partition for c in chunks):
        rows = [c for c in chunks if c.partition == partition]
        stored = {
            c.chunk_id: c for c in chroma.get(partition, [r.chunk_id for r in rows], fields="meta")
        }
        complete = plan.complete.setdefault(partition, {r.source: [] for r in rows})
        last = {r.source: r.chunk_id for r in rows if r.text.strip() and r.source not in unfinished}
        seen: set[str] = set()
        for row in rows:
            if not row.text.strip():
                plan.skipped += 1
                continue
            plan.ids.append(row.chunk_id)
            if row.chunk_id in seen or row.chunk_id in given.get((partition, row.source), ((),))[0]:
                continue
            seen.add(row.chunk_id)
            mark = fingerprints.get(row.source) if last.get(row.source) == row.chunk_id else None
            row = dataclasses.replace(row, fingerprint=mark)
            complete[row.source].append(row)
            old = stored.get(row.chunk_id)
            if old is None:
                plan.to_embed.append(row)
            elif (
                old.metadata != chroma_metadata(row.metadata) or old.fingerprint != row.fingerprint
            ):
                plan.to_update.append(row)  # a fingerprint alone changed: not counted
                plan.updated += old.metadata != chroma_metadata(row.metadata)
            else:
                plan.unchanged += 1
        kept: dict[str, set[str]] = {}
        for source, mine in list(complete.items()):
            ids, first = given.pop((partition, source), (set(), []))
            ids.update(r.chunk_id for r in mine)
            first = documents.head([*first, *mine])  # its document row: written once it is whole
            if source in unfinished:
                given[partition, source], complete[source] = (ids, first), []
                continue
            kept[source], complete[source] = ids, first
        pages = chroma.source_pages(partition, list(kept), fields="meta")
        held = (c for page in pages for c in page)
        if stale := sorted(c.chunk_id for c in held if c.chunk_id not in kept[c.source]):
            plan.stale[partition] = stale
    return plan


class Writes:
    """The write paths of one knowledge base: Chroma first, then the keyword cache.

    Args:
        chroma: Its Chroma side.
        cache: Its keyword cache.
        embeddings: Its embedding model.
        path: Its store directory (the disk reserve is checked there).
        kb_name: Its name, for errors.
    """

    def __init__(
        self,
        chroma: ChromaSide,
        cache: KeywordCache,
        embeddings: Embeddings,
        *,
        path: Path,
        kb_name: str,
    ) -> None:
        self.chroma, self.cache, self.embeddings = chroma, cache, embeddings
        self.path, self.kb_name = path, kb_name
        self.given: dict[tuple[str, str], tuple[set[str], list[Chunk]]] = {}  # unfinished sources

    def _write(self, partition: str, chunks: Sequence[Chunk], vectors: Sequence[Sequence[float]],
               updated: Sequence[Chunk] = (), stale: Sequence[str] = ()) -> None:  # fmt: skip
        """Chroma first (the cache catches up if that fails half way); fingerprints last."""
        try:
            for marked in (False, True):  # a chunk with its source's fingerprint: stale ones gone
                new = [(c, v) for c, v in zip(chunks, vectors, strict=True)
                       if (c.fingerprint is not None) == marked]  # fmt: skip
                if new:
                    self.chroma.upsert(partition, [c for c, _ in new], [v for _, v in new])
                if mine := [c for c in updated if (c.fingerprint is not None) == marked]:
                    self.chroma.update(partition, mine)
                self.chroma.delete(partition, () if marked else stale)
        except BaseException:
            self.cache.invalidate(partition)
            raise

    def _room(self, texts: Sequence[str], vectors: Sequence[Sequence[float]]) -> None:
        needed = estimated_write_bytes(texts, len(vectors[0]) if vectors else 0)
        ensure_room(self.path, needed, action="adding documents", kb_name=self.kb_name)

    def add(
        self, chunks: Sequence[Chunk], fingerprints: Mapping[str, str], unfinished: AbstractSet[str]
    ) -> WritePlan:
        """Store chunks idempotently: embed only new ones, replace each source's stale chunks."""
        for partition in dict.fromkeys(c.partition for c in chunks):
            self.cache.ensure(partition)
        plan = plan_writes(self.chroma, chunks, fingerprints, unfinished, self.given)
        with model_errors(self.kb_name):
            vectors = embed_distinct(self.embeddings, [c.text for c in plan.to_embed])
        self._room([c.text for c in plan.to_embed], vectors)
        stamp = round(time.time(), 6)
        new = [dataclasses.replace(c, stamp=stamp) for c in plan.to_embed]
        updated = [dataclasses.replace(c, stamp=stamp) for c in plan.to_update]
        for partition, stale in {p: plan.stale.get(p, []) for p in plan.complete}.items():
            picked = [(c, v) for c, v in zip(new, vectors, strict=True) if c.partition == partition]
            mine = [c for c in updated if c.partition == partition]
            self._write(partition, [c for c, _ in picked], [v for _, v in picked], mine, stale)
        for partition, complete in plan.complete.items():
            upserted = [c for c in [*new, *updated] if c.partition == partition]
            deleted = plan.stale.get(partition, [])
            self.cache.apply(partition, upserted=upserted, deleted=deleted, complete=complete)
        return plan

    def upsert(
        self,
        records: Sequence[tuple[str, str, Mapping[str, Any]]],
        partition: str,
        *,
        vectors: Sequence[Sequence[float]] | None = None,
    ) -> None:
        """Store ``(id, text, metadata)`` records under their ids (no splitting); an id is replaced.

        ``vectors``, when given (one per record, ids distinct), are stored as they are.
        """
        stamp = round(time.time(), 6)
        latest = {str(cid): (text, dict(meta)) for cid, text, meta in records}
        chunks = [
            Chunk(cid, partition, source_key(m), t, m, stamp) for cid, (t, m) in latest.items()
        ]
        if chunks:
            with model_errors(self.kb_name):
                vectors = vectors or embed_distinct(self.embeddings, [c.text for c in chunks])
            self._room([c.text for c in chunks], vectors)
            self.cache.ensure(partition)
            self._write(partition, chunks, vectors)
            self.cache.apply(partition, upserted=chunks)

    def delete(self, partition: str, ids: Sequence[str]) -> int:
        """Delete chunks by id from Chroma, then from the keyword cache; how many existed."""
        ids = list(dict.fromkeys(ids))
        self.cache.ensure(partition)
        existing = self.chroma.get(partition, ids, fields="ids")
        self._write(partition, (), (), stale=ids)
        self.cache.apply(partition, deleted=ids)
        return len(existing)
