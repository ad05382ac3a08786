"""``KnowledgeBase``: one named knowledge base over Chroma plus its keyword index.

Storage layout of a store directory (default: a per-user data directory,
overridable with ``path=`` or the environment variable ``KINJECT_HOME``)::

    <path>/catalog.sqlite3   knowledge-base metadata, chunk registry, keyword index
    <path>/chroma/           the embedded Chroma store (unless a client is given)

Tenants: every ``tenant_id`` is its own Chroma collection (cosine space), and
chunks without a tenant form the shared partition. A search reads exactly one
partition, so a tenant's chunks are only ever returned to a search that names
that tenant. Measured on 5k chunks and 10 tenants (chromadb 1.5): a metadata
``where`` filter made a query 3.6-4.2x slower than an unfiltered one, while a
per-tenant collection answered in 0.7-0.9x the time, isolated by construction.

This module is the facade; the work is done below it, each part handed only
what it needs: ``handles`` (the SQLite side and its one transaction),
``chroma`` (the client and partition collections), ``search`` (the search
path of a partition), ``writes``, ``opening``, ``sync``, ``recovery`` and
``consistency``. None of them imports this module.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from langchain_knowledge_inject.errors import (
    ConfigurationError,
    ForkedProcessError,
    KnowledgeBaseNotFoundError,
    KnowledgeBaseOpenError,
    KnowledgeInjectError,
    RetrievalError,
    StoreError,
    StoreTimeoutError,
)
from langchain_knowledge_inject.store import fusion
from langchain_knowledge_inject.store.calls import (
    DEFAULT_TIMEOUT,
    BoundedCalls,
    WorkerPool,
    apply_http_timeout,
    check_seconds,
)
from langchain_knowledge_inject.store.chroma import SERVER_WRITE_BATCH, ChromaSide
from langchain_knowledge_inject.store.consistency import ConsistencyReport, check_knowledge_base
from langchain_knowledge_inject.store.embeddings import (
    QueryEmbeddingCache,
    default_embeddings,
    embedding_model_name,
)
from langchain_knowledge_inject.store.filters import split_tenant
from langchain_knowledge_inject.store.handles import StoreHandles
from langchain_knowledge_inject.store.keyword import STOPWORDS
from langchain_knowledge_inject.store.metadata import (
    AddResult,
    KnowledgeBaseInfo,
    RestrictionFlags,
    derive_topics,
    info_from_row,
    list_knowledge_bases,
)
from langchain_knowledge_inject.store.opening import (
    StoredFlags,
    is_valid_name,
    knowledge_base_id,
    open_knowledge_base,
)
from langchain_knowledge_inject.store.recovery import copy_collection, find_collection
from langchain_knowledge_inject.store.retriever import KnowledgeBaseRetriever
from langchain_knowledge_inject.store.search import DOCUMENT_REFRESH, PartitionSearch
from langchain_knowledge_inject.store.search_args import (
    MAX_QUERY_CHARS,
    SearchMode,
    check_search_args,
)
from langchain_knowledge_inject.store.storage import (
    StoreLock,
    classify_store_error,
    collection_name,
    default_store_path,
    ensure_store_dir,
    is_not_found,
    persistent_client,
    record_collection_name,
    store_is_writable,
)
from langchain_knowledge_inject.store.sync import DEFAULT_SYNC_INTERVAL, KeywordSync
from langchain_knowledge_inject.store.vectorstore import KnowledgeBaseVectorStore
from langchain_knowledge_inject.store.write_plan import chunk_id, partition_of
from langchain_knowledge_inject.store.writes import (
    DEFAULT_CHUNK_TOKENS,
    WINDOW_CHUNK_TOKENS,
    WINDOW_OVERLAP_TOKENS,
    default_splitter,
    delete_chunks,
    split_documents,
    upsert_records,
    write_chunks,
)

if TYPE_CHECKING:
    import chromadb
    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import TextSplitter

    from langchain_knowledge_inject.store.catalog import Catalog
    from langchain_knowledge_inject.store.documents import DocumentIndex
    from langchain_knowledge_inject.store.keyword import KeywordIndex

__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "DOCUMENT_REFRESH",
    "MAX_QUERY_CHARS",
    "SERVER_WRITE_BATCH",
    "WINDOW_CHUNK_TOKENS",
    "WINDOW_OVERLAP_TOKENS",
    "AddResult",
    "KnowledgeBase",
    "KnowledgeBaseInfo",
    "RestrictionFlags",
    "SearchMode",
    "chunk_id",
    "default_store_path",
    "derive_topics",
    "info_from_row",
    "knowledge_base_id",
    "list_knowledge_bases",
]

logger = logging.getLogger(__name__)

_DEFAULT_SPLITTER: Any = object()
_HEAL_INTERVAL = 60.0
_LOCAL_GRACE_S = 1.0  # asearch with a server: local work (embedding, keyword) past the timeout


class KnowledgeBase:
    """A named knowledge base: Chroma collections (cosine) plus a keyword index.

    Setup:
        ``pip install langchain-knowledge-inject``; the default embedding model
        (all-MiniLM-L6-v2) ships with it and loads offline.

    Instantiate:
        .. code-block:: python

            from langchain_core.documents import Document
            from langchain_core.embeddings import DeterministicFakeEmbedding
            from langchain_knowledge_inject import KnowledgeBase

            kb = KnowledgeBase(
                "hr", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=32)
            )
            result = kb.add_documents(
                [Document("Staff get 25 days of annual leave.", metadata={"source": "leave.md"})]
            )
            assert result.added == 1
            assert kb.add_documents(
                [Document("Staff get 25 days of annual leave.", metadata={"source": "leave.md"})]
            ).unchanged == 1

    Search:
        .. code-block:: python

            docs = kb.search("annual leave days", k=2, min_score=0.0, mode="keyword")
            assert docs[0].metadata["source"] == "leave.md"

    Use as Retriever:
        .. code-block:: python

            retriever = kb.as_retriever(k=1, min_score=0.0, mode="keyword")
            assert len(retriever.invoke("annual leave")) == 1

    Args:
        name: Name of the knowledge base (letters, digits, '.', '_', '-'; up to 63).
        path: Store directory. Defaults to :func:`default_store_path`. With a
            ``client``, the catalog and keyword index still live here.
        client: A ``chromadb`` client (``chromadb.HttpClient`` for a Chroma server).
            Defaults to an embedded ``PersistentClient`` under ``path``.
        embeddings: Any LangChain ``Embeddings``. Defaults to all-MiniLM-L6-v2, offline.
        description: What the knowledge base holds (stored; None keeps the stored one).
        topics: Its topics (stored; None keeps the stored ones, or derives them).
        text_splitter: Splits documents longer than a chunk before storing.
            Defaults, with the default model, to a ``RecursiveCharacterTextSplitter``
            measuring word pieces: chunks of at most 128 with 32 overlap (the model
            reads 256, including two special tokens; 128 scored better on SciFact
            train, see ``writes.DEFAULT_CHUNK_TOKENS``); with another model, 1000
            characters with 150 overlap. None stores every document as one chunk.
            A chunk that comes with a ``chunk_index`` and is split again keeps it,
            its pieces numbered in ``chunk_part``. Hybrid search scores each chunk
            by its own match and its document's (chunks sharing a source; see
            ``fusion.fuse_with_documents``), the document's keyword side from BM25
            over its lead (``title`` metadata, else its first line) and its whole
            text (:mod:`langchain_knowledge_inject.store.documents`).
        create: Create the knowledge base when it does not exist; False raises
            :class:`KnowledgeBaseNotFoundError` instead.
        restricted: Restricted mode by default for this knowledge base (stored).
        sensitive_sources: Hide source names from the main model in restricted mode (stored).
        routing_hint: Restricted mode routing hint (stored).
        routing_keywords: Restricted mode routing keywords (stored).
        timeout: Seconds a call to a Chroma server (``client=``) may take, for a
            search as a whole and for each write batch; past it the call fails
            with :class:`StoreTimeoutError` (a turn goes on without knowledge).
            None waits without limit. The embedded store is not bounded: no
            network stands between it and its files.
        sync_interval: Server mode: at most this many seconds after another
            process writes to the server, this one's keyword index has its
            chunks (see :mod:`langchain_knowledge_inject.store.sync`). None turns the
            catch-up off.

    Fork safety: a knowledge base belongs to the process that opened it. Used in
    a child forked afterwards (a Gunicorn worker with ``--preload``, a
    ``multiprocessing`` worker under the ``fork`` start method) it raises
    :class:`ForkedProcessError` instead of sharing its SQLite connection and
    Chroma client with the parent. Open it in each worker after the fork.
    """

    id: str
    """A short stable id, derived from the name."""

    def __init__(
        self,
        name: str = "default",
        *,
        path: str | os.PathLike[str] | None = None,
        client: chromadb.ClientAPI | None = None,
        embeddings: Embeddings | None = None,
        description: str | None = None,
        topics: Sequence[str] | None = None,
        text_splitter: TextSplitter | None = _DEFAULT_SPLITTER,
        create: bool = True,
        restricted: bool | None = None,
        sensitive_sources: bool | None = None,
        routing_hint: str | None = None,
        routing_keywords: Sequence[str] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        sync_interval: float | None = DEFAULT_SYNC_INTERVAL,
    ) -> None:
        check_seconds("timeout", timeout)
        check_seconds("sync_interval", sync_interval, zero=True)
        self._pid = os.getpid()
        if not is_valid_name(name):
            msg = (
                f"Invalid knowledge-base name {name!r}: use 1-63 letters, digits, '.', '_' or '-',"
                " starting with a letter or digit"
            )
            raise ConfigurationError(msg, option="name", value=name)
        self.name = name
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        self._store_lock: StoreLock | None = None
        ensure_store_dir(self.path)
        read_only = not store_is_writable(self.path)
        if client is None:
            self._store_lock = StoreLock(self.path, read_only=read_only)
        self._handles = StoreHandles(name, self.path, read_only=read_only)
        self._restriction: tuple[tuple[Any, ...], RestrictionFlags] | None = None
        self._topics: tuple[int, list[str]] | None = None
        try:
            self._handles.open()
            self.embeddings = (
                embeddings if embeddings is not None else default_embeddings(cache_dir=self.path)
            )
            try:  # fail here, not on the first question, when the model cannot embed
                self.embeddings.embed_query("knowledge base open check")
            except Exception as exc:
                msg = (
                    f"The embedding model of knowledge base {name!r} failed on a test query: {exc}"
                )
                raise KnowledgeBaseOpenError(msg, kb_name=name) from exc
            server = client is not None
            self.timeout = timeout if server else None
            chroma_client = (
                client
                if client is not None
                else persistent_client(self.path, name, read_only=self.read_only)
            )
            if server and timeout is not None:
                apply_http_timeout(chroma_client, timeout)
            calls = BoundedCalls(self.timeout, kb_name=name)
            self._chroma = ChromaSide(chroma_client, self._handles, server=server, calls=calls)
            self._async_pool = WorkerPool(32, f"kinject-{name}-search") if server else None
            self._sync = (
                KeywordSync(
                    self._handles,
                    lambda partition: self._chroma.collection(partition, create=False),
                    timeout=self.timeout,
                    interval=sync_interval,
                )
                if server
                else None
            )
            settings = {
                "restricted": restricted,
                "sensitive_sources": sensitive_sources,
                "routing_hint": routing_hint,
                "routing_keywords": list(routing_keywords)
                if routing_keywords is not None
                else None,
            }
            self._flags_state = self._open(
                create=create,
                description=description,
                topics=topics,
                given={k: v for k, v in settings.items() if v is not None},
            )
        except BaseException:
            self._release_store_lock()
            conn = getattr(self._handles, "conn", None)
            if conn is not None:
                conn.close()
            raise
        self._query_vector = QueryEmbeddingCache(self.embeddings.embed_query)
        self._searcher = PartitionSearch(
            self._handles, self._chroma, self._query_vector, self._sync
        )
        self._text_splitter = (
            default_splitter(self.embeddings)
            if text_splitter is _DEFAULT_SPLITTER
            else text_splitter
        )

    def _open(
        self,
        *,
        create: bool,
        description: str | None,
        topics: Sequence[str] | None,
        given: Mapping[str, Any],
    ) -> StoredFlags:
        flags = open_knowledge_base(
            self._handles,
            self._chroma,
            model_name=embedding_model_name(self.embeddings),
            create=create,
            description=description,
            topics=topics,
            given=given,
        )
        self.id = self._handles.kb_id
        return flags

    @property
    def read_only(self) -> bool:
        """True when the store cannot be written: searches work, writes raise ``StoreError``."""
        return self._handles.read_only

    # -- metadata ----------------------------------------------------------
    @property
    def info(self) -> KnowledgeBaseInfo:
        """Metadata of this knowledge base (read from the store each time).

        ``restricted`` and ``sensitive_sources`` are on when the catalog or the
        record kept in Chroma says so, or when Chroma could not be asked.
        """
        row = self._stored_row()
        info = self._info_from_row(row)
        flags = self._flags(row)
        return dataclasses.replace(
            info, restricted=flags.restricted, sensitive_sources=flags.sensitive_sources
        )

    @property
    def restriction(self) -> RestrictionFlags:
        """The stored restriction flags alone: what :attr:`info` says of them, cheaper.

        Read on every turn by the surfaces (no chunk count, no topics). On when
        the catalog or the record kept in Chroma says so, or when Chroma could
        not be asked. Cached until the catalog changes (a write by this
        connection, or a commit by any other: SQLite's ``data_version``) or
        the flags held in memory change; while the Chroma record is unknown it
        is read again each time, so the flags follow the record once it answers.
        """
        self._check_process()
        cached = self._restriction
        if cached is not None and self._flags_state.known and cached[0] == self._catalog_key():
            return cached[1]
        flags = self._flags(self._stored_row())
        self._restriction = (self._catalog_key(), flags)
        return flags

    def _catalog_key(self) -> tuple[Any, ...]:
        """Changes whenever the catalog or the flags held in memory may have changed."""
        handles = self._handles
        with handles.lock:
            conn = handles.conn
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            return (id(conn), conn.total_changes, version, self._flags_state.version)

    def _stored_row(self) -> Mapping[str, Any]:
        """This knowledge base's catalog row; a damaged catalog is healed once first."""
        self._check_process()
        try:
            with self._handles.errors("reading its metadata"):
                row = self._handles.catalog.get_kb(self.name)
                if row is None:
                    msg = f"Knowledge base {self.name!r} was deleted"
                    raise KnowledgeBaseNotFoundError(msg, kb_name=self.name)
                self._flags_state.refresh(self._handles, self._chroma)
                return row
        except StoreError as exc:
            if not self._heal_damaged_catalog(exc):
                raise
            return self._stored_row()

    def _flags(self, row: Mapping[str, Any]) -> RestrictionFlags:
        settings = row["settings"]
        pinned = self._flags_state.pinned
        return RestrictionFlags(
            restricted=bool(settings.get("restricted", False)) or pinned.get("restricted", False),
            sensitive_sources=bool(settings.get("sensitive_sources", False))
            or pinned.get("sensitive_sources", False),
        )

    def _info_from_row(self, row: Mapping[str, Any]) -> KnowledgeBaseInfo:
        derived: list[str] | None = None
        if not row["topics"]:
            generation = self._handles.generation
            if self._topics is None or self._topics[0] != generation:
                texts = self._handles.catalog.sample_texts(self.id, 500)
                self._topics = (generation, derive_topics(texts))
            derived = self._topics[1]
        count = self._handles.catalog.count(self.id)
        return info_from_row(row, chunk_count=count, derived_topics=derived)

    def get_source_fingerprint(self, source: str, *, tenant_id: str | None = None) -> str | None:
        """The fingerprint stored with ``source`` by the last ``add_documents``, or None."""
        self._check_process()
        return self._handles.catalog.get_fingerprint(self.id, partition_of(tenant_id), source)

    # -- writing -----------------------------------------------------------
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

    # -- searching ---------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        k: int = 4,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: SearchMode = "hybrid",
        tenant_id: str | None = None,
    ) -> list[Document]:
        """Return the chunks most relevant to ``query``, best first.

        Args:
            query: The question (cut to :data:`MAX_QUERY_CHARS` characters).
            k: How many chunks at most (>= 1).
            min_score: Drop chunks scoring below this, in [0, 1]; see
                :mod:`langchain_knowledge_inject.store.fusion` for what a score means.
                None uses :data:`~langchain_knowledge_inject.store.fusion.DEFAULT_MIN_SCORE`.
            filter: Metadata filter in Chroma's ``where`` language; its
                ``tenant_id`` selects the tenant partition.
            mode: ``"dense"``, ``"keyword"`` or ``"hybrid"`` (the default, a fusion).
            tenant_id: Search this tenant's partition; None searches the shared one.

        Returns:
            Documents with ``id`` (the chunk id) and ``metadata["score"]``,
            ``["chunk_id"]``, ``["kb_name"]``, ``["kb_id"]``, ``["source"]``.

        Raises:
            ConfigurationError: An argument has a value that is not allowed.
            RetrievalError: The store could not be searched.
            StoreTimeoutError: A Chroma server did not answer within ``timeout``.
            ForkedProcessError: Used in a process forked after it was opened.
        """
        partition, ranked = self._ranked(query, k, min_score, filter, mode, tenant_id)
        if not ranked:
            return []
        try:
            with self._calls.operation():
                return self._searcher.documents(self.name, partition, ranked)
        except (RetrievalError, ConfigurationError):
            raise
        except sqlite3.DatabaseError as exc:
            if self._heal_damaged_catalog(exc):
                return self.search(
                    query, k=k, min_score=min_score, filter=filter, mode=mode, tenant_id=tenant_id
                )
            msg = f"Search of knowledge base {self.name!r} failed: {exc}"
            raise RetrievalError(msg, kb_name=self.name) from exc
        except Exception as exc:
            msg = f"Search of knowledge base {self.name!r} failed: {type(exc).__name__}: {exc}"
            raise RetrievalError(msg, kb_name=self.name) from exc

    def search_hits(
        self,
        query: str,
        *,
        k: int = 4,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: SearchMode = "hybrid",
        tenant_id: str | None = None,
        stopwords: AbstractSet[str] | None = None,
    ) -> list[tuple[str, float]]:
        """:meth:`search` without reading the chunks back: ``(chunk id, score)`` pairs, best first.

        For a caller that re-ranks a pool of hits by fields it keeps itself and
        reads back only the chunks it returns (:meth:`get_by_ids`); same
        arguments, order and scores as :meth:`search`, and ``stopwords``: the
        query words the keyword side leaves out (lowercase; default ``None``:
        the 33 of :data:`~langchain_knowledge_inject.store.keyword.STOPWORDS`).
        """
        if stopwords is not None and not (
            isinstance(stopwords, AbstractSet) and all(isinstance(w, str) for w in stopwords)
        ):
            msg = "stopwords must be a set of lowercase words, or None"
            raise ConfigurationError(msg, option="stopwords", value=stopwords)
        return self._ranked(query, k, min_score, filter, mode, tenant_id, stopwords)[1]

    def _ranked(
        self,
        query: str,
        k: int,
        min_score: float | None,
        filter: Mapping[str, Any] | None,
        mode: SearchMode,
        tenant_id: str | None,
        stopwords: AbstractSet[str] | None = None,
    ) -> tuple[str, list[tuple[str, float]]]:
        """The searched partition and its best ``k`` hits scoring ``min_score`` or more."""
        stop = STOPWORDS if stopwords is None else stopwords
        self._check_process()
        k, min_score, mode = check_search_args(k, min_score, mode)
        tenant, where = split_tenant(filter, tenant_id)
        partition = partition_of(tenant)
        text = (query or "")[:MAX_QUERY_CHARS]
        if not text.strip():
            return partition, []
        depth = max(k, fusion.CANDIDATE_DEPTH) if mode == "hybrid" else k
        searcher = self._searcher
        try:
            candidates = searcher.candidates(partition, text, depth, where, mode, stop)
        except (RetrievalError, ConfigurationError):
            raise
        except Exception as exc:
            if self._heal_damaged_catalog(exc):  # rebuilt from Chroma: search again
                return self._ranked(query, k, min_score, filter, mode, tenant_id, stopwords)
            msg = f"Search of knowledge base {self.name!r} failed: {type(exc).__name__}: {exc}"
            raise RetrievalError(msg, kb_name=self.name) from exc
        ranked = searcher.rank(partition, text, depth, where, mode, candidates, stop)
        return partition, [(cid, s) for cid, s in ranked if s >= min_score][:k]

    async def asearch(
        self,
        query: str,
        *,
        k: int = 4,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: SearchMode = "hybrid",
        tenant_id: str | None = None,
    ) -> list[Document]:
        """Async twin of :meth:`search` (runs it in a worker thread: Chroma's client is sync).

        With a Chroma server the thread is one of this knowledge base's own, and
        the wait is bounded by ``timeout``: a frozen server never takes a thread
        from the event loop's default executor, so other knowledge bases are not slowed.
        """
        self._check_process()
        return await self._in_thread(
            self.search,
            query,
            k=k,
            min_score=min_score,
            filter=filter,
            mode=mode,
            tenant_id=tenant_id,
        )

    @classmethod
    def from_chroma(
        cls,
        collection_name: str,
        *,
        name: str | None = None,
        client: chromadb.ClientAPI | None = None,
        persist_directory: str | os.PathLike[str] | None = None,
        embeddings: Embeddings | None = None,
        tenant_id: str | None = None,
        **options: Any,
    ) -> KnowledgeBase:
        """Adopt an existing Chroma collection (as ``langchain_chroma.Chroma`` writes it).

        Its documents, metadatas and vectors are copied, without re-embedding,
        into a knowledge base whose catalog and keyword index are built from
        them. A few stored documents are embedded again first and compared with
        their stored vectors, so a collection made with another model is refused.

        Args:
            collection_name: The collection to adopt.
            name: Name of the knowledge base (default: the collection's name).
            client: The ``chromadb`` client holding the collection; the knowledge
                base is stored with it too.
            persist_directory: Or the directory of an embedded Chroma store holding it.
            embeddings: The embedding model that built the collection.
            tenant_id: Adopt it as this tenant's partition (default: the shared one).
            **options: Other :class:`KnowledgeBase` arguments (``path``, ``restricted``, ...).

        Raises:
            ConfigurationError: Neither or both of ``client`` and ``persist_directory``.
            KnowledgeBaseNotFoundError: No such collection.
            KnowledgeBaseOpenError: The collection was embedded with another model.
        """
        source = find_collection(
            collection_name,
            client=client,
            persist_directory=persist_directory,
            kb_name=name or collection_name,
        )
        kb = cls(name or collection_name, client=client, embeddings=embeddings, **options)
        try:
            adoption = kb._adopt_collection(source, partition_of(tenant_id))
        except BaseException:
            if kb._handles.catalog.count(kb.id) == 0:  # made by this call: leave nothing behind
                kb.drop()
            kb.close()
            raise
        if adoption.unexplained:
            logger.warning(
                "Adopting %r: %d records hold no text and were not copied",
                collection_name,
                len(adoption.unexplained),
            )
        return kb

    def as_retriever(self, **kwargs: Any) -> KnowledgeBaseRetriever:
        """A LangChain retriever over this knowledge base.

        Pure top-k by default (``min_score=0.0``: ``k`` chunks whenever the base
        holds that many), as LangChain retrievers are expected to be; pass
        ``min_score`` (``None``: the calibrated default) to drop weak matches.

        Args:
            **kwargs: ``k``, ``min_score``, ``mode``, ``filter``, ``tenant_id``.
        """
        return KnowledgeBaseRetriever(knowledge_base=self, **kwargs)

    def vectorstore(self, *, tenant_id: str | None = None) -> KnowledgeBaseVectorStore:
        """The partition's collection as a ``langchain_chroma.Chroma`` that writes through the KB.

        Reads (MMR, raw scores, ``get``) are langchain-chroma's; writes
        (``add_documents``, ``add_texts``, ``update_documents``, ``delete``) go
        through :meth:`upsert_records` and :meth:`delete`, so the registry and
        the keyword index stay in step. See
        :mod:`langchain_knowledge_inject.store.vectorstore`.
        """
        partition = partition_of(tenant_id)
        if self._chroma.collection(partition, create=False) is None and not self.read_only:
            self._chroma.collection(partition, create=True)
        return KnowledgeBaseVectorStore(
            self,
            tenant_id=tenant_id,
            client=self._chroma.client,
            collection_name=collection_name(self.id, partition),
            embedding_function=self.embeddings,
            create_collection_if_not_exists=False,
        )

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

    def get_by_ids(self, ids: Sequence[str], *, tenant_id: str | None = None) -> list[Document]:
        """Stored chunks by id, with the metadata they were stored with (missing ids left out)."""
        partition = partition_of(tenant_id)
        rows = self._handles.catalog.get_chunks(self.id, partition, list(ids))
        missing = [cid for cid in ids if cid not in rows]
        if missing:  # written by another process to a shared Chroma server
            rows.update(self._chroma.rows(partition, missing))
        return [
            Document(id=cid, page_content=rows[cid].text, metadata=dict(rows[cid].metadata))
            for cid in dict.fromkeys(ids)
            if cid in rows
        ]

    def _adopt_collection(self, source: Any, partition: str) -> Any:
        target = self._chroma.collection(partition, create=True)
        return copy_collection(
            self._handles, self.embeddings, self._chroma.bounded(source), target, partition
        )

    # -- damage and drift ------------------------------------------------------
    def _heal_damaged_catalog(self, exc: BaseException) -> bool:
        """Rebuild the catalog from Chroma when ``exc`` says it is damaged; True when done.

        At most once a minute, so that a store that keeps failing is reported, not looped on.
        """
        cause = exc.__cause__ if isinstance(exc, KnowledgeInjectError) and exc.__cause__ else exc
        if self.read_only or classify_store_error(cause) != "damaged":
            return False
        now = time.monotonic()
        if now - getattr(self, "_healed_at", -_HEAL_INTERVAL) < _HEAL_INTERVAL:
            return False
        self._healed_at = now
        self._rebuild_catalog()
        return True

    def _rebuild_catalog(self) -> None:
        """Keep a damaged catalog aside and rebuild this knowledge base's rows from Chroma."""
        with self._handles.lock:
            kept = self._handles.set_aside()
            logger.warning(
                "The catalog of %s was damaged; it is kept as %s and rebuilt from Chroma",
                self.path,
                kept.name,
            )
            self._chroma.forget()
            self._flags_state = self._open(create=False, description=None, topics=None, given={})
            self._restriction = None

    def check(self, *, repair: bool = False) -> ConsistencyReport:
        """Report (and with ``repair=True`` fix) drift between registry, keyword index and Chroma.

        See :mod:`langchain_knowledge_inject.store.consistency`.
        """
        self._check_process()
        return check_knowledge_base(
            self._handles,
            self._chroma,
            self.embeddings,
            repair=repair,
            rebuild_catalog=self._rebuild_catalog,
        )

    def close(self) -> None:
        """Close the catalog connection and release the store lock.

        The Chroma client is left to its owner. In a process forked after the
        knowledge base was opened this does nothing: the connection and the lock
        are the parent's.
        """
        if os.getpid() != self._pid:
            return
        self._handles.close()
        self._release_store_lock()

    def _release_store_lock(self) -> None:
        lock = getattr(self, "_store_lock", None)
        if lock is not None and getattr(self, "_pid", None) == os.getpid():
            lock.release()

    # -- process and thread boundaries ---------------------------------------
    def _check_process(self) -> None:
        """Raise :class:`ForkedProcessError` in a child forked after opening."""
        if os.getpid() != self._pid:
            msg = (
                f"Knowledge base {self.name!r} was opened in process {self._pid} and is used in "
                f"process {os.getpid()}, forked from it. Its SQLite connection, threads and "
                "Chroma client do not survive a fork: open the KnowledgeBase in each worker "
                "after the fork (Gunicorn: without --preload, or in post_fork; multiprocessing: "
                "the 'spawn' start method, or open it inside the worker function)."
            )
            raise ForkedProcessError(msg, kb_name=self.name, opened_in=self._pid)

    async def _in_thread(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Run blocking ``fn`` off the event loop.

        Embedded store: the loop's default executor. Chroma server: this knowledge
        base's own threads, waited on for at most ``timeout`` (plus a second for
        the local work), so a frozen server holds none of the shared threads.
        """
        if self._async_pool is None:
            return await asyncio.to_thread(fn, *args, **kwargs)
        if self.timeout is None or fn != self.search:
            return await asyncio.wrap_future(self._async_pool.submit(fn, *args, **kwargs))
        with self._calls.operation():  # the deadline runs from now, queued or not
            future = asyncio.wrap_future(self._async_pool.submit(fn, *args, **kwargs))
        try:
            return await asyncio.wait_for(future, self.timeout + _LOCAL_GRACE_S)
        except asyncio.TimeoutError:
            msg = (
                f"Search of knowledge base {self.name!r} did not finish within its "
                f"timeout of {self.timeout:g} s"
            )
            raise StoreTimeoutError(
                msg, kb_name=self.name, operation="search", seconds=self.timeout
            ) from None

    # -- the parts, by name (the search path; tests and benchmarks reach them too) -------
    @property
    def _catalog(self) -> Catalog:
        return self._handles.catalog

    @property
    def _keyword(self) -> KeywordIndex:
        return self._handles.keyword

    @property
    def _document_index(self) -> DocumentIndex:
        return self._handles.documents

    @property
    def _lock(self) -> threading.RLock:
        return self._handles.lock

    @property
    def _conn(self) -> sqlite3.Connection:
        return self._handles.conn

    @_conn.setter
    def _conn(self, conn: sqlite3.Connection) -> None:  # tests stand a failing one in
        self._handles.conn = conn

    @property
    def _client(self) -> Any:
        return self._chroma.client

    @property
    def _calls(self) -> BoundedCalls:
        return self._chroma.calls

    def _collection(self, partition: str, *, create: bool) -> Any:
        return self._chroma.collection(partition, create=create)

    def _forget_collections(self) -> None:
        self._chroma.forget()

    def __del__(self) -> None:
        self._release_store_lock()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KnowledgeBase(name={self.name!r}, id={self.id!r}, path={str(self.path)!r})"

    # Last in the class body, so that ``list`` in the annotations above is the builtin.
    list = staticmethod(list_knowledge_bases)
    """Every knowledge base in a store directory: see :func:`list_knowledge_bases`."""


KnowledgeBaseRetriever.model_rebuild(_types_namespace={"KnowledgeBase": KnowledgeBase})
