"""``KnowledgeBase``: one named knowledge base, kept in Chroma, searched by vector and keyword.

A store directory (default: a per-user data directory, or ``path=``, or
``KINJECT_HOME``) holds ``chroma/``, the embedded Chroma store (unless a client
is given): every chunk with its vector, text and metadata, and the knowledge
base's settings (:mod:`~.flags`); and ``keyword/``, the keyword cache of it
(:mod:`~.keyword_cache`). Every ``tenant_id`` is its own Chroma collection
(cosine), so a search, which reads the tenant's partition and (by default) the
shared one, never sees another tenant's chunks. The class checks arguments and
hands the work to one helper per job (:class:`~.writes.Writes`, :class:`~.search.PartitionSearch`,
:class:`~.keyword_cache.KeywordCache`, :class:`~.chroma.ChromaSide`); each async
method runs the same code in a worker thread, as langchain-core's ``VectorStore``
does, so no async path blocks the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
from collections.abc import Callable, Coroutine, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from langchain_core.documents import Document

from langchain_knowledge_inject import errors
from langchain_knowledge_inject._store import (
    calls,
    flags,
    fusion,
    metadata,
    migration,
    sealing,
    storage,
    writes,
)
from langchain_knowledge_inject._store.chroma import ChromaSide
from langchain_knowledge_inject._store.embeddings import (
    default_embeddings,
    embedding_model_name,
    model_errors,
)
from langchain_knowledge_inject._store.filters import split_tenant
from langchain_knowledge_inject._store.flags import FLAGS, RestrictionFlags
from langchain_knowledge_inject._store.keyword import STOPWORDS
from langchain_knowledge_inject._store.keyword_cache import (
    CLOCK_SKEW_S,
    ConsistencyReport,
    KeywordCache,
)
from langchain_knowledge_inject._store.metadata import AddResult, KnowledgeBaseInfo
from langchain_knowledge_inject._store.retriever import KnowledgeBaseRetriever
from langchain_knowledge_inject._store.sealing import is_sealed
from langchain_knowledge_inject._store.search import PartitionSearch
from langchain_knowledge_inject._store.search_args import (
    MAX_QUERY_CHARS,
    SearchMode,
    check_search_args,
)
from langchain_knowledge_inject._store.storage import default_store_path, store_is_writable

if TYPE_CHECKING:
    import chromadb
    from langchain_core.embeddings import Embeddings
    from langchain_text_splitters import TextSplitter

    from langchain_knowledge_inject._store.vectorstore import KnowledgeBaseVectorStore

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_SYNC_INTERVAL = 5.0
"""With a Chroma server: most seconds before other processes' writes reach keyword search."""
_DEFAULT_SPLITTER: Any = object()
_PASSED = (errors.RetrievalError, errors.ConfigurationError, errors.KnowledgeBaseOpenError,
           errors.RestrictedKnowledgeError)  # fmt: skip
_LOCAL_GRACE_S = 1.0  # asearch with a server: local work (embedding, keyword) past the timeout
_UNBOUNDED_WRITE_S = 60.0  # how late a write may commit when the knowledge base has no timeout


def _given_flags(restricted: Any) -> dict[str, Any]:
    """The stored flags that ``KnowledgeBase(restricted=...)`` asks for (None: keep them)."""
    if isinstance(restricted, RestrictionFlags):
        if not restricted.restricted and restricted != RestrictionFlags():
            msg = f"restricted={restricted!r} sets restricted mode's flags with it off: add True"
            raise errors.ConfigurationError(msg, option="restricted", value=restricted)
        return {**vars(restricted), "routing_keywords": list(restricted.routing_keywords)}
    if restricted is None or isinstance(restricted, bool):
        return {"restricted": restricted}
    msg = f"restricted={restricted!r}: use True, False, None or RestrictionFlags(...)"
    raise errors.ConfigurationError(msg, option="restricted", value=restricted)


def _twin(method: Callable[..., T]) -> Callable[..., Coroutine[Any, Any, T]]:
    """The async twin of a ``KnowledgeBase`` method: the method, run in a worker thread."""

    async def twin(self: KnowledgeBase, *args: Any, **kwargs: Any) -> T:
        return await self._in_thread(method, self, *args, **kwargs)

    twin.__name__ = twin.__qualname__ = f"a{method.__name__}"
    twin.__doc__ = f"Async twin of :meth:`{method.__name__}` (runs it in a worker thread)."
    return twin


class KnowledgeBase:
    """A named knowledge base: Chroma collections (cosine) plus a keyword cache.

    The default embedding model (all-MiniLM-L6-v2) ships with the package and
    loads offline, on its first use.

    Example:
        .. code-block:: python

            from langchain_core.documents import Document
            from langchain_core.embeddings import DeterministicFakeEmbedding
            from langchain_knowledge_inject import KnowledgeBase

            kb = KnowledgeBase("hr", path=tmp_path, embeddings=DeterministicFakeEmbedding(size=32))
            leave = Document("Staff get 25 days of annual leave.", metadata={"source": "leave.md"})
            assert kb.add_documents([leave]).added == 1
            assert kb.add_documents([leave]).unchanged == 1  # idempotent per source
            docs = kb.search("annual leave days", k=2, min_score=0.0, mode="keyword")
            assert docs[0].metadata["source"] == "leave.md"
            retriever = kb.as_retriever(k=1, min_score=0.0, mode="keyword")
            assert len(retriever.invoke("annual leave")) == 1

    Args:
        name: Name of the knowledge base (letters, digits, '.', '_', '-'; up to 63).
        path: Store directory (default :func:`default_store_path`); the keyword cache
            lives here even with a ``client``.
        client: A ``chromadb`` client (``HttpClient`` for a server); default: an
            embedded ``PersistentClient`` under ``path``.
        embeddings: Any LangChain ``Embeddings``; default: all-MiniLM-L6-v2, offline.
        description: What it holds (stored; None keeps the stored one).
        topics: Its topics (stored; None keeps the stored ones, or derives them).
        text_splitter: Cuts documents longer than a chunk. Default: half the model's
            window, an eighth as overlap, in its word pieces (the default model: 128
            and 32; ``writes.default_splitter``). None: one chunk per document.
        create: Create it when missing; False raises :class:`KnowledgeBaseNotFoundError`.
        restricted: True turns restricted mode on (stored with the data); a
            :class:`RestrictionFlags` stores all four flags as given; None keeps them.
            Only :meth:`unrestrict` turns a flag off (here: ``ConfigurationError``).
        timeout: Seconds a call to a Chroma server may take (a search as a whole, each
            write batch); past it :class:`StoreTimeoutError`. None: no limit.
        sync_interval: With a server: most seconds before another process's writes
            reach keyword search (dense at once). None: caught up once, when first used.
        seal_key: Its key when restricted (default: ``KINJECT_SEAL_KEY_<NAME>``, a key file).

    Used in a child forked after it was opened (Gunicorn ``--preload``,
    ``multiprocessing`` with ``fork``) it raises :class:`ForkedProcessError`: open
    it in each worker after the fork.
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
        restricted: bool | RestrictionFlags | None = None,
        timeout: float | None = calls.DEFAULT_TIMEOUT,
        sync_interval: float | None = DEFAULT_SYNC_INTERVAL,
        seal_key: str | bytes | None = None,
    ) -> None:
        calls.check_seconds("timeout", timeout)
        calls.check_seconds("sync_interval", sync_interval, zero=True)
        given = _given_flags(restricted)
        topics_ok = isinstance(topics, list | tuple) and all(isinstance(t, str) for t in topics)
        is_embeddings = hasattr(embeddings, "embed_query")
        for option, value, ok, allowed in (
            ("path", path, isinstance(path, str | os.PathLike), "a str or os.PathLike directory"),
            ("embeddings", embeddings, is_embeddings, "a LangChain Embeddings"),
            ("topics", topics, topics_ok, "a list of strings"),
        ):
            if value is not None and not ok:
                msg = f"{option} must be {allowed}, or None; got {type(value).__name__}"
                raise errors.ConfigurationError(msg, option=option, value=value)
        if not isinstance(name, str) or not storage.NAME_PATTERN.match(name):
            msg = (
                f"Invalid knowledge-base name {name!r}: use 1-63 letters, digits, '.', '_' or '-',"
                " starting with a letter or digit"
            )
            raise errors.ConfigurationError(msg, option="name", value=name)
        self.name, self.id, self._pid = name, storage.knowledge_base_id(name), os.getpid()
        self.path = Path(path).expanduser() if path is not None else default_store_path()
        storage.ensure_store_dir(self.path)
        self.read_only = not store_is_writable(self.path)
        """True when the store cannot be written: searches work, writes raise ``StoreError``."""
        server = client is not None
        self._store_lock = (
            None if server else storage.StoreLock(self.path, read_only=self.read_only)
        )
        try:
            self.embeddings = embeddings or default_embeddings()
            self.timeout = timeout if server else None
            if client is None:
                client = storage.persistent_client(self.path, name, read_only=self.read_only)
            elif timeout is not None:
                calls.apply_http_timeout(client, timeout)
            bounded = calls.BoundedCalls(self.timeout, kb_name=name)
            self._chroma = ChromaSide(client, kb_id=self.id, server=server, calls=bounded)
            self._sealer = self._chroma.sealer = sealing.Sealer(name, self.id, self.path, seal_key)
            self._keyless = False  # sealed with a key this process does not hold
            self._async_pool = calls.worker_pool(32, f"kinject-{name}-search") if server else None
            self._pending: dict[str, Any] | None = None
            self._open(create=create, description=description, topics=topics, given=given)
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
        self._query_vector = functools.lru_cache(maxsize=2048)(self._embed_query)
        self._searcher = PartitionSearch(self._chroma, self._cache, self._query_vector)
        self._writes = writes.Writes(
            self._chroma, self._cache, self.embeddings, path=self.path, kb_name=name
        )
        self._text_splitter = text_splitter
        self._topics: tuple[int, list[str]] | None = None

    def _embed_query(self, text: str) -> list[float]:
        with model_errors(self.name):
            return self.embeddings.embed_query(text)

    # -- opening ------------------------------------------------------------------------
    def _open(
        self,
        *,
        create: bool,
        description: str | None,
        topics: Sequence[str] | None,
        given: Mapping[str, Any],
    ) -> None:
        """Find or create the knowledge base in Chroma (version-1 stores migrated first)."""
        client = self._chroma.client
        try:
            if not self.read_only:
                migration.migrate_store(self.path, client)
            shared = self._chroma.collection("")
            if (
                shared is None or not isinstance((shared.metadata or {}).get("kinject:format"), int)
            ) and (not self.read_only and migration.migrate_kb(client, self.name)):
                self._chroma.forget()
                shared = self._chroma.collection("")
        except errors.KnowledgeInjectError:
            raise
        except Exception as exc:
            if self._remembered() is None:
                msg = (
                    f"Knowledge base {self.name!r}: Chroma could not be asked whether it holds it "
                    f"({type(exc).__name__}: {exc}). Open it again once the Chroma server answers."
                )
                raise errors.KnowledgeBaseOpenError(msg, kb_name=self.name) from exc
            logger.warning(
                "Knowledge base %r opened while Chroma does not answer (%s): its calls fail "
                "until it does", self.name, type(exc).__name__,
            )  # fmt: skip
            self._pending = {
                "create": create,
                "description": description,
                "topics": topics,
                "given": given,
            }
            return
        wanted = {k: v for k, v in given.items() if v is not None}
        model = embedding_model_name(self.embeddings)
        if shared is None:
            shared = self._create(create, {**wanted, "model": model})
        stored = flags.read_settings(shared.metadata)
        if stored["model"] not in ("", model):
            msg = (
                f"Knowledge base {self.name!r} was built with the embedding model "
                f"{stored['model']!r}; it cannot be searched with {model!r}. Open it with the "
                "same model, or ingest into a new knowledge base."
            )
            raise errors.KnowledgeBaseOpenError(msg, kb_name=self.name)
        for key in FLAGS:
            if stored[key] and wanted.get(key) is False:
                msg = (
                    f"Knowledge base {self.name!r} is {key.replace('_', ' ')}: the constructor "
                    "never turns that off. Call kb.unrestrict() to turn restriction off (logged)."
                )
                raise errors.ConfigurationError(msg, option=key, value=False)
        wanted.update(model=model, kb=self.name, kb_id=self.id)
        if description is not None:
            wanted["description"] = description
        if topics is not None:
            wanted["topics"] = list(topics)
        changes = {k: v for k, v in wanted.items() if stored.get(k) != v}
        if changes and not self.read_only:
            self._chroma.update_settings(changes)
        self._remember({**stored, **changes})
        self._pending = None
        if stored["key_id"] and flags.PREFIX + "restricted" not in (shared.metadata or {}):
            logger.warning("Knowledge base %r: restriction flag removed, text sealed", self.name)
        self._seal_on_open({**stored, **changes})

    def _seal_on_open(self, settings: Mapping[str, Any]) -> None:
        """Seal an earlier version's restricted store, or what a cut ``restrict()`` left."""
        claimed = settings["key_id"]
        self._keyless = bool(claimed) and claimed != self._sealer.key_id
        if self._keyless:
            logger.warning("%s", self._sealer.error())
        elif settings["restricted"] and not claimed and not self.read_only:
            self._seal_all()

    def _seal_all(self, **flags_too: bool) -> None:
        """The flag first, then every chunk sealed, then the key's id (its mark of done)."""
        claimed = self._chroma.settings(fresh=True)["key_id"]
        if claimed and claimed != self._sealer.key_id:
            raise self._sealer.error()
        key_id = self._sealer.create()
        self._chroma.update_settings({"restricted": True, **flags_too})
        self._write("sealing its text", self._chroma.reseal, True)
        self._chroma.update_settings({"key_id": key_id})

    def _create(self, create: bool, wanted: dict[str, Any]) -> Any:
        """Create the knowledge base: its shared collection."""
        if not create or self.read_only:
            infos = metadata.list_knowledge_bases(self.path, client=self._chroma.client)
            raise metadata.not_found(self.name, self.path, [i.name for i in infos])
        remembered = self._remembered() or {}
        for key in FLAGS:  # lost from Chroma (a wiped server): what this store saw last wins
            if remembered.get(key) and wanted.get(key) is None:
                logger.warning(
                    "Knowledge base %r was %s here before: created so again", self.name, key
                )
                wanted[key] = True
        settings = {"kb": self.name, "kb_id": self.id, "format": flags.FORMAT, **wanted}
        return self._chroma.create("", {"description": "", "topics": [], **settings})

    def _memory(self) -> Path:
        return self.path / "keyword" / self.id / "kb.json"

    def _remembered(self) -> dict[str, Any] | None:
        """What this store saw of the knowledge base last (its flags only count to keep them on)."""
        try:
            return dict(json.loads(self._memory().read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None

    def _remember(self, settings: Mapping[str, Any]) -> None:
        seen = {"name": self.name, **{k: bool(settings.get(k)) for k in FLAGS}}
        if self.read_only or self._remembered() == seen:
            return
        try:
            self._memory().parent.mkdir(parents=True, exist_ok=True)
            self._memory().write_text(json.dumps(seen), encoding="utf-8")
        except OSError as exc:  # a full disk: Chroma holds the flags anyway
            logger.warning("Knowledge base %r: its flags not noted locally (%s)", self.name, exc)

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
            raise errors.ForkedProcessError(msg, kb_name=self.name, opened_in=self._pid)
        if self._pending is not None:
            self._open(**self._pending)
            if self._pending is not None:
                msg = f"Knowledge base {self.name!r}: the Chroma server does not answer"
                raise errors.RetrievalError(msg, kb_name=self.name)

    # -- settings and flags -------------------------------------------------------------
    @property
    def restriction(self) -> RestrictionFlags:
        """The restriction flags stored with the data, read afresh on every call.

        Never from a cache: another process's ``kb.restrict()`` holds from its next
        turn, not a second later.

        Raises:
            RetrievalError: Chroma could not be asked (the message names the cause):
                treat the knowledge base as restricted.
        """
        self._ready()
        try:
            return RestrictionFlags.of(self._chroma.settings(fresh=True))
        except errors.KnowledgeInjectError:
            raise
        except Exception as exc:
            msg = (
                f"The restriction flags of knowledge base {self.name!r} could not be read from "
                f"Chroma ({type(exc).__name__}); treat it as restricted"
            )
            raise errors.RetrievalError(msg, kb_name=self.name) from exc

    def _restriction(self) -> RestrictionFlags:
        return self.restriction

    arestriction = _twin(_restriction)

    def restrict(self, *, sensitive_sources: bool = False) -> None:
        """Turn restricted mode (and ``sensitive_sources``) on, then seal every chunk's text."""
        self._ready()
        self._refuse_if_read_only("restricting")
        self._seal_all(**({"sensitive_sources": True} if sensitive_sources else {}))
        self._remember(self._chroma.settings(fresh=True))

    def unrestrict(self) -> None:
        """Unseal the text, then turn restricted mode and ``sensitive_sources`` off (logged)."""
        self._ready()
        self._refuse_if_read_only("unrestricting")
        logger.warning(
            "Knowledge base %r: restricted mode turned off by kb.unrestrict(), its text "
            "unsealed", self.name,
        )  # fmt: skip
        self._write("unsealing its text", self._chroma.reseal, False)
        self._chroma.update_settings({**dict.fromkeys(FLAGS, False), "key_id": ""})
        self._remember(self._chroma.settings(fresh=True))

    @property
    def info(self) -> KnowledgeBaseInfo:
        """Metadata of this knowledge base, read from Chroma."""
        self._ready()
        try:
            settings = self._chroma.settings(fresh=True)
        except Exception as exc:
            if not storage.is_not_found(exc):
                raise
            msg = f"Knowledge base {self.name!r} no longer exists in Chroma (dropped)"
            raise errors.KnowledgeBaseNotFoundError(msg, kb_name=self.name) from exc
        count = sum(int(c.count()) for c in self._chroma.partitions().values())
        derived = None
        if not settings["topics"]:
            if self._topics is None or self._topics[0] != count:
                sample = self._chroma.collection("").get(limit=500, include=["documents"])
                self._topics = (
                    count,
                    metadata.derive_topics(
                        [t for t in sample["documents"] or [] if t and not is_sealed(t)]
                    ),
                )
            derived = self._topics[1]
        return metadata.info_of(settings, chunk_count=count, derived=derived)

    def _info(self) -> KnowledgeBaseInfo:
        return self.info

    ainfo = _twin(_info)

    @property
    def text_splitter(self) -> TextSplitter | None:
        """The splitter ``add_documents`` and ``ingest`` cut documents with (None: keep whole)."""
        if self._text_splitter is _DEFAULT_SPLITTER:
            self._text_splitter = writes.default_splitter(self.embeddings)
        return self._text_splitter

    def get_source_fingerprint(self, source: str, *, tenant_id: str | None = None) -> str | None:
        """The fingerprint stored with ``source`` by the last ``add_documents``, or None."""
        self._ready()
        # newest first: the chunk written last carries the fingerprint (``writes``)
        pages = self._chroma.source_pages(writes.partition_of(tenant_id), [source], fields="meta")
        return next((c.fingerprint for p in pages for c in p if c.fingerprint is not None), None)

    # -- writes -------------------------------------------------------------------------
    def _refuse_if_read_only(self, action: str) -> None:
        if self.read_only:
            msg = storage.read_only_message(self.name, self.path, action)
            raise errors.StoreError(msg, kb_name=self.name, reason="read_only", path=self.path)

    def _write(self, action: str, fn: Callable[..., T], /, *args: Any) -> T:
        """Run a write: checked, store errors explained, a collection deleted under us found."""
        self._ready()
        self._refuse_if_read_only(action)
        try:
            return fn(*args)
        except errors.KnowledgeInjectError:
            raise
        except Exception as exc:
            if storage.is_not_found(exc):  # deleted under us (server wiped or restarted): once more
                self._chroma.forget()
                return fn(*args)
            error = storage.store_error(exc, action=action, kb_name=self.name, path=self.path)
            if error is None:
                raise
            raise error from exc

    def add_documents(
        self,
        documents: Sequence[Document],
        *,
        tenant_id: str | None = None,
        fingerprints: Mapping[str, str] | None = None,
        unfinished: AbstractSet[str] = frozenset(),
    ) -> AddResult:
        """Add documents, idempotently: split, embedded only when new (see :mod:`~.writes`).

        Args:
            documents: The documents; ``metadata["source"]`` (or ``["source_path"]``)
                names the source, whose earlier chunks the ones given now replace;
                ``metadata["tenant_id"]`` puts it in a tenant partition.
            tenant_id: Tenant of every document (must agree with their metadata).
            fingerprints: ``{source identity: fingerprint}`` to store (a file hash).
            unfinished: Sources continued in a later call (see :mod:`~.writes`).

        Raises:
            StoreTimeoutError: A Chroma server was slower than ``timeout`` (running
                the same add again converges).
        """
        self._ready()
        chunks = writes.split_documents(documents, tenant_id, self.text_splitter)
        plan = self._write(
            "adding documents", self._writes.add, chunks, fingerprints or {}, unfinished
        )
        replaced = sum(len(v) for v in plan.stale.values())
        return AddResult(
            len(plan.to_embed), plan.unchanged, plan.updated, replaced, plan.skipped, plan.ids
        )

    aadd_documents = _twin(add_documents)

    def upsert_records(
        self, records: Sequence[tuple[str, str, Mapping[str, Any]]], *, tenant_id: str | None = None
    ) -> None:
        """Store ``(chunk_id, text, metadata)`` records under the caller's ids; an id is replaced.

        The write path of :meth:`vectorstore` and episodic memory: no splitting,
        no source replacement, the metadata kept as given.
        """
        self._write(
            "adding documents", self._writes.upsert, records, writes.partition_of(tenant_id)
        )

    aupsert_records = _twin(upsert_records)

    def delete(self, ids: Sequence[str], *, tenant_id: str | None = None) -> int:
        """Delete chunks by id from one partition; returns how many existed."""
        partition = writes.partition_of(tenant_id)
        return self._write("deleting chunks", self._writes.delete, partition, list(ids))

    adelete = _twin(delete)

    def delete_source(self, source: str, *, tenant_id: str | None = None) -> int:
        """Delete every chunk of ``source`` (its identity: an ingested file's full path)."""
        self._ready()
        chunks = self._chroma.of_sources(writes.partition_of(tenant_id), [source], fields="meta")
        return self.delete([c.chunk_id for c in chunks], tenant_id=tenant_id)

    adelete_source = _twin(delete_source)

    def count(self, *, tenant_id: str | None = None) -> int:
        """How many chunks one partition holds (the shared one when ``tenant_id`` is None)."""
        self._ready()
        return self._chroma.count(writes.partition_of(tenant_id))

    def delete_tenant(self, tenant_id: str) -> int:
        """Delete one tenant partition (collection and keyword cache); how many chunks it held."""
        if not writes.partition_of(tenant_id):
            msg = "delete_tenant needs a tenant id; the shared partition goes with kb.drop()"
            raise errors.ConfigurationError(msg, option="tenant_id", value=tenant_id)
        count = self.count(tenant_id=tenant_id)
        self._write("deleting a tenant", self._delete_partitions, [tenant_id])
        return count

    def drop(self) -> None:
        """Delete the whole knowledge base: its collections and its keyword cache."""
        self._write("dropping the knowledge base", self._delete_partitions, None)

    def _delete_partitions(self, partitions: Sequence[str] | None) -> None:
        chroma = self._chroma
        for partition in chroma.partitions() if partitions is None else partitions:
            try:
                chroma.calls.call(
                    "delete_collection",
                    chroma.client.delete_collection,
                    storage.collection_name(self.id, partition),
                )
            except Exception as exc:
                if not storage.is_not_found(exc):
                    raise
            self._cache.drop(partition)
        chroma.forget()
        if partitions is None:
            self._cache.drop()

    # -- search -------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        k: int = 4,
        min_score: float | None = None,
        filter: Mapping[str, Any] | None = None,
        mode: SearchMode = "hybrid",
        tenant_id: str | None = None,
        include_shared: bool = True,
    ) -> list[Document]:
        """The chunks most relevant to ``query``, best first (raw text: the owner's API).

        Args:
            query: The question (cut to :data:`MAX_QUERY_CHARS` characters).
            k: How many chunks at most (>= 1).
            min_score: Drop chunks scoring below this, in [0, 1] (what a score means:
                :mod:`~.fusion`); None: ``fusion.DEFAULT_MIN_SCORE``.
            filter: Metadata filter in Chroma's ``where`` language (its ``tenant_id``
                selects the partition).
            mode: ``"dense"``, ``"keyword"`` or ``"hybrid"`` (the default, a fusion).
            tenant_id: Search this tenant's partition; None searches the shared one.
            include_shared: With ``tenant_id``: the shared partition's chunks too, each
                partition ranked as alone and merged by score; False: the tenant's alone.

        Returns:
            Documents with ``id`` (the chunk id) and ``metadata["score"]``,
            ``["chunk_id"]``, ``["kb_name"]``, ``["kb_id"]``, ``["source"]``.

        Raises:
            ConfigurationError: An argument that is not allowed.
            RetrievalError: The store could not be searched (``StoreTimeoutError``: not in time).
        """
        parents: dict[str, str] = {}
        partitions, ranked, _ = self._ranked(
            query, k, min_score, filter, mode, tenant_id, parents=parents, shared=include_shared
        )
        if not ranked:
            return []
        merged, fields = self._searcher.merged, self._text_fields()
        return self._searching(merged, self.name, self.id, partitions, ranked, parents, k, fields)

    asearch = _twin(search)

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
        """:meth:`search` without reading the chunks back: ``(chunk id, score)``, best first.

        Same arguments, order and scores as :meth:`search` with ``include_shared=False``
        (one partition: the tenant's, or the shared one), and ``stopwords``: the
        query words the keyword side leaves out (lowercase; None: the 33 of
        :data:`~langchain_knowledge_inject._store.keyword.STOPWORDS`). With
        ``with_dense=True``, ``(chunk id, score, cosine)``: the dense side's score
        beside the fused one (the dense list's lowest for a chunk the keyword side
        alone found, as ``fusion.fuse`` counts it; 0 in keyword mode).
        """
        if stopwords is not None and not (
            isinstance(stopwords, AbstractSet) and all(isinstance(w, str) for w in stopwords)
        ):
            msg = "stopwords must be a set of lowercase words, or None"
            raise errors.ConfigurationError(msg, option="stopwords", value=stopwords)
        _, ranked, dense = self._ranked(query, k, min_score, filter, mode, tenant_id, stopwords)
        if not with_dense:
            return ranked
        cosines, floor = fusion.dense_cosines(dense)
        return [(cid, score, cosines.get(cid, floor)) for cid, score in ranked]

    asearch_hits = _twin(search_hits)

    def _ranked(
        self,
        query: str,
        k: int,
        min_score: float | None,
        filter: Mapping[str, Any] | None,
        mode: SearchMode,
        tenant_id: str | None,
        stopwords: AbstractSet[str] | None = None,
        parents: dict[str, str] | None = None,
        shared: bool = False,
    ) -> tuple[tuple[str, ...], list[tuple[str, float]], list[tuple[str, float]]]:
        """The partitions, their best ``k`` hits scoring ``min_score`` or more, the dense hits.

        With ``parents`` (grouping by document) every hit over ``min_score`` is kept.
        """
        self._ready()
        k, min_score, mode = check_search_args(k, min_score, mode)
        if query is not None and not isinstance(query, str):
            msg = f"query must be a string, got {type(query).__name__}"
            raise errors.ConfigurationError(msg, option="query", value=query)
        if self._keyless and sealing.reading() != "owner":  # no keyword cache without the text
            mode, parents = "dense", None
        tenant, where = split_tenant(filter, tenant_id)
        if not isinstance(shared, bool):
            msg = f"include_shared must be True or False, got {shared!r}"
            raise errors.ConfigurationError(msg, option="include_shared", value=shared)
        partition, text = writes.partition_of(tenant), (query or "")[:MAX_QUERY_CHARS]
        partitions = (partition, "") if partition and shared else (partition,)
        if not text.strip():
            return partitions, [], []
        self._embed_ahead(text, mode=mode)
        grouped = parents is not None
        depth = max(k, fusion.CANDIDATE_DEPTH) if mode == "hybrid" or grouped else k
        stop = STOPWORDS if stopwords is None else stopwords
        search = functools.partial(self._searching, self._searcher.ranked, partitions, text)
        first = depth
        if parents is not None and mode == "dense":  # k documents: a few chunks each at first
            first = min(depth, fusion.DENSE_DEPTH * k)
        ranked, dense = search(first, where, mode, stop, parents)
        found = len({(parents or {}).get(c) or c for c, _ in ranked}) if first < depth else k
        if len(ranked) == first and found < k:  # too few documents, and there may be more
            ranked, dense = search(depth, where, mode, stop, parents)
        kept = [(cid, s) for cid, s in ranked if s >= min_score]
        return partitions, kept if grouped else kept[:k], dense

    def _embed_ahead(self, query: str, *_: Any, mode: str = "hybrid", **__: Any) -> None:
        """Embed a search's query (cached) before the store's deadline starts.

        The first embedding loads the model (seconds); that is local work, and the
        knowledge base's ``timeout`` bounds the store, not the model (a server down: first).
        """
        text = (query or "")[:MAX_QUERY_CHARS]
        if mode != "keyword" and text.strip():
            if self._chroma.server and getattr(self.embeddings, "loaded", True) is False:
                self._searching(self._chroma.calls.call, "heartbeat", self._chroma.client.heartbeat)
            self._searching(self._query_vector, text)

    def warm(self) -> None:
        """Load now what a first search loads (model, index, keyword cache): call it at start-up."""
        self.search_hits("warm up", k=1, min_score=1.0)

    awarm = _twin(warm)

    def _searching(self, fn: Callable[..., T], /, *args: Any) -> T:
        """Run search work within one deadline; failures become :class:`RetrievalError`."""
        try:
            with self._chroma.calls.operation():
                return fn(*args)
        except _PASSED:
            raise
        except Exception as exc:
            msg = f"Search of knowledge base {self.name!r} failed: {type(exc).__name__}: {exc}"
            raise errors.RetrievalError(msg, kb_name=self.name) from exc

    def get_by_ids(self, ids: Sequence[str], *, tenant_id: str | None = None) -> list[Document]:
        """Stored chunks by id, with the metadata they were stored with (missing ids left out)."""
        self._ready()
        partition, fields = writes.partition_of(tenant_id), self._text_fields()
        found = {c.chunk_id: c for c in self._chroma.get(partition, list(ids), fields=fields)}
        chunks = [found[cid] for cid in dict.fromkeys(ids) if cid in found]
        return [
            Document(id=c.chunk_id, page_content=c.text, metadata=dict(c.metadata)) for c in chunks
        ]

    aget_by_ids = _twin(get_by_ids)

    def _text_fields(self) -> Literal["all", "stored"]:
        """Chunk text opened for the owner and in ``raw_access()`` (with the key), else stored."""
        how = sealing.reading()
        return "stored" if how == "surface" or (how == "boundary" and self._keyless) else "all"

    def check(self, *, repair: bool = False) -> ConsistencyReport:
        """Whether the keyword cache holds exactly Chroma's chunks; ``repair`` rebuilds it else."""
        self._ready()
        return self._cache.check(
            sorted(self._chroma.partitions()), repair=repair, kb_name=self.name
        )

    async def _in_thread(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run blocking ``fn`` off the event loop.

        Embedded store: the loop's default executor. Chroma server: this knowledge
        base's own threads, a search waited on for what is left of its deadline (plus
        a second of local work) after its query is embedded, so a frozen server holds
        none of the shared threads and a model's first load is not a timeout.
        """
        self._ready()
        if self._async_pool is None:
            return await asyncio.to_thread(fn, *args, **kwargs)
        if self.timeout is None or fn is not KnowledgeBase.search:
            return await asyncio.wrap_future(calls.submit(self._async_pool, fn, *args, **kwargs))
        await asyncio.wrap_future(
            calls.submit(self._async_pool, self._embed_ahead, *args[1:], **kwargs)
        )
        with self._chroma.calls.operation() as deadline:  # what is left now bounds the wait
            future = asyncio.wrap_future(calls.submit(self._async_pool, fn, *args, **kwargs))
            left = max(deadline.left(), 0.0) if deadline is not None else self.timeout
        try:
            return await asyncio.wait_for(future, left + _LOCAL_GRACE_S)
        except asyncio.TimeoutError:
            msg = f"Search of knowledge base {self.name!r} did not finish within {self.timeout:g} s"
            raise errors.StoreTimeoutError(
                msg, kb_name=self.name, operation="search", seconds=self.timeout
            ) from None

    # -- derived sources ----------------------------------------------------------------
    def as_retriever(
        self, search_kwargs: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> KnowledgeBaseRetriever:
        """A LangChain retriever: pure top-k by default (``min_score=0.0``).

        On a restricted knowledge base it raises ``RestrictedKnowledgeError``
        rather than return raw text, except inside the package's surfaces.

        Args:
            search_kwargs: The same options as a dict, as ``VectorStore.as_retriever``
                takes them (a keyword argument wins).
            **kwargs: ``k``, ``min_score``, ``mode``, ``filter``, ``tenant_id``.
        """
        return KnowledgeBaseRetriever(knowledge_base=self, **{**(search_kwargs or {}), **kwargs})

    def vectorstore(self, *, tenant_id: str | None = None) -> KnowledgeBaseVectorStore:
        """The partition's collection as a ``langchain_chroma.Chroma`` that writes through the KB.

        Its reads are langchain-chroma's (refused on a restricted knowledge base
        outside the package's surfaces); its writes go through :meth:`upsert_records`
        and :meth:`delete`, so the keyword cache stays in step.
        """
        from langchain_knowledge_inject._store.vectorstore import KnowledgeBaseVectorStore

        self._ready()
        partition = writes.partition_of(tenant_id)
        if self._chroma.collection(partition) is None and not self.read_only:
            self._chroma.collection(partition, create=True)
        return KnowledgeBaseVectorStore(
            self, tenant_id=tenant_id, client=self._chroma.client,
            collection_name=storage.collection_name(self.id, partition),
            embedding_function=self.embeddings, create_collection_if_not_exists=False,
        )  # fmt: skip

    def check_raw_read(self, via: str) -> None:
        """Raise ``RestrictedKnowledgeError`` when ``via`` may not return raw text now."""
        try:
            found = self.restriction
        except errors.RetrievalError:
            found = RestrictionFlags(restricted=True)  # unreadable: restricted
        flags.check_raw_read(self.name, found, via=via)

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
        """Adopt a collection ``langchain_chroma.Chroma`` wrote, without re-embedding.

        A collection made with another model is refused; one whose metadata says
        restricted gives a restricted knowledge base (:func:`~.migration.copy_collection`).

        Args:
            collection_name: The collection to adopt.
            name: Name of the knowledge base (default: the collection's name).
            client: The ``chromadb`` client holding it (the knowledge base too), or
            persist_directory: the directory of an embedded Chroma store holding it.
            embeddings: The embedding model that built the collection.
            tenant_id: Adopt it as this tenant's partition (default: the shared one).
            **options: Other :class:`KnowledgeBase` arguments (``path``, ...).
        """
        source = migration.find_collection(
            collection_name, client=client, persist_directory=persist_directory
        )
        found, wanted = flags.read_flags(source.metadata), _given_flags(options.get("restricted"))
        on = [key for key in FLAGS if getattr(found, key)]
        if on:  # adopted restricted, with the collection's flags
            if any(wanted.get(key) is False for key in ("restricted", *on)):
                msg = f"Collection {collection_name!r} is {' and '.join(on)}: kb.unrestrict() "
                raise errors.ConfigurationError(f"{msg}turns that off", option="restricted")
            given = {k: v for k, v in wanted.items() if v is not None}
            options["restricted"] = RestrictionFlags(**{**vars(found), **given, "restricted": True})
        kb = cls(name or collection_name, client=client, embeddings=embeddings, **options)
        try:
            kb._write(
                "adopting a collection",
                migration.copy_collection,
                kb._writes,
                source,
                writes.partition_of(tenant_id),
            )
        except BaseException:
            if kb.count(tenant_id=tenant_id) == 0:  # made by this call: leave nothing behind
                kb.drop()
            kb.close()
            raise
        return kb

    # -- closing --------------------------------------------------------------------------
    def close(self) -> None:
        """Close the keyword cache and release the store lock (nothing in a forked child)."""
        if os.getpid() == self._pid and hasattr(self, "_cache"):
            self._cache.close()
        self._release_store_lock()

    def _release_store_lock(self, *, wait: bool = True) -> None:
        lock = getattr(self, "_store_lock", None)
        if lock is not None and getattr(self, "_pid", None) == os.getpid():
            lock.release(wait=wait)

    def __del__(self) -> None:
        self._release_store_lock(wait=False)  # never waits: it may run inside StoreLock's guard

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KnowledgeBase(name={self.name!r}, id={self.id!r}, path={str(self.path)!r})"

    # Last in the class body, so that ``list`` in the annotations above is the builtin.
    list = staticmethod(metadata.list_knowledge_bases)
    """Every knowledge base in a store directory: see :func:`metadata.list_knowledge_bases`."""


KnowledgeBaseRetriever.model_rebuild(_types_namespace={"KnowledgeBase": KnowledgeBase})
