"""The write methods of :class:`~.knowledge_base.KnowledgeBase`: add, upsert, delete, drop.

Each checks the process and that the store is writable, and hands the
knowledge base's parts to the write paths of :mod:`~.writes`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from langchain_knowledge_inject._store.metadata import AddResult
from langchain_knowledge_inject._store.storage import (
    collection_name,
    is_not_found,
    record_collection_name,
)
from langchain_knowledge_inject._store.write_plan import partition_of
from langchain_knowledge_inject._store.writes import (
    delete_chunks,
    split_documents,
    upsert_records,
    write_chunks,
)

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import TextSplitter

    from langchain_knowledge_inject._store.chroma import ChromaSide
    from langchain_knowledge_inject._store.handles import StoreHandles

# the logger of the class it is part of: log records keep the name they had
logger = logging.getLogger("langchain_knowledge_inject._store.knowledge_base")


class WritesMixin:
    """The write methods of ``KnowledgeBase`` (a part of its class, not used alone)."""

    if TYPE_CHECKING:  # what it uses of the facade
        id: str
        embeddings: Embeddings
        _handles: StoreHandles
        _chroma: ChromaSide
        _text_splitter: TextSplitter | None

        def _check_process(self) -> None: ...
        async def _in_thread(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any: ...

    def add_documents(
        self,
        documents: Sequence[Document],
        *,
        tenant_id: str | None = None,
        fingerprints: Mapping[str, str] | None = None,
    ) -> AddResult:
        """Add documents, idempotently.

        Documents are split by the knowledge base's text splitter; each chunk's
        id derives from its tenant, source and content. A chunk already stored
        is not embedded again. All chunks of one source given in a call replace
        that source's previous chunks: stale ones are removed from Chroma and
        from the keyword index.

        Args:
            documents: The documents; ``metadata["source"]`` names where each
                came from (``metadata["source_path"]``, when set, is the source's
                identity instead: see ``write_plan.source_key``),
                ``metadata["tenant_id"]`` puts it in a tenant partition.
            tenant_id: Tenant of every document (must agree with their metadata).
            fingerprints: ``{source identity: fingerprint}`` to store (for example a file hash).

        Returns:
            What was added, left unchanged, updated and replaced.

        Raises:
            StoreTimeoutError: A Chroma server call took longer than ``timeout``
                (nothing is recorded locally; running the same add again converges).
        """
        self._check_process()
        self._handles.refuse_if_read_only("adding documents")
        chunks = split_documents(documents, tenant_id, self._text_splitter)
        for attempt in (1, 2):
            try:
                with self._handles.errors("adding documents"):
                    plan = write_chunks(
                        self._handles, self._chroma, self.embeddings, chunks, fingerprints or {}
                    )
                break
            except Exception as exc:
                if attempt == 2 or not is_not_found(exc):
                    raise
                self._chroma.forget()  # deleted under us (server wiped or restarted)
        return AddResult(
            added=len(plan.to_embed),
            unchanged=plan.unchanged,
            updated=len(plan.to_update),
            replaced=sum(len(v) for v in plan.stale.values()),
            skipped=plan.skipped,
            ids=plan.ids,
        )

    async def aadd_documents(
        self,
        documents: Sequence[Document],
        *,
        tenant_id: str | None = None,
        fingerprints: Mapping[str, str] | None = None,
    ) -> AddResult:
        """Async twin of :meth:`add_documents` (runs it in a worker thread)."""
        self._check_process()
        return await self._in_thread(
            self.add_documents, documents, tenant_id=tenant_id, fingerprints=fingerprints
        )

    def delete(self, ids: Sequence[str], *, tenant_id: str | None = None) -> int:
        """Delete chunks by id from one partition; returns how many existed."""
        self._check_process()
        partition = partition_of(tenant_id)
        self._handles.refuse_if_read_only("deleting chunks")
        return delete_chunks(self._handles, self._chroma, partition, ids)

    def delete_source(self, source: str, *, tenant_id: str | None = None) -> int:
        """Delete every chunk of ``source``; returns how many were deleted.

        ``source`` is the source's identity: for a file added by ``ingest``, its
        full path (``metadata["source_path"]``), not the short ``source`` name.
        """
        self._check_process()
        partition = partition_of(tenant_id)
        handles = self._handles
        handles.refuse_if_read_only("deleting a source")
        ids = list(handles.catalog.chunk_ids_for_source(self.id, partition, source))
        count = self.delete(ids, tenant_id=tenant_id)
        with handles.errors("deleting a source"), handles.transaction():
            handles.catalog.delete_source(self.id, partition, source)
        return count

    async def adelete(self, ids: Sequence[str], *, tenant_id: str | None = None) -> int:
        """Async twin of :meth:`delete` (runs it in a worker thread)."""
        self._check_process()
        return await self._in_thread(self.delete, ids, tenant_id=tenant_id)

    async def adelete_source(self, source: str, *, tenant_id: str | None = None) -> int:
        """Async twin of :meth:`delete_source` (runs it in a worker thread)."""
        self._check_process()
        return await self._in_thread(self.delete_source, source, tenant_id=tenant_id)

    def count(self, *, tenant_id: str | None = None) -> int:
        """How many chunks one partition holds (the shared one when ``tenant_id`` is None)."""
        return self._handles.catalog.count(self.id, partition_of(tenant_id))

    def delete_tenant(self, tenant_id: str) -> int:
        """Delete every chunk of one tenant partition; returns how many there were."""
        partition = partition_of(tenant_id)
        ids = sorted(self._handles.catalog.partition_ids(self.id, partition))
        return self.delete(ids, tenant_id=tenant_id) if ids else 0

    def drop(self) -> None:
        """Delete the whole knowledge base: its collections, registry and keyword index."""
        self._check_process()
        handles, chroma = self._handles, self._chroma
        handles.refuse_if_read_only("dropping the knowledge base")
        with handles.lock, handles.errors("dropping the knowledge base"):
            names = [collection_name(self.id, p) for p in handles.catalog.partitions(self.id)]
            for name in [*names, record_collection_name(self.id)]:
                try:
                    chroma.calls.call("delete_collection", chroma.client.delete_collection, name)
                except Exception:
                    logger.debug("collection %r already gone", name)
            chroma.forget()
            handles.keyword.delete_kb(self.id)
            handles.catalog.delete_kb(self.id)
            handles.documents.delete_kb(self.id)
            handles.conn.commit()
            handles.generation += 1

    def upsert_records(
        self,
        records: Sequence[tuple[str, str, Mapping[str, Any]]],
        *,
        tenant_id: str | None = None,
    ) -> None:
        """Store chunks under ids chosen by the caller; an existing id is replaced.

        The write path of :meth:`vectorstore`: no splitting, no source
        replacement, the metadata kept as given. Chroma first, then the
        registry and the keyword index in one transaction.

        Args:
            records: ``(chunk_id, text, metadata)`` triples.
            tenant_id: The tenant partition (None: the shared one).
        """
        self._handles.refuse_if_read_only("adding documents")
        upsert_records(
            self._handles, self._chroma, self.embeddings, records, partition_of(tenant_id)
        )
