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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

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
    BoundedCollection,
    WorkerPool,
    apply_http_timeout,
)
from langchain_knowledge_inject.store.catalog import Catalog, ChunkRow
from langchain_knowledge_inject.store.documents import DocumentIndex
from langchain_knowledge_inject.store.embeddings import (
    DEFAULT_MODEL_NAME,
    MODEL_WINDOW_TOKENS,
    QueryEmbeddingCache,
    default_embeddings,
    default_token_counter,
    embedding_model_name,
)
from langchain_knowledge_inject.store.filters import matches, split_tenant, to_chroma
from langchain_knowledge_inject.store.keyword import KeywordIndex, query_terms
from langchain_knowledge_inject.store.storage import (
    StoreLock,
    chroma_metadata,
    collection_name,
    default_store_path,
    ensure_store_dir,
    is_not_found,
    open_store_dir,
    persistent_client,
    record_collection_name,
    store_error,
    store_is_writable,
)
from langchain_knowledge_inject.store.sync import (
    DEFAULT_SYNC_INTERVAL,
    WRITE_MARK,
    KeywordSync,
    strip_mark,
    write_mark,
)
from langchain_knowledge_inject.store.write_plan import (
    WritePlan,
    chunk_id,
    group_by_partition,
    partition_of,
    plan_writes,
    source_key,
)

if TYPE_CHECKING:
    import chromadb
    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import TextSplitter

    from langchain_knowledge_inject.store.consistency import ConsistencyReport
    from langchain_knowledge_inject.store.retriever import KnowledgeBaseRetriever
    from langchain_knowledge_inject.store.vectorstore import KnowledgeBaseVectorStore

logger = logging.getLogger(__name__)

SearchMode = Literal["dense", "keyword", "hybrid"]
_MODES = ("dense", "keyword", "hybrid")
MAX_QUERY_CHARS = 2000
"""Queries are cut to this many characters: all-MiniLM-L6-v2 reads 256 word pieces."""
_RESERVED_KEYS = ("score", "chunk_id", "kb_name", "kb_id")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_DEFAULT_SPLITTER: Any = object()
_HEAL_INTERVAL = 60.0
SERVER_WRITE_BATCH = 256
"""Most chunks per write request to a Chroma server, so each request fits in the timeout."""
_LOCAL_GRACE_S = 1.0  # asearch with a server: local work (embedding, keyword) past the timeout


@dataclass(frozen=True)
class KnowledgeBaseInfo:
    """Metadata of a knowledge base, persisted in its store directory."""

    name: str
    """The name given by the user."""
    id: str
    """A short stable id, generated once."""
    description: str
    """What the knowledge base holds."""
    topics: list[str]
    """Topics set by the user, or derived from the content when none were set."""
    chunk_count: int
    """Number of chunks across all partitions."""
    embedding_model: str
    """Name of the embedding model its vectors were made with."""
    topics_derived: bool = False
    """True when ``topics`` were derived from the content."""
    restricted: bool = False
    """Whether restricted mode is on by default for this knowledge base."""
    sensitive_sources: bool = False
    """Whether source names must be hidden from the main model in restricted mode."""
    routing_hint: str = ""
    """Restricted mode: one line telling the main model what to ask this knowledge base."""
    routing_keywords: list[str] = field(default_factory=list)
    """Restricted mode: keywords that route questions to this knowledge base."""


@dataclass(frozen=True)
class RestrictionFlags:
    """The stored restriction flags of a knowledge base (see :attr:`KnowledgeBase.restriction`)."""

    restricted: bool
    """Whether restricted mode is on by default for this knowledge base."""
    sensitive_sources: bool
    """Whether source names must be hidden from the main model in restricted mode."""


@dataclass(frozen=True)
class AddResult:
    """What ``add_documents`` did."""

    added: int
    """Chunks embedded and stored."""
    unchanged: int
    """Chunks already stored with the same content and metadata (not re-embedded)."""
    updated: int
    """Chunks whose content was stored already but whose metadata changed."""
    replaced: int
    """Stale chunks removed because their source was added again with other content."""
    skipped: int
    """Empty chunks that were not stored."""
    ids: list[str]
    """The chunk id of every stored chunk of this call, in input order."""


def info_from_row(
    row: Mapping[str, Any], *, chunk_count: int, derived_topics: Sequence[str] | None = None
) -> KnowledgeBaseInfo:
    """A catalog row as :class:`KnowledgeBaseInfo` (``derived_topics`` stand in for none set)."""
    settings = row["settings"]
    return KnowledgeBaseInfo(
        name=row["name"],
        id=row["id"],
        description=row["description"],
        topics=list(derived_topics if derived_topics is not None else row["topics"]),
        chunk_count=chunk_count,
        embedding_model=row["embedding_model"],
        topics_derived=derived_topics is not None,
        restricted=bool(settings.get("restricted", False)),
        sensitive_sources=bool(settings.get("sensitive_sources", False)),
        routing_hint=settings.get("routing_hint") or "",
        routing_keywords=list(settings.get("routing_keywords") or []),
    )


def knowledge_base_id(name: str) -> str:
    """The id of the knowledge base ``name``: derived from the name, the same everywhere.

    So every machine that opens ``name`` on one Chroma server, each with its own
    catalog, uses the same collections.
    """
    return hashlib.sha256(f"kinject-kb\x1f{name}".encode()).hexdigest()[:12]


def list_knowledge_bases(path: str | os.PathLike[str] | None = None) -> list[KnowledgeBaseInfo]:
    """Every knowledge base in a store directory, without loading any model.

    Args:
        path: Store directory. Defaults to :func:`default_store_path`.
    """
    store = Path(path).expanduser() if path is not None else default_store_path()
    if not (store / "catalog.sqlite3").exists():
        return []
    conn = open_store_dir(store)
    try:
        catalog = Catalog(conn, threading.RLock())
        return [
            info_from_row(row, chunk_count=catalog.count(row["id"])) for row in catalog.list_kbs()
        ]
    finally:
        conn.close()


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
            measuring word pieces: chunks of at most 254 (the model reads 256,
            including two special tokens) with 32 overlap; with another model, 1000
            characters with 150 overlap. None stores every document as one chunk.
            Hybrid search scores each chunk by its own match and its document's
            (chunks sharing a source; see ``fusion.fuse_with_documents``), the
            document's keyword side from BM25 over its whole text
            (:mod:`langchain_knowledge_inject.store.documents`).
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
    read_only: bool
    """True when the store cannot be written: searches work, writes raise ``StoreError``."""
    _pinned: dict[str, bool]
    _record_known: bool
    _record_checked_at: float

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
        _check_seconds("timeout", timeout)
        _check_seconds("sync_interval", sync_interval, zero=True)
        self._pid = os.getpid()
        if not isinstance(name, str) or not _NAME.match(name):
            msg = (
                f"Invalid knowledge-base name {name!r}: use 1-63 letters, digits, '.', '_' or '-',"
                " starting with a letter or digit"
            )
            raise ConfigurationError(msg, option="name", value=name)
        self.name = name
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        self._lock = threading.RLock()
        self._store_lock: StoreLock | None = None
        ensure_store_dir(self.path)
        self.read_only = not store_is_writable(self.path)
        if client is None:
            self._store_lock = StoreLock(self.path, read_only=self.read_only)
        try:
            self._open_catalog()
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
            self._client = (
                client
                if client is not None
                else persistent_client(self.path, name, read_only=self.read_only)
            )
            settings = {
                "restricted": restricted,
                "sensitive_sources": sensitive_sources,
                "routing_hint": routing_hint,
                "routing_keywords": list(routing_keywords)
                if routing_keywords is not None
                else None,
            }
            self._collections: dict[str, Any] = {}
            self._verified: set[str] = set()
            self._server = client is not None
            self.timeout = timeout if self._server else None
            if self._server and timeout is not None:
                apply_http_timeout(self._client, timeout)
            self._calls = BoundedCalls(self.timeout, kb_name=name)
            self._async_pool = WorkerPool(32, f"kinject-{name}-search") if self._server else None
            self._sync = KeywordSync(self, interval=sync_interval) if self._server else None
            from langchain_knowledge_inject.store.opening import open_knowledge_base

            open_knowledge_base(
                self,
                create=create,
                description=description,
                topics=topics,
                given={k: v for k, v in settings.items() if v is not None},
            )
        except BaseException:
            self._release_store_lock()
            conn = getattr(self, "_conn", None)
            if conn is not None:
                conn.close()
            raise
        self._query_vector = QueryEmbeddingCache(self.embeddings.embed_query)
        self._text_splitter = (
            _default_splitter(self.embeddings)
            if text_splitter is _DEFAULT_SPLITTER
            else text_splitter
        )
        self._derived_topics: list[str] | None = None

    def _open_catalog(self) -> None:
        self._conn = open_store_dir(self.path, rebuild_damaged=not self.read_only)
        self.read_only = self.read_only or bool(getattr(self._conn, "read_only", False))
        self._catalog = Catalog(self._conn, self._lock)
        self._keyword = KeywordIndex(self._conn, lock=self._lock)
        self._document_index = DocumentIndex(self._conn, lock=self._lock, read_only=self.read_only)

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
        not be asked.
        """
        return self._flags(self._stored_row())

    def _stored_row(self) -> Mapping[str, Any]:
        """This knowledge base's catalog row; a damaged catalog is healed once first."""
        from langchain_knowledge_inject.store.opening import refresh_record

        self._check_process()
        try:
            with self._store_errors("reading its metadata"):
                row = self._catalog.get_kb(self.name)
                if row is None:
                    msg = f"Knowledge base {self.name!r} was deleted"
                    raise KnowledgeBaseNotFoundError(msg, kb_name=self.name)
                refresh_record(self)
                return row
        except StoreError as exc:
            if not self._heal_damaged_catalog(exc):
                raise
            return self._stored_row()

    def _flags(self, row: Mapping[str, Any]) -> RestrictionFlags:
        settings = row["settings"]
        return RestrictionFlags(
            restricted=bool(settings.get("restricted", False))
            or self._pinned.get("restricted", False),
            sensitive_sources=bool(settings.get("sensitive_sources", False))
            or self._pinned.get("sensitive_sources", False),
        )

    @contextlib.contextmanager
    def _store_errors(self, action: str) -> Iterator[None]:
        """Turn disk-full, read-only and damaged-file errors into :class:`StoreError`."""
        try:
            yield
        except KnowledgeInjectError:
            raise
        except Exception as exc:
            error = store_error(exc, action=action, kb_name=self.name, path=self.path)
            if error is None:
                raise
            raise error from exc

    def _refuse_if_read_only(self, action: str) -> None:
        if self.read_only:
            msg = (
                f"The store of knowledge base {self.name!r} ({self.path}) is read-only: "
                f"{action} was refused. Searching still works; to write, make the store "
                "directory writable or open a writable copy of it."
            )
            raise StoreError(msg, kb_name=self.name, reason="read_only", path=self.path)

    def _info_from_row(self, row: Mapping[str, Any]) -> KnowledgeBaseInfo:
        derived: list[str] | None = None
        if not row["topics"]:
            if self._derived_topics is None:
                self._derived_topics = derive_topics(self._catalog.sample_texts(self.id, 500))
            derived = self._derived_topics
        return info_from_row(row, chunk_count=self._catalog.count(self.id), derived_topics=derived)

    def get_source_fingerprint(self, source: str, *, tenant_id: str | None = None) -> str | None:
        """The fingerprint stored with ``source`` by the last ``add_documents``, or None."""
        self._check_process()
        return self._catalog.get_fingerprint(self.id, partition_of(tenant_id), source)

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
        self._refuse_if_read_only("adding documents")
        chunks = self._split(documents, tenant_id)
        for attempt in (1, 2):
            try:
                with self._store_errors("adding documents"):
                    plan = self._write_chunks(chunks, fingerprints or {})
                break
            except Exception as exc:
                if attempt == 2 or not is_not_found(exc):
                    raise
                self._forget_collections()  # deleted under us (server wiped or restarted)
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

    def _write_chunks(self, chunks: Sequence[ChunkRow], fps: Mapping[str, str]) -> WritePlan:
        for partition in sorted({row.partition for row in chunks}):
            self._collection(partition, create=False)  # notice a replaced collection first
        plan = plan_writes(self._catalog, self.id, chunks)
        texts = [row.text for row in plan.to_embed]
        vectors = self.embeddings.embed_documents(texts) if texts else []
        with self._lock:
            self._write(plan, vectors, fps)
        return plan

    def _needs_split(self, text: str) -> bool:
        splitter = self._text_splitter
        if splitter is None or not text.strip():
            return False
        size = getattr(splitter, "_chunk_size", None)  # chunks that already fit are kept whole
        return not (isinstance(size, int) and len(text) <= size)

    def _split(self, documents: Sequence[Document], tenant_id: str | None) -> list[ChunkRow]:
        rows: list[ChunkRow] = []
        for doc in documents:
            if not isinstance(doc, Document):
                msg = f"add_documents takes LangChain Document objects, got {type(doc).__name__}"
                raise ConfigurationError(msg, option="documents", value=doc)
            meta = {k: v for k, v in doc.metadata.items() if k not in _RESERVED_KEYS}
            tenant = meta.get("tenant_id")
            if tenant_id is not None and tenant not in (None, tenant_id):
                msg = f"Document tenant {tenant!r} disagrees with tenant_id={tenant_id!r}"
                raise ConfigurationError(msg, option="tenant_id", value=tenant_id)
            tenant = tenant_id if tenant_id is not None else tenant
            if tenant is not None:
                meta["tenant_id"] = str(tenant)
            meta["source"] = str(meta.get("source") or "")
            parts = [doc.page_content]
            if self._text_splitter is not None and self._needs_split(doc.page_content):
                parts = self._text_splitter.split_text(doc.page_content)
            partition = partition_of(meta.get("tenant_id"))
            for index, text in enumerate(parts):
                chunk_meta = dict(meta)
                if len(parts) > 1:
                    chunk_meta.setdefault("chunk_index", index)
                key = source_key(chunk_meta)
                cid = chunk_id(partition, key, text)
                rows.append(ChunkRow(cid, partition, key, text, chunk_meta))
        return rows

    def _write(
        self, plan: WritePlan, vectors: Sequence[Sequence[float]], fps: Mapping[str, str]
    ) -> None:
        by_partition: dict[str, list[tuple[ChunkRow, Sequence[float]]]] = {}
        for row, vec in zip(plan.to_embed, vectors, strict=True):
            by_partition.setdefault(row.partition, []).append((row, vec))
        batch = self._calls.call("get_max_batch_size", self._client.get_max_batch_size)
        if self._server:  # each call must finish within the timeout: keep requests small
            batch = min(batch, SERVER_WRITE_BATCH)
        for partition, items in by_partition.items():
            collection = self._collection(partition, create=True)
            for start in range(0, len(items), batch):
                part = items[start : start + batch]
                collection.upsert(
                    ids=[r.chunk_id for r, _ in part],
                    embeddings=[list(v) for _, v in part],
                    documents=[r.text for r, _ in part],
                    metadatas=[self._marked(r.metadata) for r, _ in part],
                )
        for partition, rows in group_by_partition(plan.to_update).items():
            collection = self._collection(partition, create=True)
            for start in range(0, len(rows), batch):
                collection.update(
                    ids=[r.chunk_id for r in rows[start : start + batch]],
                    metadatas=[self._marked(r.metadata) for r in rows[start : start + batch]],
                )
        for partition, ids in plan.stale.items():
            collection = self._collection(partition, create=False)
            if collection is not None and ids:
                collection.delete(ids=list(ids))
        # Chroma first, then one SQLite transaction: a crash in between leaves the
        # registry at the old state, and running the same add again converges.
        try:
            self._catalog.put_chunks(self.id, [*plan.to_embed, *plan.to_update])
            for partition, items in by_partition.items():
                self._keyword.add(self.id, partition, [(r.chunk_id, r.text) for r, _ in items])
            for partition, ids in plan.stale.items():
                self._keyword.delete(self.id, partition, list(ids))
                self._catalog.delete_chunks(self.id, partition, list(ids))
            for partition, source in plan.sources:
                if source:
                    self._catalog.put_source(self.id, partition, source, fps.get(source))
            self._document_index.refresh(self.id)
            self._conn.commit()
        except BaseException:
            self._conn.rollback()
            raise
        self._derived_topics = None

    def delete(self, ids: Sequence[str], *, tenant_id: str | None = None) -> int:
        """Delete chunks by id from one partition; returns how many existed."""
        self._check_process()
        partition = partition_of(tenant_id)
        self._refuse_if_read_only("deleting chunks")
        with self._lock, self._store_errors("deleting chunks"):
            existing = list(self._catalog.existing(self.id, partition, list(ids)))
            collection = self._collection(partition, create=False)
            if collection is not None and ids:
                collection.delete(ids=list(ids))
            try:
                self._keyword.delete(self.id, partition, list(ids))
                self._catalog.delete_chunks(self.id, partition, list(ids))
                self._document_index.refresh(self.id)
                self._conn.commit()
            except BaseException:
                self._conn.rollback()
                raise
        self._derived_topics = None
        return len(existing)

    def delete_source(self, source: str, *, tenant_id: str | None = None) -> int:
        """Delete every chunk of ``source``; returns how many were deleted.

        ``source`` is the source's identity: for a file added by ``ingest``, its
        full path (``metadata["source_path"]``), not the short ``source`` name.
        """
        self._check_process()
        partition = partition_of(tenant_id)
        self._refuse_if_read_only("deleting a source")
        ids = list(self._catalog.chunk_ids_for_source(self.id, partition, source))
        count = self.delete(ids, tenant_id=tenant_id)
        with self._lock, self._store_errors("deleting a source"):
            self._catalog.delete_source(self.id, partition, source)
            self._conn.commit()
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
        return self._catalog.count(self.id, partition_of(tenant_id))

    def delete_tenant(self, tenant_id: str) -> int:
        """Delete every chunk of one tenant partition; returns how many there were."""
        partition = partition_of(tenant_id)
        ids = sorted(self._catalog.partition_ids(self.id, partition))
        return self.delete(ids, tenant_id=tenant_id) if ids else 0

    def drop(self) -> None:
        """Delete the whole knowledge base: its collections, registry and keyword index."""
        self._check_process()
        self._refuse_if_read_only("dropping the knowledge base")
        with self._lock, self._store_errors("dropping the knowledge base"):
            names = [collection_name(self.id, p) for p in self._catalog.partitions(self.id)]
            for name in [*names, record_collection_name(self.id)]:
                try:
                    self._calls.call("delete_collection", self._client.delete_collection, name)
                except Exception:
                    logger.debug("collection %r already gone", name)
            self._forget_collections()
            self._keyword.delete_kb(self.id)
            self._catalog.delete_kb(self.id)
            self._document_index.delete_kb(self.id)
            self._conn.commit()

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
        self._check_process()
        k, min_score, mode = _check_search_args(k, min_score, mode)
        tenant, where = split_tenant(filter, tenant_id)
        partition = partition_of(tenant)
        text = (query or "")[:MAX_QUERY_CHARS]
        if not text.strip():
            return []
        depth = max(k, fusion.CANDIDATE_DEPTH) if mode == "hybrid" else k
        try:
            if partition not in self._verified:  # the catalog still describes this collection
                self._collection(partition, create=False)
            if self._sync is not None and mode != "dense":
                with self._calls.per_call():  # a catch-up may be long: each call is bounded
                    self._sync.maybe_catch_up(partition)
            with self._calls.operation():  # one deadline for the Chroma calls of the search
                dense = self._dense(partition, text, depth, where) if mode != "keyword" else []
                keyword = (
                    self._keyword_hits(partition, text, depth, where) if mode != "dense" else []
                )
        except (RetrievalError, ConfigurationError):
            raise
        except Exception as exc:
            if self._heal_damaged_catalog(exc):  # rebuilt from Chroma: search again
                return self.search(
                    query, k=k, min_score=min_score, filter=filter, mode=mode, tenant_id=tenant_id
                )
            msg = f"Search of knowledge base {self.name!r} failed: {type(exc).__name__}: {exc}"
            raise RetrievalError(msg, kb_name=self.name) from exc
        if mode == "dense":
            ranked = dense
        elif mode == "keyword":
            ranked = fusion.keyword_unit_scores(keyword)
        else:
            parents = self._parents(partition, {cid for cid, _ in [*dense, *keyword]})
            whole, indexed = self._document_hits(partition, text, depth, where, parents)
            ranked = fusion.fuse_with_documents(
                dense, keyword, parents, document_keyword=whole, indexed=indexed
            )
        ranked = [(cid, s) for cid, s in ranked if s >= min_score][:k]
        try:
            with self._calls.operation():
                return self._documents(partition, ranked)
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

    def _dense(
        self, partition: str, text: str, depth: int, where: Mapping[str, Any] | None
    ) -> list[tuple[str, float]]:
        collection = self._collection(partition, create=False)
        if collection is None:
            return []
        vector = self._query_vector(text)
        try:
            result = collection.query(
                query_embeddings=[vector],
                n_results=depth,
                where=to_chroma(where),
                include=["distances"],
            )
        except Exception as exc:
            if not is_not_found(exc):
                raise
            self._forget_collections()  # deleted under us (server wiped or restarted)
            collection = self._collection(partition, create=False)
            if collection is None:
                return []
            result = collection.query(
                query_embeddings=[vector],
                n_results=depth,
                where=to_chroma(where),
                include=["distances"],
            )
        ids, distances = result["ids"][0], (result["distances"] or [[]])[0]
        return [(cid, fusion.dense_score(d)) for cid, d in zip(ids, distances, strict=True)]

    def _keyword_hits(
        self, partition: str, text: str, depth: int, where: Mapping[str, Any] | None
    ) -> list[tuple[str, float]]:
        if not where:
            return self._keyword.search(self.id, partition, text, k=depth)
        hits = self._keyword.search(self.id, partition, text, k=depth * 4)
        rows = self._catalog.get_chunks(self.id, partition, [cid for cid, _ in hits])
        return [(c, s) for c, s in hits if c in rows and matches(rows[c].metadata, where)][:depth]

    def _document_hits(
        self,
        partition: str,
        text: str,
        depth: int,
        where: Mapping[str, Any] | None,
        parents: Mapping[str, str],
    ) -> tuple[list[tuple[str, float]], set[str]]:
        """BM25 over whole documents, for the hybrid document score (:mod:`.documents`).

        Not with a metadata filter (a document's whole text is not what the
        filter selects: its chunks' scores are pooled instead), nor with
        ``fusion.DOCUMENT_KEYWORD = "pool"``. A few sources left dirty by a
        write from another path (a catch-up, a recovery) are rebuilt first;
        when that write fails (a full disk), they are pooled and the search
        goes on.
        """
        if where or fusion.DOCUMENT_KEYWORD != "index" or fusion.DOCUMENT_WEIGHT <= 0:
            return [], set()
        with self._lock:
            if not self.read_only:
                try:
                    if self._document_index.refresh(self.id, limit=DOCUMENT_REFRESH):
                        self._conn.commit()
                except sqlite3.OperationalError as exc:  # a full disk, a locked file
                    self._conn.rollback()  # they stay dirty, so pooled: the search goes on
                    logger.warning("document index not refreshed before a search: %s", exc)
            return self._document_index.search(
                self.id, partition, text, k=depth, sources=set(parents.values())
            )

    def _parents(self, partition: str, ids: set[str]) -> dict[str, str]:
        """Chunk id -> source, for the chunks of the registry (others are their own document)."""
        found: dict[str, str] = {}
        batch = list(ids)
        with self._lock:
            for start in range(0, len(batch), 500):
                part = batch[start : start + 500]
                marks = ",".join("?" * len(part))
                found.update(
                    self._conn.execute(
                        "SELECT chunk_id, source FROM chunks WHERE kb_id = ? AND partition = ?"
                        f" AND chunk_id IN ({marks}) AND source != ''",
                        (self.id, partition, *part),
                    ).fetchall()
                )
        return found

    def _documents(self, partition: str, ranked: Sequence[tuple[str, float]]) -> list[Document]:
        ids = [cid for cid, _ in ranked]
        rows = self._catalog.get_chunks(self.id, partition, ids)
        missing = [cid for cid in ids if cid not in rows]
        if missing:  # written by another process to a shared Chroma server
            rows.update(self._rows_from_chroma(partition, missing))
        docs = []
        for cid, score in ranked:
            row = rows.get(cid)
            if row is None:
                continue
            meta = {**row.metadata, "score": score, "chunk_id": cid}
            meta.update(kb_name=self.name, kb_id=self.id)
            docs.append(Document(id=cid, page_content=row.text, metadata=meta))
        return docs

    def _rows_from_chroma(self, partition: str, ids: Sequence[str]) -> dict[str, ChunkRow]:
        collection = self._collection(partition, create=False)
        if collection is None:
            return {}
        got = collection.get(ids=list(ids), include=["documents", "metadatas"])
        return {
            cid: ChunkRow(cid, partition, source_key(meta or {}), text or "", strip_mark(meta))
            for cid, text, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        }

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
        from langchain_knowledge_inject.store.recovery import copy_collection

        if (client is None) == (persist_directory is None):
            msg = "Give exactly one of client= and persist_directory= to find the collection"
            raise ConfigurationError(msg, option="client", value=client)
        if client is not None:
            source_client = client
        else:
            import chromadb

            source_client = chromadb.PersistentClient(path=str(persist_directory))
        try:
            source = source_client.get_collection(collection_name, embedding_function=None)
        except Exception as exc:
            if not is_not_found(exc):
                raise
            msg = f"No Chroma collection named {collection_name!r} to adopt"
            raise KnowledgeBaseNotFoundError(msg, kb_name=name or collection_name) from exc
        kb = cls(name or collection_name, client=client, embeddings=embeddings, **options)
        try:
            adoption = copy_collection(kb, source, partition_of(tenant_id))
        except BaseException:
            if kb._catalog.count(kb.id) == 0:  # made by this call: leave nothing behind
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
        from langchain_knowledge_inject.store.retriever import KnowledgeBaseRetriever

        return KnowledgeBaseRetriever(knowledge_base=self, **kwargs)

    def vectorstore(self, *, tenant_id: str | None = None) -> KnowledgeBaseVectorStore:
        """The partition's collection as a ``langchain_chroma.Chroma`` that writes through the KB.

        Reads (MMR, raw scores, ``get``) are langchain-chroma's; writes
        (``add_documents``, ``add_texts``, ``update_documents``, ``delete``) go
        through :meth:`upsert_records` and :meth:`delete`, so the registry and
        the keyword index stay in step. See
        :mod:`langchain_knowledge_inject.store.vectorstore`.
        """
        from langchain_knowledge_inject.store.vectorstore import KnowledgeBaseVectorStore

        partition = partition_of(tenant_id)
        if self._collection(partition, create=False) is None and not self.read_only:
            self._collection(partition, create=True)
        return KnowledgeBaseVectorStore(
            self,
            tenant_id=tenant_id,
            client=self._client,
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
        self._refuse_if_read_only("adding documents")
        partition = partition_of(tenant_id)
        latest = {str(cid): (text, dict(meta)) for cid, text, meta in records}
        rows = [
            ChunkRow(cid, partition, str(meta.get("source") or ""), text, meta)
            for cid, (text, meta) in latest.items()
        ]
        if not rows:
            return
        vectors = self.embeddings.embed_documents([r.text for r in rows])
        with self._lock, self._store_errors("adding documents"):
            collection = self._collection(partition, create=True)
            batch = self._calls.call("get_max_batch_size", self._client.get_max_batch_size)
            if self._server:  # each call must finish within the timeout: keep requests small
                batch = min(batch, SERVER_WRITE_BATCH)
            for start in range(0, len(rows), batch):
                part = rows[start : start + batch]
                collection.upsert(
                    ids=[r.chunk_id for r in part],
                    embeddings=[list(v) for v in vectors[start : start + batch]],
                    documents=[r.text for r in part],
                    metadatas=[self._marked(r.metadata) or None for r in part],
                )
            try:
                self._catalog.put_chunks(self.id, rows)
                self._keyword.add(self.id, partition, [(r.chunk_id, r.text) for r in rows])
                self._document_index.refresh(self.id)
                self._conn.commit()
            except BaseException:
                self._conn.rollback()
                raise
        self._derived_topics = None

    def get_by_ids(self, ids: Sequence[str], *, tenant_id: str | None = None) -> list[Document]:
        """Stored chunks by id, with the metadata they were stored with (missing ids left out)."""
        partition = partition_of(tenant_id)
        rows = self._catalog.get_chunks(self.id, partition, list(ids))
        missing = [cid for cid in ids if cid not in rows]
        if missing:  # written by another process to a shared Chroma server
            rows.update(self._rows_from_chroma(partition, missing))
        return [
            Document(id=cid, page_content=rows[cid].text, metadata=dict(rows[cid].metadata))
            for cid in dict.fromkeys(ids)
            if cid in rows
        ]

    def _collection(self, partition: str, *, create: bool) -> Any:
        with self._lock:
            found = self._collections.get(partition)
            if found is not None:
                return found
            name = collection_name(self.id, partition)
            try:
                if create:
                    self._catalog.add_partition(self.id, partition)
                    found = self._calls.call(
                        "get_or_create_collection",
                        self._client.get_or_create_collection,
                        name,
                        metadata={"hnsw:space": "cosine", "kinject_partition": partition},
                        embedding_function=None,
                    )
                else:
                    found = self._calls.call(
                        "get_collection",
                        self._client.get_collection,
                        name,
                        embedding_function=None,
                    )
            except Exception as exc:
                if not create and is_not_found(exc):
                    self._verify_collection(partition, None)
                    return None
                raise
            self._verify_collection(partition, found)
            if self._server:
                found = BoundedCollection(found, self._calls)
            self._collections[partition] = found
            return found

    def _forget_collections(self) -> None:
        """Drop cached collection handles (one was deleted under us): look them up again."""
        with self._lock:
            self._collections.clear()
            self._verified.clear()

    def _verify_collection(self, partition: str, found: Any) -> None:
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
        from langchain_knowledge_inject.store.recovery import adopt_partition, adopt_rows

        recorded = self._catalog.collection_id(self.id, partition)
        current = None if found is None else str(found.id)
        registry = self._catalog.count(self.id, partition)
        if found is None:
            mismatch = registry > 0
        elif recorded is None:
            mismatch = registry > 0 and found.count() == 0
        else:
            mismatch = recorded != current
        if mismatch and not self.read_only:
            what = "is gone" if found is None else f"is not the one recorded ({recorded})"
            logger.warning(
                "Knowledge base %r: the Chroma collection of partition %r %s while the catalog "
                "holds %d chunks for it; the catalog and keyword index of that partition are "
                "rebuilt from Chroma, and documents added again are written to it",
                self.name,
                partition or "(shared)",
                what,
                registry,
            )
            if found is None:
                adopt_rows(self, partition, [], replace=True)
            else:
                adopt_partition(self, partition, found, replace=True)
        if current is not None and current != recorded and not self.read_only:
            try:
                self._catalog.set_collection_id(self.id, partition, current)
            except sqlite3.OperationalError as exc:  # disk full: recorded on a later call
                self._conn.rollback()
                logger.warning("Could not record the collection id of %r: %s", partition, exc)
                return
        self._verified.add(partition)

    def _heal_damaged_catalog(self, exc: BaseException) -> bool:
        """Rebuild the catalog from Chroma when ``exc`` says it is damaged; True when done.

        At most once a minute, so that a store that keeps failing is reported, not looped on.
        """
        from langchain_knowledge_inject.store.storage import classify_store_error

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
        from langchain_knowledge_inject.store.opening import open_knowledge_base
        from langchain_knowledge_inject.store.storage import set_aside_damaged

        with self._lock:
            self._conn.close()
            kept = set_aside_damaged(self.path / "catalog.sqlite3")
            logger.warning(
                "The catalog of %s was damaged; it is kept as %s and rebuilt from Chroma",
                self.path,
                kept.name,
            )
            self._open_catalog()
            self._forget_collections()
            open_knowledge_base(self, create=False, description=None, topics=None, given={})

    def check(self, *, repair: bool = False) -> ConsistencyReport:
        """Report (and with ``repair=True`` fix) drift between registry, keyword index and Chroma.

        See :mod:`langchain_knowledge_inject.store.consistency`.
        """
        from langchain_knowledge_inject.store.consistency import check_knowledge_base

        self._check_process()
        return check_knowledge_base(self, repair=repair)

    def close(self) -> None:
        """Close the catalog connection and release the store lock.

        The Chroma client is left to its owner. In a process forked after the
        knowledge base was opened this does nothing: the connection and the lock
        are the parent's.
        """
        if os.getpid() != self._pid:
            return
        with self._lock:
            self._conn.close()
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

    def _marked(self, metadata: Mapping[str, Any]) -> dict[str, Any]:
        """Metadata as Chroma stores it, with the write mark other processes catch up from."""
        out = chroma_metadata(metadata)
        if self._server:
            out[WRITE_MARK] = write_mark()
        return out

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


def _check_seconds(option: str, value: Any, *, zero: bool = False) -> None:
    if value is None:
        return
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value >= 0 if zero else value > 0)
        or value != value
        or value == float("inf")
    ):
        bound = ">= 0" if zero else "> 0"
        msg = f"{option} must be a number of seconds {bound}, or None; got {value!r}"
        raise ConfigurationError(msg, option=option, value=value)


def _check_search_args(k: Any, min_score: Any, mode: Any) -> tuple[int, float, SearchMode]:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        msg = f"k must be an integer >= 1, got {k!r}"
        raise ConfigurationError(msg, option="k", value=k)
    if min_score is None:
        min_score = fusion.DEFAULT_MIN_SCORE
    if (
        isinstance(min_score, bool)
        or not isinstance(min_score, (int, float))
        or not 0 <= min_score <= 1
    ):
        msg = f"min_score must be a number in [0, 1], got {min_score!r}"
        raise ConfigurationError(msg, option="min_score", value=min_score)
    if mode not in _MODES:
        msg = f"mode must be one of {', '.join(_MODES)}; got {mode!r}"
        raise ConfigurationError(msg, option="mode", value=mode)
    return k, float(min_score), mode


DOCUMENT_REFRESH = 200
"""Most dirty documents a search rebuilds before it ranks (writes rebuild all of theirs)."""

WINDOW_CHUNK_TOKENS = MODEL_WINDOW_TOKENS - 2
"""Default chunk size with the default model: its window less the [CLS] and [SEP] tokens."""
WINDOW_OVERLAP_TOKENS = 32
"""Default overlap of consecutive chunks with the default model, in word pieces."""


def _default_splitter(embeddings: Embeddings) -> TextSplitter:
    """Chunks that fit the default model's window; 1000 characters for any other model."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if embedding_model_name(embeddings) == DEFAULT_MODEL_NAME:
        try:
            counter = default_token_counter()
        except KnowledgeBaseOpenError:
            logger.warning("no tokenizer for the default model: splitting by characters")
        else:
            return RecursiveCharacterTextSplitter(
                chunk_size=WINDOW_CHUNK_TOKENS,
                chunk_overlap=WINDOW_OVERLAP_TOKENS,
                length_function=counter,
            )
    return RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=150)


_FUNCTION_WORDS = frozenset(
    """about above after again against also although among another because been before being
    below between both cannot could does doing down during each either else every from further
    have having here hers herself himself however into itself just least less many more most
    much must myself neither never none only other otherwise ours ourselves over same shall
    should since some such than that their theirs them themselves then there these they this
    those though through thus under unless until upon very were what whatever when whenever
    where whereas whether which while whom whose will with within without would your yours
    yourself""".split()  # noqa: SIM905
)


def derive_topics(texts: Sequence[str], *, n: int = 8) -> list[str]:
    """Derive up to ``n`` topic words: content words in many chunks, but not in nearly all."""
    if not texts:
        return []
    df: dict[str, int] = {}
    for text in texts:
        terms = query_terms(text[:4000])
        for term in {t for t in terms if len(t) > 3 and t.isalpha() and t not in _FUNCTION_WORDS}:
            df[term] = df.get(term, 0) + 1
    limit = max(2, int(0.6 * len(texts)))
    candidates = [(c, t) for t, c in df.items() if c <= limit or len(texts) < 3]
    candidates.sort(key=lambda ct: (-ct[0], ct[1]))
    return [t for _, t in candidates[:n]]
